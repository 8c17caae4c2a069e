package middleware

// Baton-Refused marks an answer a receiving Baton gave instead of its agent,
// before the agent saw anything: its store did not answer (503), the same
// handoff is still running (409), the agent could not be reached at all
// (502). Such an answer is the only one a sending Baton retries on its own
// (apart from a connection that was never opened): another try cannot run
// the agent twice. An agent's own answers never carry it: the receiving
// Baton removes the header from what its agent answers (proxy's
// ingressAnswer), so an agent cannot make its failure look retryable.

import (
	"net/http"

	"github.com/batonproxy/baton/problem"
)

// HeaderRefused names, on a receiving Baton's own answer, the problem it
// refused the handoff with before its agent saw it.
const HeaderRefused = "Baton-Refused"

// MarkRefused marks the answer about to be written to w as a refusal of
// class c that the agent never saw.
func MarkRefused(w http.ResponseWriter, c problem.Class) {
	w.Header().Set(HeaderRefused, string(c))
}
