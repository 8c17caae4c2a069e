package config

import "fmt"

// Intercept says how the agent's traffic reaches Baton: addressed to egress
// (proxy mode: Host routing or HTTP_PROXY), or redirected to it by the nat
// rules `baton iptables` installs (transparent mode), in which case the
// listeners recover each connection's original destination.
type Intercept struct {
	// Mode is proxy or transparent; empty means proxy.
	Mode string `yaml:"mode"`
	// InboundPorts are the local agent's ports, besides upstream's, that
	// ingress delivers a redirected inbound connection to (on upstream's
	// host). A redirected connection to any other port is closed.
	InboundPorts []int `yaml:"inbound_ports"`
	// TLS lists the destinations whose TLS the egress terminates
	// (intercept_tls.go).
	TLS InterceptTLS `yaml:"tls"`
}

// The intercept modes.
const (
	InterceptProxy       = "proxy"
	InterceptTransparent = "transparent"
)

// Transparent reports whether the listeners serve connections redirected by
// iptables.
func (c *Config) Transparent() bool { return c.Intercept.Mode == InterceptTransparent }

func (c *Config) validateIntercept(bad badFunc) {
	switch c.Intercept.Mode {
	case "", InterceptProxy, InterceptTransparent:
	default:
		bad("intercept.mode", c.Intercept.Mode, "must be proxy or transparent")
	}
	seen := map[int]bool{}
	for i, p := range c.Intercept.InboundPorts {
		path := fmt.Sprintf("intercept.inbound_ports[%d]", i)
		switch {
		case p < 1 || p > 65535:
			bad(path, p, "must be a port between 1 and 65535")
		case seen[p]:
			bad(path, p, "must not repeat a port")
		}
		seen[p] = true
	}
}
