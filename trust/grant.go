package trust

// Bounded grants. A grant travels in Baton-Grant with a handoff and bounds
// what the rest of the chain may do: the peers any agent downstream may hand
// off to and the side effects it may commit. Each Baton narrows the grant it
// passes on (Intersect) and never widens it, so authority only shrinks along
// a chain.
//
// "No grant" and "an empty grant" differ, and a *Grant says which:
//   - nil: no grant was received (no Baton-Grant header). Nothing bounds the
//     agent but its own Baton's configuration. This is the first hop of a
//     chain, where the config's edge policy alone applies. Intersect treats
//     nil as "everything", so nil ∩ g = g.
//   - a Grant: exactly its lists are allowed; an empty list allows nothing.
//
// Baton-Grant is covered by the signature, so a grant cannot be dropped or
// widened between Batons without the receiver refusing the request.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// HeaderGrant carries the grant for the receiver.
const HeaderGrant = "Baton-Grant"

// Bounds of a Baton-Grant value.
const (
	MaxGrantHeaderLen = 4096 // base64url characters
	MaxGrantEntries   = 64   // per list
	maxGrantNameLen   = 128
)

// ErrGrant is wrapped by every error about a malformed grant.
var ErrGrant = errors.New("baton-grant")

// Grant is a bounded grant: who the holder (and everyone after it in the
// chain) may hand off to, and which side effects they may commit. Names are
// agent names and side-effect names such as "email.send"; matching is exact.
type Grant struct {
	MayHandoffTo []string `json:"may_handoff_to"`
	SideEffects  []string `json:"side_effects"`
}

// Allows reports whether g lets its holder hand off to peer. A nil grant
// allows everything: the configuration decides alone.
func (g *Grant) Allows(peer string) bool {
	return g == nil || slices.Contains(g.MayHandoffTo, peer)
}

// AllowsSideEffect reports whether g lets its holder commit side effect s.
// A nil grant allows everything.
func (g *Grant) AllowsSideEffect(s string) bool {
	return g == nil || slices.Contains(g.SideEffects, s)
}

// Intersect returns the grant allowing what both a and b allow: the grant to
// pass on, given the grant received (a) and the grant the configuration
// gives the edge (b). nil stands for "no grant" and bounds nothing, so
// Intersect(nil, b) is b and Intersect(nil, nil) is nil. The result shares
// no memory with a or b, keeps a's order, and has no duplicates.
func Intersect(a, b *Grant) *Grant {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		return canonical(b)
	case b == nil:
		return canonical(a)
	}
	return &Grant{
		MayHandoffTo: intersect(a.MayHandoffTo, b.MayHandoffTo),
		SideEffects:  intersect(a.SideEffects, b.SideEffects),
	}
}

func intersect(a, b []string) []string {
	out := []string{}
	for _, s := range a {
		if slices.Contains(b, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func canonical(g *Grant) *Grant {
	return &Grant{MayHandoffTo: intersect(g.MayHandoffTo, g.MayHandoffTo), SideEffects: intersect(g.SideEffects, g.SideEffects)}
}

// EncodeGrant returns the Baton-Grant value of g: unpadded base64url of its
// JSON, with both lists always present (an empty list as []) and each list
// sorted and without duplicates, so that equal grants encode equally.
func EncodeGrant(g Grant) (string, error) {
	c := Grant{MayHandoffTo: sortedSet(g.MayHandoffTo), SideEffects: sortedSet(g.SideEffects)}
	if err := c.check(); err != nil {
		return "", err
	}
	js, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrGrant, err)
	}
	s := base64.RawURLEncoding.EncodeToString(js)
	if len(s) > MaxGrantHeaderLen {
		return "", fmt.Errorf("%w: encodes to %d characters, more than %d", ErrGrant, len(s), MaxGrantHeaderLen)
	}
	return s, nil
}

func sortedSet(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return slices.Compact(out)
}

// DecodeGrant parses a Baton-Grant value strictly: at most
// MaxGrantHeaderLen characters of unpadded base64url, holding one JSON
// object with exactly the keys may_handoff_to and side_effects, each an
// array (not null) of at most MaxGrantEntries names.
func DecodeGrant(s string) (Grant, error) {
	if len(s) > MaxGrantHeaderLen {
		return Grant{}, fmt.Errorf("%w: %d characters, more than %d", ErrGrant, len(s), MaxGrantHeaderLen)
	}
	js, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return Grant{}, fmt.Errorf("%w: not unpadded base64url: %w", ErrGrant, err)
	}
	g, err := decodeGrantJSON(js)
	if err != nil {
		return Grant{}, fmt.Errorf("%w: %w", ErrGrant, err)
	}
	return g, g.check()
}

// decodeGrantJSON walks the object's tokens rather than unmarshalling it
// whole, to refuse what encoding/json lets through: a repeated key (the last
// would win), null for a list, and data after the object.
func decodeGrantJSON(js []byte) (Grant, error) {
	var g Grant
	dec := json.NewDecoder(bytes.NewReader(js))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return g, errors.New("not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return g, err
		}
		var dst *[]string
		switch k, _ := t.(string); k {
		case "may_handoff_to":
			dst = &g.MayHandoffTo
		case "side_effects":
			dst = &g.SideEffects
		default:
			return g, fmt.Errorf("unknown key %s", quoteForError(k))
		}
		if *dst != nil {
			return g, fmt.Errorf("key %v repeated", t)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return g, err
		}
		if v[0] != '[' || json.Unmarshal(v, dst) != nil {
			return g, fmt.Errorf("%v must be an array of strings", t)
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return g, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return g, errors.New("data after the JSON object")
	}
	switch {
	case g.MayHandoffTo == nil:
		return g, errors.New("may_handoff_to is missing (an empty list is [])")
	case g.SideEffects == nil:
		return g, errors.New("side_effects is missing (an empty list is [])")
	}
	return g, nil
}

// check validates the lists' sizes and names.
func (g Grant) check() error {
	for _, l := range []struct {
		key   string
		names []string
	}{{"may_handoff_to", g.MayHandoffTo}, {"side_effects", g.SideEffects}} {
		if len(l.names) > MaxGrantEntries {
			return fmt.Errorf("%w: %s has %d entries, more than %d", ErrGrant, l.key, len(l.names), MaxGrantEntries)
		}
		for i, n := range l.names {
			if err := checkGrantName(n); err != nil {
				return fmt.Errorf("%w: %s[%d]: %w", ErrGrant, l.key, i, err)
			}
		}
	}
	return nil
}

// checkGrantName accepts agent names and dotted side-effect names: 1 to 128
// of lowercase letters, digits, '.', '_', '-', ':' and '/', starting with a
// letter or digit.
func checkGrantName(n string) error {
	if n == "" || len(n) > maxGrantNameLen {
		return fmt.Errorf("name must be 1 to %d characters, got %d", maxGrantNameLen, len(n))
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if isLcalpha(c) || isDigit(c) || (i > 0 && (c == '.' || c == '_' || c == '-' || c == ':' || c == '/')) {
			continue
		}
		return fmt.Errorf("name %s: character %q not allowed", quoteForError(n), c)
	}
	return nil
}
