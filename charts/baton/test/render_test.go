// Package test renders Baton's chart with Helm's own packages and checks
// what comes out: every manifest decoded strictly into its Kubernetes API
// type, golden files for the default values and for transparent mode,
// Baton's rendered configuration accepted by Baton's own validation, and the
// injector's configuration accepted by the injector and consistent with the
// objects the chart renders.
//
// It is a module of its own so that Helm's dependencies stay out of
// Baton's; `make test` runs it.
package test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// chartDir is the chart, one level up.
const chartDir = ".."

// The release every test renders.
const (
	releaseName = "baton"
	releaseNS   = "baton-system"
)

// object is one rendered manifest: its template, its JSON, and the typed
// value it decoded into.
type object struct {
	source     string
	apiVersion string
	kind       string
	name       string
	namespace  string
	json       []byte
	typed      any
}

// rendered is a whole render: the manifests in template order, and NOTES.txt.
type rendered struct {
	objects []object
	notes   string
	text    string // the manifests as Helm prints them, for golden files
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// render renders c with vals over its defaults, as `helm install` would.
func render(t *testing.T, c *chart.Chart, vals map[string]any) *rendered {
	t.Helper()
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: releaseNS, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(c, rv)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	out := &rendered{}
	var text strings.Builder
	for _, n := range names {
		body := files[n]
		if strings.HasSuffix(n, "NOTES.txt") {
			out.notes = body
			continue
		}
		if strings.HasPrefix(filepath.Base(n), "_") {
			continue
		}
		for _, doc := range strings.Split(body, "\n---") {
			if isBlank(doc) {
				continue
			}
			doc = strings.TrimPrefix(strings.TrimLeft(doc, "\n"), "---\n")
			fmt.Fprintf(&text, "---\n# Source: %s\n%s\n", n, strings.TrimRight(doc, "\n"))
			out.objects = append(out.objects, decodeStrict(t, n, doc))
		}
	}
	out.text = text.String()
	return out
}

func isBlank(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if l := strings.TrimSpace(line); l != "" && l != "---" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// typed returns a new value of the API type of apiVersion and kind; for
// cert-manager's and the Prometheus Operator's kinds, the schema of the
// fields this chart renders (schema.go).
func typed(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration":
		return &admissionregistrationv1.MutatingWebhookConfiguration{}
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "cert-manager.io/v1/Certificate":
		return &certificate{}
	case "cert-manager.io/v1/Issuer":
		return &issuer{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &prometheusRule{}
	}
	return nil
}

// decodeStrict decodes one manifest into its type, refusing unknown
// fields: a misspelt or misplaced key fails here as the API server's strict
// field validation would.
func decodeStrict(t *testing.T, source, doc string) object {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("%s: not YAML: %v\n%s", source, err, doc)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		t.Fatalf("%s: %v", source, err)
	}
	v := typed(head.APIVersion, head.Kind)
	if v == nil {
		t.Fatalf("%s: no type for %s %s", source, head.APIVersion, head.Kind)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %s %s does not decode strictly: %v\n%s", source, head.Kind, head.Metadata.Name, err, doc)
	}
	if head.Metadata.Name == "" {
		t.Errorf("%s: %s without a name", source, head.Kind)
	}
	return object{source: source, apiVersion: head.APIVersion, kind: head.Kind, name: head.Metadata.Name,
		namespace: head.Metadata.Namespace, json: js, typed: v}
}

// find returns the one object of kind and name (in namespace, when not
// empty).
func (r *rendered) find(t *testing.T, kind, name, namespace string) any {
	t.Helper()
	var found []object
	for _, o := range r.objects {
		if o.kind == kind && o.name == name && (namespace == "" || o.namespace == namespace) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects %s %s/%s, want one", len(found), kind, namespace, name)
	}
	return found[0].typed
}

func (r *rendered) all(kind string) []object {
	var out []object
	for _, o := range r.objects {
		if o.kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// generated is what changes on every render: the chart's certificates and
// key, the CA bundle, the admin token. Golden files hold a placeholder;
// checkTLS and checkSecrets check the values themselves.
var generated = regexp.MustCompile(`(?m)^(\s+)(tls\.crt|tls\.key|ca\.crt|caBundle|token): \S+$`)

func golden(t *testing.T, name, got string) {
	t.Helper()
	got = generated.ReplaceAllString(got, "$1$2: <generated>")
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if got != string(want) {
		t.Errorf("the render differs from %s (go test -update rewrites it):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first lines that differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want %q\n  got  %q", i+1, wl, gl)
		}
	}
	return "(equal)"
}
