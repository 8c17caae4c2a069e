package inject

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// testConfig is the injector configuration the chart renders by default.
func testConfig() *Config {
	c := &Config{
		Image:               "ghcr.io/batonproxy/baton:0.1.0",
		InitImage:           "ghcr.io/batonproxy/baton-init:0.1.0",
		ImagePullPolicy:     corev1.PullIfNotPresent,
		AdminTokenSecret:    &SecretKey{Name: "baton-admin-token", Key: "token"},
		RedisPasswordSecret: &SecretKey{Name: "baton-redis", Key: "password"},
		Env:                 []corev1.EnvVar{{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability:4318"}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
	}
	c.ApplyDefaults()
	return c
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// webhookServer is the real webhook serving HTTPS on a free loopback port.
type webhookServer struct {
	url    string
	client *http.Client
	ca     *testCA
	dir    string
}

func startWebhook(t *testing.T, cfg *Config) *webhookServer {
	t.Helper()
	in, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.issue(t, dir, "first", time.Now().Add(time.Hour))
	certs, err := NewCertReloader(certFile, keyFile, discard())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, NewWebhook(in, discard(), certs.Ready), certs, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &webhookServer{url: "https://" + ln.Addr().String(), client: &http.Client{Transport: tr, Timeout: 10 * time.Second}, ca: ca, dir: dir}
}

func (s *webhookServer) do(t *testing.T, method, path, contentType string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// review posts the AdmissionReview in testdata/review/name to path and
// returns the request it held and the response.
func (s *webhookServer) review(t *testing.T, path, name string) (*admissionv1.AdmissionRequest, *admissionv1.AdmissionResponse) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "review", name))
	if err != nil {
		t.Fatal(err)
	}
	return s.reviewBody(t, path, body)
}

func (s *webhookServer) reviewBody(t *testing.T, path string, body []byte) (*admissionv1.AdmissionRequest, *admissionv1.AdmissionResponse) {
	t.Helper()
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatal(err)
	}
	resp, b := s.do(t, http.MethodPost, path, "application/json", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var out admissionv1.AdmissionReview
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("response is not an AdmissionReview: %v\n%s", err, b)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil {
		t.Fatalf("response review: %s", b)
	}
	if out.Response.UID != in.Request.UID {
		t.Errorf("response uid %q, want the request's %q", out.Response.UID, in.Request.UID)
	}
	return in.Request, out.Response
}

// patched applies the response's JSONPatch to the request's pod, as the API
// server does, and decodes the result strictly.
func patched(t *testing.T, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) (*corev1.Pod, []Op) {
	t.Helper()
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch || len(resp.Patch) == 0 {
		t.Fatalf("no JSONPatch in the response (type %v)", resp.PatchType)
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("patch: %v\n%s", err, resp.Patch)
	}
	doc, err := p.Apply(req.Object.Raw)
	if err != nil {
		t.Fatalf("applying the patch: %v\n%s", err, resp.Patch)
	}
	var ops []Op
	var raw []map[string]any
	if err := json.Unmarshal(resp.Patch, &raw); err != nil {
		t.Fatal(err)
	}
	for _, o := range raw {
		op, _ := o["op"].(string)
		path, _ := o["path"].(string)
		ops = append(ops, Op{Op: op, Path: path, Value: o["value"]})
	}
	return strictPod(t, doc), ops
}

func strictPod(t *testing.T, doc []byte) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pod); err != nil {
		t.Fatalf("the patched pod does not decode strictly: %v\n%s", err, doc)
	}
	return &pod
}

func envOf(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// checkSidecar asserts the native sidecar's shape.
func checkSidecar(t *testing.T, c *corev1.Container, agent, upstream string) {
	t.Helper()
	if c.Name != "baton" || c.Image != "ghcr.io/batonproxy/baton:0.1.0" {
		t.Errorf("sidecar %s image %s", c.Name, c.Image)
	}
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("sidecar restartPolicy %v, want Always (a native sidecar)", c.RestartPolicy)
	}
	if want := []string{"serve", "--config", "/etc/baton/baton.yaml"}; !slices.Equal(c.Args, want) {
		t.Errorf("args %q, want %q", c.Args, want)
	}
	for name, want := range map[string]string{"BATON_AGENT": agent, "BATON_UPSTREAM": upstream,
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4318"} {
		if e := envOf(c, name); e == nil || e.Value != want {
			t.Errorf("%s = %+v, want %q", name, e, want)
		}
	}
	for name, want := range map[string]string{"BATON_ADMIN_TOKEN": "baton-admin-token/token", "BATON_REDIS_PASSWORD": "baton-redis/password"} {
		e := envOf(c, name)
		if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
			e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key != want {
			t.Errorf("%s = %+v, want from Secret key %s", name, e, want)
		}
	}
	probes := map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe}
	paths := map[string]string{"startup": "/readyz", "readiness": "/readyz", "liveness": "/healthz"}
	for kind, p := range probes {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != paths[kind] || p.HTTPGet.Port.IntValue() != 15000 {
			t.Errorf("%s probe %+v, want GET %s on 15000", kind, p, paths[kind])
		}
	}
	sc := c.SecurityContext
	if sc == nil || *sc.RunAsUser != 1337 || *sc.RunAsGroup != 1337 || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem ||
		*sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("sidecar securityContext %+v", sc)
	}
	if got := c.Resources.Limits.Memory().String(); got != "256Mi" {
		t.Errorf("memory limit %s, want the configuration's 256Mi", got)
	}
	if len(c.VolumeMounts) == 0 || c.VolumeMounts[0].MountPath != "/etc/baton" || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
}

func volume(p *corev1.Pod, name string) *corev1.Volume {
	for i := range p.Spec.Volumes {
		if p.Spec.Volumes[i].Name == name {
			return &p.Spec.Volumes[i]
		}
	}
	return nil
}

func TestWebhookInjectsProxyMode(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	req, resp := s.review(t, PathMutate, "proxy.json")
	pod, ops := patched(t, req, resp)

	// The patch only adds: nothing of the pod is rewritten.
	for _, o := range ops {
		if o.Op != "add" {
			t.Errorf("op %s %s, want only adds", o.Op, o.Path)
		}
	}
	if got, want := names(pod.Spec.InitContainers), []string{"baton", "migrate"}; !slices.Equal(got, want) {
		t.Fatalf("init containers %q, want %q: Baton first, so it serves before the pod's own init containers", got, want)
	}
	checkSidecar(t, &pod.Spec.InitContainers[0], "analyst", "http://127.0.0.1:8080")
	if got := pod.Annotations[AnnotationStatus]; got != StatusInjected {
		t.Errorf("status annotation %q", got)
	}
	if v := volume(pod, "baton-config"); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != "baton" {
		t.Errorf("config volume %+v, want ConfigMap baton", v)
	}
	if volume(pod, "kube-api-access-x7k2p") == nil {
		t.Error("the pod's own volume is gone")
	}
	agent, tools := &pod.Spec.Containers[0], &pod.Spec.Containers[1]
	// The agent container sets its own HTTP_PROXY: it is kept.
	if e := envOf(agent, "HTTP_PROXY"); e == nil || e.Value != "http://squid.example:3128" {
		t.Errorf("agent HTTP_PROXY %+v, want its own kept", e)
	}
	if e := envOf(agent, "NO_PROXY"); e == nil || e.Value != "localhost,127.0.0.1,::1,metadata.example,10.0.0.0/8" {
		t.Errorf("agent NO_PROXY %+v", e)
	}
	if e := envOf(agent, "MODEL"); e == nil || e.Value != "small" {
		t.Errorf("agent's own env lost: %+v", agent.Env)
	}
	if e := envOf(tools, "HTTP_PROXY"); e == nil || e.Value != "http://127.0.0.1:15001" {
		t.Errorf("tools HTTP_PROXY %+v", e)
	}
	if e := envOf(&pod.Spec.InitContainers[1], "HTTP_PROXY"); e != nil {
		t.Errorf("the pod's init container got HTTP_PROXY: %+v", e)
	}
}

func TestWebhookInjectsTransparentMode(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	req, resp := s.review(t, PathMutate, "transparent.json")
	pod, _ := patched(t, req, resp)

	if got, want := names(pod.Spec.InitContainers), []string{"baton-init", "baton"}; !slices.Equal(got, want) {
		t.Fatalf("init containers %q, want %q", got, want)
	}
	ipt := &pod.Spec.InitContainers[0]
	wantArgs := []string{"iptables", "--proxy-uid", "1337", "--inbound-ports", "9090", "--egress-port", "15001",
		"--ingress-port", "15006", "--admin-port", "15000", "--exclude-outbound-cidrs", "10.96.0.0/12"}
	if !slices.Equal(ipt.Args, wantArgs) {
		t.Errorf("iptables args %q, want %q", ipt.Args, wantArgs)
	}
	if ipt.Image != "ghcr.io/batonproxy/baton-init:0.1.0" {
		t.Errorf("init image %s", ipt.Image)
	}
	if ipt.RestartPolicy != nil {
		t.Errorf("the iptables container is a sidecar (restartPolicy %v); it must run once", *ipt.RestartPolicy)
	}
	sc := ipt.SecurityContext
	if sc == nil || *sc.RunAsUser != 0 || *sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("iptables securityContext %+v", sc)
	}
	checkSidecar(t, &pod.Spec.InitContainers[1], "analyst", "http://127.0.0.1:9090")
	side := &pod.Spec.InitContainers[1]
	if v := volume(pod, "baton-identity"); v == nil || v.Secret == nil || v.Secret.SecretName != "analyst-key" {
		t.Errorf("identity volume %+v", v)
	}
	if len(side.VolumeMounts) != 2 || side.VolumeMounts[1].MountPath != KeyDir || !side.VolumeMounts[1].ReadOnly {
		t.Errorf("identity mount %+v", side.VolumeMounts)
	}
	for _, c := range pod.Spec.Containers {
		if e := envOf(&c, "HTTP_PROXY"); e != nil {
			t.Errorf("transparent mode set HTTP_PROXY on %s", c.Name)
		}
	}
}

func TestWebhookMountsTLSSecret(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	req, resp := s.review(t, PathMutate, "tls.json")
	pod, ops := patched(t, req, resp)
	for _, o := range ops {
		if o.Op != "add" {
			t.Errorf("op %s %s, want only adds", o.Op, o.Path)
		}
	}
	checkSidecar(t, &pod.Spec.InitContainers[0], "analyst", "http://127.0.0.1:8080")
	if v := volume(pod, "baton-tls"); v == nil || v.Secret == nil || v.Secret.SecretName != "baton-tls-analyst" {
		t.Errorf("TLS volume %+v, want Secret baton-tls-analyst", v)
	}
	if v := volume(pod, "baton-identity"); v == nil || v.Secret == nil || v.Secret.SecretName != "analyst-key" {
		t.Errorf("identity volume %+v", v)
	}
	// The TLS Secret lies within the identity key's directory, both
	// read-only, in the sidecar only.
	want := []corev1.VolumeMount{
		{Name: "baton-config", MountPath: "/etc/baton", ReadOnly: true},
		{Name: "baton-identity", MountPath: "/var/run/secrets/baton", ReadOnly: true},
		{Name: "baton-tls", MountPath: "/var/run/secrets/baton/tls", ReadOnly: true},
	}
	same := func(a, b corev1.VolumeMount) bool {
		return a.Name == b.Name && a.MountPath == b.MountPath && a.ReadOnly == b.ReadOnly && a.SubPath == b.SubPath
	}
	if got := pod.Spec.InitContainers[0].VolumeMounts; !slices.EqualFunc(got, want, same) {
		t.Errorf("sidecar mounts %+v, want %+v", got, want)
	}
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == "baton-tls" {
				t.Errorf("container %s mounts the TLS Secret", c.Name)
			}
		}
	}
}

func TestWebhookTLSSecretFromConfig(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.TLSSecret = "baton-tls-{agent}"
	s := startWebhook(t, cfg)
	for _, tc := range []struct{ file, want string }{
		{"proxy.json", "baton-tls-analyst"}, // the configuration's, for the pod's agent
		{"tls.json", "baton-tls-analyst"},   // the pod's own annotation
	} {
		req, resp := s.review(t, PathMutate, tc.file)
		pod, _ := patched(t, req, resp)
		if v := volume(pod, "baton-tls"); v == nil || v.Secret == nil || v.Secret.SecretName != tc.want {
			t.Errorf("%s: TLS volume %+v, want Secret %s", tc.file, v, tc.want)
		}
	}
	// Without the configuration's default, a pod that names no Secret
	// mounts none.
	s = startWebhook(t, testConfig())
	req, resp := s.review(t, PathMutate, "proxy.json")
	if pod, _ := patched(t, req, resp); volume(pod, "baton-tls") != nil {
		t.Error("a TLS volume without the annotation or the configuration's tlsSecret")
	}
}
