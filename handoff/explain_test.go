package handoff

import (
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Keywords the v1 schema does not use still come out in words.
func TestExplainUnknownKeyword(t *testing.T) {
	t.Parallel()
	ck := check{c: newChecker(t), prefix: A2APointer}
	ck.explain(&jsonschema.ValidationError{
		SchemaURL:        SchemaID + "#/properties/memory_refs",
		InstanceLocation: []string{"memory_refs"},
		ErrorKind:        &kind.UniqueItems{Duplicates: [2]int{0, 2}},
	})
	if len(ck.out) != 1 || ck.out[0].Pointer != A2APointer+"/memory_refs" || ck.out[0].Detail != "memory_refs: items at 0 and 2 are equal" {
		t.Fatalf("%+v", ck.out)
	}
}

func TestDotted(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ ptr, want string }{
		{"", "the envelope"},
		{"/task/intent", "task.intent"},
		{"/artifacts/1/source", "artifacts[1].source"},
		{"/x~1y/a~0b", `["x/y"]["a~b"]`},
		{A2APointer + "/task", `params.message.metadata["baton.handoff"].task`},
	} {
		t.Run(tt.ptr, func(t *testing.T) {
			t.Parallel()
			if got := dotted(tt.ptr); got != tt.want {
				t.Fatalf("dotted(%q) = %q, want %q", tt.ptr, got, tt.want)
			}
		})
	}
}
