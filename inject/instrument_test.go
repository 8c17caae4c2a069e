package inject

import (
	"bytes"
	"encoding/json"
	"github.com/batonproxy/baton/inject/agentenv"
	"net/http"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// agentPod is an agent's pod asking for Baton and lang's instrumentation,
// with an agent container (env as given) and a tools container.
func agentPod(lang string, env ...corev1.EnvVar) *corev1.Pod {
	a := map[string]string{AnnotationInject: "true"}
	if lang != "" {
		a[AnnotationInstrument] = lang
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "analyst-7c9d6f8b5d-", Namespace: "agents",
			Labels: map[string]string{"app": "analyst"}, Annotations: a,
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "migrate", Image: "registry.example.com/migrate:1"}},
			Containers: []corev1.Container{
				{Name: "agent", Image: "registry.example.com/analyst:1.4", Env: env},
				{Name: "tools", Image: "registry.example.com/tools:2"},
			},
		},
	}
}

// reviewPod posts pod to the webhook as a CREATE review.
func reviewPod(t *testing.T, s *webhookServer, pod *corev1.Pod) (*admissionv1.AdmissionRequest, *admissionv1.AdmissionResponse) {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "0b5e4a7c-2222-4c3d-8e9f-000000000042",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "agents", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s.reviewBody(t, PathMutate, body)
}

func envValue(c *corev1.Container, name string) string {
	if e := envOf(c, name); e != nil {
		return e.Value
	}
	return "<unset>"
}

func mountOf(c *corev1.Container, volume string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == volume {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func TestWebhookInstruments(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	for _, tc := range []struct {
		lang, image string
		command     []string
		env         map[string]string
	}{
		{agentenv.LangNodeJS, DefaultNodeJSImage,
			[]string{"cp", "-r", "/autoinstrumentation/.", "/otel-auto-instrumentation-nodejs"},
			map[string]string{"NODE_OPTIONS": "--require /otel-auto-instrumentation-nodejs/autoinstrumentation.js"}},
		{agentenv.LangPython, DefaultPythonImage,
			[]string{"cp", "-r", "/autoinstrumentation/.", "/otel-auto-instrumentation-python"},
			map[string]string{"PYTHONPATH": "/otel-auto-instrumentation-python/opentelemetry/instrumentation/auto_instrumentation:/otel-auto-instrumentation-python"}},
		{agentenv.LangJava, DefaultJavaImage,
			[]string{"cp", "/javaagent.jar", "/otel-auto-instrumentation-java/javaagent.jar"},
			map[string]string{"JAVA_TOOL_OPTIONS": "-javaagent:/otel-auto-instrumentation-java/javaagent.jar"}},
		{agentenv.LangDotNet, DefaultDotNetImage,
			[]string{"cp", "-r", "/autoinstrumentation/.", "/otel-auto-instrumentation-dotnet"},
			map[string]string{
				"CORECLR_ENABLE_PROFILING": "1",
				"CORECLR_PROFILER":         "{918728DD-259F-4A6A-AC2B-B85E1B658318}",
				"CORECLR_PROFILER_PATH":    "/otel-auto-instrumentation-dotnet/linux/OpenTelemetry.AutoInstrumentation.Native.so",
				"DOTNET_STARTUP_HOOKS":     "/otel-auto-instrumentation-dotnet/net/OpenTelemetry.AutoInstrumentation.StartupHook.dll",
				"DOTNET_ADDITIONAL_DEPS":   "/otel-auto-instrumentation-dotnet/AdditionalDeps",
				"DOTNET_SHARED_STORE":      "/otel-auto-instrumentation-dotnet/store",
				"OTEL_DOTNET_AUTO_HOME":    "/otel-auto-instrumentation-dotnet",
			}},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			t.Parallel()
			req, resp := reviewPod(t, s, agentPod(tc.lang))
			pod, _ := patched(t, req, resp)
			if len(resp.Warnings) != 0 {
				t.Errorf("warnings %q", resp.Warnings)
			}
			if got, want := names(pod.Spec.InitContainers), []string{"baton", "baton-instrument", "migrate"}; !slices.Equal(got, want) {
				t.Fatalf("init containers %q, want %q: the copy after Baton's sidecar, before the pod's own", got, want)
			}
			dir := "/otel-auto-instrumentation-" + tc.lang
			ic := &pod.Spec.InitContainers[1]
			if ic.Image != tc.image || !slices.Equal(ic.Command, tc.command) {
				t.Errorf("init container image %s command %q, want %s %q", ic.Image, ic.Command, tc.image, tc.command)
			}
			if m := mountOf(ic, "baton-instrument"); m == nil || m.MountPath != dir || m.ReadOnly {
				t.Errorf("init container mount %+v, want %s writable", m, dir)
			}
			if sc := ic.SecurityContext; sc == nil || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
				t.Errorf("init container securityContext %+v", sc)
			}
			v := volume(pod, "baton-instrument")
			if v == nil || v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "200Mi" {
				t.Errorf("volume %+v, want an emptyDir of 200Mi", v)
			}
			for i := range pod.Spec.Containers {
				c := &pod.Spec.Containers[i]
				if m := mountOf(c, "baton-instrument"); m == nil || m.MountPath != dir || !m.ReadOnly {
					t.Errorf("%s: mount %+v, want %s read-only", c.Name, m, dir)
				}
				want := map[string]string{
					"OTEL_PROPAGATORS": "tracecontext,baggage", "OTEL_SERVICE_NAME": "analyst",
					"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
					"OTEL_EXPORTER_OTLP_ENDPOINT": "<unset>", "HTTP_PROXY": "http://127.0.0.1:15001",
				}
				for k, v := range tc.env {
					want[k] = v
				}
				for name, w := range want {
					if got := envValue(c, name); got != w {
						t.Errorf("%s: %s = %q, want %q", c.Name, name, got, w)
					}
				}
			}
			if m := mountOf(&pod.Spec.InitContainers[2], "baton-instrument"); m != nil || envOf(&pod.Spec.InitContainers[2], "OTEL_PROPAGATORS") != nil {
				t.Error("the pod's own init container was instrumented")
			}
		})
	}
}

// TestWebhookInstrumentKeepsContainerEnv: a variable the container sets is
// never overwritten, the preload lists are added to, and valueFrom is left
// alone.
func TestWebhookInstrumentKeepsContainerEnv(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	pod := agentPod(agentenv.LangNodeJS,
		corev1.EnvVar{Name: "NODE_OPTIONS", Value: "--max-old-space-size=512"},
		corev1.EnvVar{Name: "OTEL_SERVICE_NAME", Value: "analyst-eu"},
		corev1.EnvVar{Name: "OTEL_TRACES_EXPORTER", Value: "console"},
		corev1.EnvVar{Name: "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", Value: "http://metrics.example:4318/v1/metrics"},
		corev1.EnvVar{Name: "OTEL_PROPAGATORS", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "otel"}, Key: "propagators"}}},
	)
	pod.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "NODE_OPTIONS", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "opts"}, Key: "node"}}}}
	req, resp := reviewPod(t, s, pod)
	got, ops := patched(t, req, resp)
	agent, tools := &got.Spec.Containers[0], &got.Spec.Containers[1]
	for name, want := range map[string]string{
		"NODE_OPTIONS":          "--max-old-space-size=512 --require /otel-auto-instrumentation-nodejs/autoinstrumentation.js",
		"OTEL_SERVICE_NAME":     "analyst-eu",
		"OTEL_TRACES_EXPORTER":  "console",
		"OTEL_METRICS_EXPORTER": "otlp", // its own metrics endpoint: export stays on
		"OTEL_LOGS_EXPORTER":    "none",
	} {
		if v := envValue(agent, name); v != want {
			t.Errorf("agent %s = %q, want %q", name, v, want)
		}
	}
	if e := envOf(agent, "OTEL_PROPAGATORS"); e == nil || e.ValueFrom == nil || e.Value != "" {
		t.Errorf("agent OTEL_PROPAGATORS %+v, want its valueFrom kept", e)
	}
	if e := envOf(tools, "NODE_OPTIONS"); e == nil || e.ValueFrom == nil || e.Value != "" {
		t.Errorf("tools NODE_OPTIONS %+v, want its valueFrom kept", e)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "nodejs not loaded in container tools (NODE_OPTIONS comes from valueFrom)") {
		t.Errorf("warnings %q, want one naming the tools container", resp.Warnings)
	}
	if n := len(agent.Env); n != 9 { // 5 of its own, 2 OTEL_*, HTTP_PROXY, NO_PROXY
		t.Errorf("agent has %d variables, want 9: %+v", n, agent.Env)
	}
	// Adding to NODE_OPTIONS is the patch's one change of what was there.
	var replaced []string
	for _, o := range ops {
		if o.Op != "add" {
			replaced = append(replaced, o.Op+" "+o.Path)
		}
	}
	if !slices.Equal(replaced, []string{"replace /spec/containers/0/env/0/value"}) {
		t.Errorf("patch rewrites %q, want only NODE_OPTIONS's value", replaced)
	}
}

// TestWebhookInstrumentNotHalfway: a .NET container whose startup hooks
// come from valueFrom gets none of the loading variables (a profiler
// without its hook), and the answer says so.
func TestWebhookInstrumentNotHalfway(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	pod := agentPod(agentenv.LangDotNet, corev1.EnvVar{Name: "DOTNET_STARTUP_HOOKS", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hooks"}, Key: "hooks"}}})
	req, resp := reviewPod(t, s, pod)
	got, _ := patched(t, req, resp)
	agent, tools := &got.Spec.Containers[0], &got.Spec.Containers[1]
	if envOf(agent, "CORECLR_ENABLE_PROFILING") != nil || envOf(agent, "OTEL_DOTNET_AUTO_HOME") != nil {
		t.Errorf("agent half instrumented: %+v", agent.Env)
	}
	if envValue(agent, "OTEL_PROPAGATORS") != "tracecontext,baggage" || envValue(tools, "CORECLR_ENABLE_PROFILING") != "1" {
		t.Errorf("agent %+v tools %+v", agent.Env, tools.Env)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "container agent (DOTNET_STARTUP_HOOKS comes from valueFrom)") {
		t.Errorf("warnings %q", resp.Warnings)
	}
}

func TestWebhookInstrumentExports(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Instrumentation.OTLPEndpoint = "http://otel-collector.observability:4318"
	cfg.Instrumentation.Images.Python = "registry.example.com/otel/python:1.2.3"
	s := startWebhook(t, cfg)
	req, resp := reviewPod(t, s, agentPod(agentenv.LangPython))
	pod, _ := patched(t, req, resp)
	if img := pod.Spec.InitContainers[1].Image; img != "registry.example.com/otel/python:1.2.3" {
		t.Errorf("image %s, want the configuration's", img)
	}
	agent := &pod.Spec.Containers[0]
	for name, want := range map[string]string{
		"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
	} {
		if v := envValue(agent, name); v != want {
			t.Errorf("%s = %q, want %q", name, v, want)
		}
	}
}

// TestWebhookLeavesInstrumentationToOperator: a pod the OpenTelemetry
// Operator instruments gets Baton but none of Baton's instrumentation, and
// the answer says so.
func TestWebhookLeavesInstrumentationToOperator(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	pod := agentPod(agentenv.LangPython)
	pod.Annotations["instrumentation.opentelemetry.io/inject-python"] = "observability/python"
	req, resp := reviewPod(t, s, pod)
	got, _ := patched(t, req, resp)
	if n := names(got.Spec.InitContainers); !slices.Equal(n, []string{"baton", "migrate"}) {
		t.Errorf("init containers %q, want Baton's sidecar only", n)
	}
	if volume(got, "baton-instrument") != nil || envOf(&got.Spec.Containers[0], "PYTHONPATH") != nil ||
		envOf(&got.Spec.Containers[0], "OTEL_PROPAGATORS") != nil {
		t.Error("Baton instrumented a pod the Operator instruments")
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "instrumentation.opentelemetry.io/inject-python") {
		t.Errorf("warnings %q, want one naming the Operator's annotation", resp.Warnings)
	}

	// "false" is the Operator declining: Baton instruments.
	pod = agentPod(agentenv.LangPython)
	pod.Annotations["instrumentation.opentelemetry.io/inject-python"] = "false"
	req, resp = reviewPod(t, s, pod)
	if got, _ := patched(t, req, resp); volume(got, "baton-instrument") == nil {
		t.Error("not instrumented beside an Operator annotation saying false")
	}
}

func TestWebhookRefusesUnknownInstrument(t *testing.T) {
	t.Parallel()
	s := startWebhook(t, testConfig())
	_, resp := reviewPod(t, s, agentPod("ruby"))
	if resp.Allowed || resp.Patch != nil || resp.Result == nil || resp.Result.Code != http.StatusBadRequest {
		t.Fatalf("response %+v, want denied with 400", resp)
	}
	for _, want := range []string{AnnotationInstrument, `"ruby"`, "nodejs, python, java or dotnet"} {
		if !strings.Contains(resp.Result.Message, want) {
			t.Errorf("message %q does not name %s", resp.Result.Message, want)
		}
	}
}

const instrumentedDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: analyst}
spec:
  selector: {matchLabels: {app: analyst}}
  template:
    metadata:
      labels: {app: analyst}
      annotations: {instrumentation.opentelemetry.io/inject-nodejs: "true"}
    spec:
      containers: [{name: agent, image: registry.example.com/analyst:1}]
`

func TestManifestsInstrument(t *testing.T) {
	t.Parallel()
	in := sampleInjector(t)
	src := strings.Replace(instrumentedDeployment, `annotations: {instrumentation.opentelemetry.io/inject-nodejs: "true"}`, "", 1)

	var out bytes.Buffer
	res, err := in.Manifests(strings.NewReader(src), &out, Overrides{Instrument: agentenv.LangJava})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].String() != "deployment/analyst injected, with java instrumentation" {
		t.Errorf("results %v", res)
	}
	_, templates := decodeAll(t, out.Bytes())
	pt := templates["analyst"]
	if pt.Annotations[AnnotationInstrument] != agentenv.LangJava || !slices.Equal(names(pt.Spec.InitContainers), []string{"baton", "baton-instrument"}) ||
		envValue(&pt.Spec.Containers[0], "JAVA_TOOL_OPTIONS") != "-javaagent:/otel-auto-instrumentation-java/javaagent.jar" {
		t.Errorf("template %+v", pt)
	}

	// The Operator's annotation: Baton leaves instrumentation to it, and says so.
	out.Reset()
	res, err = in.Manifests(strings.NewReader(instrumentedDeployment), &out, Overrides{Instrument: agentenv.LangNodeJS})
	if err != nil {
		t.Fatal(err)
	}
	want := "deployment/analyst injected, nodejs instrumentation left to the OpenTelemetry Operator (instrumentation.opentelemetry.io/inject-nodejs)"
	if len(res) != 1 || res[0].String() != want {
		t.Errorf("results %v, want %q", res, want)
	}
	if strings.Contains(out.String(), "baton-instrument") || strings.Contains(out.String(), "NODE_OPTIONS") {
		t.Errorf("instrumented beside the Operator:\n%s", out.String())
	}

	// An unknown language: the flag, or the annotation.
	if _, err := in.Manifests(strings.NewReader(src), &out, Overrides{Instrument: "ruby"}); err == nil ||
		!strings.Contains(err.Error(), `--instrument: must be nodejs, python, java or dotnet, got "ruby"`) {
		t.Errorf("--instrument ruby: %v", err)
	}
	bad := strings.Replace(instrumentedDeployment, "instrumentation.opentelemetry.io/inject-nodejs", AnnotationInstrument, 1)
	if _, err := in.Manifests(strings.NewReader(bad), &out, Overrides{}); err == nil ||
		!strings.Contains(err.Error(), `annotation baton.dev/instrument: must be nodejs, python, java or dotnet, got "true"`) {
		t.Errorf("annotation baton.dev/instrument: true: %v", err)
	}
}

func TestParseConfigInstrumentation(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig(strings.NewReader(`image: registry.example.com/baton:1
instrumentation:
  images: {java: registry.example.com/otel/java:2}
  otlpEndpoint: http://collector:4318
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Instrumentation.Images; got != (InstrumentationImages{NodeJS: DefaultNodeJSImage, Python: DefaultPythonImage,
		Java: "registry.example.com/otel/java:2", DotNet: DefaultDotNetImage}) {
		t.Errorf("images %+v", got)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"instrumentation: {otlpEndpoint: collector:4318}", `instrumentation.otlpEndpoint: must be an http:// or https:// URL`},
		{"instrumentation: {images: {ruby: x}}", `unknown field "ruby"`},
		{"instrumentation: {images: {python: 'a b'}}", `instrumentation.images.python: must be an image`},
	} {
		_, err := ParseConfig(strings.NewReader("image: registry.example.com/baton:1\n" + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
