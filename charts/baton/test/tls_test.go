package test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/inject"
	"github.com/batonproxy/baton/trust/mtls"
)

// tlsValues turns mutual TLS on, with peers written every way (http://,
// without a scheme, https://, HTTP://), an agent with a peer of its own, and
// a key of config.tls of one's own; with certManager, Certificates from a
// ClusterIssuer for the two sample agents.
func tlsValues(certManager bool) map[string]any {
	tls := map[string]any{"enabled": true, "trustDomain": "example.org"}
	if certManager {
		tls["certManager"] = map[string]any{"enabled": true, "issuer": map[string]any{"name": "baton-ca"}}
	}
	return map[string]any{
		"namespaces": []any{"agents"},
		"tls":        tls,
		"config": map[string]any{
			"peers": map[string]any{
				"summarizer": map[string]any{"url": "http://summarizer.agents.svc:15006", "ports": []any{80}},
				"writer":     map[string]any{"url": "writer.agents.svc:15006"},
				"archivist":  map[string]any{"url": "https://archivist.example.com:15006"},
			},
			"edges": []any{map[string]any{"to": "summarizer"}},
			"tls":   map[string]any{"min_version": "1.2"},
		},
		"agents": map[string]any{
			"analyst": map[string]any{"peers": map[string]any{"critic": map[string]any{"url": "HTTP://critic.agents.svc:15006"}}},
			"planner": map[string]any{},
		},
	}
}

// wantHTTPSPeers is every peer of tlsValues as rendered: the agent
// analyst's own peer too.
var wantHTTPSPeers = map[string]string{
	"summarizer": "https://summarizer.agents.svc:15006",
	"writer":     "https://writer.agents.svc:15006",
	"archivist":  "https://archivist.example.com:15006",
	"critic":     "https://critic.agents.svc:15006",
}

// tlsCertificates returns the Certificates of Batons' mutual TLS (not the
// injector's own).
func tlsCertificates(r *rendered) []*certificate {
	var out []*certificate
	for _, o := range r.all("Certificate") {
		if c := o.typed.(*certificate); c.Metadata.Labels["app.kubernetes.io/component"] == "tls" {
			out = append(out, c)
		}
	}
	return out
}

// certificateWriting returns the Certificate in ns whose Secret is name.
func certificateWriting(r *rendered, name, ns string) *certificate {
	for _, c := range tlsCertificates(r) {
		if c.Spec.SecretName == name && c.Metadata.Namespace == ns {
			return c
		}
	}
	return nil
}

// batonConfigs returns every rendered baton.yaml, decoded, by
// namespace/name.
func batonConfigs(t *testing.T, r *rendered) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range r.all("ConfigMap") {
		y, ok := o.typed.(*corev1.ConfigMap).Data["baton.yaml"]
		if !ok {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(y), &m); err != nil {
			t.Fatal(err)
		}
		out[o.namespace+"/"+o.name] = m
	}
	if len(out) == 0 {
		t.Fatal("no baton.yaml rendered")
	}
	return out
}

// parseWithTLSFiles loads every rendered baton.yaml with Baton's own
// configuration code, the TLS files it names put in a directory of the
// test's (Baton checks that they exist), and returns them by
// namespace/name.
func parseWithTLSFiles(t *testing.T, r *rendered) map[string]*config.Config {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("-----BEGIN PLACEHOLDER-----\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]*config.Config{}
	for _, o := range r.all("ConfigMap") {
		cm := o.typed.(*corev1.ConfigMap)
		y, ok := cm.Data["baton.yaml"]
		if !ok {
			continue
		}
		agent := cm.Labels["baton.dev/agent"]
		if agent == "" {
			agent = "some-agent"
		}
		y = strings.ReplaceAll(y, inject.TLSDir+"/", dir+"/")
		c, err := config.Parse(strings.NewReader(y), testEnv(agent))
		if err != nil {
			t.Errorf("%s/%s: baton.yaml is refused:\n%v\n%s", o.namespace, o.name, err, y)
			continue
		}
		out[o.namespace+"/"+o.name] = c
	}
	return out
}

// injectSamples injects the sample agents with the rendered injector
// configuration and returns their pod templates by agent.
func injectSamples(t *testing.T, r *rendered) map[string]*corev1.PodTemplateSpec {
	t.Helper()
	in, err := inject.New(injectorConfig(t, r))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := in.Manifests(strings.NewReader(sampleAgents), &out, inject.Overrides{}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*corev1.PodTemplateSpec{}
	for _, doc := range strings.Split(out.String(), "---\n") {
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		pods[d.Name] = &d.Spec.Template
	}
	return pods
}

// tlsMount returns the TLS Secret a sample pod mounts in its sidecar, and
// whether the mount is where baton.yaml looks, read-only.
func tlsMount(t *testing.T, pt *corev1.PodTemplateSpec) (secret string, mounted bool) {
	t.Helper()
	for _, v := range pt.Spec.Volumes {
		if v.Name == "baton-tls" && v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	for _, c := range pt.Spec.InitContainers {
		if c.Name != inject.ContainerName {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "baton-tls" && m.MountPath == inject.TLSDir && m.ReadOnly {
				mounted = true
			}
		}
	}
	return secret, mounted
}

// TestRenderTLSOff: without tls.enabled the chart renders what it did
// before: no tls block, peers as written, no TLS Secret for the injector,
// no Certificates (the default and transparent golden files hold the rest).
func TestRenderTLSOff(t *testing.T) {
	t.Parallel()
	for name, vals := range map[string]map[string]any{"defaults": nil, "transparent": transparentValues()} {
		r := render(t, loadChart(t), vals)
		for cm, m := range batonConfigs(t, r) {
			if _, ok := m["tls"]; ok {
				t.Errorf("%s: %s has a tls block", name, cm)
			}
			peers, _ := m["peers"].(map[string]any)
			for peer, p := range peers {
				if u := p.(map[string]any)["url"].(string); !strings.HasPrefix(u, "http://") {
					t.Errorf("%s: %s peer %s url %s, want it as written", name, cm, peer, u)
				}
			}
		}
		if cfg := injectorConfig(t, r); cfg.TLSSecret != "" {
			t.Errorf("%s: injector tlsSecret %q", name, cfg.TLSSecret)
		}
		if n := len(r.all("Certificate")); n != 0 {
			t.Errorf("%s: %d Certificates", name, n)
		}
		if strings.Contains(r.notes, "Mutual TLS") {
			t.Errorf("%s: NOTES.txt speaks of mutual TLS", name)
		}
		for agent, pt := range injectSamples(t, r) {
			if s, _ := tlsMount(t, pt); s != "" {
				t.Errorf("%s: %s mounts TLS Secret %s", name, agent, s)
			}
		}
	}
}

// TestRenderTLS: tls.enabled renders the tls block into every baton.yaml,
// https peers, and the injector's TLS Secret per agent.
func TestRenderTLS(t *testing.T) {
	t.Parallel()
	r := render(t, loadChart(t), tlsValues(false))
	checkTLS(t, r) // the webhook's own TLS is unchanged
	checkDeployment(t, r)

	want := map[string]any{
		"cert_file":    inject.TLSDir + "/tls.crt",
		"key_file":     inject.TLSDir + "/tls.key",
		"ca_file":      inject.TLSDir + "/ca.crt",
		"trust_domain": "example.org",
		"min_version":  "1.2", // config.tls's own key, kept
	}
	configs := batonConfigs(t, r)
	for _, ns := range []string{releaseNS, "agents"} {
		for _, name := range []string{"baton", "baton-analyst", "baton-planner"} {
			m, ok := configs[ns+"/"+name]
			if !ok {
				t.Fatalf("no baton.yaml %s/%s", ns, name)
			}
			tls, _ := m["tls"].(map[string]any)
			if len(tls) != len(want) {
				t.Errorf("%s/%s: tls %v, want %v", ns, name, tls, want)
			}
			for k, v := range want {
				if tls[k] != v {
					t.Errorf("%s/%s: tls.%s %v, want %v", ns, name, k, tls[k], v)
				}
			}
			peers := m["peers"].(map[string]any)
			for peer, p := range peers {
				if u := p.(map[string]any)["url"]; u != wantHTTPSPeers[peer] {
					t.Errorf("%s/%s: peer %s url %v, want %s", ns, name, peer, u, wantHTTPSPeers[peer])
				}
			}
			if ports := peers["summarizer"].(map[string]any)["ports"]; len(ports.([]any)) != 1 {
				t.Errorf("%s/%s: summarizer's ports %v lost", ns, name, ports)
			}
			if _, ok := peers["critic"]; ok != (name == "baton-analyst") {
				t.Errorf("%s/%s: peers %v", ns, name, peers)
			}
		}
	}

	// Baton takes every file, and hands off to each peer over mutual TLS.
	parsed := parseWithTLSFiles(t, r)
	if len(parsed) != len(configs) {
		t.Fatalf("%d of %d baton.yaml loaded", len(parsed), len(configs))
	}
	for name, c := range parsed {
		if c.TLS == nil || c.TLS.TrustDomain != "example.org" || c.TLS.MinVersion != "1.2" {
			t.Errorf("%s: tls %+v", name, c.TLS)
		}
		for peer := range c.Peers {
			if !c.PeerTLS(peer) {
				t.Errorf("%s: the handoff to %s is not over mutual TLS", name, peer)
			}
		}
	}

	cfg := checkInjectorConfig(t, r, []string{releaseNS, "agents"})
	if cfg.TLSSecret != "baton-tls-{agent}" {
		t.Errorf("injector tlsSecret %q, want baton-tls-{agent}", cfg.TLSSecret)
	}
	for agent, pt := range injectSamples(t, r) {
		if s, mounted := tlsMount(t, pt); s != "baton-tls-"+agent || !mounted {
			t.Errorf("%s mounts TLS Secret %q (at %s, read-only: %v), want baton-tls-%s", agent, s, inject.TLSDir, mounted, agent)
		}
	}
	if n := len(r.all("Certificate")); n != 0 {
		t.Errorf("%d Certificates without tls.certManager.enabled", n)
	}
	for _, s := range []string{"Mutual TLS", `"baton-tls-{agent}"`, inject.TLSDir, "baton.dev/tls-secret", "spiffe://example.org/"} {
		if !strings.Contains(r.notes, s) {
			t.Errorf("NOTES.txt does not mention %s", s)
		}
	}
}

// TestRenderTLSCertManager: a Certificate per agent and namespace, its
// SPIFFE ID naming the agent, its Secret the one the injector mounts in
// that agent's pods.
func TestRenderTLSCertManager(t *testing.T) {
	t.Parallel()
	c := loadChart(t)
	r := render(t, c, tlsValues(true))
	golden(t, "tls.golden", r.text)
	checkTLS(t, r)
	checkDeployment(t, r)
	checkWebhook(t, r, "Ignore")
	checkInjectorConfig(t, r, []string{releaseNS, "agents"})
	parseWithTLSFiles(t, r)
	if len(r.all("Issuer")) != 0 {
		t.Error("an Issuer rendered: the agents' certificates come from the given issuer")
	}

	certs := tlsCertificates(r)
	if len(certs) != 4 {
		t.Fatalf("%d Certificates, want one per agent (2) in each namespace (2)", len(certs))
	}
	for _, ns := range []string{releaseNS, "agents"} {
		for _, agent := range []string{"analyst", "planner"} {
			cert := r.find(t, "Certificate", "baton-tls-"+agent, ns).(*certificate)
			if err := cert.validate(); err != nil {
				t.Error(err)
			}
			s := cert.Spec
			if s.SecretName != "baton-tls-"+agent || cert.Metadata.Labels["baton.dev/agent"] != agent {
				t.Errorf("%s/%s: secretName %s labels %v", ns, cert.Metadata.Name, s.SecretName, cert.Metadata.Labels)
			}
			if len(s.URIs) != 1 {
				t.Fatalf("%s/%s: uris %q, want the SPIFFE ID only", ns, cert.Metadata.Name, s.URIs)
			}
			id, err := mtls.ParseID(s.URIs[0])
			if err != nil {
				t.Fatalf("%s/%s: %v", ns, cert.Metadata.Name, err)
			}
			if id.TrustDomain != "example.org" || id.Agent() != agent || id.String() != "spiffe://example.org/ns/"+ns+"/sa/"+agent {
				t.Errorf("%s/%s: SPIFFE ID %s", ns, cert.Metadata.Name, id)
			}
			if len(s.DNSNames) != 0 || s.CommonName != "" {
				t.Errorf("%s/%s: dnsNames %q commonName %q, want the SPIFFE ID alone", ns, cert.Metadata.Name, s.DNSNames, s.CommonName)
			}
			if !slices.Contains(s.Usages, "server auth") || !slices.Contains(s.Usages, "client auth") {
				t.Errorf("%s/%s: usages %q, want server and client auth", ns, cert.Metadata.Name, s.Usages)
			}
			if s.PrivateKey.Algorithm != "ECDSA" || s.PrivateKey.Size != 256 || s.PrivateKey.RotationPolicy != "Always" {
				t.Errorf("%s/%s: privateKey %+v", ns, cert.Metadata.Name, s.PrivateKey)
			}
			if s.IssuerRef != (issuerRef{Name: "baton-ca", Kind: "ClusterIssuer", Group: "cert-manager.io"}) {
				t.Errorf("%s/%s: issuerRef %+v", ns, cert.Metadata.Name, s.IssuerRef)
			}
			if s.Duration != "2160h" || s.RenewBefore != "360h" {
				t.Errorf("%s/%s: duration %s renewBefore %s", ns, cert.Metadata.Name, s.Duration, s.RenewBefore)
			}
		}
	}

	// Each injected pod mounts the Secret of the Certificate whose SPIFFE ID
	// names its agent, in every namespace.
	for agent, pt := range injectSamples(t, r) {
		secret, mounted := tlsMount(t, pt)
		if !mounted {
			t.Errorf("%s: no TLS mount at %s", agent, inject.TLSDir)
		}
		var env string
		for _, c := range pt.Spec.InitContainers {
			for _, e := range c.Env {
				if c.Name == inject.ContainerName && e.Name == "BATON_AGENT" {
					env = e.Value
				}
			}
		}
		for _, ns := range []string{releaseNS, "agents"} {
			cert := certificateWriting(r, secret, ns)
			if cert == nil {
				t.Errorf("%s in %s mounts %s, which no Certificate writes", agent, ns, secret)
				continue
			}
			if id, err := mtls.ParseID(cert.Spec.URIs[0]); err != nil || id.Agent() != env {
				t.Errorf("%s in %s: its certificate names %v (%v), its sidecar BATON_AGENT=%s", agent, ns, id, err, env)
			}
		}
	}
}

func TestRenderTLSCertManagerOptions(t *testing.T) {
	t.Parallel()
	c := loadChart(t)

	// A Secret name of one's own, and an Issuer per namespace.
	vals := tlsValues(true)
	vals["tls"].(map[string]any)["secretName"] = "mtls-{agent}"
	vals["tls"].(map[string]any)["certManager"] = map[string]any{"enabled": true,
		"issuer": map[string]any{"kind": "Issuer", "name": "agents-ca", "group": ""}, "duration": "720h", "renewBefore": "240h"}
	r := render(t, c, vals)
	checkInjectorConfig(t, r, []string{releaseNS, "agents"})
	if cfg := injectorConfig(t, r); cfg.TLSSecret != "mtls-{agent}" {
		t.Errorf("injector tlsSecret %q", cfg.TLSSecret)
	}
	cert := r.find(t, "Certificate", "baton-tls-analyst", "agents").(*certificate)
	if err := cert.validate(); err != nil {
		t.Error(err)
	}
	if cert.Spec.SecretName != "mtls-analyst" || cert.Spec.Duration != "720h" || cert.Spec.RenewBefore != "240h" ||
		cert.Spec.IssuerRef != (issuerRef{Name: "agents-ca", Kind: "Issuer", Group: "cert-manager.io"}) {
		t.Errorf("certificate %+v", cert.Spec)
	}

	// Certificates ahead of turning TLS on: nothing else changes.
	vals = tlsValues(true)
	vals["tls"].(map[string]any)["enabled"] = false
	delete(vals["config"].(map[string]any), "tls")
	r = render(t, c, vals)
	if n := len(tlsCertificates(r)); n != 4 {
		t.Errorf("%d Certificates, want 4", n)
	}
	for cm, m := range batonConfigs(t, r) {
		if _, ok := m["tls"]; ok {
			t.Errorf("%s has a tls block without tls.enabled", cm)
		}
		if u := m["peers"].(map[string]any)["summarizer"].(map[string]any)["url"]; u != "http://summarizer.agents.svc:15006" {
			t.Errorf("%s: summarizer %v, want it as written", cm, u)
		}
	}
	if cfg := injectorConfig(t, r); cfg.TLSSecret != "" {
		t.Errorf("injector tlsSecret %q without tls.enabled", cfg.TLSSecret)
	}
}

func TestRenderRefusesBadTLSValues(t *testing.T) {
	t.Parallel()
	c := loadChart(t)
	with := func(edit func(tls map[string]any, vals map[string]any)) map[string]any {
		vals := tlsValues(true)
		edit(vals["tls"].(map[string]any), vals)
		return vals
	}
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no issuer", with(func(tls, _ map[string]any) {
			tls["certManager"].(map[string]any)["issuer"] = map[string]any{"name": ""}
		}), "tls.certManager.issuer.name"},
		{"an issuer of another kind", with(func(tls, _ map[string]any) {
			tls["certManager"].(map[string]any)["issuer"] = map[string]any{"name": "x", "kind": "Vault"}
		}), `tls.certManager.issuer.kind: must be Issuer or ClusterIssuer, got "Vault"`},
		{"no agents", with(func(_, vals map[string]any) { delete(vals, "agents") }), "tls.certManager.enabled: list the agents"},
		{"one Secret for every agent", with(func(tls, _ map[string]any) { tls["secretName"] = "baton-tls" }),
			`tls.secretName: must contain "{agent}"`},
		{"not a Secret name", with(func(tls, _ map[string]any) { tls["secretName"] = "TLS_{agent}" }),
			`tls.secretName: must be a Secret name`},
		{"a bad trust domain", with(func(tls, _ map[string]any) { tls["trustDomain"] = "Example.ORG" }),
			`tls.trustDomain: must be a SPIFFE trust domain`},
		{"an agent name a SPIFFE ID cannot end with", with(func(_, vals map[string]any) {
			vals["agents"].(map[string]any)["data_prep"] = map[string]any{}
		}), "agents.data_prep"},
	} {
		rv, err := chartutilValues(c, tc.vals)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := renderErr(c, rv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: render error %v, want one saying %s", tc.name, err, tc.want)
		}
	}
}
