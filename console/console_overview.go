package console

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/batonproxy/baton/edgehealth"
	"github.com/batonproxy/baton/handoff/record"
)

// Spending lists the chains whose model calls cost most in the last hour,
// most first (package modelcall keeps that index; sidecar hands it over).
type Spending interface {
	CostlyChains(ctx context.Context, n int) ([]ChainCost, error)
}

// ChainCost is what one chain's model calls spent in the last hour.
type ChainCost struct {
	TraceID string
	CostUSD float64
	Tokens  int64
	// Priced: some of its calls had a price (else CostUSD is unknown).
	Priced bool
}

// costlyShown is how many chains the overview lists.
const costlyShown = 10

// consoleOverviewView is the overview's data: the handoff-health figures
// per edge (those of baton top, since this Baton started) and the dead
// letters.
type consoleOverviewView struct {
	MetricsOff  bool   // the process serves no Prometheus metrics
	MetricsErr  string // reading them failed
	Uptime      string
	Rows        []edgehealth.Row
	RecordsOff  bool // records are disabled: no dead letters are kept
	StoreErr    bool // the store did not answer the counts
	DeadLetters int64
	Edges       []consoleEdgeCount
	// Costly are the chains whose model calls cost most in the last hour;
	// CostlyOff: no Spending to ask, CostlyErr: it did not answer.
	Costly    []ChainCost
	CostlyOff bool
	CostlyErr bool
}

type consoleEdgeCount struct {
	Edge        string
	DeadLetters int64
}

func (con *Console) consoleOverview(w http.ResponseWriter, r *http.Request) {
	v := consoleOverviewView{RecordsOff: !con.o.Book.Enabled()}
	snap, err := con.consoleHealth(r.Context())
	switch {
	case err != nil:
		con.o.Log.Warn("console: reading metrics", "error", err.Error())
		v.MetricsErr = err.Error()
	case snap == nil:
		v.MetricsOff = true
	default:
		if snap.Started.IsZero() {
			snap.Started = con.started
		}
		v.Rows, _ = edgehealth.Rows(nil, snap)
		up := snap.At.Sub(snap.Started)
		v.Uptime = up.Round(time.Second).String()
		if up < 10*time.Second {
			v.Uptime = up.Round(100 * time.Millisecond).String()
		}
	}
	status := http.StatusOK
	if !v.RecordsOff {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		n, err := con.o.Book.DeadLetterCount(ctx, record.AgentDeadLetters(con.o.Config.Agent))
		v.DeadLetters = n
		peers := slices.Sorted(slices.Values(con.o.Peers))
		for _, p := range peers {
			if err != nil {
				break
			}
			edge := con.o.Config.Agent + "→" + p
			var c int64
			c, err = con.o.Book.DeadLetterCount(ctx, record.EdgeDeadLetters(edge))
			v.Edges = append(v.Edges, consoleEdgeCount{Edge: edge, DeadLetters: c})
		}
		if err != nil {
			con.o.Log.Warn("console: counting dead letters", "error", err.Error())
			v.StoreErr, v.Edges = true, nil
			status = http.StatusServiceUnavailable
		}
	}
	if con.o.Spending == nil {
		v.CostlyOff = true
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		cs, err := con.o.Spending.CostlyChains(ctx, costlyShown)
		if err != nil {
			con.o.Log.Warn("console: listing the costly chains", "error", err.Error())
			v.CostlyErr = true
		}
		v.Costly = cs
	}
	con.consoleRender(w, r, status, "overview.html", "overview", v)
}

// consoleHealth reads this Baton's metrics as its GET /metrics serves them
// (in process, no request on the network): nil when it serves none.
func (con *Console) consoleHealth(ctx context.Context) (*edgehealth.Snapshot, error) {
	if con.o.Metrics == nil {
		return nil, nil
	}
	return edgehealth.Scrape(ctx, con.o.Metrics, time.Now())
}
