package proxy

import (
	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
)

// mcpPolicies returns the MCP policy of each edge, outbound by peer and
// inbound by sender, looked up per request (docs/mcp.md).
func mcpPolicies(c *config.Config) (out, in func(*middleware.Info) middleware.MCPPolicy) {
	to, from := map[string]middleware.MCPPolicy{}, map[string]middleware.MCPPolicy{}
	for _, e := range c.Edges {
		if e.MCP == nil {
			continue
		}
		p := middleware.MCPPolicy{On: true, Allow: e.MCP.AllowTools, Deny: e.MCP.DenyTools}
		if e.To != "" {
			to[e.To] = p
		} else {
			from[e.From] = p
		}
	}
	return func(i *middleware.Info) middleware.MCPPolicy { return to[i.To] },
		func(i *middleware.Info) middleware.MCPPolicy { return from[i.From] }
}

// untrustedResults reports whether a request's outbound edge takes tool
// results as untrusted (edges[].mcp.untrusted_results).
func untrustedResults(c *config.Config) func(*middleware.Info) bool {
	peers := map[string]bool{}
	for _, e := range c.Edges {
		if e.To != "" && e.MCP != nil && e.MCP.UntrustedResults {
			peers[e.To] = true
		}
	}
	return func(in *middleware.Info) bool { return peers[in.To] }
}
