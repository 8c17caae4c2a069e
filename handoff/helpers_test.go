package handoff

import (
	"bytes"
	"encoding/json"
	"testing"
)

func newChecker(tb testing.TB) *Checker {
	tb.Helper()
	c, err := NewChecker()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// a2aRequest wraps env in an A2A JSON-RPC request for method, laid out as a
// client would send it.
func a2aRequest(method string, env []byte) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":"req-1","method":"` + method + `","params":{"message":{"role":"user","messageId":"msg-1","parts":[{"kind":"text","text":"Please take over the checkout analysis."}],"metadata":{"trace":"x","baton.handoff":`)
	b.Write(env)
	b.WriteString(`}}}}`)
	return b.Bytes()
}

// mutate returns Example changed by edit, compact.
func mutate(tb testing.TB, edit func(m map[string]any)) []byte {
	tb.Helper()
	m := decode(tb, Example())
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func decode(tb testing.TB, b []byte) map[string]any {
	tb.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		tb.Fatalf("decoding %.200s: %v", b, err)
	}
	return m
}

// obj returns the object member name of m.
func obj(m map[string]any, name string) map[string]any { return m[name].(map[string]any) }

// item returns the i-th object of the array member name of m.
func item(m map[string]any, name string, i int) map[string]any {
	return m[name].([]any)[i].(map[string]any)
}
