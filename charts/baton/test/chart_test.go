package test

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
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/inject"
)

const injectorName = "baton-injector"

// transparentValues is a fuller installation: transparent mode by default,
// a second namespace, Redis with a password, peers, external hosts, edges
// with every per-edge policy, and an agent with a configuration of its own.
func transparentValues() map[string]any {
	return map[string]any{
		"injector": map[string]any{"intercept": "transparent", "agentPort": 9090},
		"sidecar": map[string]any{"env": []any{
			map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.observability:4318"}}},
		"namespaces": []any{"agents"},
		"config": map[string]any{
			"store": map[string]any{"redis": map[string]any{
				"url": "redis://redis.baton-system.svc:6379/0", "prefix": "baton:", "password": "s3cret-pw",
			}},
			"peers": map[string]any{
				"summarizer": map[string]any{"url": "http://summarizer.agents.svc:15006"},
				"writer":     map[string]any{"url": "http://writer.agents.svc:15006"},
			},
			"external": map[string]any{"allow": []any{"api.example.com:443", "*.wikipedia.org:443"}},
			"edges": []any{
				map[string]any{
					"to": "summarizer", "max_hops": 4, "posture": "trusted", "require_signature": false,
					"grant":       map[string]any{"may_handoff_to": []any{"writer"}, "side_effects": []any{"read"}},
					"contract":    map[string]any{"mode": "enforce", "min_completeness": 0.5},
					"retry":       map[string]any{"attempts": 3, "backoff": "200ms"},
					"breaker":     map[string]any{"failures": 5, "open_for": "30s"},
					"auto_replay": true,
				},
				map[string]any{"from": "planner", "posture": "evaluate", "dedupe": map[string]any{"window": "1h", "require_key": true}},
			},
			"dedupe":  map[string]any{"window": "12h"},
			"records": map[string]any{"retention": "72h"},
		},
		"agents": map[string]any{
			"analyst": map[string]any{
				"log_level": "debug",
				"edges":     []any{map[string]any{"to": "writer", "posture": "untrusted"}},
			},
		},
	}
}

func TestRenderDefaults(t *testing.T) {
	t.Parallel()
	r := render(t, loadChart(t), nil)
	golden(t, "default.golden", r.text)

	checkTLS(t, r)
	checkDeployment(t, r)
	checkWebhook(t, r, admissionregistrationv1.Ignore)
	checkBatonConfigs(t, r)
	checkSecrets(t, r)
	cfg := checkInjectorConfig(t, r, []string{releaseNS})
	if cfg.Intercept != "proxy" || cfg.AgentPort != 8080 || cfg.ConfigMap != "baton" || cfg.RedisPasswordSecret != nil {
		t.Errorf("injector configuration %+v", cfg)
	}
	pdb := r.find(t, "PodDisruptionBudget", injectorName, releaseNS).(*policyv1.PodDisruptionBudget)
	if pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB minAvailable %v", pdb.Spec.MinAvailable)
	}
	if len(r.all("PrometheusRule"))+len(r.all("Certificate")) != 0 {
		t.Error("optional objects rendered by default")
	}
	for _, s := range []string{"baton.dev/inject", "port-forward", "BATON_ADMIN_TOKEN", releaseNS} {
		if !strings.Contains(r.notes, s) {
			t.Errorf("NOTES.txt does not mention %s", s)
		}
	}
}

func TestRenderTransparent(t *testing.T) {
	t.Parallel()
	r := render(t, loadChart(t), transparentValues())
	golden(t, "transparent.golden", r.text)

	checkTLS(t, r)
	checkDeployment(t, r)
	checkWebhook(t, r, admissionregistrationv1.Ignore)
	checkBatonConfigs(t, r)
	checkSecrets(t, r)
	cfg := checkInjectorConfig(t, r, []string{releaseNS, "agents"})
	if cfg.Intercept != "transparent" || cfg.AgentPort != 9090 || cfg.AgentConfigMaps["analyst"] != "baton-analyst" ||
		cfg.RedisPasswordSecret == nil || cfg.RedisPasswordSecret.Name != "baton-redis" || len(cfg.Env) != 1 {
		t.Errorf("injector configuration %+v", cfg)
	}

	for _, ns := range []string{releaseNS, "agents"} {
		shared := batonYAML(t, r, "baton", ns)
		if shared["intercept"].(map[string]any)["mode"] != "transparent" {
			t.Errorf("%s: the shared configuration's intercept %v, want transparent like the injector's default", ns, shared["intercept"])
		}
		redis := shared["store"].(map[string]any)["redis"].(map[string]any)
		if _, ok := redis["password"]; ok {
			t.Errorf("%s: the Redis password is in the ConfigMap", ns)
		}
		if len(shared["edges"].([]any)) != 2 {
			t.Errorf("%s: shared edges %v", ns, shared["edges"])
		}
		own := batonYAML(t, r, "baton-analyst", ns)
		if own["agent"] != "analyst" || own["log_level"] != "debug" || len(own["edges"].([]any)) != 1 {
			t.Errorf("%s: analyst's configuration %v", ns, own)
		}
		if own["peers"] == nil || own["store"] == nil {
			t.Errorf("%s: analyst's configuration lost the shared keys: %v", ns, own)
		}
		sec := r.find(t, "Secret", "baton-redis", ns).(*corev1.Secret)
		if string(sec.Data["password"]) != "s3cret-pw" {
			t.Errorf("%s: Redis password Secret %q", ns, sec.Data["password"])
		}
	}
}

func TestRenderCertManager(t *testing.T) {
	t.Parallel()
	c := loadChart(t)
	r := render(t, c, map[string]any{"certManager": map[string]any{"enabled": true}})
	golden(t, "cert-manager.golden", r.text)
	for _, o := range r.all("Secret") {
		if o.name == injectorName+"-tls" {
			t.Error("the chart rendered its own TLS Secret with cert-manager enabled")
		}
	}
	cert := r.find(t, "Certificate", injectorName, releaseNS).(*certificate)
	if err := cert.validate(); err != nil {
		t.Error(err)
	}
	iss := r.find(t, "Issuer", injectorName+"-selfsigned", releaseNS).(*issuer)
	if iss.Spec.SelfSigned == nil || cert.Spec.IssuerRef.Name != iss.Metadata.Name || cert.Spec.IssuerRef.Kind != "Issuer" {
		t.Errorf("issuer %+v, certificate's issuerRef %+v", iss, cert.Spec.IssuerRef)
	}
	dep := r.find(t, "Deployment", injectorName, releaseNS).(*appsv1.Deployment)
	if v := podVolume(dep, "tls"); v == nil || v.Secret.SecretName != cert.Spec.SecretName {
		t.Errorf("the injector mounts %+v, cert-manager writes Secret %s", v, cert.Spec.SecretName)
	}
	if !slices.Contains(cert.Spec.DNSNames, injectorName+"."+releaseNS+".svc") {
		t.Errorf("dnsNames %q lack the Service's name", cert.Spec.DNSNames)
	}
	mwc := r.find(t, "MutatingWebhookConfiguration", injectorName, "").(*admissionregistrationv1.MutatingWebhookConfiguration)
	if got := mwc.Annotations["cert-manager.io/inject-ca-from"]; got != releaseNS+"/"+cert.Metadata.Name {
		t.Errorf("inject-ca-from %q", got)
	}
	for _, w := range mwc.Webhooks {
		if len(w.ClientConfig.CABundle) != 0 {
			t.Errorf("%s has a caBundle; cert-manager's CA injector sets it", w.Name)
		}
	}

	// With an issuer of one's own, no self-signed Issuer.
	r = render(t, c, map[string]any{"certManager": map[string]any{"enabled": true,
		"issuerRef": map[string]any{"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}}})
	if len(r.all("Issuer")) != 0 {
		t.Error("a self-signed Issuer beside the given issuer")
	}
	cert = r.find(t, "Certificate", injectorName, releaseNS).(*certificate)
	if cert.Spec.IssuerRef != (issuerRef{Name: "corp-ca", Kind: "ClusterIssuer", Group: "cert-manager.io"}) {
		t.Errorf("issuerRef %+v", cert.Spec.IssuerRef)
	}
}

func TestRenderOptions(t *testing.T) {
	t.Parallel()
	c := loadChart(t)
	for _, tc := range []struct {
		name  string
		vals  map[string]any
		check func(t *testing.T, r *rendered)
	}{
		{"failurePolicy Fail", map[string]any{"webhook": map[string]any{"failurePolicy": "Fail"}}, func(t *testing.T, r *rendered) {
			checkWebhook(t, r, admissionregistrationv1.Fail)
		}},
		{"no match conditions", map[string]any{"webhook": map[string]any{"matchConditions": false}}, func(t *testing.T, r *rendered) {
			mwc := r.find(t, "MutatingWebhookConfiguration", injectorName, "").(*admissionregistrationv1.MutatingWebhookConfiguration)
			for _, w := range mwc.Webhooks {
				if len(w.MatchConditions) != 0 {
					t.Errorf("%s has match conditions", w.Name)
				}
			}
		}},
		{"an admin token Secret of one's own", map[string]any{"sidecar": map[string]any{"adminToken": map[string]any{"existingSecret": "ops-token"}}}, func(t *testing.T, r *rendered) {
			for _, o := range r.all("Secret") {
				if o.name == "baton-admin-token" {
					t.Error("the chart made an admin token Secret beside the given one")
				}
			}
			cfg := injectorConfig(t, r)
			if cfg.AdminTokenSecret == nil || cfg.AdminTokenSecret.Name != "ops-token" {
				t.Errorf("adminTokenSecret %+v", cfg.AdminTokenSecret)
			}
		}},
		{"a Redis password Secret of one's own", map[string]any{"config": map[string]any{"store": map[string]any{"redis": map[string]any{
			"url": "redis://redis:6379/0", "existingSecret": "redis-auth", "existingSecretKey": "redis-password"}}}}, func(t *testing.T, r *rendered) {
			cfg := injectorConfig(t, r)
			if cfg.RedisPasswordSecret == nil || *cfg.RedisPasswordSecret != (inject.SecretKey{Name: "redis-auth", Key: "redis-password"}) {
				t.Errorf("redisPasswordSecret %+v", cfg.RedisPasswordSecret)
			}
			redis := batonYAML(t, r, "baton", releaseNS)["store"].(map[string]any)["redis"].(map[string]any)
			if len(redis) != 1 || redis["url"] != "redis://redis:6379/0" {
				t.Errorf("redis in baton.yaml %v, want the url only", redis)
			}
			checkBatonConfigs(t, r)
		}},
		{"PDB off, one replica", map[string]any{"pdb": map[string]any{"enabled": false}, "injector": map[string]any{"replicas": 1}}, func(t *testing.T, r *rendered) {
			if len(r.all("PodDisruptionBudget")) != 0 {
				t.Error("PDB rendered")
			}
		}},
		{"ConfigMaps per agent only", map[string]any{"sidecar": map[string]any{"configMap": "baton-{agent}"},
			"agents": map[string]any{"planner": map[string]any{}, "analyst": map[string]any{}}}, func(t *testing.T, r *rendered) {
			var names []string
			for _, o := range r.all("ConfigMap") {
				names = append(names, o.name)
			}
			if !slices.Equal(names, []string{"baton-analyst", "baton-planner", injectorName}) {
				t.Errorf("ConfigMaps %q", names)
			}
			checkBatonConfigs(t, r)
			checkInjectorConfig(t, r, []string{releaseNS})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, render(t, c, tc.vals))
		})
	}
}

func TestRenderRefusesBadValues(t *testing.T) {
	t.Parallel()
	c := loadChart(t)
	for name, vals := range map[string]map[string]any{
		"intercept":     {"injector": map[string]any{"intercept": "sideways"}},
		"failurePolicy": {"webhook": map[string]any{"failurePolicy": "Sometimes"}},
	} {
		rv, err := chartutilValues(c, vals)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := renderErr(c, rv); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: render error %v, want one naming it", name, err)
		}
	}
}

func chartutilValues(c *chart.Chart, vals map[string]any) (chartutil.Values, error) {
	return chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNS, IsInstall: true}, chartutil.DefaultCapabilities)
}

func renderErr(c *chart.Chart, rv chartutil.Values) (map[string]string, error) {
	return engine.Render(c, rv)
}

func TestLint(t *testing.T) {
	t.Parallel()
	for name, vals := range map[string]map[string]any{"defaults": nil, "transparent": transparentValues(), "tls": tlsValues(true)} {
		l := lint.All(chartDir, vals, releaseNS, false)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: %s", name, m)
			}
		}
	}
}

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

var alnum32 = regexp.MustCompile(`^[A-Za-z0-9]{32}$`)

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
	if c.Image != "ghcr.io/batonproxy/baton:0.1.0" || c.Args[0] != "inject-webhook" {
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

// sampleAgents are deployments of agents: one with its own ConfigMap in the
// transparent values, one on the shared one.
const sampleAgents = `apiVersion: apps/v1
kind: Deployment
metadata: {name: analyst}
spec:
  selector: {matchLabels: {app: analyst}}
  template:
    metadata: {labels: {app: analyst}}
    spec:
      containers: [{name: agent, image: registry.example.com/analyst:1}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: planner}
spec:
  selector: {matchLabels: {app: planner}}
  template:
    metadata: {labels: {app: planner}}
    spec:
      containers: [{name: agent, image: registry.example.com/planner:1}]
`

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

func TestRenderDashboardsAndAlerts(t *testing.T) {
	t.Parallel()
	files := readDir(t, filepath.Join("testdata", "dashboards"))
	checkDashboards(t, withFiles(loadChart(t), files), files)
}

// TestChartDashboards checks the dashboards and alerts the chart ships.
func TestChartDashboards(t *testing.T) {
	t.Parallel()
	files := readDir(t, filepath.Join(chartDir, "dashboards"))
	var alerts int
	for name := range files {
		if strings.HasPrefix(name, "alerts") {
			alerts++
		}
	}
	if alerts == 0 {
		t.Fatal("the chart ships no dashboards/alerts*.yaml")
	}
	checkDashboards(t, loadChart(t), files)
}
