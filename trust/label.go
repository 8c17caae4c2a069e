package trust

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// HeaderTrust carries a handoff's untrusted-content labels from the sending
// Baton to the receiving one. It is one of the signed components, so a label
// cannot be dropped or forged on the way:
//
//	Baton-Trust: untrusted=("/artifacts/0/content";src="https://news.example/a" "";src="peer:planner"), unscanned
//
// untrusted lists the JSON pointers (RFC 6901; "" is the whole body) of the
// untrusted spans, each with its sources (space-separated) in src; the
// boolean unscanned says part of the body was too large or streamed to be
// fingerprinted. Bytes outside printable ASCII, '%' and ' ' inside a pointer
// or source are percent-encoded.
const HeaderTrust = "Baton-Trust"

// SpanLabel marks one span of a body as untrusted: Pointer is its JSON pointer
// ("" for the whole body), Sources where its text came from (a URL, or
// "peer:NAME" for a peer whose content is untrusted as a whole).
type SpanLabel struct {
	Pointer string   `json:"pointer"`
	Sources []string `json:"sources"`
}

// Labels is a body's set of labels, kept sorted by pointer.
type Labels struct {
	Spans     []SpanLabel
	Unscanned bool
}

// Empty reports that there is nothing to say.
func (l Labels) Empty() bool { return len(l.Spans) == 0 && !l.Unscanned }

// Add labels pointer with sources, merging with a label already there.
func (l *Labels) Add(pointer string, sources ...string) {
	i, found := slices.BinarySearchFunc(l.Spans, pointer, func(s SpanLabel, p string) int { return strings.Compare(s.Pointer, p) })
	if !found {
		l.Spans = slices.Insert(l.Spans, i, SpanLabel{Pointer: pointer})
	}
	for _, s := range sources {
		if s != "" && !slices.Contains(l.Spans[i].Sources, s) {
			l.Spans[i].Sources = append(l.Spans[i].Sources, s)
		}
	}
}

// Find returns the label of pointer or of a span that contains it (a label on
// "/artifacts/0" covers "/artifacts/0/content"; "" covers everything).
func (l Labels) Find(pointer string) (SpanLabel, bool) {
	for _, s := range l.Spans {
		if s.Pointer == pointer || s.Pointer == "" || strings.HasPrefix(pointer, s.Pointer+"/") {
			return s, true
		}
	}
	return SpanLabel{}, false
}

// Sources returns every source named, sorted, once each.
func (l Labels) Sources() []string {
	var out []string
	for _, s := range l.Spans {
		out = append(out, s.Sources...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// String renders the header value (empty when there is nothing to say).
func (l Labels) String() string {
	// Rendered on the stack: the string is the one allocation of a usual
	// value (a span or two, a source each).
	var buf [256]byte
	b := buf[:0]
	if len(l.Spans) > 0 {
		b = append(b, "untrusted=("...)
		for i, s := range l.Spans {
			if i > 0 {
				b = append(b, ' ')
			}
			b = appendSFString(b, escapeLabel(s.Pointer))
			if len(s.Sources) > 0 {
				// One string of the sources, space-separated.
				b = append(b, ";src=\""...)
				for j, v := range s.Sources {
					if j > 0 {
						b = append(b, ' ')
					}
					b = appendSFChars(b, escapeLabel(v))
				}
				b = append(b, '"')
			}
		}
		b = append(b, ')')
	}
	if l.Unscanned {
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, "unscanned"...)
	}
	return string(b)
}

// ErrLabels wraps every Baton-Trust parse error.
var ErrLabels = errors.New("malformed " + HeaderTrust)

// ParseLabels reads a header value written by Labels.String. Unknown
// dictionary members are ignored (a newer Baton may say more).
func ParseLabels(v string) (Labels, error) {
	var l Labels
	if strings.TrimSpace(v) == "" {
		return l, nil
	}
	members, err := parseDictionary(v)
	if err != nil {
		return l, fmt.Errorf("%w: %v", ErrLabels, err)
	}
	for _, m := range members {
		switch m.key {
		case "unscanned":
			l.Unscanned = m.item.val.kind == sfBoolean && m.item.val.num != 0
		case "untrusted":
			if !m.inner {
				return Labels{}, fmt.Errorf("%w: untrusted must be an inner list", ErrLabels)
			}
			for _, it := range m.list {
				if it.val.kind != sfString {
					return Labels{}, fmt.Errorf("%w: untrusted lists JSON pointers as strings", ErrLabels)
				}
				ptr, err := url.PathUnescape(it.val.str)
				if err != nil || (ptr != "" && ptr[0] != '/') {
					return Labels{}, fmt.Errorf("%w: %q is not a JSON pointer", ErrLabels, it.val.str)
				}
				var sources []string
				for _, p := range it.params {
					if p.key != "src" {
						continue
					}
					if p.val.kind != sfString {
						return Labels{}, fmt.Errorf("%w: src must be a string", ErrLabels)
					}
					for _, s := range strings.Fields(p.val.str) {
						d, err := url.PathUnescape(s)
						if err != nil {
							return Labels{}, fmt.Errorf("%w: source %q: %v", ErrLabels, s, err)
						}
						sources = append(sources, d)
					}
				}
				l.Add(ptr, sources...)
			}
		}
	}
	return l, nil
}

// escapeLabel percent-encodes what an sf-string cannot hold, '%' and the
// space that separates sources.
func escapeLabel(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
