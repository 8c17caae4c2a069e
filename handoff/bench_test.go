package handoff

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// BenchmarkCheck4KiB measures Check on a realistic 4 KiB envelope: locating,
// parsing, validating against the schema, completeness and summary.
func BenchmarkCheck4KiB(b *testing.B) {
	c := newChecker(b)
	env, err := os.ReadFile("testdata/envelope-4k.json")
	if err != nil {
		b.Fatal(err)
	}
	if len(env) < 4000 || len(env) > 4200 {
		b.Fatalf("testdata/envelope-4k.json is %d bytes, want about 4 KiB", len(env))
	}
	a2a := a2aRequest("SendMessage", env)
	p := Policy{Mode: Enforce, Require: []string{"open_questions", "/task/scope"}, MinCompleteness: 0.75, MaxBytes: 64 << 10}
	for _, bc := range []struct {
		name        string
		contentType string
		body        []byte
	}{
		{name: "body", contentType: MediaType, body: env},
		{name: "a2a", contentType: "application/json", body: a2a},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				r, err := c.Check(bc.contentType, bc.body, p, "analyst")
				if err != nil || len(r.Violations) > 0 {
					b.Fatal(err, r.Violations)
				}
			}
		})
	}
	// The slow path: an envelope with one violation goes through jsonschema.
	bad := bytes.Replace(env, []byte(`"verification": "verified"`), []byte(`"verification": "done"`), 1)
	b.Run("invalid", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(bad)))
		for b.Loop() {
			r, _ := c.Check(MediaType, bad, p, "analyst")
			if len(r.Violations) == 0 {
				b.Fatal("no violation")
			}
		}
	})
}

// BenchmarkLocateOpaque measures what a body without an envelope costs.
func BenchmarkLocateOpaque(b *testing.B) {
	jsonArray := []byte("[" + strings.Repeat(`{"id":1,"name":"x"},`, 1<<20/20) + "1]")
	rpc := []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"user","parts":[{"text":"` + strings.Repeat("hello ", 1<<20/6) + `"}]}}}`)
	for _, bc := range []struct {
		name        string
		contentType string
		body        []byte
	}{
		{name: "json-array-1MiB", contentType: "application/json", body: jsonArray},
		{name: "text-1MiB", contentType: "text/plain", body: bytes.Repeat([]byte("lorem ipsum "), 1<<20/12)},
		{name: "a2a-without-envelope-1MiB", contentType: "application/json", body: rpc},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				if Locate(bc.contentType, bc.body) != None {
					b.Fatal("found an envelope")
				}
			}
		})
	}
}
