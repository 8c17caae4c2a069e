package intercept

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The chains Baton owns in the nat table. OUTPUT jumps to BATON_OUTPUT,
// PREROUTING to BATON_INBOUND; the two REDIRECT chains hold one rule each,
// so that counters show how much traffic was redirected each way.
const (
	ChainOutput     = "BATON_OUTPUT"
	ChainRedirect   = "BATON_REDIRECT"
	ChainInbound    = "BATON_INBOUND"
	ChainInRedirect = "BATON_IN_REDIRECT"
)

// Chains lists Baton's chains in the order a restore file declares them.
var chains = [...]string{ChainInbound, ChainInRedirect, ChainOutput, ChainRedirect}

// Defaults of Options, the ports of Baton's listeners and the UID Baton
// runs as (the one Istio's sidecar uses, so that existing pod security
// policies fit).
const (
	DefaultProxyUID    = 1337
	DefaultEgressPort  = 15001
	DefaultIngressPort = 15006
	DefaultAdminPort   = 15000
)

// Family is an IP version: IPv4 rules go to iptables, IPv6 to ip6tables.
type Family int

// The two families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// loopback is the family's loopback range: traffic that stays on lo to it
// is the agent talking to itself or to its Baton, never redirected.
func (f Family) loopback() string {
	if f == IPv6 {
		return "::1/128"
	}
	return "127.0.0.0/8"
}

// Options says what to intercept. The zero value is not useful: start from
// DefaultOptions.
type Options struct {
	// ProxyUID and ProxyGID are Baton's: its own connections are never
	// redirected. A negative ProxyGID adds no GID rule.
	ProxyUID, ProxyGID int
	// EgressPort, IngressPort and AdminPort are Baton's listeners'.
	EgressPort, IngressPort, AdminPort int
	// InboundAll redirects inbound TCP to every port but the excluded
	// ones; otherwise only InboundPorts are redirected (none: inbound is
	// not intercepted).
	InboundAll   bool
	InboundPorts []int
	// ExcludeOutboundPorts and ExcludeInboundPorts are destination ports
	// never redirected.
	ExcludeOutboundPorts, ExcludeInboundPorts []int
	// ExcludeOutboundCIDRs are destinations never redirected; each goes to
	// the rules of its family.
	ExcludeOutboundCIDRs []netip.Prefix
}

// DefaultOptions intercepts all outbound TCP but Baton's and inbound TCP to
// every port, with Baton on its default UID and ports.
func DefaultOptions() Options {
	return Options{
		ProxyUID: DefaultProxyUID, ProxyGID: DefaultProxyUID,
		EgressPort: DefaultEgressPort, IngressPort: DefaultIngressPort, AdminPort: DefaultAdminPort,
		InboundAll: true,
	}
}

// Validate reports every bad value at once.
func (o Options) Validate() error {
	var errs []string
	if o.ProxyUID < 0 {
		errs = append(errs, fmt.Sprintf("proxy UID must be >= 0, got %d", o.ProxyUID))
	}
	for _, p := range []struct {
		name string
		port int
	}{{"egress port", o.EgressPort}, {"ingress port", o.IngressPort}, {"admin port", o.AdminPort}} {
		if p.port < 1 || p.port > 65535 {
			errs = append(errs, fmt.Sprintf("%s must be between 1 and 65535, got %d", p.name, p.port))
		}
	}
	if o.EgressPort == o.IngressPort {
		errs = append(errs, fmt.Sprintf("egress and ingress ports must differ, both are %d", o.EgressPort))
	}
	for _, l := range [][]int{o.InboundPorts, o.ExcludeOutboundPorts, o.ExcludeInboundPorts} {
		for _, p := range l {
			if p < 1 || p > 65535 {
				errs = append(errs, fmt.Sprintf("port %d is not between 1 and 65535", p))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("intercept: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Plan is the rules of one family: the restore input that (re)creates
// Baton's chains with their rules, and the rules that hook them into the
// built-in chains, added only when absent.
type Plan struct {
	Family Family
	// Restore is iptables-restore input for the nat table. Run with
	// --noflush, it leaves other chains alone and empties each declared
	// chain before refilling it, so that applying twice gives one set.
	Restore string
	// Jumps are rule specifications for the nat table ("-A OUTPUT -p tcp
	// -j BATON_OUTPUT").
	Jumps [][]string
}

// PlanFor generates the rules of one family. It is pure: the same options
// always give the same text.
func PlanFor(o Options, f Family) Plan {
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, c := range chains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	rule := func(chain string, spec ...string) {
		b.WriteString("-A " + chain + " " + strings.Join(spec, " ") + "\n")
	}
	dport := func(p int) []string { return []string{"-p", "tcp", "-m", "tcp", "--dport", strconv.Itoa(p)} }

	// Inbound: Baton's own ports and the excluded ones pass; then either
	// every other port or only the listed ones go to ingress.
	rule(ChainInRedirect, "-p", "tcp", "-j", "REDIRECT", "--to-ports", strconv.Itoa(o.IngressPort))
	if o.InboundAll || len(o.InboundPorts) > 0 {
		for _, p := range uniq(append([]int{o.AdminPort, o.EgressPort, o.IngressPort}, o.ExcludeInboundPorts...)) {
			rule(ChainInbound, append(dport(p), "-j", "RETURN")...)
		}
		if o.InboundAll {
			rule(ChainInbound, "-p", "tcp", "-j", ChainInRedirect)
		} else {
			for _, p := range uniq(o.InboundPorts) {
				rule(ChainInbound, append(dport(p), "-j", ChainInRedirect)...)
			}
		}
	}

	// Outbound: Baton's own connections, the agent talking to itself (or
	// to its Baton) over loopback, excluded ports and destinations pass;
	// everything else goes to egress.
	rule(ChainRedirect, "-p", "tcp", "-j", "REDIRECT", "--to-ports", strconv.Itoa(o.EgressPort))
	rule(ChainOutput, "-m", "owner", "--uid-owner", strconv.Itoa(o.ProxyUID), "-j", "RETURN")
	if o.ProxyGID >= 0 {
		rule(ChainOutput, "-m", "owner", "--gid-owner", strconv.Itoa(o.ProxyGID), "-j", "RETURN")
	}
	rule(ChainOutput, "-d", f.loopback(), "-o", "lo", "-j", "RETURN")
	for _, p := range uniq(o.ExcludeOutboundPorts) {
		rule(ChainOutput, append(dport(p), "-j", "RETURN")...)
	}
	for _, c := range o.ExcludeOutboundCIDRs {
		if c.Addr().Is4() == (f == IPv4) {
			rule(ChainOutput, "-d", c.Masked().String(), "-j", "RETURN")
		}
	}
	rule(ChainOutput, "-j", ChainRedirect)
	b.WriteString("COMMIT\n")

	return Plan{Family: f, Restore: b.String(), Jumps: jumps()}
}

// jumps hook Baton's chains into the built-in ones. They are always
// present, whatever the options, so that the state after Apply depends on
// the options alone; an empty BATON_INBOUND lets everything through.
func jumps() [][]string {
	return [][]string{
		{"-A", "OUTPUT", "-p", "tcp", "-j", ChainOutput},
		{"-A", "PREROUTING", "-p", "tcp", "-j", ChainInbound},
	}
}

func uniq(ps []int) []int {
	var out []int
	for _, p := range ps {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// ParsePorts parses a comma-separated list of ports ("80,443"); empty is
// none.
func ParsePorts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%q is not a port between 1 and 65535", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// ParseCIDRs parses a comma-separated list of CIDRs ("10.0.0.0/8,fd00::/8");
// a bare address counts as a /32 or /128.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR like 10.0.0.0/8 or fd00::/8", f)
		}
		out = append(out, p)
	}
	return out, nil
}
