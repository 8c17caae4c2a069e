package proxy_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestConnectTunnelsUnlisted: with Baton as its HTTPS proxy, an agent's
// CONNECT to an allowed host whose TLS nothing lists is tunnelled as raw
// bytes: the agent sees the real server's certificate. A CONNECT to a host
// that is not allowed is refused before anything is dialled.
func TestConnectTunnelsUnlisted(t *testing.T) {
	t.Parallel()
	var hits int
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		io.WriteString(w, "real site")
	}))
	t.Cleanup(site.Close)
	host := site.Listener.Addr().String()
	b := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\nexternal: {allow: ['"+host+"']}\n", nil)

	var seen *tls.ConnectionState
	client := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: b.EgressAddr()}),
		TLSClientConfig: site.Client().Transport.(*http.Transport).TLSClientConfig.Clone(),
	}}
	resp, err := client.Get("https://" + host + "/page")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	seen = resp.TLS
	if string(body) != "real site" || hits != 1 {
		t.Errorf("through the tunnel: %q, %d hits", body, hits)
	}
	if seen == nil || !seen.PeerCertificates[0].Equal(site.Certificate()) {
		t.Error("the agent did not see the real server's certificate")
	}
	client.CloseIdleConnections() // the tunnel ends, and its access line is written
	waitFor(t, "the tunnel's access line", func() bool {
		return strings.Contains(b.log.String(), `"method":"CONNECT","target":"`+host+`","status":200`)
	})

	other := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("a refused CONNECT reached its host") }))
	t.Cleanup(other.Close)
	_, err = client.Get("https://" + other.Listener.Addr().String() + "/")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("CONNECT to a host not allowed: %v, want 403", err)
	}
}
