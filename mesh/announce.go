package mesh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/batonproxy/baton/edgehealth"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/state"
)

// Announcement is what a Baton says of itself.
type Announcement struct {
	ID          string    `json:"id"` // this process, random at start
	Agent       string    `json:"agent"`
	Version     string    `json:"version"`
	Egress      string    `json:"egress"`
	Ingress     string    `json:"ingress"`
	Admin       string    `json:"admin"`
	Started     time.Time `json:"started"`
	LastSeen    time.Time `json:"last_seen"`
	TLSIdentity string    `json:"tls_identity,omitempty"`
	// Edges are its outbound edges' figures over Window; Models its
	// agent's model APIs' (at most MaxModelAPIs, models.go).
	Edges  []EdgeFigures  `json:"edges,omitempty"`
	Models []ModelFigures `json:"models,omitempty"`
	Window float64        `json:"window_seconds,omitempty"`
}

// EdgeFigures are one outbound edge's figures, as edgehealth renders them
// ("-" when there is nothing to show).
type EdgeFigures struct {
	To string `json:"to"`
	// Traces are the edge's latest traces, newest first (at most
	// recentTraces).
	Traces  []RecentTrace `json:"traces,omitempty"`
	Rate    string        `json:"rate"` // handoffs a second
	ErrPct  string        `json:"err_pct"`
	Errors  float64       `json:"error_share"` // 0 to 1
	P99     string        `json:"p99"`
	Breaker string        `json:"breaker"`
}

// RecentTrace is a trace a handoff on an edge belonged to, and how that
// handoff ended.
type RecentTrace struct {
	TraceID string    `json:"trace_id"`
	State   string    `json:"state"`
	At      time.Time `json:"at"`
}

// recentTraces bounds the traces announced per edge.
const recentTraces = 8

// Timing of announcements.
const (
	AnnounceEvery = 5 * time.Second
	Expiry        = 3 * AnnounceEvery
	// window is how far back the edges' figures reach.
	window = time.Minute
)

// Store keys.
const (
	indexKey  = "mesh/batons"
	entryPref = "mesh/baton/"
)

// Options are what an announcer announces.
type Options struct {
	Store state.Store
	Log   *slog.Logger
	Agent string
	// Addrs returns the listeners' addresses once they listen.
	Addrs func() (egress, ingress, admin string)
	// Metrics serves the Baton's metrics (its GET /metrics); nil: no
	// edge figures.
	Metrics http.Handler
	// Served counts the requests the Baton has served (nil: unknown, and
	// every announcement scrapes the metrics).
	Served func() int64
	// TLSIdentity is the Baton's SPIFFE ID when it serves TLS ("" when not).
	TLSIdentity string
}

// Announcer announces one Baton.
type Announcer struct {
	o       Options
	id      string
	started time.Time
	version string
	snaps   []*edgehealth.Snapshot // the last minute's, oldest first
	// last is the last scrape, taken when the Baton had served lastServed
	// requests.
	last       *edgehealth.Snapshot
	lastServed int64

	mu     sync.Mutex
	recent map[string][]RecentTrace // by peer, newest first
}

// New returns the announcer of the Baton o describes.
func New(o Options) *Announcer {
	var b [8]byte
	_, _ = rand.Read(b[:])
	v := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return &Announcer{o: o, id: hex.EncodeToString(b[:]), started: time.Now().UTC(), version: v,
		recent: map[string][]RecentTrace{}}
}

// Answered notes the trace of a handoff an edge of this Baton's got an
// answer for (proxy.Plugins.Answered), for the edge's latest traces.
func (a *Announcer) Answered(rec *record.Record) {
	if rec == nil || rec.TraceID == "" || rec.To == "" {
		return
	}
	now := time.Now().UTC() // read before the lock, which every answered handoff takes
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.recent[rec.To]
	if len(list) > 0 && list[0].TraceID == rec.TraceID {
		list[0].State = string(rec.State)
		return
	}
	if len(a.recent) >= 1024 && list == nil {
		return // bounded: peers are configured, but a broadcast may name many
	}
	// Shifted in place (readers copy the list under the lock): a full
	// list takes no allocation, a new one one of its full size, and the
	// map is written only while the list grows.
	grown := true
	switch {
	case list == nil:
		list = make([]RecentTrace, 1, recentTraces)
	case len(list) < recentTraces:
		list = append(list, RecentTrace{})
	default:
		grown = false
	}
	copy(list[1:], list)
	list[0] = RecentTrace{TraceID: rec.TraceID, State: string(rec.State), At: now}
	if grown {
		a.recent[rec.To] = list
	}
}

// served is how many requests the Baton has served (Options.Served), or
// -1 when it cannot say.
func (a *Announcer) served() int64 {
	if a.o.Served == nil {
		return -1
	}
	return a.o.Served()
}

// Run announces the Baton every AnnounceEvery until ctx ends, then
// withdraws it.
func (a *Announcer) Run(ctx context.Context) {
	t := time.NewTicker(AnnounceEvery)
	defer t.Stop()
	for {
		a.announce(ctx)
		select {
		case <-ctx.Done():
			end, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = a.o.Store.Delete(end, entryPref+a.id)
			_ = a.o.Store.IndexRemove(end, indexKey, a.id)
			cancel()
			return
		case <-t.C:
		}
	}
}

func (a *Announcer) announce(ctx context.Context) {
	now := time.Now().UTC()
	an := Announcement{ID: a.id, Agent: a.o.Agent, Version: a.version, Started: a.started, LastSeen: now,
		TLSIdentity: a.o.TLSIdentity}
	if a.o.Addrs != nil {
		an.Egress, an.Ingress, an.Admin = a.o.Addrs()
	}
	an.Edges, an.Models, an.Window = a.figures(ctx, now)
	b, err := json.Marshal(an)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, AnnounceEvery)
	defer cancel()
	if err := a.o.Store.Set(ctx, entryPref+a.id, b, Expiry); err != nil {
		a.o.Log.Debug("mesh: announcement not stored", "error", err.Error())
		return
	}
	_ = a.o.Store.IndexAdd(ctx, indexKey, a.id, float64(now.Unix()), 0)
}

// figures reads the Baton's metrics and returns its outbound edges' and
// model APIs' figures over the last minute.
func (a *Announcer) figures(ctx context.Context, now time.Time) ([]EdgeFigures, []ModelFigures, float64) {
	if a.o.Metrics == nil {
		return nil, nil, 0
	}
	// A Baton that served nothing since its last scrape has the same
	// figures: its last scrape stands for now, and an idle Baton does not
	// run (and keep mapped) the metrics' exposition every AnnounceEvery.
	var snap *edgehealth.Snapshot
	if served := a.served(); served >= 0 && a.last != nil && served == a.lastServed {
		s := *a.last
		s.At = now
		snap = &s
	} else {
		var err error
		if snap, err = edgehealth.Scrape(ctx, a.o.Metrics, now); err != nil {
			return nil, nil, 0
		}
		a.last, a.lastServed = snap, served
	}
	for len(a.snaps) > 0 && now.Sub(a.snaps[0].At) > window {
		a.snaps = a.snaps[1:]
	}
	var prev *edgehealth.Snapshot
	if len(a.snaps) > 0 {
		prev = a.snaps[0]
	}
	a.snaps = append(a.snaps, snap)
	rows, w := edgehealth.Rows(prev, snap)
	var out []EdgeFigures
	for _, r := range rows {
		if r.Side != "egress" || r.From != a.o.Agent {
			continue
		}
		f := EdgeFigures{To: r.To, Rate: r.Rate, ErrPct: r.ErrPct, P99: r.P99, Breaker: r.Breaker}
		a.mu.Lock()
		f.Traces = append([]RecentTrace(nil), a.recent[r.To]...)
		a.mu.Unlock()
		if prev != nil {
			if d := snap.Edges[r.Edge].Since(prev.Edges[r.Edge]); d.Requests > 0 {
				f.Errors = d.Failed / d.Requests
			}
		}
		out = append(out, f)
	}
	return out, modelFigures(prev, snap), w.Seconds()
}
