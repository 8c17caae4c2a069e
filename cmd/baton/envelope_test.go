package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonproxy/baton/handoff"
)

func writeEnvelope(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEnvelopeCommand(t *testing.T) {
	t.Parallel()
	example := string(handoff.Example())
	good := writeEnvelope(t, "good.json", example)
	a2a := writeEnvelope(t, "a2a.json", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","parts":[],"metadata":{"baton.handoff":`+example+`}}}}`)
	bad := writeEnvelope(t, "bad.json", `{"schema_version":"1.0.0","task":{"id":"t"},"confidence":2}`)
	badA2A := writeEnvelope(t, "bad-a2a.json", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"baton.handoff":{"schema_version":"2.0.0"}}}}}`)
	minimal := writeEnvelope(t, "minimal.json", `{"schema_version":"1.0.0","task":{"id":"t","intent":"i"},"open_questions":[]}`)
	tests := []struct {
		name     string
		args     []string
		wantErr  string // substring of the error; "" for success
		wantCode int
		wantOut  []string
	}{
		{name: "example", args: []string{"example"}, wantOut: []string{`"schema_version": "1.0.0"`}},
		{name: "validate a bare envelope", args: []string{"validate", good}, wantOut: []string{good + ": ok (body, schema_version 1.0.0, completeness 1.00)"}},
		{name: "validate an A2A request", args: []string{"validate", a2a}, wantOut: []string{a2a + ": ok (a2a, schema_version 1.0.0, completeness 1.00)"}},
		{
			name: "validate reports every violation of every file", args: []string{"validate", good, bad, badA2A},
			wantErr: "2 of 3 files break the envelope contract", wantCode: 1,
			wantOut: []string{
				good + ": ok",
				bad + ": 2 violations (body, schema_version 1.0.0, completeness 0.00)",
				"  /confidence [schema] confidence must be at most 1, not 2",
				"  /task/intent [schema] task.intent is missing (the original human request, in the human's words)",
				badA2A + ": 1 violation (a2a, schema_version 2.0.0",
				"  /params/message/metadata/baton.handoff/schema_version [version] schema_version 2.0.0 is not supported: this Baton reads envelope versions 1.x",
			},
		},
		{
			name: "validate with an edge's contract", args: []string{"validate", "--require", "rejected_paths,/task/scope", "--min-completeness", "0.75", "--max-bytes", "10", "--agent", "analyst", minimal},
			wantErr: "1 of 1 files", wantCode: 1,
			wantOut: []string{
				"  (envelope) [size] the envelope is 77 bytes, over this edge's limit of 10",
				"  /rejected_paths [required] rejected_paths is required on this edge",
				"  /task/scope [required]",
				"  /completed [completeness] completeness 0.50 is below this edge's minimum 0.75",
			},
		},
		{name: "validate checks identity", args: []string{"validate", "--agent", "planner", good}, wantErr: "1 of 1", wantCode: 1, wantOut: []string{`/provenance/agent [identity] provenance.agent claims "analyst"`}},
		{name: "validate a missing file", args: []string{"validate", "/nonexistent/envelope.json"}, wantErr: "1 of 1", wantCode: 1, wantOut: []string{"no such file"}},
		{name: "validate without files", args: []string{"validate"}, wantErr: "no FILE given", wantCode: 2},
		{name: "validate with a bad policy", args: []string{"validate", "--min-completeness", "2", good}, wantErr: "min_completeness: must be between 0 and 1", wantCode: 2},
		{name: "validate with a bad flag", args: []string{"validate", "--frobnicate", good}, wantErr: "", wantCode: 2},
		{name: "help", args: []string{"help"}, wantOut: []string{"baton envelope validate [flags] FILE...", "-min-completeness"}},
		{name: "no subcommand", args: nil, wantErr: "validate or example expected", wantCode: 2},
		{name: "unknown subcommand", args: []string{"sign"}, wantErr: `unknown command "sign"`, wantCode: 2},
		{name: "example takes no arguments", args: []string{"example", "x"}, wantErr: "no arguments", wantCode: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			err := envelopeCmd(tc.args, &out, &errOut)
			switch {
			case tc.wantCode == 0 && err != nil:
				t.Fatalf("envelope: %v\n%s", err, out.String())
			case tc.wantCode != 0 && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			case tc.wantCode != 0 && exitCode(err) != tc.wantCode:
				t.Errorf("exit code %d, want %d", exitCode(err), tc.wantCode)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// The example the command prints validates with the command.
func TestEnvelopeExampleValidates(t *testing.T) {
	t.Parallel()
	var example bytes.Buffer
	if err := envelopeCmd([]string{"example"}, &example, nil); err != nil {
		t.Fatal(err)
	}
	p := writeEnvelope(t, "example.json", example.String())
	var out bytes.Buffer
	if err := envelopeCmd([]string{"validate", "--min-completeness", "1", "--agent", "analyst", p}, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
}
