package middleware

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust/taint"
)

// BenchmarkTaintEgress is the cost of labelling an outbound handoff: a
// 4 KiB JSON body of prose in 8 fields, against an agent that has read 64
// KiB of untrusted text, on the memory store. copy: one field copies the
// untrusted text (the body is labelled and rewritten); clean: none does.
func BenchmarkTaintEgress(b *testing.B) {
	store := state.NewMemory(config.Memory{MaxEntries: 1 << 20, MaxBytes: 256 << 20})
	b.Cleanup(func() { store.Close() })
	c := config.Config{}
	c.ApplyDefaults()
	tn := NewTaint(TaintOptions{Store: store, Agent: "analyst", Config: c.Taint, Log: benchLogger(),
		Modes: func(*Info) (string, string) { return config.UntrustedTag, config.InjectionFlag }})
	var page strings.Builder
	for i := 0; page.Len() < 64<<10; i++ {
		fmt.Fprintf(&page, "Item %d of the fetched page says the shipment of %d crates left the port of %s on time. ", i, i*13, []string{"Rotterdam", "Hamburg", "Antwerp"}[i%3])
	}
	hashes := taint.NewHasher(taint.Default).Sum(nil, []byte(page.String()))
	if err := store.MarkAdd(context.Background(), "taint:{analyst}", hashes, "http://news.example/page", time.Hour, 1<<20); err != nil {
		b.Fatal(err)
	}
	body := func(copyPage bool) []byte {
		fields := map[string]string{}
		for i := range 8 {
			fields[fmt.Sprintf("field%d", i)] = strings.Repeat(fmt.Sprintf("The agent's own analysis, part %d, weighs the options carefully. ", i), 8)
		}
		if copyPage {
			fields["field3"] = page.String()[1000:1500]
		}
		bb, _ := json.Marshal(fields)
		return bb
	}
	h := AccessLog(benchLogger(), Egress, "analyst")(benchResolve(IdempotencyKey(newMemBook(nil), 1<<20, true)(tn.Egress(drain()))))
	for _, bc := range []struct {
		name string
		copy bool
	}{{"clean", false}, {"copy", true}} {
		b.Run(bc.name, func(b *testing.B) {
			runChain(b, h, body(bc.copy), http.Header{"Content-Type": {"application/json"}})
		})
	}
}
