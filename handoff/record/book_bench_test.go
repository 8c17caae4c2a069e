package record

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/state/redistest"
)

// BenchmarkBookHandoff is what records cost the sender's Baton per handoff:
// the delegation record with its checkpoint, written before forwarding
// (Write), and its outcome, queued (WriteLater), from many handoffs at once,
// each in a trace of its own. The time includes the flusher's work, which
// Close waits for.
func BenchmarkBookHandoff(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		m := state.NewMemory(config.Memory{MaxEntries: config.DefaultMemoryEntries, MaxBytes: config.DefaultMemoryBytes})
		b.Cleanup(func() { m.Close() })
		benchHandoffs(b, m)
	})
	b.Run("redis", func(b *testing.B) {
		url := redistest.Shared(b)
		r, err := state.NewRedis(config.Redis{URL: url, Prefix: redistest.Prefix(b, url)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close() })
		benchHandoffs(b, r)
	})
}

func benchHandoffs(b *testing.B, s state.Store) {
	book := NewBook(s, time.Minute, slog.New(slog.DiscardHandler))
	tmpl, req := benchRecord(), benchRequest()
	b.SetParallelism(16) // handoffs in flight at once, as under load
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := *tmpl
			r.TraceID = strings.Repeat(NewID("")[1:], 2)
			r.ID, r.State, r.Status, r.Request = NewID(r.TraceID), Sent, 0, req
			if err := book.Write(b.Context(), &r); err != nil {
				b.Error(err)
				return
			}
			r.State, r.Status = Delivered, 200
			book.WriteLater(&r)
		}
	})
	book.Close()
}
