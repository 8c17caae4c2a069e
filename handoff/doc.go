// Package handoff is the handoff envelope contract, v1: what one agent hands
// to another besides the artifact (task and intent, constraints, completed
// work and how it was verified, open questions, rejected paths, provenance,
// side effects, failure modes, artifacts with their trust), as Go types and
// as a JSON Schema embedded in the binary.
//
// An envelope travels as the whole body (Content-Type MediaType) or inside an
// A2A JSON-RPC request at params.message.metadata["baton.handoff"]. Locate
// finds it with cheap sniffing, so other bodies stay opaque. A Checker
// validates it against the schema and an edge's Policy and reports every
// Violation with a JSON pointer and a sentence a developer can act on, along
// with its completeness and a Summary for delegation records. At egress,
// Result.Stamp writes the sender's identity, the trace id, the hop and the
// time into provenance by splicing the raw bytes: everything else, members of
// newer 1.x minors included, passes on byte for byte.
//
// The contract, the completeness formula and the modes are described in
// docs/envelope.md.
//
// It uses nothing of Baton's but handoff/tokens; every other package may
// use it.
package handoff
