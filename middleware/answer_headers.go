package middleware

// Headers a Baton sets on the answers its agent gets.
const (
	// HeaderDeadLetter names, on an answer to an agent, the dead letter
	// where its handoff's chain stopped: the handoff itself, dead-lettered
	// after its tries, or a handoff further down the chain (retry
	// pushback).
	HeaderDeadLetter = "Baton-Dead-Letter"
	// HeaderApproval names, on the 202 answer to a handoff a confirmation
	// gate held, the held record and its state.
	HeaderApproval = "Baton-Approval"
)
