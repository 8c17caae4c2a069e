package test

// What each rendered object must hold: checked by the render tests.

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/inject"
)

// checkTLS checks the chart's own CA and serving pair, and that the
// webhook trusts that CA.
func checkTLS(t *testing.T, r *rendered) {
	t.Helper()
	sec := r.find(t, "Secret", injectorName+"-tls", releaseNS).(*corev1.Secret)
	if sec.Type != corev1.SecretTypeTLS {
		t.Errorf("TLS Secret type %s", sec.Type)
	}
	if _, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"]); err != nil {
		t.Fatalf("serving pair: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		t.Fatal("ca.crt is not a certificate")
	}
	block, _ := pem.Decode(sec.Data["tls.crt"])
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: injectorName + "." + releaseNS + ".svc"}); err != nil {
		t.Errorf("the serving certificate does not verify for the Service's name: %v", err)
	}
	mwc := r.find(t, "MutatingWebhookConfiguration", injectorName, "").(*admissionregistrationv1.MutatingWebhookConfiguration)
	for _, w := range mwc.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, sec.Data["ca.crt"]) {
			t.Errorf("%s: caBundle is not the Secret's CA", w.Name)
		}
	}
}

// checkSecrets checks the admin token Secrets.
func checkSecrets(t *testing.T, r *rendered) {
	t.Helper()
	for _, o := range r.all("Secret") {
		sec := o.typed.(*corev1.Secret)
		if o.name == "baton-admin-token" && !alnum32.Match(sec.Data["token"]) {
			t.Errorf("%s/%s token %q, want 32 random letters and digits", o.namespace, o.name, sec.Data["token"])
		}
	}
}

func podVolume(d *appsv1.Deployment, name string) *corev1.Volume {
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &d.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// checkDeployment checks the injector's Deployment against the objects it
// refers to.
func checkDeployment(t *testing.T, r *rendered) {
	t.Helper()
	dep := r.find(t, "Deployment", injectorName, releaseNS).(*appsv1.Deployment)
	pod := dep.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("containers %d", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if c.Image != "ghcr.io/batonproxy/baton-injector:0.1.0" || c.Args[0] != "inject-webhook" {
		t.Errorf("image %s args %q", c.Image, c.Args)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("mount %s is writable", m.Name)
		}
		mounts[m.Name] = m.MountPath
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--tls-cert " + mounts["tls"] + "/tls.crt", "--tls-key " + mounts["tls"] + "/tls.key",
		"--config " + mounts["config"] + "/injector.yaml", "--listen :8443"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if v := podVolume(dep, "config"); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != injectorName {
		t.Errorf("config volume %+v", v)
	}
	if dep.Spec.Selector == nil {
		t.Fatal("no selector")
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("the selector's %s=%s is not on the pod", k, v)
		}
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port.String() != "https" {
			t.Errorf("%s probe %+v", name, p)
		}
	}
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("probe paths")
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "https" || c.Ports[0].ContainerPort != 8443 {
		t.Errorf("ports %+v", c.Ports)
	}
	sc, psc := c.SecurityContext, pod.Spec.SecurityContext
	if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		psc == nil || !*psc.RunAsNonRoot || *psc.RunAsUser != 1337 {
		t.Errorf("security contexts %+v %+v", sc, psc)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}
	if pod.Annotations["baton.dev/inject"] != "false" || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(pod.Annotations["checksum/config"]) {
		t.Errorf("pod annotations %v", pod.Annotations)
	}
	if *pod.Spec.AutomountServiceAccountToken {
		t.Error("the injector mounts an API token it does not need")
	}
	sa := r.find(t, "ServiceAccount", pod.Spec.ServiceAccountName, releaseNS).(*corev1.ServiceAccount)
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Error("ServiceAccount automounts its token")
	}

	svc := r.find(t, "Service", injectorName, releaseNS).(*corev1.Service)
	for k, v := range svc.Spec.Selector {
		if pod.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the injector's pods lack", k, v)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "https" {
		t.Errorf("Service ports %+v", svc.Spec.Ports)
	}
}

// checkWebhook checks the MutatingWebhookConfiguration against the
// Service and the injector's paths.
func checkWebhook(t *testing.T, r *rendered, policy admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	mwc := r.find(t, "MutatingWebhookConfiguration", injectorName, "").(*admissionregistrationv1.MutatingWebhookConfiguration)
	svc := r.find(t, "Service", injectorName, releaseNS).(*corev1.Service)
	paths := map[string]string{}
	for _, w := range mwc.Webhooks {
		s := w.ClientConfig.Service
		if s == nil || s.Name != svc.Name || s.Namespace != svc.Namespace || s.Port == nil || *s.Port != svc.Spec.Ports[0].Port || s.Path == nil {
			t.Fatalf("%s: clientConfig %+v does not reach the Service", w.Name, w.ClientConfig)
		}
		paths[w.Name] = *s.Path
		if *w.SideEffects != admissionregistrationv1.SideEffectClassNone || !slices.Equal(w.AdmissionReviewVersions, []string{"v1"}) ||
			*w.FailurePolicy != policy || *w.TimeoutSeconds < 1 || *w.TimeoutSeconds > 30 {
			t.Errorf("%s: sideEffects %v versions %v failurePolicy %v timeout %v", w.Name, *w.SideEffects, w.AdmissionReviewVersions, *w.FailurePolicy, *w.TimeoutSeconds)
		}
		if len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Resources, []string{"pods"}) ||
			!slices.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) {
			t.Errorf("%s: rules %+v", w.Name, w.Rules)
		}
		var excludes bool
		for _, e := range w.NamespaceSelector.MatchExpressions {
			if e.Key == "kubernetes.io/metadata.name" && e.Operator == "NotIn" && slices.Contains(e.Values, "kube-system") {
				excludes = true
			}
		}
		if !excludes {
			t.Errorf("%s does not exclude kube-system", w.Name)
		}
	}
	want := map[string]string{"namespace.inject.baton.dev": inject.PathMutateNamespace, "pod.inject.baton.dev": inject.PathMutate}
	if len(paths) != 2 || paths["namespace.inject.baton.dev"] != want["namespace.inject.baton.dev"] || paths["pod.inject.baton.dev"] != want["pod.inject.baton.dev"] {
		t.Errorf("webhook paths %v, want %v", paths, want)
	}
}

// testEnv is what an injected sidecar's environment gives `baton serve`.
func testEnv(agent string) func(string) string {
	return func(name string) string {
		return map[string]string{
			"BATON_AGENT": agent, "BATON_UPSTREAM": "http://127.0.0.1:8080",
			"BATON_ADMIN_TOKEN": "a-token", "BATON_REDIS_PASSWORD": "a-password",
		}[name]
	}
}

// checkBatonConfigs runs every rendered baton.yaml through Baton's own
// configuration loading and validation.
func checkBatonConfigs(t *testing.T, r *rendered) {
	t.Helper()
	n := 0
	for _, o := range r.all("ConfigMap") {
		cm := o.typed.(*corev1.ConfigMap)
		y, ok := cm.Data["baton.yaml"]
		if !ok {
			continue
		}
		n++
		agent := cm.Labels["baton.dev/agent"]
		if agent == "" {
			agent = "some-agent"
		}
		c, err := config.Parse(strings.NewReader(y), testEnv(agent))
		if err != nil {
			t.Errorf("%s/%s: baton.yaml is refused:\n%v\n%s", o.namespace, o.name, err, y)
			continue
		}
		if c.Listen.Admin != "0.0.0.0:15000" || c.Listen.Ingress != "0.0.0.0:15006" || c.Listen.Egress != "127.0.0.1:15001" {
			t.Errorf("%s: listeners %+v, want the ports the sidecar's probes and the injector use", o.name, c.Listen)
		}
	}
	if n == 0 {
		t.Error("no baton.yaml rendered")
	}
}

func batonYAML(t *testing.T, r *rendered, name, ns string) map[string]any {
	t.Helper()
	cm := r.find(t, "ConfigMap", name, ns).(*corev1.ConfigMap)
	var m map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["baton.yaml"]), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func injectorConfig(t *testing.T, r *rendered) *inject.Config {
	t.Helper()
	cm := r.find(t, "ConfigMap", injectorName, releaseNS).(*corev1.ConfigMap)
	cfg, err := inject.ParseConfig(strings.NewReader(cm.Data["injector.yaml"]))
	if err != nil {
		t.Fatalf("the injector refuses its configuration: %v\n%s", err, cm.Data["injector.yaml"])
	}
	return cfg
}

// checkInjectorConfig loads the injector's configuration as the injector
// does, injects sample agents with it, and checks that every ConfigMap and
// Secret an injected pod refers to is rendered in each of namespaces (a TLS
// Secret: written by a rendered Certificate, or one's own when the chart
// renders none).
func checkInjectorConfig(t *testing.T, r *rendered, namespaces []string) *inject.Config {
	t.Helper()
	cfg := injectorConfig(t, r)
	if cfg.Image != "ghcr.io/batonproxy/baton:0.1.0" || cfg.InitImage != "ghcr.io/batonproxy/baton-init:0.1.0" {
		t.Errorf("images %s %s", cfg.Image, cfg.InitImage)
	}
	in, err := inject.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := in.Manifests(strings.NewReader(sampleAgents), &out, inject.Overrides{}); err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(out.String(), "---\n") {
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		spec := d.Spec.Template.Spec
		for _, ns := range namespaces {
			for _, v := range spec.Volumes {
				if v.ConfigMap != nil {
					if cm, ok := find(r, "ConfigMap", v.ConfigMap.Name, ns); !ok {
						t.Errorf("%s in %s mounts ConfigMap %s, which the chart does not render there", d.Name, ns, v.ConfigMap.Name)
					} else if _, ok := cm.(*corev1.ConfigMap).Data["baton.yaml"]; !ok {
						t.Errorf("ConfigMap %s has no baton.yaml", v.ConfigMap.Name)
					}
				}
				if v.Secret != nil {
					name := v.Secret.SecretName
					_, rendered := find(r, "Secret", name, ns)
					switch {
					case rendered || certificateWriting(r, name, ns) != nil:
					case v.Name == "baton-tls" && len(tlsCertificates(r)) == 0:
						// a TLS Secret of one's own
					default:
						t.Errorf("%s in %s mounts Secret %s, which the chart neither renders nor has a Certificate write there", d.Name, ns, name)
					}
				}
			}
			for _, c := range spec.InitContainers {
				for _, e := range c.Env {
					if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
						continue
					}
					ref := e.ValueFrom.SecretKeyRef
					if ref.Name == "ops-token" || ref.Name == "redis-auth" {
						continue // Secrets of one's own
					}
					s, ok := find(r, "Secret", ref.Name, ns)
					if !ok {
						t.Errorf("%s in %s: %s comes from Secret %s, which the chart does not render there", d.Name, ns, e.Name, ref.Name)
					} else if _, ok := s.(*corev1.Secret).Data[ref.Key]; !ok {
						t.Errorf("Secret %s has no key %s", ref.Name, ref.Key)
					}
				}
			}
		}
	}
	return cfg
}

func find(r *rendered, kind, name, ns string) (any, bool) {
	for _, o := range r.objects {
		if o.kind == kind && o.name == name && o.namespace == ns {
			return o.typed, true
		}
	}
	return nil, false
}

// withFiles returns a copy of c whose dashboards/ holds files (name →
// content) instead of its own.
func withFiles(c *chart.Chart, files map[string][]byte) *chart.Chart {
	cp := *c
	cp.Files = nil
	for _, f := range c.Files {
		if !strings.HasPrefix(f.Name, "dashboards/") {
			cp.Files = append(cp.Files, f)
		}
	}
	for name, data := range files {
		cp.Files = append(cp.Files, &chart.File{Name: "dashboards/" + name, Data: data})
	}
	return &cp
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// checkDashboards renders c with dashboards and alerts on and checks the
// result against files, the dashboards/ content it holds.
func checkDashboards(t *testing.T, c *chart.Chart, files map[string][]byte) {
	t.Helper()
	r := render(t, c, map[string]any{
		"dashboards": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "Baton"}},
		"alerts":     map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}},
	})
	cm := r.find(t, "ConfigMap", "baton-dashboards", releaseNS).(*corev1.ConfigMap)
	if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Baton" {
		t.Errorf("dashboards ConfigMap labels %v annotations %v", cm.Labels, cm.Annotations)
	}
	groups := 0
	var dashboards []string
	for name, data := range files {
		switch {
		case strings.HasSuffix(name, ".json"):
			dashboards = append(dashboards, name)
			if got := cm.Data[name]; got != strings.TrimRight(string(data), "\n") {
				t.Errorf("dashboard %s differs from its file", name)
			}
			if !json.Valid(data) {
				t.Errorf("dashboard %s is not JSON", name)
			}
		case strings.HasPrefix(name, "alerts") && strings.HasSuffix(name, ".yaml"):
			var f struct {
				Groups []any `json:"groups"`
				Spec   struct {
					Groups []any `json:"groups"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(data, &f); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			groups += len(f.Groups) + len(f.Spec.Groups)
		}
	}
	if len(cm.Data) != len(dashboards) {
		t.Errorf("the ConfigMap holds %d dashboards, the directory %d", len(cm.Data), len(dashboards))
	}
	rule := r.find(t, "PrometheusRule", "baton", releaseNS).(*prometheusRule)
	if err := rule.validate(); err != nil {
		t.Error(err)
	}
	if len(rule.Spec.Groups) != groups || rule.Metadata.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule: %d groups, want %d; labels %v", len(rule.Spec.Groups), groups, rule.Metadata.Labels)
	}
}
