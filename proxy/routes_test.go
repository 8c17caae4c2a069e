package proxy_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/state/redistest"
)

// tlsModel is a model server over HTTPS (HTTP/2 offered), with a
// certificate of a CA only the test knows; it records what it was sent.
type tlsModel struct {
	*modelServer
	srv    *httptest.Server
	caFile string
	proto  atomic.Pointer[string]
	path   atomic.Pointer[string]
	auth   atomic.Pointer[string]
}

func newTLSModel(t *testing.T) *tlsModel {
	t.Helper()
	m := &tlsModel{modelServer: &modelServer{}}
	m.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto, path, auth := r.Proto, r.URL.Path, r.Header.Get("Authorization")
		m.proto.Store(&proto)
		m.path.Store(&path)
		m.auth.Store(&auth)
		m.modelServer.ServeHTTP(w, r)
	}))
	m.srv.EnableHTTP2 = true
	m.srv.StartTLS()
	t.Cleanup(m.srv.Close)
	m.caFile = filepath.Join(t.TempDir(), "model-ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.srv.Certificate().Raw})
	if err := os.WriteFile(m.caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *tlsModel) host() string { return m.srv.Listener.Addr().String() }

func loaded(p *atomic.Pointer[string]) string {
	if v := p.Load(); v != nil {
		return *v
	}
	return ""
}

// TestRouteOpenAIClientOverHTTPS: an agent whose OpenAI SDK has its base
// URL on the egress (OPENAI_BASE_URL=http://127.0.0.1:15001/openai/v1, no
// CA to trust) streams a chat completion from a model server Baton reaches
// over HTTPS, verified against external.ca_file, in HTTP/2. The call is
// journaled: the re-run gets the stream from the journal and the model
// server is not called again; the API key is in no journal entry.
func TestRouteOpenAIClientOverHTTPS(t *testing.T) {
	t.Parallel()
	model := newTLSModel(t)
	const apiKey = "sk-route-0123456789abcdef"
	yaml := "external: {routes: [{name: openai, url: 'https://" + model.host() + "/'}], ca_file: " + model.caFile + "}\n" +
		"journal: {hosts: [" + model.host() + "]}\n"
	var runs []chatRun
	var g *journalRig
	url := redistest.Shared(t)
	prefix := redistest.Prefix(t, url)
	g = newJournalRig(t, yaml, redisStoreWithPrefix(t, url, prefix), func(n int, _ caller) int {
		runs = append(runs, streamChat(t, n,
			option.WithBaseURL("http://"+g.b.EgressAddr()+"/openai/v1/"),
			option.WithAPIKey(apiKey),
			option.WithHeader("Baggage", *g.baggage.Load())))
		return failFirst(n)
	})
	g.handle("k-route")
	g.handle("k-route")
	if len(runs) != 2 {
		t.Fatalf("the agent ran %d times, want 2", len(runs))
	}
	if runs[0].text == "" || runs[0].chunks != 3 || runs[0].replayed != "" {
		t.Errorf("first run: %+v; want the model's 3 chunks, not replayed", runs[0])
	}
	if runs[1].text != runs[0].text || runs[1].chunks != runs[0].chunks || runs[1].replayed != "true" {
		t.Errorf("re-run: %+v; want the first run's stream, replayed", runs[1])
	}
	if n := model.calls.Load(); n != 1 {
		t.Errorf("the model was called %d times, want 1", n)
	}
	if p, path, auth := loaded(&model.proto), loaded(&model.path), loaded(&model.auth); p != "HTTP/2.0" ||
		path != "/v1/chat/completions" || auth != "Bearer "+apiKey {
		t.Errorf("the model server saw %s %s with Authorization %q; want HTTP/2.0 /v1/chat/completions with the agent's key", p, path, auth)
	}
	g.receipts(2) // the records are stored
	if appends, _ := g.store.counts(); appends == 0 {
		t.Fatal("nothing was journaled")
	}
	stored := storedBytes(t, url, prefix)
	if !strings.Contains(string(stored), "journal/") {
		t.Fatal("the store holds no journal: the search below would prove nothing")
	}
	if strings.Contains(string(stored), apiKey) {
		t.Error("the API key is in a stored byte")
	}
}

// TestRouteRefusals: a route's upstream whose certificate Baton does not
// trust is a 502 upstream-certificate, never a downgrade; a path naming no
// route is not taken for one.
func TestRouteRefusals(t *testing.T) {
	t.Parallel()
	model := newTLSModel(t)
	// No ca_file: the model server's certificate chains to no root Baton trusts.
	b := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\nexternal: {routes: [{name: llm, url: 'https://"+model.host()+"/v1'}]}\n", nil)

	resp, err := http.Post("http://"+b.EgressAddr()+"/llm/chat/completions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Type, Detail, Destination string
		Status                    int
	}
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.HasSuffix(p.Type, "#"+string(problem.UpstreamCertificate)) ||
		p.Destination != model.host() || resp.Header.Get("Content-Type") != problem.ContentType {
		t.Errorf("untrusted upstream: %d %+v", resp.StatusCode, p)
	}
	if n := model.calls.Load(); n != 0 {
		t.Errorf("the model answered %d calls over an unverified connection", n)
	}

	resp, err = http.Post("http://"+b.EgressAddr()+"/other/chat", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("a path naming no route: %d, want 403 unknown-destination", resp.StatusCode)
	}
}

// storedBytes returns every value Redis holds under prefix, of every kind,
// concatenated: what a test searches for a secret that must not be stored.
func storedBytes(t *testing.T, url, prefix string) []byte {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	add := func(vs ...string) {
		for _, v := range vs {
			out = append(append(out, v...), '\n')
		}
	}
	for _, k := range keys {
		add(k)
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			add(rdb.Get(ctx, k).Val())
		case "list":
			add(rdb.LRange(ctx, k, 0, -1).Val()...)
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				add(f, v)
			}
		case "set":
			add(rdb.SMembers(ctx, k).Val()...)
		case "zset":
			add(rdb.ZRange(ctx, k, 0, -1).Val()...)
		case "stream":
			for _, m := range rdb.XRange(ctx, k, "-", "+").Val() {
				for f, v := range m.Values {
					add(f, fmt.Sprint(v))
				}
			}
		case "none":
		default:
			t.Fatalf("key %s of type %s: read it here", k, typ)
		}
	}
	return out
}
