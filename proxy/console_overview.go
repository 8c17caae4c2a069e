package proxy

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
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

func (s *Server) consoleOverview(w http.ResponseWriter, r *http.Request) {
	v := consoleOverviewView{RecordsOff: !s.book.Enabled()}
	snap, err := s.consoleHealth(r.Context())
	switch {
	case err != nil:
		s.log.Warn("console: reading metrics", "error", err.Error())
		v.MetricsErr = err.Error()
	case snap == nil:
		v.MetricsOff = true
	default:
		if snap.Started.IsZero() {
			snap.Started = s.con.started
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
		n, err := s.book.DeadLetterCount(ctx, record.AgentDeadLetters(s.cfg.Agent))
		v.DeadLetters = n
		peers := make([]string, 0, len(s.edges))
		for name := range s.edges {
			peers = append(peers, name)
		}
		sort.Strings(peers)
		for _, p := range peers {
			if err != nil {
				break
			}
			edge := s.cfg.Agent + "→" + p
			var c int64
			c, err = s.book.DeadLetterCount(ctx, record.EdgeDeadLetters(edge))
			v.Edges = append(v.Edges, consoleEdgeCount{Edge: edge, DeadLetters: c})
		}
		if err != nil {
			s.log.Warn("console: counting dead letters", "error", err.Error())
			v.StoreErr, v.Edges = true, nil
			status = http.StatusServiceUnavailable
		}
	}
	s.consoleRender(w, r, status, "overview.html", "overview", v)
}

// consoleHealth reads this Baton's metrics as its GET /metrics serves them
// (in process, no request on the network): nil when it serves none.
func (s *Server) consoleHealth(ctx context.Context) (*edgehealth.Snapshot, error) {
	h := s.sm.handler
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
