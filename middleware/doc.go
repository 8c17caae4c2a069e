// Package middleware holds Baton's request middlewares, one concern per file,
// each a func(http.Handler) http.Handler built by a constructor that does its
// parsing once. The proxy package assembles them into the egress and ingress
// chains; each file's doc comment says where it must sit in the chain and how
// it fails.
//
// It owns the request's shared state (Info) and the wire contract's
// headers. It uses handoff, handoff/record, state, trust, config and
// problem; never proxy or a capability.
package middleware
