package inject

import (
	"github.com/batonproxy/baton/inject/agentenv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		nsEnabled   bool
		want        bool
		err         bool
	}{
		{"no annotation", nil, false, false, false},
		{"namespace opted in", nil, true, true, false},
		{"pod opts in", map[string]string{AnnotationInject: "true"}, false, true, false},
		{"pod opts out of its namespace", map[string]string{AnnotationInject: "false"}, true, false, false},
		{"already injected", map[string]string{AnnotationInject: "true", AnnotationStatus: StatusInjected}, true, false, false},
		{"bad value", map[string]string{AnnotationInject: "yes"}, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Wants(&metav1.ObjectMeta{Annotations: tc.annotations}, tc.nsEnabled)
			if got != tc.want || (err != nil) != tc.err {
				t.Errorf("Wants = %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestAgentName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		meta     metav1.ObjectMeta
		fallback string
		want     string
	}{
		{"annotation first", metav1.ObjectMeta{Annotations: map[string]string{AnnotationAgent: "planner"}, Labels: map[string]string{"app": "x"}}, "", "planner"},
		{"app label", metav1.ObjectMeta{Labels: map[string]string{"app": "analyst", "app.kubernetes.io/name": "y"}, Name: "z"}, "", "analyst"},
		{"app.kubernetes.io/name", metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "memory"}}, "", "memory"},
		{"pod name", metav1.ObjectMeta{Name: "scratchpad"}, "", "scratchpad"},
		{"generateName", metav1.ObjectMeta{GenerateName: "summarizer-"}, "", "summarizer"},
		{"workload name", metav1.ObjectMeta{}, "digest", "digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := testConfig().options(&tc.meta, tc.fallback)
			if err != nil || o.Agent != tc.want {
				t.Errorf("agent %q (%v), want %q", o.Agent, err, tc.want)
			}
		})
	}
}

func TestOptionsReportEveryBadAnnotation(t *testing.T) {
	t.Parallel()
	_, err := testConfig().options(&metav1.ObjectMeta{Name: "p", Annotations: map[string]string{
		AnnotationAgentPort:            "0",
		AnnotationIntercept:            "sideways",
		AnnotationConfigMap:            "Bad Name",
		AnnotationKeySecret:            "-",
		AnnotationTLSSecret:            "Baton_TLS",
		AnnotationNoProxy:              "a,,b",
		AnnotationExcludeOutboundPorts: "22,http",
		AnnotationExcludeInboundPorts:  "70000",
		AnnotationExcludeOutboundCIDRs: "10.0.0.0/33",
	}}, "")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, a := range []string{AnnotationAgentPort, AnnotationIntercept, AnnotationConfigMap, AnnotationKeySecret, AnnotationTLSSecret, AnnotationNoProxy,
		AnnotationExcludeOutboundPorts, AnnotationExcludeInboundPorts, AnnotationExcludeOutboundCIDRs} {
		if !strings.Contains(err.Error(), "annotation "+a+":") {
			t.Errorf("%v\ndoes not name %s", err, a)
		}
	}
}

func TestTLSSecret(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		tlsSecret   string // the configuration's default
		agent       string
		annotations map[string]string
		want        string
		err         string // what the refusal says, when refused
	}{
		{"none", "", "analyst", nil, "", ""},
		{"annotation", "", "analyst", map[string]string{AnnotationTLSSecret: "analyst-mtls"}, "analyst-mtls", ""},
		{"the configuration's, per agent", "baton-tls-{agent}", "analyst", nil, "baton-tls-analyst", ""},
		{"the configuration's, shared", "baton-tls", "analyst", nil, "baton-tls", ""},
		{"the annotation over the configuration's", "baton-tls-{agent}", "analyst", map[string]string{AnnotationTLSSecret: "analyst-mtls"}, "analyst-mtls", ""},
		{"not a Secret name", "", "analyst", map[string]string{AnnotationTLSSecret: "Analyst TLS"},
			"", `annotation baton.dev/tls-secret: must be a Secret name (the one with tls.crt, tls.key and ca.crt), got "Analyst TLS"`},
		{"empty", "", "analyst", map[string]string{AnnotationTLSSecret: ""},
			"", `annotation baton.dev/tls-secret: must be a Secret name`},
		{"the configuration's makes no Secret name for this agent", "baton-tls-{agent}", "data_prep", nil,
			"", `annotation baton.dev/tls-secret: is unset and the configuration's tlsSecret for this agent is not a Secret name: set it, got "baton-tls-data_prep"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := testConfig()
			c.TLSSecret = tc.tlsSecret
			a := map[string]string{AnnotationAgent: tc.agent}
			for k, v := range tc.annotations {
				a[k] = v
			}
			o, err := c.options(&metav1.ObjectMeta{Annotations: a}, "")
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %s", err, tc.err)
			}
			if o.TLSSecret != tc.want {
				t.Errorf("TLS Secret %q, want %q", o.TLSSecret, tc.want)
			}
		})
	}
}

// TestBaseURLs: baton.dev/base-urls points each listed model SDK at its
// route on the egress, in either mode, keeping a variable the container
// sets itself; a name that is no route preset is refused.
func TestBaseURLs(t *testing.T) {
	t.Parallel()
	in, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{ModeProxy, ModeTransparent} {
		meta := &metav1.ObjectMeta{Name: "agent", Annotations: map[string]string{
			AnnotationBaseURLs: "openai, anthropic", AnnotationIntercept: mode}}
		spec := &corev1.PodSpec{Containers: []corev1.Container{
			{Name: "agent", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
			{Name: "tools", Env: []corev1.EnvVar{{Name: "ANTHROPIC_BASE_URL", Value: "https://own.example/"}}},
		}}
		if _, err := in.Pod(meta, spec, ""); err != nil {
			t.Fatal(err)
		}
		for c, want := range map[int]map[string]string{
			0: {"OPENAI_BASE_URL": "http://127.0.0.1:15001/openai/v1", "ANTHROPIC_BASE_URL": "http://127.0.0.1:15001/anthropic"},
			1: {"OPENAI_BASE_URL": "http://127.0.0.1:15001/openai/v1", "ANTHROPIC_BASE_URL": "https://own.example/"},
		} {
			for name, v := range want {
				if e := envOf(&spec.Containers[c], name); e == nil || e.Value != v {
					t.Errorf("%s: container %s %s = %+v, want %s", mode, spec.Containers[c].Name, name, e, v)
				}
			}
		}
	}
	_, err = testConfig().options(&metav1.ObjectMeta{Name: "p", Annotations: map[string]string{AnnotationBaseURLs: "openai,bedrock"}}, "")
	if err == nil || !strings.Contains(err.Error(), "annotation "+AnnotationBaseURLs+": must be comma-separated route names of anthropic, azure-openai, gemini, openai") {
		t.Errorf("an unknown route name: %v", err)
	}
}

// TestInterceptTLS: baton.dev/intercept-tls mounts the volume Baton
// publishes its CA bundle in (writable for Baton, read-only for the agent)
// and points every runtime's trust at the bundle; in proxy mode HTTPS goes
// through Baton too.
func TestInterceptTLS(t *testing.T) {
	t.Parallel()
	in, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{ModeProxy, ModeTransparent} {
		meta := &metav1.ObjectMeta{Name: "agent", Annotations: map[string]string{AnnotationInterceptTLS: "true", AnnotationIntercept: mode}}
		spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}
		if _, err := in.Pod(meta, spec, ""); err != nil {
			t.Fatal(err)
		}
		agent := &spec.Containers[0]
		for _, name := range agentenv.TrustBundleVars {
			if e := envOf(agent, name); e == nil || e.Value != "/var/run/baton/ca/bundle.pem" {
				t.Errorf("%s: %s = %+v", mode, name, e)
			}
		}
		if e := envOf(agent, "HTTPS_PROXY"); (e != nil) != (mode == ModeProxy) || (e != nil && e.Value != "http://127.0.0.1:15001") {
			t.Errorf("%s: HTTPS_PROXY %+v", mode, e)
		}
		mounted := func(c *corev1.Container, readOnly bool) bool {
			for _, m := range c.VolumeMounts {
				if m.Name == "baton-ca" && m.MountPath == "/var/run/baton/ca" && m.ReadOnly == readOnly {
					return true
				}
			}
			return false
		}
		var sidecar *corev1.Container
		for i := range spec.InitContainers {
			if spec.InitContainers[i].Name == ContainerName {
				sidecar = &spec.InitContainers[i]
			}
		}
		if !mounted(agent, true) || sidecar == nil || !mounted(sidecar, false) {
			t.Errorf("%s: the CA volume is not mounted read-only in the agent and writable in Baton", mode)
		}
	}
	_, err = testConfig().options(&metav1.ObjectMeta{Name: "p", Annotations: map[string]string{AnnotationInterceptTLS: "yes please"}}, "")
	if err == nil || !strings.Contains(err.Error(), "annotation "+AnnotationInterceptTLS+": must be true or false") {
		t.Errorf("a bad value: %v", err)
	}
}
