package test

import (
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

var alnum32 = regexp.MustCompile(`^[A-Za-z0-9]{32}$`)

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
