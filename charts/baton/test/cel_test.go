package test

import (
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestMatchConditions compiles the webhooks' CEL match conditions and runs
// them on pods, as the API server does before it calls the webhook.
func TestMatchConditions(t *testing.T) {
	t.Parallel()
	r := render(t, loadChart(t), nil)
	mwc := r.find(t, "MutatingWebhookConfiguration", injectorName, "").(*admissionregistrationv1.MutatingWebhookConfiguration)
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	pod := func(annotations map[string]any) map[string]any {
		md := map[string]any{"name": "p"}
		if annotations != nil {
			md["annotations"] = annotations
		}
		return map[string]any{"metadata": md}
	}
	cases := []struct {
		name string
		pod  map[string]any
		want map[string]bool // webhook → called
	}{
		{"no annotations", pod(nil), map[string]bool{"pod.inject.baton.dev": false, "namespace.inject.baton.dev": true}},
		{"other annotations", pod(map[string]any{"a": "b"}), map[string]bool{"pod.inject.baton.dev": false, "namespace.inject.baton.dev": true}},
		{"opted in", pod(map[string]any{"baton.dev/inject": "true"}), map[string]bool{"pod.inject.baton.dev": true, "namespace.inject.baton.dev": true}},
		{"a bad value, for the webhook to refuse", pod(map[string]any{"baton.dev/inject": "yes"}), map[string]bool{"pod.inject.baton.dev": true, "namespace.inject.baton.dev": true}},
		{"opted out", pod(map[string]any{"baton.dev/inject": "false"}), map[string]bool{"pod.inject.baton.dev": true, "namespace.inject.baton.dev": false}},
	}
	for _, w := range mwc.Webhooks {
		if len(w.MatchConditions) == 0 {
			t.Fatalf("%s has no match conditions", w.Name)
		}
		var progs []cel.Program
		for _, mc := range w.MatchConditions {
			ast, iss := env.Compile(mc.Expression)
			if iss.Err() != nil {
				t.Fatalf("%s %s: %v", w.Name, mc.Name, iss.Err())
			}
			if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
				t.Fatalf("%s %s: type %v, want bool", w.Name, mc.Name, ast.OutputType())
			}
			p, err := env.Program(ast)
			if err != nil {
				t.Fatal(err)
			}
			progs = append(progs, p)
		}
		for _, tc := range cases {
			called := true
			for _, p := range progs {
				out, _, err := p.Eval(map[string]any{"object": tc.pod})
				if err != nil {
					t.Fatalf("%s on %s: %v", w.Name, tc.name, err)
				}
				if out.Value() != true {
					called = false
				}
			}
			if called != tc.want[w.Name] {
				t.Errorf("%s on a pod with %s: called %v, want %v", w.Name, tc.name, called, tc.want[w.Name])
			}
		}
	}
}
