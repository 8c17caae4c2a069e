package tlsintercept

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Hosts is the list of destinations whose TLS Baton terminates, host:port
// entries written as in external.allow: "api.openai.com:443" names one
// host on one port, and a leading "*." matches any subdomain at any depth
// ("*.openai.com:443" matches api.openai.com:443 and a.b.openai.com:443,
// not openai.com:443). Names match without regard to case or a trailing
// dot. An IP address matches only an entry that lists it exactly: a
// wildcard never covers one. The zero Hosts lists nothing.
type Hosts struct {
	exact    map[string]bool // "name:port", lowercase; IPs in canonical form
	suffixes []string        // ".openai.com:443" for "*.openai.com:443"
	entries  []string        // as normalised, in the order given
}

// ParseHosts reads the entries of a list. It reports every bad entry
// together, each by its index, its value and the form it must take.
func ParseHosts(entries []string) (Hosts, error) {
	h := Hosts{exact: map[string]bool{}}
	var errs []error
	for i, e := range entries {
		n, err := parseEntry(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("tlsintercept: hosts[%d] %q: %w", i, e, err))
			continue
		}
		h.entries = append(h.entries, n)
		if suffix, ok := strings.CutPrefix(n, "*"); ok {
			h.suffixes = append(h.suffixes, suffix)
		} else {
			h.exact[n] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Hosts{}, err
	}
	return h, nil
}

// parseEntry checks an entry as config's external.allow does and returns
// it normalised: lowercase, no trailing dot, an IP in canonical form.
func parseEntry(e string) (string, error) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(e))
	if err != nil {
		return "", errors.New("must be host:port, e.g. api.openai.com:443 or *.openai.com:443")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", errors.New("must have a port between 1 and 65535")
	}
	wild := strings.HasPrefix(host, "*.")
	name := normalName(strings.TrimPrefix(host, "*."))
	if name == "" || strings.Contains(name, "*") {
		return "", errors.New("must be a host name or IP, with at most a leading *. wildcard")
	}
	if _, ip := parseIP(name); ip && wild {
		return "", errors.New("a wildcard covers host names, not IP addresses: list the IP alone")
	}
	if wild {
		name = "*." + name
	}
	return net.JoinHostPort(name, port), nil
}

// normalName is how a name is compared: lowercase, without IPv6 brackets
// or a trailing dot, an IP in canonical form.
func normalName(name string) string {
	name = strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(name), "["), "]")
	name = strings.TrimSuffix(name, ".")
	if ip, ok := parseIP(name); ok {
		return ip.String()
	}
	return name
}

// parseIP parses name as an IP address. An IP ends in a digit or holds a
// colon (IPv6, a zone), so most host names skip the parse, and the
// allocation of its error.
func parseIP(name string) (netip.Addr, bool) {
	if name == "" || (!strings.Contains(name, ":") && (name[len(name)-1] < '0' || name[len(name)-1] > '9')) {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(name)
	return ip, err == nil
}

// Match reports whether host on port is listed.
func (h Hosts) Match(host string, port uint16) bool { return h.Entry(host, port) != "" }

// Entry returns the entry that lists host on port ("*.example.com:443" for
// a name under a wildcard), or "" when none does: a label as bounded as the
// list, where the name is the agent's to choose.
func (h Hosts) Entry(host string, port uint16) string {
	if port == 0 {
		return ""
	}
	name := normalName(host)
	if name == "" {
		return ""
	}
	hp := net.JoinHostPort(name, strconv.Itoa(int(port)))
	if h.exact[hp] {
		return hp
	}
	if _, ip := parseIP(name); ip {
		return ""
	}
	for _, s := range h.suffixes {
		if len(hp) > len(s) && strings.HasSuffix(hp, s) {
			return "*" + s
		}
	}
	return ""
}

// MatchHostPort is Match for "host:port" (a CONNECT target, an
// authority).
func (h Hosts) MatchHostPort(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return false
	}
	return h.Match(host, uint16(p))
}

// Empty reports whether h lists nothing: there is nothing to intercept.
func (h Hosts) Empty() bool { return len(h.entries) == 0 }

// Entries returns the entries, normalised, in the order given.
func (h Hosts) Entries() []string { return append([]string(nil), h.entries...) }
