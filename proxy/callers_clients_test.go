package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonproxy/baton/handoff/record"
	"github.com/batonproxy/baton/proxy"
	"github.com/batonproxy/baton/records"
	"github.com/batonproxy/baton/state/redistest"
)

// A caller as it is written: a program that sends one POST with the
// headers given and prints the status, the WWW-Authenticate challenge and
// the body, one per line.
type callerClient struct {
	name string
	run  func(t *testing.T, url string, hdr [][2]string, body string) (status int, challenge, answer string)
}

// callerClients are curl, Node's fetch and Python's requests.
func callerClients(t *testing.T) []callerClient {
	t.Helper()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is not on PATH: install the Debian package curl")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: install the Debian package nodejs")
	}
	python := requestsPython(t)
	out := func(t *testing.T, cmd *exec.Cmd) (int, string, string) {
		t.Helper()
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd.Args[0], err, b)
		}
		status, rest, _ := strings.Cut(string(b), "\n")
		challenge, body, _ := strings.Cut(rest, "\n")
		n, err := strconv.Atoi(strings.TrimSpace(status))
		if err != nil {
			t.Fatalf("%s printed %q", cmd.Args[0], b)
		}
		return n, strings.TrimSpace(challenge), strings.TrimSuffix(body, "\n")
	}
	return []callerClient{
		{"curl", func(t *testing.T, url string, hdr [][2]string, body string) (int, string, string) {
			dir := t.TempDir()
			args := []string{"-sS", "-X", "POST", "-o", filepath.Join(dir, "body"), "-D", filepath.Join(dir, "head"),
				"-w", "%{http_code}", "--data-binary", body, "-H", "Content-Type: application/json"}
			for _, kv := range hdr {
				args = append(args, "-H", kv[0]+": "+kv[1])
			}
			b, err := exec.Command(curl, append(args, url)...).Output()
			if err != nil {
				t.Fatalf("curl: %v", err)
			}
			head, _ := os.ReadFile(filepath.Join(dir, "head"))
			answer, _ := os.ReadFile(filepath.Join(dir, "body"))
			var challenge string
			for line := range strings.SplitSeq(string(head), "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "WWW-Authenticate") {
					challenge = strings.TrimSpace(v)
				}
			}
			n, _ := strconv.Atoi(string(b))
			return n, challenge, string(answer)
		}},
		{"node fetch", func(t *testing.T, url string, hdr [][2]string, body string) (int, string, string) {
			h, _ := json.Marshal(append([][2]string{{"Content-Type", "application/json"}}, hdr...))
			const script = `const [url, hdr, body] = process.argv.slice(1);
const r = await fetch(url, {method: "POST", headers: JSON.parse(hdr), body});
console.log(r.status); console.log(r.headers.get("www-authenticate") ?? ""); console.log(await r.text());`
			return out(t, exec.Command(node, "--input-type=module", "-e", script, url, string(h), body))
		}},
		{"python requests", func(t *testing.T, url string, hdr [][2]string, body string) (int, string, string) {
			h, _ := json.Marshal(append([][2]string{{"Content-Type", "application/json"}}, hdr...))
			const script = `import json, sys, requests
url, hdr, body = sys.argv[1:]
r = requests.post(url, headers=dict(json.loads(hdr)), data=body)
print(r.status_code); print(r.headers.get("WWW-Authenticate", "")); print(r.text)`
			return out(t, exec.Command(python, "-c", script, url, string(h), body))
		}},
	}
}

// requestsPython is a python3 that has the requests package: Debian's,
// with python3-requests installed.
func requestsPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import requests").Run() == nil {
			return path
		}
	}
	t.Fatal("no python3 with the requests package: install the Debian packages python3 and python3-requests")
	return ""
}

// TestCallerCredentialStaysAtTheEdge: callers as they are (curl, Node's
// fetch, Python's requests), with a bearer token and with a JWT, each
// forging the identity headers as well. The agent receives no credential,
// and the caller's verified identity instead: Baton-Agent (the edge),
// Baton-Caller, Baton-Caller-Subject and the edge's claim headers, the
// forged ones replaced. Nothing of either credential is in the records,
// the log, or the store (the dedupe window, with Redis). An edge that
// forwards its credential passes it on; a caller with no credential is
// challenged with 401 and WWW-Authenticate: Bearer realm="analyst".
func TestCallerCredentialStaysAtTheEdge(t *testing.T) {
	t.Parallel()
	clients := callerClients(t)
	iss := newJWTIssuer(t, "k-1")
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, iss.jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	const opsToken = "ops-token-0123456789abcdef"
	url := redistest.Shared(t)
	prefix := redistest.Prefix(t, url)
	got := &seen{}
	ag := httptest.NewServer(got.handler(http.StatusOK, `{"ok":true}`))
	t.Cleanup(ag.Close)
	b := startBatonWith(t, "agent: analyst\nupstream: "+ag.URL+"\nedges:\n"+
		"  - {from: web, callers: {bearer: {tokens_env: WEB_TOKENS}}}\n"+
		fmt.Sprintf("  - {from: app, callers: {jwt: {issuer: %q, audience: analyst, jwks_file: %q}, ", jwtIssuer, jwks)+
		"claim_headers: {X-Caller-Email: email, X-Caller-Groups: groups}}}\n"+
		"  - {from: ops, callers: {networks: [127.0.0.2/32], bearer: {tokens_env: OPS_TOKENS}, forward: true}}\n",
		redisStoreWithPrefix(t, url, prefix), func(o *proxy.Options) {
			o.Env = func(k string) string {
				switch k {
				case "WEB_TOKENS":
					return webToken1
				case "OPS_TOKENS":
					return opsToken
				}
				return ""
			}
		})
	ingress := "http://" + b.IngressAddr() + "/task"
	jwtTok := iss.token(t, "k-1", "sub", "svc-7", "email", "ada@example.com", "groups", []string{"ops", "billing"})
	forged := [][2]string{{"Baton-Caller", "jwt"}, {"Baton-Caller-Subject", "admin"}, {"X-Caller-Email", "root@example.com"}}

	var traces []string
	for _, c := range clients {
		for _, cred := range []struct {
			name, auth, edge, via, subject, email, groups string
		}{
			{"token", "Bearer " + webToken1, "web", "bearer", "", "", ""},
			{"JWT", "Bearer " + jwtTok, "app", "jwt", "svc-7", "ada@example.com", "ops,billing"},
		} {
			t.Run(c.name+" with a "+cred.name, func(t *testing.T) {
				tp, trace := newTraceparent(t)
				traces = append(traces, trace)
				key := fmt.Sprintf(`"%s-%s"`, strings.ReplaceAll(c.name, " ", "-"), cred.name)
				hdr := append([][2]string{{"Authorization", cred.auth}, {"Traceparent", tp}, {"Idempotency-Key", key}}, forged...)
				for range 2 { // the second is answered from the dedupe window
					status, _, answer := c.run(t, ingress, hdr, `{"task":"summarise"}`)
					if status != http.StatusOK || answer != `{"ok":true}` {
						t.Fatalf("%d %s", status, answer)
					}
				}
				r := got.last(t)
				h := r.Header
				if h.Get("Authorization") != "" {
					t.Errorf("the agent got the caller's credential: %q", h.Get("Authorization"))
				}
				if h.Get("Baton-Agent") != cred.edge || h.Get("Baton-Caller") != cred.via ||
					h.Get("Baton-Caller-Subject") != cred.subject || h.Get("X-Caller-Email") != cred.email ||
					h.Get("X-Caller-Groups") != cred.groups {
					t.Errorf("the agent's view: Baton-Agent %q, Baton-Caller %q, Baton-Caller-Subject %q, X-Caller-Email %q, X-Caller-Groups %q",
						h.Get("Baton-Agent"), h.Get("Baton-Caller"), h.Get("Baton-Caller-Subject"), h.Get("X-Caller-Email"), h.Get("X-Caller-Groups"))
				}
				if n := len(h.Values("Baton-Caller-Subject")) + len(h.Values("X-Caller-Email")); n > 2 {
					t.Errorf("forged identity headers kept beside Baton's: %v", h)
				}
				v := waitTrace(t, b.AdminAddr(), trace, func(v records.TraceView) bool {
					return len(v.Records) == 2 && v.Records[0].State != record.Sent && v.Records[1].State != record.Sent
				})
				for _, rec := range v.Records {
					if rec.From != cred.edge || rec.Caller != strings.TrimSuffix(cred.via+":"+cred.subject, ":") {
						t.Errorf("receipt from %q, caller %q", rec.From, rec.Caller)
					}
				}
			})
			t.Run(c.name+" with no credential", func(t *testing.T) {
				status, challenge, answer := c.run(t, ingress, forged, `{}`)
				var p problemDoc
				_ = json.Unmarshal([]byte(answer), &p)
				if status != http.StatusUnauthorized || challenge != `Bearer realm="analyst"` || !strings.HasSuffix(p.Type, "#missing-credential") {
					t.Errorf("%d, WWW-Authenticate %q, %s", status, challenge, answer)
				}
			})
		}
	}
	if n := got.count(); n != 2*len(clients) {
		t.Errorf("the agent was called %d times, want %d (once per client and credential)", n, 2*len(clients))
	}

	// An edge that forwards its credential (a caller from 127.0.0.2).
	from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	cl := &http.Client{Transport: &http.Transport{DialContext: from.DialContext}}
	req, _ := http.NewRequest(http.MethodPost, ingress, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+opsToken)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := got.last(t).Header; resp.StatusCode != http.StatusOK || h.Get("Authorization") != "Bearer "+opsToken || h.Get("Baton-Agent") != "ops" {
		t.Errorf("forwarding edge: %d, the agent got Authorization %q from %q", resp.StatusCode, h.Get("Authorization"), h.Get("Baton-Agent"))
	}

	// Nothing of the credentials anywhere Baton keeps or writes.
	secrets := []string{webToken1, jwtTok, opsToken, strings.Split(jwtTok, ".")[2]}
	for _, trace := range traces {
		var v json.RawMessage
		if st := adminGet(t, b.AdminAddr(), "/v1/traces/"+trace, &v); st != http.StatusOK {
			t.Fatalf("trace %s: %d", trace, st)
		}
		body := string(v)
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("trace %s's records hold a credential", trace)
			}
		}
	}
	for _, s := range secrets {
		if strings.Contains(b.log.String(), s) {
			t.Error("the log holds a credential")
		}
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opts)
	t.Cleanup(func() { rc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := rc.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the store's keys: %v (%d)", err, len(keys))
	}
	for _, k := range keys {
		text := storedText(ctx, t, rc, k)
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("store key %s holds a credential", k)
			}
		}
	}
}

// storedText is everything key holds, whatever its type.
func storedText(ctx context.Context, t *testing.T, rc *redis.Client, key string) string {
	t.Helper()
	typ, err := rc.Type(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	switch typ {
	case "string":
		v, _ := rc.Get(ctx, key).Result()
		parts = []string{v}
	case "hash":
		m, _ := rc.HGetAll(ctx, key).Result()
		for k, v := range m {
			parts = append(parts, k, v)
		}
	case "list":
		parts, _ = rc.LRange(ctx, key, 0, -1).Result()
	case "set":
		parts, _ = rc.SMembers(ctx, key).Result()
	case "zset":
		parts, _ = rc.ZRange(ctx, key, 0, -1).Result()
	case "stream":
		xs, _ := rc.XRange(ctx, key, "-", "+").Result()
		for _, x := range xs {
			for k, v := range x.Values {
				parts = append(parts, k, fmt.Sprint(v))
			}
		}
	case "none":
	default:
		t.Fatalf("store key %s of type %s", key, typ)
	}
	return strings.Join(parts, "\n")
}
