package config

import (
	"fmt"
	"path"
)

// MCP is an edge's Model Context Protocol policy (docs/mcp.md): the edge's
// POSTs are MCP messages, and AllowTools and DenyTools bound the tools it
// may call, by name or glob ("search_*"). A denied tool wins over an
// allowed one; with no allow list every tool not denied is allowed.
type MCP struct {
	AllowTools []string `yaml:"allow_tools"`
	DenyTools  []string `yaml:"deny_tools"`
	// UntrustedResults takes the results of the edge's tool calls as
	// untrusted content (a server whose tools fetch the web): labelled, and
	// followed into later handoffs. Outbound edges only.
	UntrustedResults bool `yaml:"untrusted_results"`
}

func (c *Config) validateMCP(bad badFunc) {
	for i, e := range c.Edges {
		if e.MCP == nil {
			continue
		}
		if e.MCP.UntrustedResults && e.From != "" {
			bad(fmt.Sprintf("edges[%d].mcp.untrusted_results", i), nil, "applies to outbound edges (to) only: the calling agent's Baton receives the results")
		}
		for _, list := range []struct {
			field string
			globs []string
		}{{"allow_tools", e.MCP.AllowTools}, {"deny_tools", e.MCP.DenyTools}} {
			for k, g := range list.globs {
				if _, err := path.Match(g, ""); err != nil || g == "" {
					bad(fmt.Sprintf("edges[%d].mcp.%s[%d]", i, list.field, k), g, "must be a tool name or a glob like search_*")
				}
			}
		}
	}
}
