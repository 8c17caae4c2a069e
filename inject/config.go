package inject

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Config is the injector's configuration: what it adds to a pod. The chart
// renders it as injector.yaml in the injector's ConfigMap; `baton inject`
// reads the same file with --config. Keys are camelCase, as in Kubernetes
// objects, because resources are written as in a container spec.
type Config struct {
	// Image is the Baton image of the sidecar.
	Image string `json:"image"`
	// InitImage is the image of the transparent mode's init container: Baton
	// with iptables installed (the Dockerfile's init target), since `baton
	// iptables` drives iptables-restore. Default: Image.
	InitImage string `json:"initImage,omitempty"`
	// ImagePullPolicy is Always, IfNotPresent or Never; empty leaves the
	// cluster's default.
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// Intercept is the mode for pods that do not choose one: proxy (the
	// default) or transparent.
	Intercept string `json:"intercept,omitempty"`
	// AgentPort is the agent's port for pods that do not name one: where
	// the sidecar's ingress delivers (default 8080).
	AgentPort int32 `json:"agentPort,omitempty"`
	// ConfigMap is the ConfigMap holding baton.yaml that a pod mounts
	// unless it names one or its agent has its own; "{agent}" in it is
	// replaced by the agent's name. Default "baton".
	ConfigMap string `json:"configMap,omitempty"`
	// AgentConfigMaps maps an agent's name to its own ConfigMap.
	AgentConfigMaps map[string]string `json:"agentConfigMaps,omitempty"`
	// TLSSecret is the Secret with the certificate, key and trust bundle of
	// mutual TLS (tls.crt, tls.key, ca.crt) that a pod mounts at TLSDir
	// unless it names one with baton.dev/tls-secret; "{agent}" in it is
	// replaced by the agent's name. Empty: only pods that name one mount
	// one.
	TLSSecret string `json:"tlsSecret,omitempty"`
	// AdminTokenSecret is the Secret key whose value becomes
	// BATON_ADMIN_TOKEN. The kubelet probes the admin listener on the pod's
	// address, and Baton requires an admin token once the admin listener
	// binds beyond loopback.
	AdminTokenSecret *SecretKey `json:"adminTokenSecret,omitempty"`
	// RedisPasswordSecret is the Secret key whose value becomes
	// BATON_REDIS_PASSWORD, so that the password need not sit in the
	// ConfigMap.
	RedisPasswordSecret *SecretKey `json:"redisPasswordSecret,omitempty"`
	// Env is added to the sidecar's environment, after Baton's own
	// variables: OTEL_EXPORTER_OTLP_ENDPOINT, BATON_LOG_LEVEL, ...
	Env []corev1.EnvVar `json:"env,omitempty"`
	// Resources are the sidecar's requests and limits.
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// InitResources are the iptables init container's.
	InitResources corev1.ResourceRequirements `json:"initResources,omitempty"`
	// Instrumentation is the zero-code OpenTelemetry instrumentation that
	// pods annotated baton.dev/instrument get.
	Instrumentation Instrumentation `json:"instrumentation,omitempty"`
}

// SecretKey names one key of a Secret in the pod's namespace.
type SecretKey struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// Interception modes.
const (
	ModeProxy       = "proxy"
	ModeTransparent = "transparent"
)

// Defaults of Config.
const (
	DefaultIntercept = ModeProxy
	DefaultAgentPort = 8080
	DefaultConfigMap = "baton"
)

// The sidecar's fixed layout: its UID (the one `baton iptables` excludes
// from redirection), listener ports and paths.
const (
	ProxyUID    = 1337
	EgressPort  = 15001
	IngressPort = 15006
	AdminPort   = 15000
	ConfigDir   = "/etc/baton"
	ConfigFile  = ConfigDir + "/baton.yaml"
	KeyDir      = "/var/run/secrets/baton"
	// TLSDir is where the TLS Secret is mounted. It lies within KeyDir: the
	// kubelet makes the mount point inside the identity Secret's volume.
	TLSDir = KeyDir + "/tls"
)

// maxConfigBytes bounds the injector's configuration file.
const maxConfigBytes = 1 << 20

// ReadConfig reads and decodes the injector configuration at path (see
// DecodeConfig).
func ReadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("inject: config: %w", err)
	}
	defer f.Close()
	return DecodeConfig(f)
}

// ParseConfig decodes and validates.
func ParseConfig(r io.Reader) (*Config, error) {
	c, err := DecodeConfig(r)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// DecodeConfig decodes YAML strictly (an unknown or duplicate key is an
// error) and applies defaults. It does not validate, so that a caller can
// fill in the image first.
func DecodeConfig(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("inject: config: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("inject: config: larger than %d bytes", maxConfigBytes)
	}
	c := &Config{}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, fmt.Errorf("inject: config: %w", err)
	}
	c.ApplyDefaults()
	return c, nil
}

// ApplyDefaults fills in what the file left out, except the image, which
// the caller knows (the binary's own version).
func (c *Config) ApplyDefaults() {
	if c.Intercept == "" {
		c.Intercept = DefaultIntercept
	}
	if c.AgentPort == 0 {
		c.AgentPort = DefaultAgentPort
	}
	if c.ConfigMap == "" {
		c.ConfigMap = DefaultConfigMap
	}
	c.Instrumentation.Images.applyDefaults()
}

// dnsName is a DNS-1123 subdomain: the names of ConfigMaps and Secrets.
var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// secretDataKey is the shape of a key in a Secret's data.
var secretDataKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Validate reports every problem with c at once, each naming its field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("inject: config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Image == "" {
		bad("image", "must be set to Baton's image, like ghcr.io/batonproxy/baton:0.1.0")
	}
	switch c.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		bad("imagePullPolicy", "must be Always, IfNotPresent or Never, got %q", c.ImagePullPolicy)
	}
	if c.Intercept != ModeProxy && c.Intercept != ModeTransparent {
		bad("intercept", "must be proxy or transparent, got %q", c.Intercept)
	}
	if err := checkAgentPort(c.AgentPort); err != nil {
		bad("agentPort", "%v", err)
	}
	if !dnsName.MatchString(strings.ReplaceAll(c.ConfigMap, "{agent}", "a")) {
		bad("configMap", "must be a ConfigMap name (\"{agent}\" is replaced by the agent's name), got %q", c.ConfigMap)
	}
	agents := make([]string, 0, len(c.AgentConfigMaps))
	for a := range c.AgentConfigMaps {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	for _, a := range agents {
		if !agentName.MatchString(a) {
			bad("agentConfigMaps."+a, "the key must be an agent name: %s", expectAgent)
		}
		if cm := c.AgentConfigMaps[a]; !dnsName.MatchString(cm) {
			bad("agentConfigMaps."+a, "must be a ConfigMap name, got %q", cm)
		}
	}
	if c.TLSSecret != "" && !dnsName.MatchString(strings.ReplaceAll(c.TLSSecret, "{agent}", "a")) {
		bad("tlsSecret", "must be a Secret name (\"{agent}\" is replaced by the agent's name), got %q", c.TLSSecret)
	}
	for field, s := range map[string]*SecretKey{"adminTokenSecret": c.AdminTokenSecret, "redisPasswordSecret": c.RedisPasswordSecret} {
		if s == nil {
			continue
		}
		if !dnsName.MatchString(s.Name) {
			bad(field+".name", "must be a Secret name, got %q", s.Name)
		}
		if !secretDataKey.MatchString(s.Key) {
			bad(field+".key", "must be a key of the Secret's data, got %q", s.Key)
		}
	}
	for i, e := range c.Env {
		if e.Name == "" || e.Name == "BATON_AGENT" || e.Name == "BATON_UPSTREAM" || e.Name == "BATON_INTERCEPT_MODE" {
			bad(fmt.Sprintf("env[%d].name", i), "must be set, and not BATON_AGENT, BATON_UPSTREAM or BATON_INTERCEPT_MODE (the injector sets them per pod), got %q", e.Name)
		}
	}
	errs = append(errs, c.Instrumentation.validate()...)
	sortErrs(errs)
	return errors.Join(errs...)
}

func checkAgentPort(p int32) error {
	switch {
	case p < 1 || p > 65535:
		return fmt.Errorf("must be a port between 1 and 65535, got %d", p)
	case p == EgressPort || p == IngressPort || p == AdminPort:
		return fmt.Errorf("must not be one of Baton's own ports (15000, 15001, 15006), got %d", p)
	}
	return nil
}

// sortErrs orders messages so that a report is the same on every run (map
// iteration above is not).
func sortErrs(errs []error) {
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
}

// configMapFor returns the ConfigMap an agent mounts when its pod names none.
func (c *Config) configMapFor(agent string) string {
	if cm, ok := c.AgentConfigMaps[agent]; ok {
		return cm
	}
	return strings.ReplaceAll(c.ConfigMap, "{agent}", agent)
}

// tlsSecretFor returns the TLS Secret an agent mounts when its pod names
// none: "" without TLSSecret.
func (c *Config) tlsSecretFor(agent string) string {
	return strings.ReplaceAll(c.TLSSecret, "{agent}", agent)
}
