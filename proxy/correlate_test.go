package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestA2AContextCorrelation: summarizer's agent does not forward traceparent,
// but its A2A call names the contextId of the message it was given, which
// ties the call to that inbound handoff. A call naming an unknown context,
// in a trace of its own, stays uncorrelated, and trust.uncorrelated: deny
// refuses it; one that carries no trace at all is tied to the one handling
// in flight.
func TestA2AContextCorrelation(t *testing.T) {
	t.Parallel()
	var atReviewer seen
	rAgent := httptest.NewServer(atReviewer.handler(200, `{"jsonrpc":"2.0","id":1,"result":{}}`))
	t.Cleanup(rAgent.Close)
	reviewer := startBaton(t, "agent: reviewer\nupstream: "+rAgent.URL+"\n", nil)

	msg := func(id, ctx string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"` + id +
			`","contextId":"` + ctx + `","role":"user","parts":[{"text":"review"}]}}}`
	}
	var sumEgress string
	statuses := make(chan int, 3)
	sAgent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		for i, ctx := range []string{"ctx-42", "ctx-unknown", "ctx-unknown"} {
			req, _ := http.NewRequest("POST", "http://"+sumEgress+"/a2a", strings.NewReader(msg("out-"+ctx+strconv.Itoa(i), ctx)))
			req.Host = "reviewer"
			req.Header.Set("Content-Type", "application/json") // and no traceparent...
			if i == 1 {
				// ...but this one, in a trace of its own
				req.Header.Set("Traceparent", "00-5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a-5a5a5a5a5a5a5a5a-01")
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				statuses <- 0
				continue
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}
		w.WriteHeader(200)
	}))
	t.Cleanup(sAgent.Close)
	sum := startBaton(t, "agent: summarizer\nupstream: "+sAgent.URL+"\npeers: {reviewer: {url: http://"+
		reviewer.IngressAddr()+"}}\ntrust: {uncorrelated: deny}\n", nil)
	sumEgress = sum.EgressAddr()
	analyst := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\npeers: {summarizer: {url: http://"+
		sum.IngressAddr()+"}}\n", nil)

	resp := send(t, analyst.EgressAddr(), "summarizer", "POST", "/a2a", msg("in-1", "ctx-42"),
		http.Header{"Content-Type": {"application/json"}, "Traceparent": {tp}})
	if resp.StatusCode != 200 {
		t.Fatalf("analyst → summarizer: %d", resp.StatusCode)
	}
	if st := <-statuses; st != 200 {
		t.Errorf("the call naming the inbound context: %d, want 200", st)
	}
	if st := <-statuses; st != 403 {
		t.Errorf("the call naming an unknown context in another trace: %d, want 403 (uncorrelated, deny)", st)
	}
	if st := <-statuses; st != 200 {
		t.Errorf("the call naming an unknown context and no trace: %d, want 200 (the one handling in flight)", st)
	}
	r := atReviewer.last(t)
	if r.Header.Get("Baton-Hop") != "2" || atReviewer.count() != 2 {
		t.Errorf("at reviewer: Baton-Hop %q, %d calls; want hop 2 from the correlated handling, 2 calls", r.Header.Get("Baton-Hop"), atReviewer.count())
	}
}
