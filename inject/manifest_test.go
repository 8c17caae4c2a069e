package inject

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"github.com/batonproxy/baton/inject/agentenv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// strictTypes maps the kinds the samples hold to their API types.
func strictType(kind string) any {
	switch kind {
	case "Pod":
		return &corev1.Pod{}
	case "Service":
		return &corev1.Service{}
	case "ConfigMap":
		return &corev1.ConfigMap{}
	case "List":
		return &corev1.List{}
	case "Deployment":
		return &appsv1.Deployment{}
	case "StatefulSet":
		return &appsv1.StatefulSet{}
	case "DaemonSet":
		return &appsv1.DaemonSet{}
	case "ReplicaSet":
		return &appsv1.ReplicaSet{}
	case "Job":
		return &batchv1.Job{}
	case "CronJob":
		return &batchv1.CronJob{}
	}
	return nil
}

// decodeStrict decodes one object given as JSON into its API type,
// refusing unknown fields, entering List items. It returns the pod specs
// found, by object name.
func decodeStrict(t *testing.T, js []byte) map[string]*corev1.PodTemplateSpec {
	t.Helper()
	var head struct{ Kind string }
	if err := json.Unmarshal(js, &head); err != nil {
		t.Fatal(err)
	}
	obj := strictType(head.Kind)
	if obj == nil {
		t.Fatalf("no API type for kind %q in the samples", head.Kind)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		t.Fatalf("%s does not decode strictly: %v\n%s", head.Kind, err, js)
	}
	out := map[string]*corev1.PodTemplateSpec{}
	switch o := obj.(type) {
	case *corev1.List:
		for _, it := range o.Items {
			for k, v := range decodeStrict(t, it.Raw) {
				out[k] = v
			}
		}
	case *corev1.Pod:
		out[o.Name] = &corev1.PodTemplateSpec{ObjectMeta: o.ObjectMeta, Spec: o.Spec}
	case *appsv1.Deployment:
		out[o.Name] = &o.Spec.Template
	case *appsv1.StatefulSet:
		out[o.Name] = &o.Spec.Template
	case *appsv1.DaemonSet:
		out[o.Name] = &o.Spec.Template
	case *appsv1.ReplicaSet:
		out[o.Name] = &o.Spec.Template
	case *batchv1.Job:
		out[o.Name] = &o.Spec.Template
	case *batchv1.CronJob:
		out[o.Name] = &o.Spec.JobTemplate.Spec.Template
	}
	return out
}

// decodeAll decodes every document of a YAML stream strictly.
func decodeAll(t *testing.T, stream []byte) (docs [][]byte, templates map[string]*corev1.PodTemplateSpec) {
	t.Helper()
	templates = map[string]*corev1.PodTemplateSpec{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, templates
		}
		if err != nil {
			t.Fatal(err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
		for k, v := range decodeStrict(t, js) {
			templates[k] = v
		}
	}
}

func sampleInjector(t *testing.T) *Injector {
	t.Helper()
	in, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestManifestsGolden(t *testing.T) {
	t.Parallel()
	in := sampleInjector(t)
	for _, tc := range []struct {
		name     string
		input    string
		ov       Overrides
		injected []string // workloads that get Baton
	}{
		{"deployment", "deployment.yaml", Overrides{}, []string{"analyst"}},
		{"deployment-transparent", "deployment.yaml", Overrides{Intercept: ModeTransparent, AgentPort: 9090}, []string{"analyst"}},
		{"deployment-python", "deployment.yaml", Overrides{Instrument: agentenv.LangPython}, []string{"analyst"}},
		{"statefulset", "statefulset.yaml", Overrides{}, []string{"memory"}},
		{"job", "job.yaml", Overrides{Agent: "reviewer", ConfigMap: "baton-reviewer"}, []string{"nightly-review"}},
		{"cronjob", "cronjob.yaml", Overrides{}, []string{"digest"}},
		{"pod", "pod.yaml", Overrides{}, []string{"scratchpad"}},
		{"service", "service.yaml", Overrides{}, nil},
		{"multi", "multi.yaml", Overrides{}, []string{"summarizer", "node-scout", "planner"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join("testdata", "manifests", tc.input))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			results, err := in.Manifests(bytes.NewReader(src), &out, tc.ov)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("manifests", tc.name+".golden"), out.Bytes())

			var injected []string
			for _, r := range results {
				if r.Injected {
					injected = append(injected, r.Name)
				}
			}
			if !slices.Equal(injected, tc.injected) {
				t.Errorf("injected %q, want %q (results %v)", injected, tc.injected, results)
			}
			_, templates := decodeAll(t, out.Bytes())
			for _, name := range tc.injected {
				pt := templates[name]
				if pt == nil {
					t.Fatalf("%s missing from the output", name)
				}
				checkInjectedTemplate(t, pt, tc.ov)
			}

			// Deterministic, and injecting the output again changes nothing.
			var again, twice bytes.Buffer
			if _, err := in.Manifests(bytes.NewReader(src), &again, tc.ov); err != nil || !bytes.Equal(again.Bytes(), out.Bytes()) {
				t.Errorf("a second run differs (err %v)", err)
			}
			if _, err := in.Manifests(bytes.NewReader(out.Bytes()), &twice, tc.ov); err != nil || !bytes.Equal(twice.Bytes(), out.Bytes()) {
				t.Errorf("injecting the output again changed it (err %v):\n%s", err, twice.Bytes())
			}
		})
	}
}

func checkInjectedTemplate(t *testing.T, pt *corev1.PodTemplateSpec, ov Overrides) {
	t.Helper()
	if pt.Annotations[AnnotationInject] != "true" || pt.Annotations[AnnotationStatus] != StatusInjected {
		t.Errorf("template annotations %v", pt.Annotations)
	}
	var sidecar *corev1.Container
	for i := range pt.Spec.InitContainers {
		if pt.Spec.InitContainers[i].Name == ContainerName {
			sidecar = &pt.Spec.InitContainers[i]
		}
	}
	if sidecar == nil || sidecar.RestartPolicy == nil || *sidecar.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("no native sidecar in %q", names(pt.Spec.InitContainers))
	}
	transparent := ov.Intercept == ModeTransparent
	if hasInit := pt.Spec.InitContainers[0].Name == InitContainerName; hasInit != transparent {
		t.Errorf("iptables init container present %v, want %v", hasInit, transparent)
	}
	for _, c := range pt.Spec.Containers {
		if (envOf(&c, "HTTP_PROXY") != nil) == transparent {
			t.Errorf("container %s HTTP_PROXY %v in mode %q", c.Name, envOf(&c, "HTTP_PROXY"), ov.Intercept)
		}
	}
}

func TestManifestsPassThroughUnchanged(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("testdata", "manifests", "service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := sampleInjector(t).Manifests(bytes.NewReader(src), &out, Overrides{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), src) {
		t.Errorf("a Service changed:\n%s", out.Bytes())
	}
}

func TestManifestsErrors(t *testing.T) {
	t.Parallel()
	in := sampleInjector(t)
	for _, tc := range []struct {
		name, input string
		ov          Overrides
		want        string
	}{
		{"bad flag", "kind: Service\n", Overrides{Intercept: "sideways", AgentPort: 15006}, "--intercept"},
		{"bad annotation", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {baton.dev/agent-port: nine}}\nspec: {containers: [{name: a, image: x}]}\n", Overrides{}, "baton.dev/agent-port"},
		{"not YAML", "a: [b\n", Overrides{}, "document 1"},
		{"no template", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n", Overrides{}, "no pod template"},
		{"bad agent name", "apiVersion: v1\nkind: Pod\nmetadata: {name: Big_Pod}\nspec: {containers: [{name: a, image: x}]}\n", Overrides{}, "baton.dev/agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := in.Manifests(strings.NewReader(tc.input), &out, tc.ov)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("partial output on error:\n%s", out.Bytes())
			}
		})
	}
}
