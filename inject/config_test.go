package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig(strings.NewReader(`
image: ghcr.io/batonproxy/baton:0.1.0
initImage: ghcr.io/batonproxy/baton-init:0.1.0
imagePullPolicy: IfNotPresent
intercept: transparent
agentConfigMaps: {analyst: baton-analyst}
tlsSecret: baton-tls-{agent}
adminTokenSecret: {name: baton-admin-token, key: token}
resources:
  requests: {cpu: 50m, memory: 64Mi}
  limits: {memory: 256Mi}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Intercept != ModeTransparent || c.AgentPort != DefaultAgentPort || c.ConfigMap != DefaultConfigMap {
		t.Errorf("config %+v", c)
	}
	if got := c.Resources.Requests[corev1.ResourceCPU]; got.String() != "50m" {
		t.Errorf("cpu request %s", got.String())
	}
	if got := c.configMapFor("analyst"); got != "baton-analyst" {
		t.Errorf("analyst's ConfigMap %q", got)
	}
	if got := c.configMapFor("planner"); got != "baton" {
		t.Errorf("planner's ConfigMap %q", got)
	}
	if got := c.tlsSecretFor("planner"); got != "baton-tls-planner" {
		t.Errorf("planner's TLS Secret %q", got)
	}
}

func TestConfigMapTemplate(t *testing.T) {
	t.Parallel()
	c := &Config{Image: "x", ConfigMap: "baton-{agent}"}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.configMapFor("planner"); got != "baton-planner" {
		t.Errorf("%q", got)
	}
}

func TestParseConfigRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "image: x\nimagee: y\n", []string{`unknown field "imagee"`}},
		{"duplicate key", "image: x\nimage: y\n", []string{"image"}},
		{"every bad value at once", `
intercept: sideways
agentPort: 15001
imagePullPolicy: Sometimes
configMap: Not_A_Name
agentConfigMaps: {Analyst: "x y"}
tlsSecret: "TLS {agent}"
redisPasswordSecret: {name: "", key: "a b"}
env: [{name: BATON_AGENT, value: x}]
`, []string{
			`env[0].name: must be set, and not BATON_AGENT`,
			"image: must be set",
			`intercept: must be proxy or transparent, got "sideways"`,
			"agentPort: must not be one of Baton's own ports",
			`imagePullPolicy: must be Always, IfNotPresent or Never, got "Sometimes"`,
			`configMap: must be a ConfigMap name`,
			"agentConfigMaps.Analyst: the key must be an agent name",
			`agentConfigMaps.Analyst: must be a ConfigMap name, got "x y"`,
			`tlsSecret: must be a Secret name ("{agent}" is replaced by the agent's name), got "TLS {agent}"`,
			`redisPasswordSecret.name: must be a Secret name, got ""`,
			`redisPasswordSecret.key: must be a key of the Secret's data, got "a b"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig(strings.NewReader(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
		})
	}
}
