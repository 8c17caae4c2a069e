// Package tlsintercept is what Baton needs to terminate an agent's TLS to a
// listed destination (docs/tls-interception.md), so that the calls inside
// go through the egress chain as plain-HTTP calls do. It owns:
//
//   - Hosts: the destinations intercepted, host:port entries written as in
//     external.allow (hosts.go); nothing else is;
//   - the CA: made in memory at start, or loaded from a Secret's PEM files;
//     its key stays in memory, is never written, logged or formatted
//     (ca.go);
//   - the bundle the agent trusts: the CA's certificate and the system
//     roots, published atomically to a file (bundle.go);
//   - leaves: minted on demand for listed names only, ECDSA P-256,
//     short-lived, cached (bounded) and minted once however many
//     handshakes ask at once (minter.go);
//   - the server side of an intercepted connection: a tls.Config per
//     destination, or one whose GetCertificate reads the destination from
//     the handshake's context (server.go);
//   - the metrics baton.tls.intercept.certificates.minted,
//     baton.tls.intercept.certificate.cache and
//     baton.tls.intercept.mint.duration (metrics.go), and
//     baton.tls.intercept.handshakes.refused (interceptor.go);
//   - Interceptor, what the egress asks (proxy.TLSInterceptor): whether to
//     terminate a connection (Listed), the configuration that answers its
//     handshake (ServerConfig), and the agents that refused the
//     certificate (Refused). New makes it from the config and publishes
//     the bundle where the agent's environment points. It keeps
//
// nothing in the store: the CA and its leaves live and die with the
// process. It uses config and state (the bounded FIFO its leaves and
// configurations are kept in).
package tlsintercept
