package handoff

import (
	"bytes"
	"strings"
	"testing"
)

func TestLocate(t *testing.T) {
	t.Parallel()
	env := Example()
	tests := []struct {
		name        string
		contentType string
		body        string
		want        Where
	}{
		{name: "body", contentType: MediaType, body: string(env), want: Body},
		{name: "body with parameters and case", contentType: "Application/VND.Baton.Handoff+JSON; charset=utf-8", body: string(env), want: Body},
		{name: "body that is not JSON still is the envelope", contentType: MediaType, body: "not json", want: Body},
		{name: "bare envelope as application/json is opaque", contentType: "application/json", body: string(env), want: None},
		{name: "A2A v1.0 SendMessage", contentType: "application/json", body: string(a2aRequest("SendMessage", env)), want: A2A},
		{name: "A2A v1.0 SendStreamingMessage", contentType: "application/json; charset=utf-8", body: string(a2aRequest("SendStreamingMessage", env)), want: A2A},
		{name: "A2A v0.3 message/send", contentType: "application/json", body: string(a2aRequest("message/send", env)), want: A2A},
		{name: "A2A v0.3 message/stream", contentType: "application/json", body: string(a2aRequest("message/stream", env)), want: A2A},
		{name: "A2A with a +json content type", contentType: "application/a2a+json", body: string(a2aRequest("SendMessage", env)), want: A2A},
		{name: "A2A method with an escaped slash", contentType: "application/json", body: strings.Replace(string(a2aRequest("message/send", env)), "message/send", `message\/send`, 1), want: A2A},
		{name: "A2A key spelt with escapes", contentType: "application/json", body: strings.Replace(string(a2aRequest("SendMessage", env)), `"baton.handoff"`, `"\u0062aton\u002ehandoff"`, 1), want: A2A},
		{name: "A2A without an envelope", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"user","parts":[{"text":"baton.handoff"}],"metadata":{"other":1}}}}`, want: None},
		{name: "A2A without metadata", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m"}},"x":"\"baton.handoff\""}`, want: None},
		{name: "A2A GetTask is not a handoff method", contentType: "application/json", body: string(a2aRequest("GetTask", env)), want: None},
		{name: "JSON-RPC 1.0", contentType: "application/json", body: strings.Replace(string(a2aRequest("SendMessage", env)), `"2.0"`, `"1.0"`, 1), want: None},
		{name: "no jsonrpc member", contentType: "application/json", body: strings.Replace(string(a2aRequest("SendMessage", env)), `"jsonrpc"`, `"json_rpc"`, 1), want: None},
		{name: "A2A body as text/plain", contentType: "text/plain", body: string(a2aRequest("SendMessage", env)), want: None},
		{name: "A2A body truncated", contentType: "application/json", body: string(a2aRequest("SendMessage", env))[:200], want: None},
		{name: "A2A body with trailing garbage", contentType: "application/json", body: string(a2aRequest("SendMessage", env)) + "x", want: None},
		{name: "metadata is not an object", contentType: "application/json", body: `{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"metadata":["baton.handoff"]}}}`, want: None},
		{name: "last method wins", contentType: "application/json", body: `{"jsonrpc":"2.0","method":"GetTask","method":"SendMessage","params":{"message":{"metadata":{"baton.handoff":{}}}}}`, want: A2A},
		{name: "empty body", contentType: "application/json", body: "", want: None},
		{name: "no content type", contentType: "", body: string(a2aRequest("SendMessage", env)), want: None},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Locate(tt.contentType, []byte(tt.body)); got != tt.want {
				t.Fatalf("Locate = %v, want %v", got, tt.want)
			}
		})
	}
}

// Bodies without an envelope are never parsed: Locate decides on the content
// type, the first byte and a search for the metadata key. A parse would
// allocate its tape, so no allocation shows that none happened
// (BenchmarkLocateOpaque shows the time). Not parallel: AllocsPerRun forbids
// it.
func TestLocateLeavesOpaqueBodiesAlone(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name        string
		contentType string
		body        []byte
	}{
		{name: "1 MiB JSON array", contentType: "application/json", body: []byte("[" + strings.Repeat(`{"baton.handoff":1},`, mib/20) + "1]")},
		{name: "1 MiB text", contentType: "text/plain", body: bytes.Repeat([]byte(`"baton.handoff" `), mib/16)},
		{name: "1 MiB JSON object without the key", contentType: "application/json", body: []byte(`{"jsonrpc":"2.0","method":"SendMessage","params":"` + strings.Repeat("x", mib) + `"}`)},
		{name: "1 MiB deeply nested", contentType: "application/json", body: bytes.Repeat([]byte("["), mib)},
		{name: "1 MiB binary", contentType: "application/octet-stream", body: bytes.Repeat([]byte{'{', 0}, mib/2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if w := Locate(tt.contentType, tt.body); w != None {
				t.Fatalf("Locate = %v", w)
			}
			if n := testing.AllocsPerRun(3, func() { Locate(tt.contentType, tt.body) }); n != 0 {
				t.Fatalf("Locate allocated %v times", n)
			}
		})
	}
}

func TestLocateFindsTheEnvelopeBytes(t *testing.T) {
	t.Parallel()
	env := Example()
	body := a2aRequest("SendMessage", env)
	var tp tape
	loc := locate("application/json", body, &tp)
	if loc.where != A2A {
		t.Fatalf("located %v", loc.where)
	}
	if got := tp.span(loc.env); !bytes.Equal(body[got.s:got.e], bytes.TrimSpace(env)) {
		t.Fatalf("located %.80q", body[got.s:got.e])
	}
}
