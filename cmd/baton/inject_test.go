//go:build !sidecar

package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/inject"
)

const injectorYAML = `image: registry.example.com/baton:9.9.9
initImage: registry.example.com/baton-init:9.9.9
adminTokenSecret: {name: baton-admin-token, key: token}
`

func TestInjectCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "injector.yaml")
	if err := os.WriteFile(cfgPath, []byte(injectorYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	samples := filepath.Join("..", "..", "inject", "testdata", "manifests")
	deployment := filepath.Join(samples, "deployment.yaml")
	service := filepath.Join(samples, "service.yaml")
	src, err := os.ReadFile(deployment)
	if err != nil {
		t.Fatal(err)
	}

	// What the library prints for the same input and configuration: the
	// command must add nothing and lose nothing.
	cfg, err := inject.ParseConfig(strings.NewReader(injectorYAML))
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	ov := inject.Overrides{Intercept: "transparent", AgentPort: 9090}
	if _, err := in.Manifests(bytes.NewReader(src), &want, ov); err != nil {
		t.Fatal(err)
	}
	svc, err := os.ReadFile(service)
	if err != nil {
		t.Fatal(err)
	}
	want.WriteString("---\n")
	want.Write(svc)

	var stdout, stderr bytes.Buffer
	err = injectCmd([]string{"-f", "-", "-f", service, "--config", cfgPath, "--intercept", "transparent", "--agent-port", "9090"},
		bytes.NewReader(src), &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if stdout.String() != want.String() {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), want.String())
	}
	for _, s := range []string{"baton.dev/intercept: transparent", `baton.dev/agent-port: "9090"`, "registry.example.com/baton-init:9.9.9", "--inbound-ports\n        - \"9090\""} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("output lacks %q", s)
		}
	}
	if got := stderr.String(); got != "deployment/analyst injected\n" {
		t.Errorf("stderr %q", got)
	}
}

func TestInjectCommandDefaults(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: x}]}\n"
	if err := injectCmd([]string{"-f", "-", "--image", "registry.example.com/baton:1.0.0"}, strings.NewReader(pod), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	// No configuration file: the ConfigMap "baton", proxy mode, and the
	// image given.
	for _, s := range []string{"image: registry.example.com/baton:1.0.0", "name: baton\n", "HTTP_PROXY", "configMap:\n      name: baton\n"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, stdout.String())
		}
	}
	if defaultImage() != "ghcr.io/batonproxy/baton:latest" || defaultInitImage() != "ghcr.io/batonproxy/baton-init:latest" {
		t.Errorf("a dev build's images: %s %s", defaultImage(), defaultInitImage())
	}
}

func TestInjectCommandInstrument(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: scout}\nspec: {containers: [{name: a, image: x}]}\n"
	if err := injectCmd([]string{"-f", "-", "--instrument", "nodejs"}, strings.NewReader(pod), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"baton.dev/instrument: nodejs", "name: baton-instrument", inject.DefaultNodeJSImage,
		"value: --require /otel-auto-instrumentation-nodejs/autoinstrumentation.js", "value: tracecontext,baggage"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, stdout.String())
		}
	}
	if got := stderr.String(); got != "pod/scout injected, with nodejs instrumentation\n" {
		t.Errorf("stderr %q", got)
	}
}

func TestInjectCommandErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no file", []string{}, 2, "-f FILE is required"},
		{"bad intercept", []string{"-f", "-", "--intercept", "sideways"}, 2, "--intercept: must be proxy or transparent"},
		{"bad port", []string{"-f", "-", "--agent-port", "15000"}, 2, "--agent-port"},
		{"port out of range", []string{"-f", "-", "--agent-port", "99999"}, 2, "--agent-port"},
		{"stray argument", []string{"-f", "-", "deploy.yaml"}, 2, "unexpected argument"},
		{"unknown instrument", []string{"-f", "-", "--instrument", "ruby"}, 2, `--instrument: must be nodejs, python, java or dotnet, got "ruby"`},
		{"missing file", []string{"-f", "/nonexistent.yaml"}, 1, "no such file"},
		{"bad config", []string{"-f", "-", "--config", "/nonexistent.yaml"}, 1, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := injectCmd(tc.args, strings.NewReader("kind: Service\n"), &stdout, &stderr)
			if err == nil || exitCode(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v (exit %d), want exit %d naming %q", err, exitCode(err), tc.code, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout on error: %s", stdout.String())
			}
		})
	}
}

// selfSigned writes a self-signed serving pair for 127.0.0.1 and returns
// the file paths and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "baton-injector"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// serving waits for the injector's "injector serving" log line and returns
// its address.
func serving(t *testing.T, logs *lockedBuffer, done <-chan error) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "injector serving" {
				return m["addr"].(string)
			}
		}
		select {
		case err := <-done:
			t.Fatalf("inject-webhook returned %v:\n%s", err, logs.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("the injector never served:\n%s", logs.String())
	return ""
}

func TestInjectWebhookCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	cfgPath := filepath.Join(dir, "injector.yaml")
	if err := os.WriteFile(cfgPath, []byte(injectorYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"inject-webhook", "--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile, "--config", cfgPath},
			io.Discard, logs, noEnv)
	}()
	addr := serving(t, logs, done)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}

	review, err := os.ReadFile(filepath.Join("..", "..", "inject", "testdata", "review", "transparent.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post("https://"+addr+"/mutate", "application/json", bytes.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		Response struct {
			Allowed   bool   `json:"allowed"`
			PatchType string `json:"patchType"`
			Patch     []byte `json:"patch"`
		} `json:"response"`
	}
	if err := json.Unmarshal(body, &out); err != nil || !out.Response.Allowed || out.Response.PatchType != "JSONPatch" {
		t.Fatalf("review answer %s (%v)", body, err)
	}
	if !bytes.Contains(out.Response.Patch, []byte(`"image":"registry.example.com/baton-init:9.9.9"`)) {
		t.Errorf("the configuration's init image is not in the patch: %s", out.Response.Patch)
	}
	resp, err = client.Get("https://" + addr + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()
	if !strings.Contains(logs.String(), `"msg":"injected"`) {
		t.Errorf("no injection logged:\n%s", logs.String())
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("inject-webhook returned %v after shutdown, want nil", err)
	}
}

func TestInjectWebhookCommandErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no certificate", []string{}, 2, "--tls-cert FILE and --tls-key FILE are required"},
		{"missing certificate", []string{"--tls-cert", "/nonexistent.crt", "--tls-key", keyFile}, 1, "no such file"},
		{"key of another pair", []string{"--tls-cert", certFile, "--tls-key", certFile}, 1, "key pair"},
		{"bad listen", []string{"--tls-cert", certFile, "--tls-key", keyFile, "--listen", "nowhere"}, 1, "nowhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := run(context.Background(), append([]string{"inject-webhook"}, tc.args...), io.Discard, io.Discard, noEnv)
			var ue usageError
			if err == nil || exitCode(err) != tc.code || !strings.Contains(err.Error(), tc.want) || (tc.code == 2) != errors.As(err, &ue) {
				t.Errorf("error %v (exit %d), want exit %d naming %q", err, exitCode(err), tc.code, tc.want)
			}
		})
	}
}
