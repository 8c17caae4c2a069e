package tlsintercept

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestHostsMatch(t *testing.T) {
	t.Parallel()
	hosts, err := ParseHosts([]string{
		"api.openai.com:443", "*.anthropic.com:443", "Model.Internal.:8443", "10.0.0.5:443", "[2001:DB8::1]:443",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		host string
		port uint16
		want bool
	}{
		{"exact", "api.openai.com", 443, true},
		{"exact in another case", "API.OpenAI.com", 443, true},
		{"exact with a trailing dot", "api.openai.com.", 443, true},
		{"exact on another port", "api.openai.com", 8443, false},
		{"a sibling of an exact entry", "chat.openai.com", 443, false},
		{"a subdomain of an exact entry", "x.api.openai.com", 443, false},
		{"the parent of an exact entry", "openai.com", 443, false},
		{"wildcard: a subdomain", "api.anthropic.com", 443, true},
		{"wildcard: a deeper subdomain", "a.b.anthropic.com", 443, true},
		{"wildcard: the domain itself", "anthropic.com", 443, false},
		{"wildcard: another port", "api.anthropic.com", 80, false},
		{"wildcard: a look-alike domain", "api.evilanthropic.com", 443, false},
		{"wildcard: the domain as a label", "anthropic.com.evil.net", 443, false},
		{"an entry written in capitals", "model.internal", 8443, true},
		{"an IPv4 entry", "10.0.0.5", 443, true},
		{"an IPv4 entry on another port", "10.0.0.5", 444, false},
		{"an IPv6 entry, another spelling", "2001:db8:0::1", 443, true},
		{"an IPv6 entry in brackets", "[2001:db8::1]", 443, true},
		{"no name", "", 443, false},
		{"port 0", "api.openai.com", 0, false},
		{"unlisted", "example.com", 443, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := hosts.Match(tc.host, tc.port); got != tc.want {
				t.Errorf("Match(%q, %d) = %v, want %v", tc.host, tc.port, got, tc.want)
			}
			hp := net.JoinHostPort(strings.Trim(tc.host, "[]"), strconv.Itoa(int(tc.port)))
			if got := hosts.MatchHostPort(hp); got != tc.want {
				t.Errorf("MatchHostPort(%q) = %v, want %v", hp, got, tc.want)
			}
		})
	}
}

// TestHostsWildcardIP: a wildcard covers names, never an IP address, though
// the address's text ends like the entry.
func TestHostsWildcardIP(t *testing.T) {
	t.Parallel()
	hosts, err := ParseHosts([]string{"*.0.0.1:443"})
	if err != nil {
		t.Fatal(err)
	}
	if hosts.Match("127.0.0.1", 443) {
		t.Error("*.0.0.1:443 matched 127.0.0.1:443")
	}
	if !hosts.Match("x.0.0.1", 443) {
		t.Error("*.0.0.1:443 did not match the name x.0.0.1")
	}
}

func TestParseHostsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		entry string
		want  string
	}{
		{"no port", "api.openai.com", "must be host:port"},
		{"port 0", "api.openai.com:0", "port between 1 and 65535"},
		{"port too high", "api.openai.com:65536", "port between 1 and 65535"},
		{"port not a number", "api.openai.com:https", "port between 1 and 65535"},
		{"a wildcard inside", "api.*.com:443", "at most a leading *."},
		{"a bare wildcard", "*:443", "at most a leading *."},
		{"two wildcards", "*.*.openai.com:443", "at most a leading *."},
		{"nothing after the wildcard", "*.:443", "at most a leading *."},
		{"no host", ":443", "at most a leading *."},
		{"a wildcard over IPs", "*.10.0.0.1:443", "not IP addresses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseHosts([]string{"ok.example.com:443", tc.entry})
			if err == nil {
				t.Fatalf("ParseHosts accepted %q", tc.entry)
			}
			if !strings.Contains(err.Error(), "hosts[1] "+strconv.Quote(tc.entry)) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want the entry's index and value, and %q", err, tc.want)
			}
		})
	}
}

// TestParseHostsAllErrors: every bad entry is reported at once.
func TestParseHostsAllErrors(t *testing.T) {
	t.Parallel()
	_, err := ParseHosts([]string{"a", "ok.example.com:443", "b:0"})
	if err == nil || !strings.Contains(err.Error(), "hosts[0]") || !strings.Contains(err.Error(), "hosts[2]") {
		t.Errorf("error %v: want hosts[0] and hosts[2]", err)
	}
	var zero Hosts
	if !zero.Empty() || zero.Match("a.example.com", 443) {
		t.Error("the zero Hosts lists something")
	}
}

// FuzzHostsMatch: matching never panics, and a destination matched is
// one an entry lists: the entry's host itself, or under a wildcard entry's
// domain, on the entry's port.
func FuzzHostsMatch(f *testing.F) {
	for _, s := range []struct {
		entry, host string
		port        uint16
	}{
		{"api.openai.com:443", "api.openai.com", 443},
		{"*.openai.com:443", "a.openai.com", 443},
		{"*.openai.com:443", "openai.com", 443},
		{"*.0.0.1:443", "127.0.0.1", 443},
		{"[::1]:8443", "::1", 8443},
		{"*.example.com:443", "*.example.com", 443},
		{"*.example.com:443", "x]:443 .example.com", 443},
		{"A.B:1", "a.b.", 1},
	} {
		f.Add(s.entry, s.host, s.port)
	}
	f.Fuzz(func(t *testing.T, entry, host string, port uint16) {
		hosts, err := ParseHosts([]string{entry})
		if err != nil {
			return
		}
		if !hosts.Match(host, port) {
			return
		}
		listed := hosts.Entries()[0]
		eh, ep, err := net.SplitHostPort(listed)
		if err != nil {
			t.Fatalf("entry %q normalised to %q, not host:port", entry, listed)
		}
		if ep != strconv.Itoa(int(port)) {
			t.Fatalf("%q matched %q on port %d", entry, host, port)
		}
		name := normalName(host)
		if domain, wild := strings.CutPrefix(eh, "*."); wild {
			if !strings.HasSuffix(name, "."+domain) || len(name) <= len(domain)+1 {
				t.Fatalf("%q matched %q, which is not under %s", entry, host, domain)
			}
		} else if name != eh {
			t.Fatalf("%q matched %q (%q)", entry, host, name)
		}
	})
}
