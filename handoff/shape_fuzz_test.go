package handoff

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
)

// FuzzApplyFields checks the tape-based rewrite against encoding/json:
// dropping the members a pointer names from any JSON object envelope must
// give JSON that decodes to the decoded input with those members removed
// (the protected ones kept), and the pointers reported must be the ones
// removed.
func FuzzApplyFields(f *testing.F) {
	seedEnvelopes(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var want any
		if json.Unmarshal(body, &want) != nil {
			return
		}
		if _, ok := want.(map[string]any); !ok {
			return
		}
		for _, ptr := range []string{"/completed/*/evidence", "/*", "/provenance", "/artifacts/0", "/task/id", "/*/*"} {
			out, dropped := ApplyFields(MediaType, body, FieldPolicy{Drop: []string{ptr}}, FieldPolicy{})
			var got any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("drop %s: not JSON: %v\n%s", ptr, err, out)
			}
			var ref any
			_ = json.Unmarshal(body, &ref)
			var removed []string
			ref = dropRef(ref, parsePointers([]string{ptr})[0], nil, &removed)
			if !reflect.DeepEqual(got, ref) {
				t.Fatalf("drop %s:\n got %v\nwant %v", ptr, got, ref)
			}
			if len(removed) != len(dropped) {
				t.Fatalf("drop %s: reported %q, removed %q", ptr, dropped, removed)
			}
		}
	})
}

// dropRef returns v without what ptr names (the protected members kept),
// built from encoding/json values, and adds the pointers removed to
// removed.
func dropRef(v any, ptr, path []string, removed *[]string) any {
	if len(ptr) == 0 {
		return v
	}
	last := len(ptr) == 1
	match := func(tok string) bool { return ptr[0] == "*" || ptr[0] == tok }
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for name, child := range x {
			p := append(append([]string(nil), path...), name)
			switch {
			case !match(name):
				out[name] = child
			case last && !isProtected(p, protectedEnvelope):
				*removed = append(*removed, pointerOf(p))
			case last:
				out[name] = child
			default:
				out[name] = dropRef(child, ptr[1:], p, removed)
			}
		}
		return out
	case []any:
		out := []any{}
		for i, child := range x {
			tok := strconv.Itoa(i)
			p := append(append([]string(nil), path...), tok)
			switch {
			case !match(tok):
				out = append(out, child)
			case last && !isProtected(p, protectedEnvelope):
				*removed = append(*removed, pointerOf(p))
			case last:
				out = append(out, child)
			default:
				out = append(out, dropRef(child, ptr[1:], p, removed))
			}
		}
		return out
	}
	return v
}
