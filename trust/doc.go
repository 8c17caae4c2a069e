// Package trust holds what decides whom Baton trusts: the guard on the
// addresses egress may dial, identity keys and trust bundles, HTTP message
// signatures between Batons, bounded grants and edge policy. Everything here
// is pure or nearly so (LoadKey reads a file); nothing imports config, the
// store or the proxy, so the lead wires it and tests run without a network.
//
// # Identity
//
// A Baton signs with one Ed25519 Key named by a key id (LoadKey, ParseKey;
// `baton keygen` makes one). A Key prints, logs and marshals as its id and
// public key only. Peers list public keys in a Bundle: agent name → keys, so
// that a key rotates without downtime (add the new key to every peer's
// bundle, switch the Baton to it, then drop the old one). A public key is
// written as "KEYID BASE64URL": unpadded base64url of the raw 32 bytes.
//
// # Signatures
//
// Signer and Verifier implement the subset of RFC 9421 that Baton needs:
// Ed25519, label "baton", parameters created, keyid, nonce and
// alg="ed25519", and the derived components @method, @authority, @path and
// @query plus header fields (no component parameters such as ;sf or ;req).
// Content-Digest (RFC 9530, sha-256 sent; sha-256 and sha-512 checked)
// binds the body. The signature base follows §2.5 exactly; the RFC's own
// Ed25519 example (Appendix B.2.6) is a test. The coverage rule, which the
// verifier enforces whatever the signer chose:
//
//	always:            @method @authority @path @query content-digest
//	                   baton-agent baton-hop traceparent
//	when on a request: every other Baton-* field, and idempotency-key
//
// A refusal is a *SignatureError whose Reason (missing, malformed,
// unknown_key, bad_signature, digest_mismatch, expired, future,
// agent_mismatch, uncovered) is stable for metrics and problem types.
//
// Replay: Verify does not remember nonces. The caller must refuse a
// (KeyID, Nonce) it has seen and store it until Verified.NonceUntil, after
// which the signature is refused as expired anyway. Since a replayed nonce is
// refused, a retry must be signed again (Sign per attempt, innermost in the
// transport), and so must a dead letter replayed later.
//
// Both ends must describe the request alike (see Message and
// RequestMessage): at egress the request exactly as the transport will send
// it, after every header change (trace propagation included), with the
// authority the client will put in Host; at ingress the request as received,
// before any middleware changes it, with r.Host. A proxy between two Batons
// that rewrites Host, the path or the query breaks the signature.
//
// # Grants and edge policy
//
// A Grant (Baton-Grant: base64url JSON) bounds what the rest of a chain may
// do. Intersect narrows it at each hop and never widens it; a nil *Grant
// means none was received, and then the configuration alone decides.
// Policy answers, per edge, whether a handoff may pass and with which
// Posture (trusted, evaluate, untrusted) its content is treated.
//
// # Callers that run no Baton
//
// Callers names a caller that sends no Baton-Agent and no signature by the
// first inbound edge with callers it matches: its source network, then a
// bearer token (compared in constant time) or a JWT (RS256, ES256 or
// EdDSA, checked with github.com/golang-jwt/jwt/v5 against a JWK Set that
// ParseJWKS reads with the standard library, from a JWKSFile or a
// JWKSURL), or none. The edge's Policy rule admits only such a Caller, and
// gives an anonymous one the untrusted posture unless configured.
//
// It uses config and state; the request path and the capabilities use it.
package trust
