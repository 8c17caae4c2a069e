package console

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/batonproxy/baton/edgehealth"
	"github.com/batonproxy/baton/handoff/record"
)

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
	con.consoleRender(w, r, status, "overview.html", "overview", v)
}

// consoleHealth reads this Baton's metrics as its GET /metrics serves them
// (in process, no request on the network): nil when it serves none.
func (con *Console) consoleHealth(ctx context.Context) (*edgehealth.Snapshot, error) {
	h := con.o.Metrics
	if h == nil {
		return nil, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	var rw bufferedResponse
	h.ServeHTTP(&rw, req)
	if rw.status != 0 && rw.status != http.StatusOK {
		return nil, fmt.Errorf("the metrics handler answered %d", rw.status)
	}
	return edgehealth.Read(&rw.body, time.Now())
}

// bufferedResponse keeps what a handler writes.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header {
	if b.header == nil {
		b.header = http.Header{}
	}
	return b.header
}

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}
