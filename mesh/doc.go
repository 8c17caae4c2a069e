// Package mesh is the Batons that share a store, as each announces itself
// (docs/console.md): its agent, version, addresses, start, last sign of
// life and TLS identity, its outbound edges' figures over the last minute
// (rate, error share, p99, breaker state) and latest traces, and its
// agent's model APIs' (calls, failures, tokens, cost; the busiest
// MaxModelAPIs). Each Baton writes its announcement every AnnounceEvery
// with an expiry of three times that, so a Baton that stops drops out
// within Expiry; List reads them all, and Layout draws the agents as a
// graph, by the depth at which they receive handoffs, with a node per
// external destination they fetch from (MaxExternal per agent; the rest as
// one, other external); a model API's node says so, with its tokens a
// minute and error share summed over the Batons that call it (models.go).
// Draw places each edge's labels on its own path where they cover no other
// label and no node.
//
// It owns the store keys mesh/batons (an index by last sign of life) and
// mesh/baton/ID. It uses state, edgehealth (the figures, read from the
// Baton's own metrics) and handoff/record (the traces its edges' handoffs
// were on, as the edges answer them); the console shows what it lists.
package mesh
