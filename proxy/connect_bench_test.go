package proxy_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkHTTPSCall measures one external call from the agent, on kept-alive
// connections, the ways Baton can carry it (issue: see inside TLS):
//
//   - plain: plain HTTP to Baton and from Baton to the server (no TLS);
//   - route: plain HTTP to Baton on a base-URL route, TLS from Baton to the
//     server (the same call over plain HTTP through Baton);
//   - tunnel: CONNECT, the agent's TLS passed through to the server;
//   - intercepted: CONNECT, the agent's TLS terminated by Baton, TLS from
//     Baton to the server;
//   - intercepted-new-conn: as intercepted, a new connection (and handshake,
//     with its leaf from the cache) per call.
//
// Everything runs in this process: cpu-µs/op is the process's CPU per call
// (agent, Baton and server), so each row's cost over plain is what its TLS
// costs, on both sides of Baton. ns/op is the call's latency, one at a time.
func BenchmarkHTTPSCall(b *testing.B) {
	answer := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","answer":"ok"}`)
	}
	plainSrv := httptest.NewServer(http.HandlerFunc(answer))
	defer plainSrv.Close()
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(answer))
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	dir := b.TempDir()
	caFile := filepath.Join(dir, "server-ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o600)
	plainHost, tlsHost := plainSrv.Listener.Addr().String(), tlsSrv.Listener.Addr().String()
	// The same server on a second address, allowed but not listed: tunnelled.
	tunnelSrv := httptest.NewUnstartedServer(http.HandlerFunc(answer))
	tunnelSrv.TLS = tlsSrv.TLS
	tunnelSrv.StartTLS()
	defer tunnelSrv.Close()
	tunnelHost := tunnelSrv.Listener.Addr().String()

	bundle := filepath.Join(dir, "ca", "bundle.pem")
	bt := startBaton(b, "agent: a\nupstream: http://127.0.0.1:1\nlog_level: warn\n"+
		"external: {allow: ['"+plainHost+"', '"+tlsHost+"', '"+tunnelHost+"'], ca_file: "+caFile+
		", routes: [{name: llm, url: 'https://"+tlsHost+"/'}]}\n"+
		"intercept: {tls: {hosts: ['"+tlsHost+"'], bundle: "+bundle+"}}\n", nil)
	pemBytes, err := os.ReadFile(bundle)
	if err != nil {
		b.Fatal(err)
	}
	batonRoots := x509.NewCertPool()
	batonRoots.AppendCertsFromPEM(pemBytes)
	serverRoots := tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	viaBaton := http.ProxyURL(&neturl.URL{Scheme: "http", Host: bt.EgressAddr()})

	body := strings.Repeat("x", 512)
	rows := []struct {
		name   string
		url    string
		client *http.Client
	}{
		{"plain", "http://" + plainHost + "/v1/chat", &http.Client{Transport: &http.Transport{Proxy: viaBaton}}},
		{"route", "http://" + bt.EgressAddr() + "/llm/v1/chat", &http.Client{Transport: &http.Transport{}}},
		{"tunnel", "https://" + tunnelHost + "/v1/chat", &http.Client{Transport: &http.Transport{Proxy: viaBaton,
			TLSClientConfig: &tls.Config{RootCAs: serverRoots}}}},
		{"intercepted", "https://" + tlsHost + "/v1/chat", &http.Client{Transport: &http.Transport{Proxy: viaBaton,
			TLSClientConfig: &tls.Config{RootCAs: batonRoots}}}},
		{"intercepted-new-conn", "https://" + tlsHost + "/v1/chat", &http.Client{Transport: &http.Transport{Proxy: viaBaton,
			TLSClientConfig: &tls.Config{RootCAs: batonRoots}, DisableKeepAlives: true}}},
	}
	for _, row := range rows {
		b.Run(row.name, func(b *testing.B) {
			call := func() {
				resp, err := row.client.Post(row.url, "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%s: %d", row.name, resp.StatusCode)
				}
			}
			call() // the connections up
			measureCalls(b, call)
			row.client.CloseIdleConnections()
		})
	}
}
