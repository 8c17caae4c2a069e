// Package mcpsession remembers, for the MCP server a Baton fronts, which
// agent opened each session: a session id the server gives in answer to a
// request that named none is bound to the request's sender, in the process
// and in the store (so that replicas agree), and middleware.MCP refuses a
// request that names another agent's session (docs/mcp.md). It owns the
// store keys mcp/session/{agent}/{id}. It uses state and middleware (the
// request's Info); it is plugged in at ingress by package sidecar.
package mcpsession

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
)

// ttl is how long Baton remembers who opened an MCP session.
const ttl = 24 * time.Hour

// Sessions remembers who opened the sessions of this agent's MCP server.
type Sessions struct {
	agent string
	store state.Store
	log   *slog.Logger
	known *state.FIFO[string]
}

// New returns the sessions of agent's MCP server, kept in store.
func New(agent string, store state.Store, log *slog.Logger) *Sessions {
	return &Sessions{agent: agent, store: store, log: log, known: state.NewFIFO[string](1<<16, ttl)}
}

func (s *Sessions) key(sid string) string { return "mcp/session/" + s.agent + "/" + sid }

// Owner implements middleware.MCPSessions.
func (s *Sessions) Owner(ctx context.Context, sid string) (string, error) {
	if owner, ok := s.known.Get(sid); ok {
		return owner, nil
	}
	v, err := s.store.Get(ctx, s.key(sid))
	if errors.Is(err, state.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	s.known.Set(sid, string(v))
	return string(v), nil
}

// Bind notes the session an answer of the agent opened: one that names a
// session its request did not.
func (s *Sessions) Bind(resp *http.Response) {
	sid := resp.Header.Get(middleware.HeaderMCPSession)
	if sid == "" || resp.Request == nil || resp.Request.Header.Get(middleware.HeaderMCPSession) != "" {
		return
	}
	in := middleware.InfoFromContext(resp.Request.Context())
	if in == nil || in.From == "" {
		return
	}
	// The first binding stands: a later answer naming the same id does not
	// move the session to another agent.
	s.known.Update(sid, func(old string, ok bool) (string, bool) {
		if ok {
			return old, true
		}
		return in.From, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, _, err := s.store.Claim(ctx, s.key(sid), []byte(in.From), ttl); err != nil {
		s.log.Warn("mcp: session owner not stored; other replicas will not know it", "agent", in.From, "error", err.Error())
	}
}
