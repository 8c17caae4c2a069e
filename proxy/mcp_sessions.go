package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/state"
)

// mcpSessionTTL is how long Baton remembers who opened an MCP session.
const mcpSessionTTL = 24 * time.Hour

// mcpSessions remembers, for the MCP server this Baton fronts, which agent
// opened each session: a session id the server gives in answer to a request
// that carried none is bound to the request's sender, in the process and in
// the store (so that replicas agree). middleware.MCP refuses a request that
// names another agent's session (docs/mcp.md).
type mcpSessions struct {
	agent string
	store state.Store
	log   *slog.Logger
	known *state.FIFO[string]
}

func newMCPSessions(agent string, store state.Store, log *slog.Logger) *mcpSessions {
	return &mcpSessions{agent: agent, store: store, log: log, known: state.NewFIFO[string](1<<16, mcpSessionTTL)}
}

func (s *mcpSessions) key(sid string) string { return "mcp/session/" + s.agent + "/" + sid }

// Owner implements middleware.MCPSessions.
func (s *mcpSessions) Owner(ctx context.Context, sid string) (string, error) {
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

// bind notes the session an answer opened: one that names a session its
// request did not.
func (s *mcpSessions) bind(resp *http.Response) {
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
	if _, _, err := s.store.Claim(ctx, s.key(sid), []byte(in.From), mcpSessionTTL); err != nil {
		s.log.Warn("mcp: session owner not stored; other replicas will not know it", "agent", in.From, "error", err.Error())
	}
}
