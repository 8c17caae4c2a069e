package broadcast

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

// Destination resolution (package proxy) asks Listed of every egress
// request, first, and IsGroup of a Host that names no peer; for either it
// leaves the request to Route, which resolves it as a broadcast and passes
// it on to the chain, where FanOut (run.go) sends it to the members.

type specKey struct{}

// Listed reports whether r lists the peers it goes to in Baton-Broadcast:
// a broadcast whatever its Host, or its connection's original destination.
func (b *Broadcaster) Listed(r *http.Request) bool {
	_, listed := r.Header[Header]
	return listed
}

// IsGroup reports whether name is a configured group.
func (b *Broadcaster) IsGroup(name string) bool {
	_, ok := b.groups[name]
	return ok
}

// Route resolves r as a broadcast: to group, one IsGroup reported, or,
// when group is empty, to the peers r lists (Listed). It refuses a list it
// cannot send to, or passes r on to next with its edge set in in.
func (b *Broadcaster) Route(w http.ResponseWriter, r *http.Request, in *middleware.Info, group string, next http.Handler) {
	if group == "" {
		b.adHoc(w, r, in, next)
		return
	}
	b.toGroup(w, r, in, b.groups[group], next)
}

// toGroup routes a handoff to a broadcast: the edge is the group (its
// positional key is the broadcast's), and the hop limit the strictest of
// its members'.
func (b *Broadcaster) toGroup(w http.ResponseWriter, r *http.Request, in *middleware.Info, g *spec, next http.Handler) {
	in.From, in.To, in.Target, in.MaxHops = b.agent, g.name, nil, 0
	for _, m := range g.Members {
		if _, maxHops, _ := b.peers.PeerRoute(m); in.MaxHops == 0 || maxHops < in.MaxHops {
			in.MaxHops = maxHops
		}
	}
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), specKey{}, g)))
}

// adHoc routes a request with a Baton-Broadcast list: a broadcast to those
// peers whatever its Host, in the mode Baton-Broadcast-Mode names (all, any
// or quorum=N; all by default), within the default deadline.
func (b *Broadcaster) adHoc(w http.ResponseWriter, r *http.Request, in *middleware.Info, next http.Handler) {
	g := &spec{name: adHocGroup, Group: config.Group{Mode: config.BroadcastAll, Deadline: config.Duration(config.DefaultBroadcastDeadline)}}
	for _, v := range r.Header[Header] {
		for m := range strings.SplitSeq(v, ",") {
			m = strings.ToLower(strings.TrimSpace(m))
			switch _, _, peer := b.peers.PeerRoute(m); {
			case m == "":
				problem.Write(w, r, problem.BadRequest, Header+" has an empty member; want a comma-separated list of peers")
				return
			case !peer:
				in.PolicyDenial = middleware.DenialUnknownDestination
				problem.New(r, problem.UnknownDestination, Header+" names "+m+", which is not a configured peer").
					With("destination", m).Write(w)
				return
			case slices.Contains(g.Members, m):
				problem.Write(w, r, problem.BadRequest, Header+" lists "+m+" twice")
				return
			}
			g.Members = append(g.Members, m)
		}
	}
	if len(g.Members) > config.MaxGroupMembers {
		problem.Write(w, r, problem.BadRequest, Header+" lists "+strconv.Itoa(len(g.Members))+
			" peers; at most "+strconv.Itoa(config.MaxGroupMembers))
		return
	}
	if err := g.parseMode(r.Header.Get(HeaderMode)); err != nil {
		problem.Write(w, r, problem.BadRequest, err.Error())
		return
	}
	r.Header.Del(Header)
	r.Header.Del(HeaderMode)
	b.toGroup(w, r, in, g, next)
}

// parseMode reads Baton-Broadcast-Mode: all, any or quorum=N.
func (g *spec) parseMode(v string) error {
	v = strings.TrimSpace(v)
	switch {
	case v == "" || v == config.BroadcastAll:
		g.Mode = config.BroadcastAll
	case v == config.BroadcastAny:
		g.Mode = config.BroadcastAny
	case strings.HasPrefix(v, config.BroadcastQuorum+"="):
		n, err := strconv.Atoi(v[len(config.BroadcastQuorum)+1:])
		if err != nil || n < 1 || n > len(g.Members) {
			return errors.New(HeaderMode + ": quorum must be between 1 and the " + strconv.Itoa(len(g.Members)) + " members, got " + strconv.Quote(v))
		}
		g.Mode, g.Quorum = config.BroadcastQuorum, n
	default:
		return errors.New(HeaderMode + ": want all, any or quorum=N, got " + strconv.Quote(v))
	}
	return nil
}
