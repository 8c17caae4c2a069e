package middleware

// The baton.handling member of W3C Baggage. The receiving Baton adds it to
// the baggage of every request it delivers to its agent, naming the
// handling (the receipt's record id); an agent instrumented with
// OpenTelemetry propagates baggage to the calls it makes while it handles
// the request, so that its Baton ties each of them to that handling
// exactly. Baton reads the member at egress and removes it from what leaves
// the pod: it names a handling only to the Baton that made it. The value is
// only ever looked up in that Baton's own handlings: a forged or stale one
// finds nothing and is ignored, and a malformed baggage header never fails a
// request.

import (
	"net/http"
	"strings"

	"github.com/batonproxy/baton/handoff/record"
)

// BaggageHandling is the baggage member that names the handling.
const BaggageHandling = "baton.handling"

// maxBaggage is the W3C Baggage limit on a header's size, in bytes.
const maxBaggage = 8192

// mentionsHandling reports whether h's baggage mentions baton.handling at
// all, well-formed or not: a call that carries one carries a signal, and is
// never tied by guesswork when the signal finds nothing.
func mentionsHandling(h http.Header) bool {
	for _, l := range h[HeaderBaggage] {
		if strings.Contains(l, BaggageHandling) {
			return true
		}
	}
	return false
}

// takeHandlingMember removes every baton.handling member from h's baggage
// and returns the handling id they name: "" when there is none, when the
// value is not a record id, or when two members name different ids.
func takeHandlingMember(h http.Header) string {
	lines := h[HeaderBaggage]
	if len(lines) == 0 {
		return ""
	}
	if !mentionsHandling(h) {
		return ""
	}
	var id string
	conflict := false
	kept := make([]string, 0, 8)
	for _, l := range lines {
		for _, m := range strings.Split(l, ",") {
			v, isOurs := handlingValue(m)
			if !isOurs {
				if strings.TrimSpace(m) != "" {
					kept = append(kept, strings.TrimSpace(m))
				}
				continue
			}
			switch {
			case id == "":
				id = v
			case id != v:
				conflict = true
			}
		}
	}
	if len(kept) == 0 {
		delete(h, HeaderBaggage)
	} else {
		h[HeaderBaggage] = []string{strings.Join(kept, ",")}
	}
	if conflict || record.TraceOf(id) == "" {
		return ""
	}
	return id
}

// handlingValue reports whether the list-member m ("key=value;props") is
// baton.handling, and its value without properties, trimmed.
func handlingValue(m string) (string, bool) {
	k, rest, ok := strings.Cut(m, "=")
	if !ok || strings.TrimSpace(k) != BaggageHandling {
		return "", false
	}
	v, _, _ := strings.Cut(rest, ";")
	return strings.TrimSpace(v), true
}

// setHandlingMember makes id the one baton.handling member of h's baggage,
// keeping the other members. When the header would pass the W3C limit it
// is left without the member (the handling is then found by its trace).
func setHandlingMember(h http.Header, id string) {
	member := BaggageHandling + "=" + id
	lines := h[HeaderBaggage]
	if len(lines) == 1 && !strings.Contains(lines[0], BaggageHandling) {
		if len(lines[0])+1+len(member) <= maxBaggage {
			h[HeaderBaggage] = []string{lines[0] + "," + member}
		}
		return
	}
	takeHandlingMember(h)
	if cur := strings.Join(h.Values(HeaderBaggage), ","); cur != "" {
		if len(cur)+1+len(member) <= maxBaggage {
			h[HeaderBaggage] = []string{cur + "," + member}
		}
		return
	}
	h[HeaderBaggage] = []string{member}
}
