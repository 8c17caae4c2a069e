package inject

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/config"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations a pod (or a pod template) is configured with.
const (
	// AnnotationInject opts a pod in ("true") or out ("false").
	AnnotationInject = "baton.dev/inject"
	// AnnotationStatus is set to "injected" on an injected pod; a pod that
	// has it is never injected again.
	AnnotationStatus = "baton.dev/status"
	// AnnotationAgent names the agent; default: the pod's app label, else
	// app.kubernetes.io/name, else its name (or generateName, or the
	// workload's name offline).
	AnnotationAgent = "baton.dev/agent"
	// AnnotationAgentPort is the agent's port, where ingress delivers.
	AnnotationAgentPort = "baton.dev/agent-port"
	// AnnotationIntercept is proxy or transparent.
	AnnotationIntercept = "baton.dev/intercept"
	// AnnotationConfigMap names the ConfigMap holding baton.yaml.
	AnnotationConfigMap = "baton.dev/config-map"
	// AnnotationKeySecret names the Secret holding the identity key (key
	// "key"), mounted read-only at KeyDir.
	AnnotationKeySecret = "baton.dev/key-secret"
	// AnnotationTLSSecret names the Secret holding the certificate, key and
	// trust bundle of mutual TLS (keys tls.crt, tls.key and ca.crt, as
	// cert-manager writes them), mounted read-only at TLSDir.
	AnnotationTLSSecret = "baton.dev/tls-secret"
	// AnnotationNoProxy adds comma-separated entries to NO_PROXY in proxy
	// mode.
	AnnotationNoProxy = "baton.dev/no-proxy"
	// AnnotationBaseURLs lists, comma-separated, the base-URL routes
	// (config.RoutePresets: openai, anthropic, ...) whose SDK variable
	// (OPENAI_BASE_URL, ...) the agent's containers get, pointing at the
	// egress.
	AnnotationBaseURLs = "baton.dev/base-urls"
	// The transparent mode's exclusions, passed to `baton iptables`.
	AnnotationExcludeOutboundPorts = "baton.dev/exclude-outbound-ports"
	AnnotationExcludeInboundPorts  = "baton.dev/exclude-inbound-ports"
	AnnotationExcludeOutboundCIDRs = "baton.dev/exclude-outbound-cidrs"
)

// StatusInjected is the value of AnnotationStatus on an injected pod.
const StatusInjected = "injected"

// ContainerName is the sidecar's name; InitContainerName the iptables init
// container's.
const (
	ContainerName     = "baton"
	InitContainerName = "baton-init"
)

// agentName is the shape of an agent's name, as config requires it.
var agentName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

const expectAgent = "1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit"

// Options is what one pod is injected with: the configuration's defaults
// overridden by the pod's annotations.
type Options struct {
	Agent                string
	AgentPort            int32
	Intercept            string
	ConfigMap            string
	KeySecret            string
	TLSSecret            string
	NoProxy              []string
	BaseURLs             []string // route names (AnnotationBaseURLs)
	InterceptTLS         bool     // AnnotationInterceptTLS
	ExcludeOutboundPorts string
	ExcludeInboundPorts  string
	ExcludeOutboundCIDRs string
	// Instrument is the language of the zero-code OpenTelemetry
	// instrumentation the pod asks for (baton.dev/instrument), "" for none.
	Instrument string
	// OperatorAnnotation is the OpenTelemetry Operator's inject annotation
	// the pod carries, if any: the Operator instruments the pod, and Baton
	// adds no instrumentation of its own.
	OperatorAnnotation string
	// Uninstrumented lists the app containers Pod left without the
	// instrumentation's loading variables, each with why.
	Uninstrumented []string
}

// AnnotationError is a pod annotation with a value the injector cannot use.
type AnnotationError struct {
	Annotation string
	Value      string
	Expect     string
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %s: %s, got %q", e.Annotation, e.Expect, e.Value)
}

// Wants tells whether a pod with meta is to be injected: its
// baton.dev/inject annotation, else nsEnabled (its namespace opted in). A
// pod already injected is not.
func Wants(meta *metav1.ObjectMeta, nsEnabled bool) (bool, error) {
	if meta.Annotations[AnnotationStatus] == StatusInjected {
		return false, nil
	}
	switch v, ok := meta.Annotations[AnnotationInject]; {
	case !ok:
		return nsEnabled, nil
	case v == "true":
		return true, nil
	case v == "false":
		return false, nil
	default:
		return false, &AnnotationError{AnnotationInject, v, `must be "true" or "false"`}
	}
}

// options resolves a pod's options from its annotations and labels over
// c's defaults. fallbackName names the agent when no annotation or label
// does (the pod's or the workload's name). Every bad annotation is
// reported.
func (c *Config) options(meta *metav1.ObjectMeta, fallbackName string) (Options, error) {
	a := meta.Annotations
	o := Options{
		AgentPort:            c.AgentPort,
		Intercept:            c.Intercept,
		ExcludeOutboundPorts: a[AnnotationExcludeOutboundPorts],
		ExcludeInboundPorts:  a[AnnotationExcludeInboundPorts],
		ExcludeOutboundCIDRs: a[AnnotationExcludeOutboundCIDRs],
	}
	var errs []error
	bad := func(name, expect string) {
		errs = append(errs, &AnnotationError{name, a[name], expect})
	}

	o.Agent = agentFor(meta, fallbackName)
	if !agentName.MatchString(o.Agent) {
		if _, ok := a[AnnotationAgent]; ok {
			bad(AnnotationAgent, "must be an agent name: "+expectAgent)
		} else {
			errs = append(errs, &AnnotationError{AnnotationAgent, o.Agent,
				"is unset and the pod's app label or name is not an agent name (" + expectAgent + "): set it"})
		}
	}
	if v, ok := a[AnnotationAgentPort]; ok {
		p, err := strconv.ParseInt(v, 10, 32)
		if err == nil {
			err = checkAgentPort(int32(p))
		}
		if err != nil {
			bad(AnnotationAgentPort, "must be the agent's port, 1 to 65535, not 15000, 15001 or 15006")
		} else {
			o.AgentPort = int32(p)
		}
	}
	if v, ok := a[AnnotationIntercept]; ok {
		if v != ModeProxy && v != ModeTransparent {
			bad(AnnotationIntercept, "must be proxy or transparent")
		} else {
			o.Intercept = v
		}
	}
	o.ConfigMap = c.configMapFor(o.Agent)
	if v, ok := a[AnnotationConfigMap]; ok {
		if !dnsName.MatchString(v) {
			bad(AnnotationConfigMap, "must be a ConfigMap name")
		} else {
			o.ConfigMap = v
		}
	}
	if v, ok := a[AnnotationKeySecret]; ok {
		if !dnsName.MatchString(v) {
			bad(AnnotationKeySecret, "must be a Secret name")
		} else {
			o.KeySecret = v
		}
	}
	if v, ok := a[AnnotationTLSSecret]; ok {
		if !dnsName.MatchString(v) {
			bad(AnnotationTLSSecret, "must be a Secret name (the one with tls.crt, tls.key and ca.crt)")
		} else {
			o.TLSSecret = v
		}
	} else if s := c.tlsSecretFor(o.Agent); s != "" {
		// The configuration's default, for this agent ("{agent}" replaced).
		if !dnsName.MatchString(s) {
			errs = append(errs, &AnnotationError{AnnotationTLSSecret, s,
				"is unset and the configuration's tlsSecret for this agent is not a Secret name: set it"})
		} else {
			o.TLSSecret = s
		}
	}
	if v := a[AnnotationNoProxy]; v != "" {
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			if e == "" || strings.ContainsAny(e, " \t\n\"'") {
				bad(AnnotationNoProxy, "must be comma-separated hosts, domains or CIDRs")
				break
			}
			o.NoProxy = append(o.NoProxy, e)
		}
	}
	if v, ok := a[AnnotationInterceptTLS]; ok {
		if b, err := strconv.ParseBool(v); err != nil {
			bad(AnnotationInterceptTLS, "must be true or false")
		} else {
			o.InterceptTLS = b
		}
	}
	if v := a[AnnotationBaseURLs]; v != "" {
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			if _, ok := config.RoutePresets[e]; !ok {
				bad(AnnotationBaseURLs, "must be comma-separated route names of "+strings.Join(config.RoutePresetNames(), ", "))
				break
			}
			o.BaseURLs = append(o.BaseURLs, e)
		}
	}
	if lang, operator, err := instrumentOptions(a); err != nil {
		errs = append(errs, err)
	} else {
		o.Instrument, o.OperatorAnnotation = lang, operator
	}
	if !portList(o.ExcludeOutboundPorts) {
		bad(AnnotationExcludeOutboundPorts, "must be comma-separated ports")
	}
	if !portList(o.ExcludeInboundPorts) {
		bad(AnnotationExcludeInboundPorts, "must be comma-separated ports")
	}
	if !cidrList(o.ExcludeOutboundCIDRs) {
		bad(AnnotationExcludeOutboundCIDRs, "must be comma-separated CIDRs like 10.96.0.0/12")
	}
	return o, errors.Join(errs...)
}

// agentFor names the agent: the annotation, the app labels, the pod's name,
// its generateName without the trailing '-', then fallback.
func agentFor(meta *metav1.ObjectMeta, fallback string) string {
	for _, v := range []string{
		meta.Annotations[AnnotationAgent],
		meta.Labels["app"],
		meta.Labels["app.kubernetes.io/name"],
		meta.Name,
		strings.TrimSuffix(meta.GenerateName, "-"),
	} {
		if v != "" {
			return v
		}
	}
	return fallback
}

func portList(s string) bool {
	if s == "" {
		return true
	}
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > 65535 {
			return false
		}
	}
	return true
}

func cidrList(s string) bool {
	if s == "" {
		return true
	}
	for _, p := range strings.Split(s, ",") {
		if _, err := netip.ParsePrefix(strings.TrimSpace(p)); err != nil {
			return false
		}
	}
	return true
}

// compact drops the spaces around a comma-separated list's entries.
func compact(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return strings.Join(parts, ",")
}
