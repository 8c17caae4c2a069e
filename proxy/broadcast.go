package proxy

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/problem"
)

// A broadcast is one handoff to several agents (docs/broadcast.md): the
// agent sends one request to a group (Host: <group>, groups in config) or
// to the peers a Baton-Broadcast header lists, and its Baton sends it to each
// member as a handoff of its own, with its own key (derived from the
// broadcast's key and the member), record, retries, breaker and dead letter.
// The agent gets one answer: every member's status and body in one JSON
// document.
const (
	HeaderBroadcast     = "Baton-Broadcast"
	HeaderBroadcastMode = "Baton-Broadcast-Mode"
)

// adHocGroup is the edge name of a broadcast to a Baton-Broadcast list:
// one name for all of them, so that metrics and positions stay bounded.
const adHocGroup = "broadcast"

// broadcastSpec is a resolved broadcast: its group's name and settings.
type broadcastSpec struct {
	name string
	config.Group
}

type broadcastKey struct{}

// groupSpecs names the configured groups.
func groupSpecs(c *config.Config) map[string]*broadcastSpec {
	out := make(map[string]*broadcastSpec, len(c.Groups))
	for name, g := range c.Groups {
		out[name] = &broadcastSpec{name: name, Group: g}
	}
	return out
}

// needed is how many members must answer 2xx for the broadcast's mode.
func (g *broadcastSpec) needed() int {
	switch g.Mode {
	case config.BroadcastAny:
		return 1
	case config.BroadcastQuorum:
		return g.Quorum
	}
	return len(g.Members)
}

// toGroup routes a handoff to a broadcast: the edge is the group (its
// positional key is the broadcast's), and the hop limit the strictest of
// its members'.
func (rs *resolver) toGroup(w http.ResponseWriter, r *http.Request, in *middleware.Info, g *broadcastSpec, next http.Handler) {
	in.From, in.To, in.Target, in.MaxHops = rs.agent, g.name, nil, 0
	for _, m := range g.Members {
		if p := rs.peers[m]; in.MaxHops == 0 || p.maxHops < in.MaxHops {
			in.MaxHops = p.maxHops
		}
	}
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), broadcastKey{}, g)))
}

// adHocBroadcast routes a request with a Baton-Broadcast list: a broadcast
// to those peers whatever its Host, in the mode Baton-Broadcast-Mode names
// (all, any or quorum=N; all by default), within the default deadline.
func (rs *resolver) adHocBroadcast(w http.ResponseWriter, r *http.Request, in *middleware.Info, next http.Handler) {
	g := &broadcastSpec{name: adHocGroup, Group: config.Group{Mode: config.BroadcastAll, Deadline: config.Duration(config.DefaultBroadcastDeadline)}}
	for _, v := range r.Header[HeaderBroadcast] {
		for m := range strings.SplitSeq(v, ",") {
			m = strings.ToLower(strings.TrimSpace(m))
			switch _, peer := rs.peers[m]; {
			case m == "":
				problem.Write(w, r, problem.BadRequest, HeaderBroadcast+" has an empty member; want a comma-separated list of peers")
				return
			case !peer:
				in.PolicyDenial = middleware.DenialUnknownDestination
				problem.New(r, problem.UnknownDestination, HeaderBroadcast+" names "+m+", which is not a configured peer").
					With("destination", m).Write(w)
				return
			case slices.Contains(g.Members, m):
				problem.Write(w, r, problem.BadRequest, HeaderBroadcast+" lists "+m+" twice")
				return
			}
			g.Members = append(g.Members, m)
		}
	}
	if len(g.Members) > config.MaxGroupMembers {
		problem.Write(w, r, problem.BadRequest, HeaderBroadcast+" lists "+strconv.Itoa(len(g.Members))+
			" peers; at most "+strconv.Itoa(config.MaxGroupMembers))
		return
	}
	if err := g.parseMode(r.Header.Get(HeaderBroadcastMode)); err != nil {
		problem.Write(w, r, problem.BadRequest, err.Error())
		return
	}
	r.Header.Del(HeaderBroadcast)
	r.Header.Del(HeaderBroadcastMode)
	rs.toGroup(w, r, in, g, next)
}

// parseMode reads Baton-Broadcast-Mode: all, any or quorum=N.
func (g *broadcastSpec) parseMode(v string) error {
	v = strings.TrimSpace(v)
	switch {
	case v == "" || v == config.BroadcastAll:
		g.Mode = config.BroadcastAll
	case v == config.BroadcastAny:
		g.Mode = config.BroadcastAny
	case strings.HasPrefix(v, config.BroadcastQuorum+"="):
		n, err := strconv.Atoi(v[len(config.BroadcastQuorum)+1:])
		if err != nil || n < 1 || n > len(g.Members) {
			return errors.New(HeaderBroadcastMode + ": quorum must be between 1 and the " + strconv.Itoa(len(g.Members)) + " members, got " + strconv.Quote(v))
		}
		g.Mode, g.Quorum = config.BroadcastQuorum, n
	default:
		return errors.New(HeaderBroadcastMode + ": want all, any or quorum=N, got " + strconv.Quote(v))
	}
	return nil
}

// broadcaster sends a broadcast's handoffs through the rest of the egress
// chain (policy, contract, labels, the edge), one per member.
type broadcaster struct {
	rs      *resolver
	maxBody int64 // bounds each member's answer kept for the document
}

// middleware fans a broadcast out; any other request passes through.
func (b *broadcaster) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, ok := r.Context().Value(broadcastKey{}).(*broadcastSpec)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		in := middleware.InfoFromContext(r.Context())
		if !middleware.Buffer(w, r, in) { // every member is sent the whole body
			return
		}
		b.answer(w, r, in, g, b.start(r, in, g, next).wait())
	})
}
