package proxy

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
	"github.com/batonproxy/baton/proxy/intercept"
	"github.com/batonproxy/baton/trust"
)

// resolver maps an egress request to its destination: a peer (a handoff to
// that peer's Baton) or an allowed external host (a fetch, dialled directly).
// Anything else is refused with 403: Baton is no open proxy.
type resolver struct {
	agent    string
	peers    map[string]peerRoute
	exact    map[string]bool         // external host:port allowed exactly
	suffixes []string                // ".example.com:443" for "*.example.com:443"
	byHost   map[string][]string     // peers by their URL's host, for redirected connections
	routes   map[string]config.Route // base-URL routes by name (external.routes)
	routeAt  map[string]string       // a route's name by its upstream's host:port
	// broadcasts are asked whether a request is a broadcast (Plugins);
	// nil: none is.
	broadcasts Broadcasts
}

type peerRoute struct {
	url     *url.URL
	maxHops int
	ports   []uint16 // the peer agent's own ports (peers.<name>.ports)
}

// newResolver precomputes the routes. Sensitive addresses (link-local,
// metadata) are vetted when dialled, after DNS, by trust.AddressGuard: an IP
// literal reaches the dialler only when listed exactly in external.allow.
func newResolver(c *config.Config) *resolver {
	rs := &resolver{agent: c.Agent, peers: map[string]peerRoute{}, exact: map[string]bool{}}
	for name, p := range c.Peers {
		max := config.DefaultMaxHops
		if e, ok := c.OutEdge(name); ok {
			max = e.MaxHops
		}
		r := peerRoute{url: p.ParsedURL, maxHops: max}
		for _, port := range p.Ports {
			r.ports = append(r.ports, uint16(port))
		}
		rs.peers[name] = r
	}
	rs.byHost = peersByHost(c)
	rs.routes, rs.routeAt = map[string]config.Route{}, map[string]string{}
	for _, r := range c.External.Routes {
		rs.routes[r.Name] = r
		if r.ParsedURL == nil {
			continue
		}
		if _, taken := rs.routeAt[r.HostPort()]; !taken {
			rs.routeAt[r.HostPort()] = r.Name
		}
	}
	for _, a := range c.External.Allowed() {
		a = strings.ToLower(a)
		if strings.HasPrefix(a, "*.") {
			rs.suffixes = append(rs.suffixes, a[1:])
		} else {
			rs.exact[a] = true
		}
	}
	return rs
}

// middleware resolves the destination into the request's Info.
func (rs *resolver) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := middleware.InfoFromContext(r.Context())
		host := r.Host
		if r.URL.IsAbs() {
			host = r.URL.Host // absolute-form: the agent uses Baton as HTTP_PROXY
		}
		name, port := splitHost(host)
		_, terminated := r.Context().Value(targetKey{}).(string) // goes where the agent's TLS went (connect.go)
		if rs.broadcasts != nil && !terminated && rs.broadcasts.Listed(r) {
			rs.broadcasts.Route(w, r, in, "", next)
			return
		}
		if dst, ok := intercept.OriginalDstFromContext(r.Context()); ok {
			rs.viaOriginal(w, r, in, name, dst, next) // transparent.go
			return
		}
		if name == "" {
			in.PolicyDenial = middleware.DenialUnknownDestination
			problem.Write(w, r, problem.UnknownDestination, "the request names no destination host")
			return
		}
		if p, ok := rs.peers[name]; ok && (port == "" || port == "80") {
			in.From, in.To, in.Target, in.MaxHops = rs.agent, name, p.url, p.maxHops
			next.ServeHTTP(w, r)
			return
		}
		if rs.broadcasts != nil && (port == "" || port == "80") && rs.broadcasts.IsGroup(name) {
			rs.broadcasts.Route(w, r, in, name, next)
			return
		}
		if rt, rest, ok := rs.route(r); ok {
			rs.viaRoute(r, in, rt, rest)
			next.ServeHTTP(w, r)
			return
		}
		if port == "" {
			port = "80"
		}
		if n, err := strconv.ParseUint(port, 10, 16); err == nil {
			// A peer called at its own address (its URL's host, on its URL's
			// port or one of its ports), as an agent configured with its
			// peers' real addresses does through a forward proxy.
			if peer, ok := rs.peerAt(name, uint16(n)); ok {
				p := rs.peers[peer]
				in.From, in.To, in.Target, in.MaxHops = rs.agent, peer, p.url, p.maxHops
				next.ServeHTTP(w, r)
				return
			}
		}
		if trust.NumericHost(name) {
			in.PolicyDenial = middleware.DenialDeniedAddress
			problem.New(r, problem.DeniedAddress, "destination "+name+" is an IP address in a non-standard form; write it as an IP literal").
				With("destination", name).Write(w)
			return
		}
		hostport := net.JoinHostPort(name, port)
		if !rs.allowed(hostport) {
			in.PolicyDenial = middleware.DenialUnknownDestination
			problem.New(r, problem.UnknownDestination, "destination "+hostport+
				" is neither a configured peer nor in external.allow").With("destination", hostport).Write(w)
			return
		}
		rs.external(in, hostport)
		in.Target = &url.URL{Scheme: externalScheme(r, port), Host: hostport}
		next.ServeHTTP(w, r)
	})
}

// external notes an external fetch from the agent to hostport, and the
// base-URL route whose upstream it is, if one is: the route names the
// destination in metrics and in the mesh, however the agent reached it.
func (rs *resolver) external(in *middleware.Info, hostport string) {
	in.From, in.External, in.Route = rs.agent, hostport, rs.routeAt[strings.ToLower(hostport)]
}

// route returns the base-URL route an origin-form request's path names
// (/<name>/...), and the path after it.
func (rs *resolver) route(r *http.Request) (config.Route, string, bool) {
	if len(rs.routes) == 0 || r.URL.IsAbs() {
		return config.Route{}, "", false
	}
	p := r.URL.EscapedPath()
	name, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	rt, ok := rs.routes[name]
	return rt, "/" + rest, ok
}

// viaRoute sends the request to the route's upstream: its base URL joined
// with the path after the route's name, the host an external one.
func (rs *resolver) viaRoute(r *http.Request, in *middleware.Info, rt config.Route, rest string) {
	if u, err := url.Parse(rest); err == nil {
		r.URL.Path, r.URL.RawPath = u.Path, u.RawPath
	}
	in.From, in.External, in.Route, in.Target = rs.agent, rt.HostPort(), rt.Name, rt.ParsedURL
}

// externalScheme is how Baton reaches an external host on port: over TLS
// on 443, or when the agent's own request was (a terminated connection's,
// connect.go).
func externalScheme(r *http.Request, port string) string {
	if port == "443" || r.URL.Scheme == "https" {
		return "https"
	}
	return "http"
}

// PeerRoute returns the route to peer: its URL and the hop limit of the
// edge to it (Parts.Peers).
func (rs *resolver) PeerRoute(peer string) (target *url.URL, maxHops int, ok bool) {
	p, ok := rs.peers[peer]
	return p.url, p.maxHops, ok
}

func (rs *resolver) allowed(hostport string) bool {
	if rs.exact[hostport] {
		return true
	}
	for _, s := range rs.suffixes {
		if strings.HasSuffix(hostport, s) && len(hostport) > len(s) {
			return true
		}
	}
	return false
}

// splitHost lowercases host and splits off its port; the name loses a
// trailing dot and IPv6 brackets.
func splitHost(host string) (name, port string) {
	host = strings.ToLower(strings.TrimSpace(host))
	split := false
	// Without a colon there is no port, and SplitHostPort would only
	// allocate the error saying so.
	if strings.Contains(host, ":") {
		if h, p, err := net.SplitHostPort(host); err == nil {
			host, port, split = h, p, true
		}
	}
	if !split {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	return strings.TrimSuffix(host, "."), port
}
