package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/batonproxy/baton/handoff"
)

const envelopeUsage = `Usage:
  baton envelope validate [flags] FILE...
        check each FILE, a bare handoff envelope or an A2A JSON-RPC request
        carrying one at params.message.metadata["baton.handoff"]: print ok with
        its completeness, or every violation with its JSON pointer; exit 1 when
        any FILE has a violation
  baton envelope example
        print a complete, valid envelope

Flags of validate (an edge's contract; see docs/envelope.md):
`

// envelopeCmd runs `baton envelope validate|example`.
func envelopeCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, envelopeUsage)
		return usageError{msg: "envelope: validate or example expected"}
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "example":
		if len(rest) > 0 {
			return usageError{msg: "envelope example takes no arguments"}
		}
		_, err := stdout.Write(handoff.Example())
		return err
	case "validate":
		return envelopeValidate(rest, stdout, stderr)
	case "help", "-h", "--help":
		return envelopeValidate([]string{"-h"}, stdout, stdout) // prints the usage with the flags
	default:
		fmt.Fprint(stderr, envelopeUsage)
		return usageError{msg: fmt.Sprintf("envelope: unknown command %q: validate or example expected", sub)}
	}
}

func envelopeValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("envelope validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, envelopeUsage)
		fs.PrintDefaults()
	}
	require := fs.String("require", "", "comma-separated `members` that must be present: top-level names or JSON pointers, like open_questions,/task/scope")
	minComp := fs.Float64("min-completeness", 0, "lowest completeness accepted, 0 to 1")
	maxBytes := fs.Int("max-bytes", 0, "largest envelope accepted, in bytes (0: any)")
	agent := fs.String("agent", "", "check as the `agent`'s Baton does at egress: provenance.agent must name it or be absent")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{} // the flag package has said what is wrong
	}
	policy := handoff.Policy{Mode: handoff.Enforce, MinCompleteness: *minComp, MaxBytes: *maxBytes}
	if *require != "" {
		policy.Require = strings.Split(*require, ",")
	}
	if err := policy.Validate(); err != nil {
		return usageError{msg: "envelope validate: " + strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return usageError{msg: "envelope validate: no FILE given"}
	}
	checker, err := handoff.NewChecker()
	if err != nil {
		return err
	}
	failed := 0
	for _, path := range fs.Args() {
		if !validateEnvelopeFile(checker, path, policy, *agent, stdout) {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("envelope validate: %d of %d files break the envelope contract", failed, fs.NArg())
	}
	return nil
}

// validateEnvelopeFile checks one file and reports it on w.
func validateEnvelopeFile(c *handoff.Checker, path string, p handoff.Policy, agent string, w io.Writer) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(w, "%s: %v\n", path, err)
		return false
	}
	contentType := handoff.MediaType
	if handoff.Locate("application/json", data) == handoff.A2A {
		contentType = "application/json"
	}
	r, err := c.Check(contentType, data, p, agent)
	if err != nil {
		fmt.Fprintf(w, "%s: %v\n", path, err)
		return false
	}
	version := r.Version
	if version == "" {
		version = "none"
	}
	about := fmt.Sprintf("%s, schema_version %s, completeness %.2f", r.Where, version, r.Completeness)
	if len(r.Violations) == 0 {
		fmt.Fprintf(w, "%s: ok (%s)\n", path, about)
		return true
	}
	noun := "violations"
	if len(r.Violations) == 1 {
		noun = "violation"
	}
	fmt.Fprintf(w, "%s: %d %s (%s)\n", path, len(r.Violations), noun, about)
	for _, v := range r.Violations {
		ptr := v.Pointer
		if ptr == "" {
			ptr = "(envelope)"
		}
		fmt.Fprintf(w, "  %s [%s] %s\n", ptr, v.Kind, v.Detail)
	}
	return false
}
