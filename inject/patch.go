package inject

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Op is one RFC 6902 JSON Patch operation: add, replace or remove.
type Op struct {
	Op    string
	Path  string
	Value any
}

// MarshalJSON writes the operation; add and replace always carry a value,
// null included.
func (o Op) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	return json.Marshal(struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}{o.Op, o.Path, o.Value})
}

// diff returns the JSON Patch that turns before into after, both values
// marshalled to JSON the same way, under the pointer prefix. It descends
// into objects, and into arrays of equal length; an array that only grew at
// either end gets one add per new element, one that grew at the end and
// changed before it the changes and the adds; any other changed array or
// value is replaced whole. Object keys are visited in sorted order, so the patch
// is the same on every run.
func diff(prefix string, before, after any) ([]Op, error) {
	a, err := normalize(before)
	if err != nil {
		return nil, err
	}
	b, err := normalize(after)
	if err != nil {
		return nil, err
	}
	var ops []Op
	diffValue(prefix, a, b, &ops)
	return ops, nil
}

// normalize turns v into the plain maps, slices and scalars that
// encoding/json decodes to.
func normalize(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("inject: encoding: %w", err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("inject: decoding: %w", err)
	}
	return out, nil
}

func diffValue(path string, a, b any, ops *[]Op) {
	if reflect.DeepEqual(a, b) {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			diffObject(path, av, bv, ops)
			return
		}
	case []any:
		if bv, ok := b.([]any); ok {
			diffArray(path, av, bv, ops)
			return
		}
	}
	*ops = append(*ops, Op{Op: "replace", Path: path, Value: b})
}

func diffObject(path string, a, b map[string]any, ops *[]Op) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range b {
		keys = append(keys, k)
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := path + "/" + escape(k)
		av, inA := a[k]
		bv, inB := b[k]
		switch {
		case !inA:
			*ops = append(*ops, Op{Op: "add", Path: p, Value: bv})
		case !inB:
			*ops = append(*ops, Op{Op: "remove", Path: p})
		default:
			diffValue(p, av, bv, ops)
		}
	}
}

func diffArray(path string, a, b []any, ops *[]Op) {
	switch n := len(b) - len(a); {
	case n == 0:
		for i := range a {
			diffValue(path+"/"+strconv.Itoa(i), a[i], b[i], ops)
		}
	case n > 0 && reflect.DeepEqual(a, b[:len(a)]):
		for i := len(a); i < len(b); i++ {
			*ops = append(*ops, Op{Op: "add", Path: path + "/" + strconv.Itoa(i), Value: b[i]})
		}
	case n > 0 && reflect.DeepEqual(a, b[n:]):
		// Inserted in front: each add at index i shifts what follows.
		for i := 0; i < n; i++ {
			*ops = append(*ops, Op{Op: "add", Path: path + "/" + strconv.Itoa(i), Value: b[i]})
		}
	case n > 0:
		// Changed in place and grown at the end (a variable added to, and
		// more appended): the changes, then the adds.
		for i := range a {
			diffValue(path+"/"+strconv.Itoa(i), a[i], b[i], ops)
		}
		for i := len(a); i < len(b); i++ {
			*ops = append(*ops, Op{Op: "add", Path: path + "/" + strconv.Itoa(i), Value: b[i]})
		}
	default:
		*ops = append(*ops, Op{Op: "replace", Path: path, Value: b})
	}
}

// escape encodes a key as a JSON Pointer reference token (RFC 6901).
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
