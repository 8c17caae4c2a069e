package inject

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

func TestDiffAppliesToAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		before, after string
		ops           int // how many operations a minimal patch has
	}{
		{"equal", `{"a":1}`, `{"a":1}`, 0},
		{"added key", `{"a":1}`, `{"a":1,"b":{"c":[1]}}`, 1},
		{"removed key", `{"a":1,"b":2}`, `{"a":1}`, 1},
		{"changed scalar", `{"a":{"b":"x"}}`, `{"a":{"b":"y"}}`, 1},
		{"null added", `{"a":1}`, `{"a":1,"n":null}`, 1},
		{"appended", `{"l":[1,2]}`, `{"l":[1,2,3,4]}`, 2},
		{"prepended", `{"l":[{"n":"app"}]}`, `{"l":[{"n":"init"},{"n":"baton"},{"n":"app"}]}`, 2},
		{"element changed in place", `{"l":[{"n":"a","e":[]},{"n":"b"}]}`, `{"l":[{"n":"a","e":[{"x":1}]},{"n":"b"}]}`, 1},
		{"changed in place and appended", `{"env":[{"n":"NODE_OPTIONS","v":"--x"},{"n":"A"}]}`,
			`{"env":[{"n":"NODE_OPTIONS","v":"--x --require y"},{"n":"A"},{"n":"B"},{"n":"C"}]}`, 3},
		{"reordered", `{"l":[1,2,3]}`, `{"l":[3,1]}`, 1},
		{"grown in the middle", `{"l":[1,2]}`, `{"l":[1,3,2]}`, 2},
		{"key needing escapes", `{"m":{}}`, `{"m":{"baton.dev/status":"injected","a~b":"c"}}`, 2},
		{"type changed", `{"a":[1]}`, `{"a":{"b":1}}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var before, after any
			if err := json.Unmarshal([]byte(tc.before), &before); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.after), &after); err != nil {
				t.Fatal(err)
			}
			ops, err := diff("", before, after)
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != tc.ops {
				t.Errorf("%d ops, want %d: %+v", len(ops), tc.ops, ops)
			}
			raw, err := json.Marshal(ops)
			if err != nil {
				t.Fatal(err)
			}
			p, err := jsonpatch.DecodePatch(raw)
			if err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
			got, err := p.Apply([]byte(tc.before))
			if err != nil {
				t.Fatalf("applying %s: %v", raw, err)
			}
			var g any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, after) {
				t.Errorf("patched %s, want %s (patch %s)", got, tc.after, raw)
			}
		})
	}
}

func TestOpMarshalKeepsNullValue(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal([]Op{{Op: "add", Path: "/a", Value: nil}, {Op: "remove", Path: "/b"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"op":"add","path":"/a","value":null},{"op":"remove","path":"/b"}]`; string(b) != want {
		t.Errorf("%s, want %s", b, want)
	}
}
