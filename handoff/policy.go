package handoff

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Mode is what an edge does with the envelope contract.
type Mode uint8

// The contract modes. The zero Mode is Off.
const (
	Off     Mode = iota // the envelope is neither checked nor stamped
	Observe             // checked; violations are reported (Baton-Contract header, metrics, records), never refused
	Enforce             // checked; a handoff with violations is refused with 422
)

func (m Mode) String() string {
	switch m {
	case Observe:
		return "observe"
	case Enforce:
		return "enforce"
	default:
		return "off"
	}
}

// ParseMode parses "off", "observe" or "enforce"; "" is Off.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "off":
		return Off, nil
	case "observe":
		return Observe, nil
	case "enforce":
		return Enforce, nil
	}
	return Off, fmt.Errorf("contract mode %q: must be off, observe or enforce", s)
}

// Policy is the envelope contract of one edge.
type Policy struct {
	Mode Mode
	// Require lists what must be present beyond the schema's own required
	// members: top-level member names ("open_questions") or JSON pointers
	// into the envelope ("/task/scope", "/completed/0/evidence").
	Require []string
	// MinCompleteness is the lowest completeness accepted, 0 to 1; 0 accepts
	// any.
	MinCompleteness float64
	// MaxBytes caps the size of the envelope (not of the whole body); 0 means
	// no cap.
	MaxBytes int
}

// Validate reports every problem with p, each naming the field, the bad value
// and what is expected.
func (p Policy) Validate() error {
	var errs []error
	if p.Mode > Enforce {
		errs = append(errs, fmt.Errorf("mode: must be off, observe or enforce, got %d", p.Mode))
	}
	for i, r := range p.Require {
		if err := checkRequire(r); err != nil {
			errs = append(errs, fmt.Errorf("require[%d]: %q: %w", i, r, err))
		}
	}
	if !(p.MinCompleteness >= 0 && p.MinCompleteness <= 1) {
		errs = append(errs, fmt.Errorf("min_completeness: must be between 0 and 1, got %v", p.MinCompleteness))
	}
	if p.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("max_bytes: must be >= 0 (0: no cap), got %d", p.MaxBytes))
	}
	return errors.Join(errs...)
}

func checkRequire(r string) error {
	switch {
	case r == "":
		return errors.New("must be a member name like open_questions or a JSON pointer like /task/scope")
	case r[0] != '/':
		return nil // a top-level member name, taken literally
	}
	for i := 0; i < len(r); i++ {
		if r[i] == '~' && (i+1 == len(r) || (r[i+1] != '0' && r[i+1] != '1')) {
			return errors.New(`in a JSON pointer "~" must be followed by 0 or 1 (~0 is "~", ~1 is "/")`)
		}
	}
	return nil
}

// requirePointer turns a Require entry into a JSON pointer.
func requirePointer(r string) string {
	if strings.HasPrefix(r, "/") {
		return r
	}
	return "/" + escapeToken(r)
}

// escapeToken escapes one JSON pointer reference token (RFC 6901).
func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// resolve reports whether the JSON pointer ptr names a value inside value
// at of t. An ill-formed pointer names nothing.
func resolve(t *tape, at int, ptr string) bool {
	for ptr != "" {
		if ptr[0] != '/' {
			return false
		}
		ptr = ptr[1:]
		tok := ptr
		if i := strings.IndexByte(ptr, '/'); i >= 0 {
			tok, ptr = ptr[:i], ptr[i:]
		} else {
			ptr = ""
		}
		if strings.IndexByte(tok, '~') >= 0 {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		}
		switch t.kind(at) {
		case '{':
			at = t.member(at, tok)
		case '[':
			idx, err := strconv.Atoi(tok)
			if err != nil || idx < 0 || tok[0] == '+' || (len(tok) > 1 && tok[0] == '0') {
				return false
			}
			k, end := t.first(at)
			for ; k < end && idx > 0; idx-- {
				k = t.after(k)
			}
			at = -1
			if k < end {
				at = k
			}
		default:
			return false
		}
		if at < 0 {
			return false
		}
	}
	return true
}
