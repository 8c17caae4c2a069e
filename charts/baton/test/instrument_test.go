package test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/batonproxy/baton/inject"
)

// pythonAgent is a Python agent's pod that asks for Baton and for zero-code
// OpenTelemetry instrumentation, with a PYTHONPATH of its own.
const pythonAgent = `apiVersion: v1
kind: Pod
metadata:
  name: researcher
  namespace: agents
  labels: {app: researcher}
  annotations:
    baton.dev/inject: "true"
    baton.dev/instrument: python
spec:
  containers:
    - name: agent
      image: registry.example.com/researcher:2.1
      command: [python, -m, researcher]
      env:
        - {name: PYTHONPATH, value: /app/src}
`

// injectPythonAgent injects pythonAgent with the injector configuration r
// renders and returns the pod.
func injectPythonAgent(t *testing.T, r *rendered) *corev1.Pod {
	t.Helper()
	in, err := inject.New(injectorConfig(t, r))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := in.Manifests(strings.NewReader(pythonAgent), &out, inject.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].String() != "pod/researcher injected, with python instrumentation" {
		t.Errorf("results %v", res)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(out.Bytes(), &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func containerEnv(c *corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// TestRenderInstrumentsPythonAgent: with the chart's defaults, a Python
// agent's pod annotated baton.dev/instrument: python gets the copy of the
// Operator's Python image, the volume, PYTHONPATH around its own, and the
// propagation variables with export off.
func TestRenderInstrumentsPythonAgent(t *testing.T) {
	t.Parallel()
	r := render(t, loadChart(t), nil)
	cfg := injectorConfig(t, r)
	if got, want := cfg.Instrumentation.Images, (inject.InstrumentationImages{NodeJS: inject.DefaultNodeJSImage,
		Python: inject.DefaultPythonImage, Java: inject.DefaultJavaImage, DotNet: inject.DefaultDotNetImage}); got != want {
		t.Errorf("the chart's images %+v, want the injector's defaults %+v", got, want)
	}
	if cfg.Instrumentation.OTLPEndpoint != "" || cfg.Instrumentation.Resources.Limits.Memory().String() != "128Mi" {
		t.Errorf("instrumentation %+v", cfg.Instrumentation)
	}

	pod := injectPythonAgent(t, r)
	if got := containerNames(pod.Spec.InitContainers); !slices.Equal(got, []string{inject.ContainerName, inject.InstrumentContainerName}) {
		t.Fatalf("init containers %q, want Baton's sidecar, then the instrumentation's copy", got)
	}
	ic := pod.Spec.InitContainers[1]
	const dir = "/otel-auto-instrumentation-python"
	if ic.Image != "ghcr.io/open-telemetry/opentelemetry-operator/autoinstrumentation-python:0.64b0" ||
		!slices.Equal(ic.Command, []string{"cp", "-r", "/autoinstrumentation/.", dir}) {
		t.Errorf("init container image %s command %q", ic.Image, ic.Command)
	}
	if len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0].MountPath != dir || ic.Resources.Requests.Memory().String() != "32Mi" {
		t.Errorf("init container mounts %+v resources %+v", ic.VolumeMounts, ic.Resources)
	}
	var vol *corev1.Volume
	for i, v := range pod.Spec.Volumes {
		if v.Name == ic.VolumeMounts[0].Name {
			vol = &pod.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.EmptyDir == nil {
		t.Fatalf("volume %+v, want an emptyDir", vol)
	}
	agent := &pod.Spec.Containers[0]
	mounted := false
	for _, m := range agent.VolumeMounts {
		mounted = mounted || (m.Name == vol.Name && m.MountPath == dir && m.ReadOnly)
	}
	if !mounted {
		t.Errorf("the agent's mounts %+v lack %s at %s", agent.VolumeMounts, vol.Name, dir)
	}
	env := containerEnv(agent)
	for name, want := range map[string]string{
		"PYTHONPATH":            dir + "/opentelemetry/instrumentation/auto_instrumentation:/app/src:" + dir,
		"OTEL_PROPAGATORS":      "tracecontext,baggage",
		"OTEL_TRACES_EXPORTER":  "none",
		"OTEL_METRICS_EXPORTER": "none",
		"OTEL_LOGS_EXPORTER":    "none",
		"OTEL_SERVICE_NAME":     "researcher",
		"HTTP_PROXY":            "http://127.0.0.1:15001",
	} {
		if env[name] != want {
			t.Errorf("%s = %q, want %q", name, env[name], want)
		}
	}
	if _, ok := env["OTEL_EXPORTER_OTLP_ENDPOINT"]; ok {
		t.Error("an OTLP endpoint without one configured")
	}
}

// TestRenderInstrumentationValues: the images and the exporter from values
// reach the injected pod.
func TestRenderInstrumentationValues(t *testing.T) {
	t.Parallel()
	r := render(t, loadChart(t), map[string]any{"instrumentation": map[string]any{
		"images":       map[string]any{"python": "registry.example.com/otel/python:0.64b0-corp"},
		"otlpEndpoint": "http://otel-collector.observability:4318",
	}})
	cfg := injectorConfig(t, r)
	if cfg.Instrumentation.Images.Java != inject.DefaultJavaImage {
		t.Errorf("java image %s: the other languages keep the chart's defaults", cfg.Instrumentation.Images.Java)
	}
	pod := injectPythonAgent(t, r)
	if img := pod.Spec.InitContainers[1].Image; img != "registry.example.com/otel/python:0.64b0-corp" {
		t.Errorf("image %s, want the values'", img)
	}
	env := containerEnv(&pod.Spec.Containers[0])
	for name, want := range map[string]string{
		"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
	} {
		if env[name] != want {
			t.Errorf("%s = %q, want %q", name, env[name], want)
		}
	}

	rv, err := chartutilValues(loadChart(t), map[string]any{"instrumentation": map[string]any{"otlpEndpoint": "otel-collector:4318"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := renderErr(loadChart(t), rv); err == nil || !strings.Contains(err.Error(), "instrumentation.otlpEndpoint") {
		t.Errorf("render error %v, want one naming instrumentation.otlpEndpoint", err)
	}
}
