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
