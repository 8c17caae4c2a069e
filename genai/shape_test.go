package genai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A long Chat Completions stream, as OpenAI sends it with its obfuscation
// padding: a role chunk, content chunks of one shape (text with escapes,
// colons and member names in it), the finish, the usage.
func openAIChatSSELong() string {
	head := `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4.1-mini-2025-04-14","service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"delta":`
	var b strings.Builder
	b.WriteString("data: " + head + `{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x"}` + "\n\n")
	for i, text := range []string{"Hello", ` \"usage\": {\"prompt_tokens\":1}`, "w\\u00f6rld", `\"finish_reason\":\"stop\"`, "", "\\\\", "!"} {
		fmt.Fprintf(&b, "data: %s{\"content\":\"%s\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null,\"obfuscation\":\"%s\"}\n\n", head, text, strings.Repeat("k", i%3))
	}
	b.WriteString("data: " + head + `{},"logprobs":null,"finish_reason":"length"}],"usage":null,"obfuscation":"q"}` + "\n\n")
	b.WriteString("data: " + head[:strings.Index(head, `"choices"`)] + `"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":8,"total_tokens":15},"obfuscation":"zz"}` + "\n\ndata: [DONE]\n\n")
	return b.String()
}

func TestStreamShapes(t *testing.T) {
	t.Parallel()
	body := openAIChatSSELong()
	tc := streamCase{call: chatStreamCall, contentType: sseType}
	s := NewStream(tc.call, 200, tc.contentType, "", nil)
	_, _ = s.Write([]byte(body))
	_ = s.Close()
	if !s.acc.shape.ok || s.acc.shape.n != 2 {
		t.Errorf("shape %+v, want one of two varying strings", s.acc.shape)
	}
	got := s.Result()
	if got.Usage != (Usage{Input: 7, Output: 8, Known: true}) || len(got.FinishReasons) != 1 || got.FinishReasons[0] != "length" ||
		got.ResponseModel != "gpt-4.1-mini-2025-04-14" || got.ResponseID != "chatcmpl-9" || !got.Ended || got.Events != 11 {
		t.Fatalf("got %+v", got)
	}
	if exact := exactStream(tc, body); !sameStreamResult(got, exact) {
		t.Fatalf("got %+v\nexact %+v", got, exact)
	}
}

func TestShape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		a, b, y string
		match   bool
	}{
		{"content varies", `{"m":"x","d":{"c":"a"}}`, `{"m":"x","d":{"c":"bb"}}`, `{"m":"x","d":{"c":"\"u\":1"}}`, true},
		{"two strings vary", `{"c":"a","o":"p"}`, `{"c":"b","o":"pp"}`, `{"c":"","o":""}`, true},
		{"array element", `{"c":["a"]}`, `{"c":["b"]}`, `{"c":["zz"]}`, true},
		{"same events", `{"c":"a"}`, `{"c":"a"}`, `{"c":"a"}`, true},
		{"other event", `{"c":"a"}`, `{"c":"b"}`, `{"c":"a","finish_reason":"stop"}`, false},
		{"escape before the end", `{"c":"a"}`, `{"c":"b"}`, `{"c":"\\"}`, true},
		{"quote escaped", `{"c":"a"}`, `{"c":"b"}`, `{"c":"\"}`, false},
		{"a name varies", `{"c":"a"}`, `{"d":"a"}`, `{"d":"a"}`, false},
		{"a number varies", `{"c":1}`, `{"c":2}`, `{"c":2}`, false},
		{"a string and a number vary", `{"c":"a","n":1}`, `{"c":"b","n":2}`, `{"c":"b","n":2}`, false},
		{"lengths differ", `{"c":"a"}`, `{"c":"a","d":"e"}`, `{"c":"a","d":"e"}`, false},
		{"too many strings vary", `["a","a","a","a","a"]`, `["b","b","b","b","b"]`, `["c","c","c","c","c"]`, false},
		{"not a value", `{"c":"a" "d"}`, `{"c":"b" "d"}`, `{"c":"b" "d"}`, false},
		{"longer y", `{"c":"a"}`, `{"c":"b"}`, `{"c":"b"}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s shape
			s.learn([]byte(tc.a))
			s.learn([]byte(tc.b))
			if got := s.match([]byte(tc.y)); got != tc.match {
				t.Fatalf("match(%s) = %v after %s, %s", tc.y, got, tc.a, tc.b)
			}
		})
	}
}

func TestAnyMember(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		data string
		want bool
	}{
		{`{"usage":null}`, false},
		{`{"usage" : null }`, false},
		{`{"usage":{}}`, true},
		{`{"usage":nul}`, true},
		{`{"usage":nullx}`, true},
		{`{"a":{"b":[{"finish_reason":"stop"}]}}`, true},
		{`{"finish_reason":null,"x":"usage"}`, false},
		{`{"content":"\"error\": 1"}`, false},
		{`{"a":[{"error":0}]}`, true},
		{`{"sage":1,"xusage":2}`, false},
	} {
		if got := anyMember([]byte(tc.data), "finish_reason", "usage", "error"); got != tc.want {
			t.Errorf("anyMember(%s) = %v", tc.data, got)
		}
	}
}

// jsonMember reports whether decoded JSON has, at any depth, a member named
// one of keys whose value is not null.
func jsonMember(v any, keys ...string) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			for _, key := range keys {
				if k == key && x != nil {
					return true
				}
			}
			if jsonMember(x, keys...) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if jsonMember(x, keys...) {
				return true
			}
		}
	}
	return false
}

// FuzzAnyMember checks the byte scan against encoding/json: it never misses
// a member that decoding finds.
func FuzzAnyMember(f *testing.F) {
	for _, b := range fuzzBodies() {
		for _, line := range strings.Split(b, "\n") {
			f.Add([]byte(strings.TrimPrefix(line, "data: ")))
		}
	}
	f.Add([]byte(`{"usage" :null, "a":[{"finish_reason": "stop"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		if jsonMember(v, "finish_reason", "usage", "error") && !anyMember(data, "finish_reason", "usage", "error") {
			t.Fatalf("anyMember missed a member of %s", data)
		}
		if jsonMember(v, "finishReason", "finish_reason") && !anyMember(data, "finishReason", "finish_reason") {
			t.Fatalf("anyMember missed a member of %s", data)
		}
	})
}

// skeleton replaces every string value (not member names) of decoded JSON
// with "".
func skeleton(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = skeleton(x)
		}
	case []any:
		for i, x := range v {
			v[i] = skeleton(x)
		}
	case string:
		return ""
	}
	return v
}

// FuzzShape checks shapes against encoding/json: an event that repeats the
// shape of two that carried nothing has their members, with the same
// values but for strings, and so carries nothing either.
func FuzzShape(f *testing.F) {
	var events [][]byte
	for _, e := range strings.Split(openAIChatSSELong(), "\n\n") {
		if d, ok := strings.CutPrefix(e, "data: {"); ok {
			events = append(events, []byte("{"+d))
		}
	}
	for i := 1; i+2 < len(events); i++ {
		f.Add(events[i], events[i+1], events[i+2])
	}
	f.Add([]byte(`{"c":"a","o":"p"}`), []byte(`{"c":"b","o":"pp"}`), []byte(`{"c":"\u0022","o":"\\"}`))
	f.Fuzz(func(t *testing.T, a, b, y []byte) {
		keys := []string{"finish_reason", "usage", "error"}
		if anyMember(a, keys...) || anyMember(b, keys...) {
			return
		}
		var s shape
		s.learn(a)
		s.learn(b)
		if !s.match(y) {
			return
		}
		var vb, vy any
		if json.Unmarshal(b, &vb) != nil || json.Unmarshal(y, &vy) != nil {
			return
		}
		if jsonMember(vy, keys...) {
			t.Fatalf("%s matched the shape of %s, %s but carries a member", y, a, b)
		}
		sb, _ := json.Marshal(skeleton(vb))
		sy, _ := json.Marshal(skeleton(vy))
		if string(sb) != string(sy) {
			t.Fatalf("%s matched the shape of %s but decodes to %s, not %s", y, b, sy, sb)
		}
	})
}
