package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestExternalEdgesNamed: an agent's fetches are counted per destination,
// to="_external:NAME": a base-URL route's upstream by the route's name,
// whether the agent called the route or the upstream's host, and any other
// host by host:port.
func TestExternalEdgesNamed(t *testing.T) {
	t.Parallel()
	var got seen
	search, other := httptest.NewServer(got.handler(200, "ok")), httptest.NewServer(got.handler(200, "ok"))
	t.Cleanup(search.Close)
	t.Cleanup(other.Close)
	searchHost, otherHost := search.Listener.Addr().String(), other.Listener.Addr().String()
	b := startBatonWith(t, "agent: a\nupstream: http://127.0.0.1:1\nexternal: {allow: ['"+otherHost+"'], routes: [{name: search, url: '"+
		search.URL+"/'}]}\n", nil, prometheusMetrics(t))
	for _, call := range []struct{ host, path string }{
		{b.EgressAddr(), "/search/q"}, // the route
		{searchHost, "/q"},            // its upstream, by host
		{otherHost, "/page"},
	} {
		resp := send(t, b.EgressAddr(), call.host, "GET", call.path, "", nil)
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s%s: %d", call.host, call.path, resp.StatusCode)
		}
	}
	counts := map[string]float64{}
	for _, m := range scrapeMetrics(t, b.AdminAddr())["baton_handoff_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "to" {
				counts[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	if counts["_external:search"] != 2 || counts["_external:"+otherHost] != 1 || counts["_external"] != 0 {
		t.Errorf("requests by destination %v: want 2 to _external:search and 1 to _external:%s", counts, otherHost)
	}
}
