package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/state"
)

// BenchmarkContextByReference passes a 20 MB artifact a → b → c → d, one
// fresh trace per op, on one memory store shared by the four Batons: b and
// c pass the envelope on as they got it, d takes the artifact's content.
// By reference, a's Baton stores the content once, b, c and d get a
// reference of a few hundred bytes, and d reads the content once from its
// own Baton. Inline, the content travels in the envelope (25 MB of JSON)
// through every hop to every agent. Both chains keep the same records (every handoff checkpointed
// with its body). Per op: CPU of the whole process (Batons, agents,
// client), the store writes of content and their megabytes, how much the
// store grew (records and checkpoints included), and the bytes of the
// handoffs that reached b, c and d.
func BenchmarkContextByReference(b *testing.B) {
	body, content := bigEnvelope(b, 20<<20, "trusted", "")
	for _, mode := range []struct{ name, out, in string }{
		{"by-reference", ", context: {by_reference: true}", ", context: {by_reference: {deliver: reference}}"},
		{"inline", "", ""},
	} {
		b.Run(mode.name, func(b *testing.B) {
			store := &ctxCountingStore{Memory: state.NewMemory(config.Memory{MaxEntries: 1 << 20, MaxBytes: 2 << 30})}
			b.Cleanup(func() { store.Close() }) // as each Baton does: Close is idempotent
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			common := "log_level: warn\nlimits: {max_body_bytes: 40000000}\nrecords: {max_body_bytes: 40000000}\n"
			node := func(name, next, yaml string) (*baton, *byteAgent) {
				ag := &byteAgent{next: next, client: client}
				srv := httptest.NewServer(ag)
				b.Cleanup(srv.Close)
				bt := startBaton(b, "agent: "+name+"\nupstream: "+srv.URL+"\n"+common+yaml, store)
				ag.egress = bt.EgressAddr()
				return bt, ag
			}
			peer := func(name string, bt *baton) string {
				return "peers: {" + name + ": {url: http://" + bt.IngressAddr() + "}}\n"
			}
			dB, d := node("d", "", "edges: [{from: c"+mode.in+"}]\n")
			cB, c := node("c", "d", peer("d", dB)+"edges: [{from: b"+mode.in+"}, {to: d}]\n")
			bB, bAg := node("b", "c", peer("c", cB)+"edges: [{from: a"+mode.in+"}, {to: c}]\n")
			aB := startBaton(b, "agent: a\nupstream: http://127.0.0.1:1\n"+common+peer("b", bB)+
				"edges: [{to: b"+mode.out+"}]\n", store)

			b.ReportAllocs()
			agentBytes := func() int64 { return bAg.bytes.Load() + c.bytes.Load() + d.bytes.Load() }
			_, used0 := store.Usage()
			i, start := 0, cpuTime()
			for b.Loop() {
				i++
				writes, reads := store.ctxSets.Load(), d.reads.Load()
				req, _ := http.NewRequest(http.MethodPost, "http://"+aB.EgressAddr()+"/handoff", bytes.NewReader(body))
				req.Host = "b"
				req.Header.Set("Content-Type", handoff.MediaType)
				req.Header.Set("Traceparent", fmt.Sprintf("00-%032x-b7ad6b7169203331-01", i))
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("op %d: the chain answered %d: %.300s", i, resp.StatusCode, answer)
				}
				if got := d.last.Swap(nil); got == nil || *got != content {
					b.Fatalf("op %d: d did not get the %d bytes of content sent", i, len(content))
				}
				if mode.in != "" {
					if n := store.ctxSets.Load() - writes; n != 1 {
						b.Fatalf("op %d: %d store writes of content, want 1", i, n)
					}
					if n := d.reads.Load() - reads; n != 1 {
						b.Fatalf("op %d: d read the content %d times, want 1", i, n)
					}
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/n, "cpu-µs/op")
			b.ReportMetric(float64(store.ctxSets.Load())/n, "store-writes/op")
			b.ReportMetric(float64(store.ctxBytes.Load())/1e6/n, "stored-MB/op")
			b.ReportMetric(float64(agentBytes())/n, "agent-bytes/op")
			_, used := store.Usage()
			b.ReportMetric(float64(used-used0)/1e6/n, "store-growth-MB/op")
		})
	}
}

// ctxCountingStore is a memory store that counts the content passed by
// reference written to it (Set calls on ctx keys, and their bytes). It
// embeds the *state.Memory itself so that the record book still takes the
// in-process path.
type ctxCountingStore struct {
	*state.Memory
	ctxSets, ctxBytes atomic.Int64
}

func (s *ctxCountingStore) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if strings.Contains(key, ":ctx:") {
		s.ctxSets.Add(1)
		s.ctxBytes.Add(int64(len(val)))
	}
	return s.Memory.Set(ctx, key, val, ttl)
}

// byteAgent passes the handoff it gets to next through its Baton, as it
// got it, and counts its bytes. The last agent (next "") takes the content
// of the envelope's last artifact instead, reading it from its Baton when
// it is a reference.
type byteAgent struct {
	next, egress string
	client       *http.Client
	bytes, reads atomic.Int64
	last         atomic.Pointer[string] // the content the last agent took
}

func (a *byteAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.bytes.Add(int64(len(body)))
	if a.next == "" {
		var env handoff.Envelope
		if err := json.Unmarshal(body, &env); err != nil || len(env.Artifacts) == 0 {
			http.Error(w, fmt.Sprint("no envelope: ", err), http.StatusBadRequest)
			return
		}
		art, got := env.Artifacts[len(env.Artifacts)-1], ""
		if _, ok := handoff.ParseContextRef(art.Ref); ok {
			resp, err := a.client.Get("http://" + a.egress + art.Ref)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				http.Error(w, fmt.Sprintf("reading %s: %d %.200s", art.Ref, resp.StatusCode, data), http.StatusBadGateway)
				return
			}
			a.reads.Add(1)
			got = string(data)
		} else {
			_ = json.Unmarshal(art.Content, &got)
		}
		a.last.Store(&got)
		io.WriteString(w, `{"ok":true}`)
		return
	}
	relay(w, r, a.client.Transport, a.egress, a.next, body)
}
