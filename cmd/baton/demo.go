//go:build !sidecar

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/batonproxy/baton/middleware"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/deadletter"
	"github.com/batonproxy/baton/handoff"
	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/sidecar"
	"github.com/batonproxy/baton/state"
	"github.com/batonproxy/baton/trust"
)

// The demo is a financial-analysis workflow of four agents, each with its
// Baton on loopback, sharing one in-memory store: analyst compiles a dataset
// with an agreed anomaly threshold and hands it to flagger, which flags
// anomalies with severities, books them in the ledger and hands them to
// writer, which drafts the summary. writer is down for the whole first run,
// so flagger's handoff to it is dead-lettered (its 503 is its own failure:
// no Baton retries it), and the chain stops there. Once writer is back the
// operator replays the dead
// letter and analyst re-sends its handoff with the key it got: the chain
// resumes at writer, and the ledger books once, though flagger runs again
// with different bodies; flagger's call to a model is answered from its
// Baton's journal on the re-run, so the model is paid once.
const demoTrace = "4bf92f3577b34da6a3ce929d0e0e4736"

type demoAgents struct {
	analystRuns, flaggerRuns, writerCalls atomic.Int64
	ledgerBookings, writerDrafts          atomic.Int64
	modelCalls                            atomic.Int64
	modelAddr, modelReplayed              string
	writerDown                            atomic.Bool
	mu                                    sync.Mutex
	flaggerSaw                            http.Header
	flaggerEgress                         string
	deadLetter                            string
	writerGrant                           string
	research                              []byte
	researchSaw                           http.Header
}

func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	verbose := fs.Bool("v", false, "print the Batons' JSON logs to stderr")
	if err := fs.Parse(args); err != nil {
		return usageError{msg: "demo: " + err.Error()}
	}
	logOut := io.Discard
	if *verbose {
		logOut = stderr
	}
	log := newLogger(logOut, "info")
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	tp := &middleware.IDTracerProvider{} // as serve with no exporter
	store := state.NewMemory(config.Memory{MaxEntries: 100_000, MaxBytes: 64 << 20})
	defer store.Close()

	ag := &demoAgents{}
	ag.writerDown.Store(true)
	web, err := startDemoAgent(http.HandlerFunc(demoNewsPage))
	if err != nil {
		return err
	}
	defer web.Close()
	writer, err := startDemoAgent(http.HandlerFunc(ag.writer))
	if err != nil {
		return err
	}
	defer writer.Close()
	flagger, err := startDemoAgent(http.HandlerFunc(ag.flagger))
	if err != nil {
		return err
	}
	defer flagger.Close()
	ledger, err := startDemoAgent(http.HandlerFunc(ag.ledger))
	if err != nil {
		return err
	}
	defer ledger.Close()
	model, err := startDemoAgent(http.HandlerFunc(ag.model))
	if err != nil {
		return err
	}
	defer model.Close()
	ag.modelAddr = model.Addr

	start := func(yaml string) (*sidecar.Baton, func(), error) {
		c, err := config.Parse(strings.NewReader(yaml), nil)
		if err != nil {
			return nil, nil, err
		}
		s, err := sidecar.New(proxy.Options{Config: c, Store: store, TracerProvider: tp, Propagator: prop, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		if err := s.Start(); err != nil {
			return nil, nil, err
		}
		return s, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = s.Shutdown(sctx)
		}, nil
	}
	loop := "listen: {egress: 127.0.0.1:0, ingress: 127.0.0.1:0, admin: 127.0.0.1:0}\n"
	ids, err := demoIdentities([]string{"analyst", "flagger", "ledger", "writer"})
	if err != nil {
		return err
	}
	defer os.RemoveAll(ids.dir)
	wB, stopW, err := start("agent: writer\nupstream: http://" + writer.Addr + "\n" + loop + ids.yaml("writer") +
		"edges: [{from: flagger}]\n")
	if err != nil {
		return fmt.Errorf("demo: writer's Baton: %w", err)
	}
	defer stopW()
	lB, stopL, err := start("agent: ledger\nupstream: http://" + ledger.Addr + "\n" + loop + ids.yaml("ledger") +
		"edges: [{from: flagger}]\n")
	if err != nil {
		return fmt.Errorf("demo: ledger's Baton: %w", err)
	}
	defer stopL()
	fB, stopF, err := start("agent: flagger\nupstream: http://" + flagger.Addr + "\n" + loop + ids.yaml("flagger") +
		"peers: {writer: {url: http://" + wB.IngressAddr() + "}, ledger: {url: http://" + lB.IngressAddr() + "}}\n" +
		"external: {allow: [" + model.Addr + "]}\njournal: {hosts: [" + model.Addr + "]}\n" +
		"models: {hosts: {\"" + model.Addr + "\": openai}}\n" +
		"edges: [{from: analyst, contract: {mode: enforce, min_completeness: 0.75}, untrusted: spotlight},\n" +
		"  {to: ledger, grant: {may_handoff_to: [], side_effects: [write]}},\n" +
		"  {to: writer, retry: {attempts: 2, backoff: 50ms}, grant: {may_handoff_to: [], side_effects: [read]}}]\n")
	if err != nil {
		return fmt.Errorf("demo: flagger's Baton: %w", err)
	}
	defer stopF()
	ag.flaggerEgress = fB.EgressAddr()
	aB, stopA, err := start("agent: analyst\nupstream: http://127.0.0.1:9\n" + loop + ids.yaml("analyst") +
		"external: {allow: [" + web.Addr + "]}\n" +
		"peers: {flagger: {url: http://" + fB.IngressAddr() + "}}\n" +
		"edges: [{to: flagger, grant: {may_handoff_to: [ledger, writer], side_effects: [read, write]}}]\n")
	if err != nil {
		return fmt.Errorf("demo: analyst's Baton: %w", err)
	}
	defer stopA()

	p := func(format string, a ...any) { fmt.Fprintf(stdout, format, a...) }
	p("Baton demo: a financial-analysis workflow, four agents, each with its Baton on loopback;\n")
	p("every handoff is signed by its Baton's key and checked against the receiver's trust bundle\n\n")
	top := fmt.Sprintf("  analyst ─▶ Baton %s ─▶ Baton %s ─▶ flagger ─▶ Baton %s ─┬─▶ Baton %s ─▶ ledger",
		aB.EgressAddr(), fB.IngressAddr(), fB.EgressAddr(), lB.IngressAddr())
	fork := len([]rune(top[:strings.Index(top, "┬")]))
	p("%s\n%s└─▶ Baton %s ─▶ writer\n\n", top, strings.Repeat(" ", fork), wB.IngressAddr())

	// 1. analyst hands the dataset to flagger; the chain stops at writer.
	caller := "00-" + demoTrace + "-00f067aa0ba902b7-01"
	dataset := demoEnvelope("analyst", "q3-anomalies", "Flag Q3 vendor payments above the agreed threshold and summarise them",
		[]string{"compiled 3 vendors' Q3 deviations from the ledger"},
		`{"threshold":0.05,"rows":[["vendor-17",0.41],["vendor-03",0.02],["vendor-22",0.09]]}`)
	p("1. analyst compiles Q3 with the agreed anomaly threshold 0.05 and hands it to flagger in a handoff\n")
	p("   envelope; flagger books its flags in the ledger, then asks writer for a draft. writer is down.\n")
	ag.analystRuns.Add(1)
	resp, err := demoPost(ctx, aB.EgressAddr(), "flagger", "/flag", caller, dataset)
	if err != nil {
		return err
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	key := resp.Header.Get("Idempotency-Key")
	ag.mu.Lock()
	saw, dead := ag.flaggerSaw, ag.deadLetter
	ag.mu.Unlock()
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Baton-Dead-Letter") != dead || key == "" {
		return fmt.Errorf("demo: the failed chain answered %d (dead letter %q, key %q): %s", resp.StatusCode,
			resp.Header.Get("Baton-Dead-Letter"), key, answer)
	}
	p("   writer answered 503 (restarting), its own failure: flagger's Baton ran it %d time(s), retried nothing\n"+
		"   (a Baton retries only what surely did not reach the agent) and dead-lettered the handoff; flagger answered 502, and\n",
		ag.writerCalls.Load())
	p("   analyst's Baton did not retry it: the chain had stopped below, at that dead letter. analyst got\n")
	p("     %d, Baton-Dead-Letter: %s\n", resp.StatusCode, dead)
	p("          Idempotency-Key: %s (the key to resume with)\n", key)
	p("   what reached flagger, added by the Batons (analyst also sent a forged Baton-Agent: admin):\n")
	for _, h := range []string{"Baton-Agent", "Baton-Hop", "Idempotency-Key", "Traceparent", "Baton-Contract", "Baton-Grant"} {
		p("     %-16s %s\n", h+":", saw.Get(h))
	}
	ag.mu.Lock()
	writerGrant := ag.writerGrant
	ag.mu.Unlock()
	if g, err := trust.DecodeGrant(saw.Get("Baton-Grant")); err == nil {
		p("   grant analyst gave flagger:      may_handoff_to %v, side_effects %v\n", g.MayHandoffTo, g.SideEffects)
	}
	if g, err := trust.DecodeGrant(writerGrant); err == nil {
		p("   grant flagger passed to writer:  may_handoff_to %v, side_effects %v (narrowed, never widened)\n\n",
			g.MayHandoffTo, g.SideEffects)
	}

	// A forged handoff: someone without analyst's key posts to flagger's
	// Baton claiming to be analyst.
	p("   a forged handoff (Baton-Agent: analyst, no signature) sent straight to flagger's Baton:\n")
	forged, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+fB.IngressAddr()+"/flag", strings.NewReader(dataset))
	if err != nil {
		return err
	}
	forged.Header.Set("Baton-Agent", "analyst")
	forged.Header.Set("Content-Type", handoff.MediaType)
	resp, err = http.DefaultTransport.RoundTrip(forged)
	if err != nil {
		return fmt.Errorf("demo: forged handoff: %w", err)
	}
	var forgedPD struct{ Detail, Reason string }
	_ = json.NewDecoder(resp.Body).Decode(&forgedPD)
	resp.Body.Close()
	p("     %d %s (reason %s); flagger ran %d time(s) so far\n\n", resp.StatusCode, forgedPD.Detail, forgedPD.Reason, ag.flaggerRuns.Load())

	// An incomplete handoff is refused before flagger sees it.
	p("   an incomplete handoff (no verification status, no open questions) is refused by flagger's Baton:\n")
	resp, err = demoPost(ctx, aB.EgressAddr(), "flagger", "/flag", "00-"+demoTrace+"-2222222222222222-01",
		`{"schema_version":"1.0.0","task":{"id":"q3-anomalies","intent":"flag Q3"},"completed":[{"id":"c1","summary":"compiled"}]}`)
	if err != nil {
		return err
	}
	var refusal struct {
		Status     int    `json:"status"`
		Detail     string `json:"detail"`
		Violations []struct {
			Pointer, Detail string
		} `json:"violations"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&refusal)
	resp.Body.Close()
	p("     %d %s\n", resp.StatusCode, refusal.Detail)
	for _, v := range refusal.Violations {
		p("       - %s %s\n", v.Pointer, v.Detail)
	}
	p("\n")

	// 2. writer is back: replay the dead letter, then resume the chain.
	ag.writerDown.Store(false)
	p("2. writer is back; the operator replays the dead letter at flagger's Baton (baton dlq replay ID):\n")
	admin := newAdminClient(fB.AdminAddr(), func(string) string { return "" })
	var res deadletter.ReplayResult
	if err := admin.do("POST", "/v1/deadletters/"+dead+"/replay", &res); err != nil {
		return fmt.Errorf("demo: replay: %w", err)
	}
	p("     %s %d, writer drafted %s\n", res.Record.State, res.Status, strings.TrimSpace(res.Response))
	p("   then analyst re-sends its handoff with Idempotency-Key: %s.\n", key)
	resp, err = demoPostKey(ctx, aB.EgressAddr(), "flagger", "/flag", caller, dataset, key)
	if err != nil {
		return err
	}
	answer, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("demo: the resumed chain answered %d: %s", resp.StatusCode, answer)
	}
	p("   flagger runs again, its bodies stamped anew, and sends the same keys by their position:\n")
	p("   ledger and writer answer from their dedupe windows, neither runs again. analyst got\n")
	p("     %d %s\n", resp.StatusCode, bytes.TrimSpace(answer))
	p("   ledger booked %d time(s), writer drafted %d time(s), flagger ran %d time(s), analyst %d\n",
		ag.ledgerBookings.Load(), ag.writerDrafts.Load(), ag.flaggerRuns.Load(), ag.analystRuns.Load())
	ag.mu.Lock()
	replayed := ag.modelReplayed
	ag.mu.Unlock()
	p("   flagger's call to the model was answered from its Baton's journal (Baton-Journal-Replayed: %s):\n", replayed)
	p("   the model was called %d time(s) in all, and flagger's review is the first run's, word for word\n\n",
		ag.modelCalls.Load())

	// 3. analyst's client times out and retries: answered from the window.
	p("3. analyst's client timed out and retries the same handoff: same Idempotency-Key,\n")
	resp, err = demoPostKey(ctx, aB.EgressAddr(), "flagger", "/flag", "00-"+demoTrace+"-1111111111111111-01", dataset, key)
	if err != nil {
		return err
	}
	resp.Body.Close()
	p("   answered from flagger's dedupe window: Idempotent-Replayed: %s; flagger ran %d time(s)\n\n",
		resp.Header.Get("Idempotent-Replayed"), ag.flaggerRuns.Load())

	// 4. The trace.
	p("4. the trace, as the Batons recorded it (baton trace %s --verify):\n", demoTrace)
	var view records.TraceView
	deadline := time.Now().Add(5 * time.Second)
	for {
		view = records.TraceView{} // decoding into the last one would keep its records' fields
		if err := admin.do("GET", "/v1/traces/"+demoTrace, &view); err != nil {
			return err
		}
		if demoTraceSettled(view) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var tree strings.Builder
	printTree(&tree, demoTrace, view.Records)
	for _, line := range strings.Split(strings.TrimRight(tree.String(), "\n"), "\n") {
		p("   %s\n", line)
	}
	entries := make([][]byte, len(view.Entries))
	for i, e := range view.Entries {
		entries[i] = []byte(e)
	}
	if err := record.Verify(entries, view.Tail); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	p("   hash chain intact: %d entries\n\n", len(view.Entries))

	// 5. A stream, and a refusal.
	p("5. writer streams its summary through two Batons (text/event-stream), each event as it arrives:\n")
	startStream := time.Now()
	if err := demoStream(ctx, aB.EgressAddr(), func(ev string) {
		p("     +%4dms  %s\n", time.Since(startStream).Milliseconds(), ev)
	}); err != nil {
		return err
	}
	if err := demoUntrusted(ctx, p, aB.EgressAddr(), web.Addr, ag); err != nil {
		return err
	}
	p("\n7. a destination that is neither a peer nor allowed is refused:\n")
	status, detail, err := demoRefused(ctx, aB.EgressAddr())
	if err != nil {
		return err
	}
	p("     %d %s\n", status, detail)
	if err := demoGate(ctx, p, start, loop); err != nil {
		return err
	}
	if err := demoAbandon(ctx, p, start, loop); err != nil {
		return err
	}
	if err := demoContext(ctx, p, start, loop); err != nil {
		return err
	}
	if err := demoBudget(ctx, p, start, loop); err != nil {
		return err
	}
	p("\nDone: the Batons and the demo agents shut down.\n")
	return nil
}

// demoIDs holds the demo Batons' identity keys.
type demoIDs struct {
	dir   string
	files map[string]string // agent → key file
	lines map[string]string // agent → "KEYID PUBLICKEY"
}

func demoIdentities(agents []string) (*demoIDs, error) {
	dir, err := os.MkdirTemp("", "baton-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	ids := &demoIDs{dir: dir, files: map[string]string{}, lines: map[string]string{}}
	for _, a := range agents {
		k, err := trust.GenerateKey(a + "-2026")
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		pem, err := k.PrivatePEM()
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		f := filepath.Join(dir, a+".key")
		if err := os.WriteFile(f, pem, 0o600); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		ids.files[a], ids.lines[a] = f, k.Public().String()
	}
	return ids, nil
}

// yaml is agent's identity and a trust bundle of every other demo agent.
func (d *demoIDs) yaml(agent string) string {
	var b strings.Builder
	b.WriteString("identity: {key_file: '" + d.files[agent] + "'}\ntrust:\n  peers:\n")
	for a, line := range d.lines {
		if a != agent {
			b.WriteString("    " + a + ": ['" + line + "']\n")
		}
	}
	return b.String()
}

// demoTraceSettled waits for the last records of the story (records are
// written off the request path): the resumed run's calls answered from
// ledger's and writer's windows, its model call from flagger's journal,
// analyst's retry from flagger's window, and every record's parent.
func demoTraceSettled(v records.TraceView) bool {
	var ledger, writer, flagger, journal bool
	ids := map[string]bool{}
	for _, r := range v.Records {
		ids[r.ID] = true
		fromWindow := r.Side == record.Ingress && strings.HasPrefix(r.Outcome, "replayed from the dedupe window")
		ledger = ledger || (fromWindow && r.To == "ledger")
		writer = writer || (fromWindow && r.To == "writer")
		flagger = flagger || (fromWindow && r.To == "flagger")
		journal = journal || (r.Journal != nil && r.Journal.Hits > 0)
	}
	for _, r := range v.Records {
		if r.ParentID != "" && !ids[r.ParentID] {
			return false
		}
	}
	return ledger && writer && flagger && journal
}
