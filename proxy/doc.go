// Package proxy is Baton's request path: the egress, ingress and admin
// listeners; destination resolution (a peer, an external host, or nothing:
// no open proxy); correlation's registry of the handlings in flight, so
// that an agent's calls are tied to the handoff it is handling; the
// middleware chains of both sides; an outbound edge's path, top to bottom
// (the record and checkpoint, the tries through the peer's breaker, the
// verdict on each, the dead letter of what failed); the shared transport;
// transparent interception's listeners; and the one place that maps errors
// to statuses.
//
// It owns nothing a capability does. The capabilities (dead letters,
// compensation, approvals, the console, the call journal, broadcast,
// context by reference, MCP sessions) plug into it through Plugins and
// reach it through Parts (plugins.go); package sidecar assembles them. It
// uses middleware, handoff, handoff/record, state, trust, config, problem
// and records; it never imports a capability (docs/architecture.md).
package proxy
