package inject

// The webhook's refusals, what it leaves alone, its probes and its
// certificate (webhook_test.go has the shared helpers).

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWebhookLeavesPodsAlone(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	for _, tc := range []struct {
		name, path, file string
	}{
		{"no annotation", PathMutate, "plain.json"},
		{"opted out in an opted-in namespace", PathMutateNamespace, "opt-out.json"},
		{"status injected", PathMutate, "injected.json"},
		{"a container named baton", PathMutateNamespace, "has-baton.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp := s.review(t, tc.path, tc.file)
			if !resp.Allowed || resp.Patch != nil || resp.PatchType != nil || len(resp.Warnings) != 0 {
				t.Errorf("response %+v, want allowed with no patch", resp)
			}
		})
	}
}

func TestWebhookNamespaceOptIn(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	req, resp := s.review(t, PathMutateNamespace, "plain.json")
	pod, _ := patched(t, req, resp)
	checkSidecar(t, &pod.Spec.InitContainers[0], "analyst", "http://127.0.0.1:8080")
}

func TestWebhookDoesNotInjectTwice(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	req, resp := s.review(t, PathMutateNamespace, "proxy.json")
	pod, _ := patched(t, req, resp)

	// The injected pod comes back (a re-created pod from an injected
	// manifest): no second sidecar.
	body, err := os.ReadFile(filepath.Join("testdata", "review", "proxy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rv map[string]any
	if err := json.Unmarshal(body, &rv); err != nil {
		t.Fatal(err)
	}
	rv["request"].(map[string]any)["object"] = pod
	again, err := json.Marshal(rv)
	if err != nil {
		t.Fatal(err)
	}
	_, resp = s.reviewBody(t, PathMutateNamespace, again)
	if !resp.Allowed || resp.Patch != nil {
		t.Errorf("second review %+v, want no patch", resp)
	}
}

func TestWebhookAgentFromPodName(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	req, resp := s.review(t, PathMutate, "no-labels.json")
	pod, _ := patched(t, req, resp)
	checkSidecar(t, &pod.Spec.InitContainers[0], "summarizer-0", "http://127.0.0.1:8080")
}

func TestWebhookAgentConfigMap(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.AgentConfigMaps = map[string]string{"analyst": "baton-analyst"}
	s := startWebhook(t, cfg)
	req, resp := s.review(t, PathMutate, "proxy.json")
	pod, _ := patched(t, req, resp)
	if v := volume(pod, "baton-config"); v == nil || v.ConfigMap.Name != "baton-analyst" {
		t.Errorf("config volume %+v, want the agent's own ConfigMap", v)
	}
}

func TestWebhookDeniesBadAnnotations(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	_, resp := s.review(t, PathMutate, "bad-annotations.json")
	if resp.Allowed || resp.Patch != nil || resp.Result == nil || resp.Result.Code != http.StatusBadRequest {
		t.Fatalf("response %+v, want denied with 400", resp)
	}
	for _, want := range []string{"baton.dev/intercept", `"sideways"`, "baton.dev/agent-port", `"15001"`,
		"baton.dev/tls-secret", `"Analyst_TLS"`} {
		if !strings.Contains(resp.Result.Message, want) {
			t.Errorf("message %q does not name %s", resp.Result.Message, want)
		}
	}
}

func TestWebhookOtherKindsAllowedWithWarning(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	_, resp := s.review(t, PathMutate, "deployment.json")
	if !resp.Allowed || resp.Patch != nil || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "apps/v1, Kind=Deployment") {
		t.Errorf("response %+v, want allowed, unchanged, one warning naming the kind", resp)
	}
}

func TestWebhookUndecodablePodAllowedWithWarning(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",
		"kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"spec":{"containers":"not a list"}}}}`)
	_, resp := s.reviewBody(t, PathMutate, body)
	if !resp.Allowed || resp.Patch != nil || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "could not be decoded") {
		t.Errorf("response %+v", resp)
	}
}

func TestWebhookBadRequests(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	huge := append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"`),
		bytes.Repeat([]byte("a"), MaxReviewBytes)...)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		class                    string
	}{
		{"not JSON", "POST", PathMutate, "<xml/>", 400, "bad-request"},
		{"a JSON array", "POST", PathMutate, "[1,2]", 400, "bad-request"},
		{"v1beta1", "POST", PathMutate, `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`, 400, "bad-request"},
		{"another kind", "POST", PathMutateNamespace, `{"apiVersion":"v1","kind":"Pod"}`, 400, "bad-request"},
		{"no request", "POST", PathMutate, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, 400, "bad-request"},
		{"oversized", "POST", PathMutate, string(huge), 413, "body-too-large"},
		{"GET", "GET", PathMutate, "", 400, "bad-request"},
		{"unknown path", "POST", "/validate", "{}", 404, "not-found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := s.do(t, tc.method, tc.path, "application/json", []byte(tc.body))
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
			var p struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
				Detail string `json:"detail"`
			}
			if err := json.Unmarshal(b, &p); err != nil || !strings.HasSuffix(p.Type, "#"+tc.class) || p.Status != tc.status || p.Detail == "" {
				t.Errorf("problem %s, want type %s", b, tc.class)
			}
		})
	}
}

func TestWebhookProbes(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, b := s.do(t, http.MethodGet, path, "", nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"status"`) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
}

func TestReadyzExpiredCertificate(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	certFile, keyFile := ca.issue(t, t.TempDir(), "old", time.Now().Add(-time.Minute))
	certs, err := NewCertReloader(certFile, keyFile, discard())
	if err != nil {
		t.Fatal(err)
	}
	in, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	NewWebhook(in, discard(), certs.Ready).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not-ready") || !strings.Contains(rec.Body.String(), "expired") {
		t.Errorf("readyz with an expired certificate: %d %s", rec.Code, rec.Body)
	}
}

// servedCN dials the server afresh and returns its certificate's common
// name.
func servedCN(t *testing.T, s *webhookServer) string {
	t.Helper()
	conn, err := tls.Dial("tcp", strings.TrimPrefix(s.url, "https://"), &tls.Config{RootCAs: s.ca.pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func TestWebhookReloadsCertificate(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	if cn := servedCN(t, s); cn != "first" {
		t.Fatalf("served %q, want first", cn)
	}
	s.ca.issue(t, s.dir, "second", time.Now().Add(time.Hour))
	if cn := servedCN(t, s); cn != "second" {
		t.Fatalf("after the files changed, served %q, want second", cn)
	}
	// A broken certificate file (written before its key, say) keeps the
	// pair that works.
	writeAtomic(t, filepath.Join(s.dir, "cert.pem"), []byte("not a certificate"))
	if cn := servedCN(t, s); cn != "second" {
		t.Fatalf("with a broken file, served %q, want second kept", cn)
	}
}

func TestWebhookHostNetwork(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	body, err := os.ReadFile(filepath.Join("testdata", "review", "plain.json"))
	if err != nil {
		t.Fatal(err)
	}
	withPod := func(annotations map[string]any) []byte {
		var rv map[string]any
		if err := json.Unmarshal(body, &rv); err != nil {
			t.Fatal(err)
		}
		obj := rv["request"].(map[string]any)["object"].(map[string]any)
		obj["spec"].(map[string]any)["hostNetwork"] = true
		if annotations != nil {
			obj["metadata"].(map[string]any)["annotations"] = annotations
		}
		b, err := json.Marshal(rv)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Opted in by its namespace: left alone, with a warning.
	_, resp := s.reviewBody(t, PathMutateNamespace, withPod(nil))
	if !resp.Allowed || resp.Patch != nil || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "hostNetwork") {
		t.Errorf("namespace opt-in: %+v", resp)
	}
	// Asked for by the pod itself: refused, saying why.
	_, resp = s.reviewBody(t, PathMutate, withPod(map[string]any{"baton.dev/inject": "true"}))
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "hostNetwork") {
		t.Errorf("pod opt-in: %+v", resp)
	}
}
