package genai

import (
	"encoding/json"
	"reflect"
	"testing"
)

// fuzzEndpoints are the calls the fuzz targets read answers to, chosen by a
// byte.
var fuzzCalls = []Call{chatCall, chatStreamCall, responsesCall, responsesStream, completionsCall, embeddingsCall,
	messagesCall, messagesStream, geminiCall, geminiStream}

func fuzzBodies() []string {
	return []string{openAIChatJSON, openAIChatSSE, openAIChatSSENoUsage, azureChatSSE, openAIResponsesJSON, openAIResponsesSSE,
		openAIResponsesIncomplete, openAIResponsesFailed, openAICompletionsJSON, openAIEmbeddingsJSON, openAIErrorJSON, azureErrorJSON,
		anthropicJSON, anthropicSSE, anthropicSSEOverloaded, anthropicErrorJSON, geminiJSON, geminiSSE, geminiArray, geminiErrorJSON,
		geminiBlockedJSON, openAIChatSSELong()}
}

// exactStream reads body whole, decoding every event: without the shapes
// and byte scans that skip events.
func exactStream(tc streamCase, body string) StreamResult {
	var clock byteClock
	s := NewStream(tc.call, 200, tc.contentType, "", clock.now)
	s.acc.exact = true
	clock.n.Add(int64(len(body)))
	_, _ = s.Write([]byte(body))
	_ = s.Close()
	return s.Result()
}

// sameStreamResult reports whether two results are the same but for their
// times, and have a first token alike.
func sameStreamResult(a, b StreamResult) bool {
	return reflect.DeepEqual(withoutTimes(a), withoutTimes(b)) && a.FirstTokenAt.IsZero() == b.FirstTokenAt.IsZero()
}

// checkUsage fails when a known usage breaks its own rules.
func checkUsage(t *testing.T, u Usage) {
	t.Helper()
	if !u.Known {
		if u != (Usage{}) {
			t.Fatalf("unknown usage with counts: %+v", u)
		}
		return
	}
	if u.Input < 0 || u.Output < 0 || u.CachedInput < 0 || u.CacheCreation < 0 || u.Reasoning < 0 ||
		u.CachedInput+u.CacheCreation > u.Input || u.Reasoning > u.Output || u.Input > 2*maxTokens || u.Output > 2*maxTokens {
		t.Fatalf("incoherent known usage: %+v", u)
	}
}

func FuzzDetect(f *testing.F) {
	f.Add(uint8(OpenAI), "POST", "/v1/chat/completions", []byte(`{"model":"gpt-4o","stream":true,"max_tokens":5,"temperature":0.5}`))
	f.Add(uint8(AzureOpenAI), "POST", "/openai/deployments/d/chat/completions?api-version=1", []byte(`{}`))
	f.Add(uint8(Anthropic), "POST", "/v1/messages", []byte(`{"model":"claude-opus-4-5","max_tokens":1024}`))
	f.Add(uint8(Gemini), "POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", []byte(`{"generationConfig":{"maxOutputTokens":9}}`))
	f.Add(uint8(Gemini), "POST", "/v1beta/models/:generateContent", []byte(`[`))
	f.Fuzz(func(t *testing.T, api uint8, method, path string, body []byte) {
		c, ok := Detect(API(api), method, path, body)
		if !ok {
			if c != (Call{}) {
				t.Fatalf("no call, but %+v", c)
			}
			return
		}
		if method != "POST" || c.Provider == "" || c.Operation == "" || c.Endpoint == 0 || c.MaxTokens < 0 {
			t.Fatalf("Detect(%v, %q, %q) = %+v", api, method, path, c)
		}
	})
}

func FuzzParseResponse(f *testing.F) {
	for i, b := range fuzzBodies() {
		f.Add(uint8(i), 200, "application/json", "", []byte(b))
	}
	f.Add(uint8(1), 200, "text/event-stream", "", []byte(openAIChatSSE))
	f.Add(uint8(0), 200, "application/json", "gzip", gzipBytes(f, openAIChatJSON))
	f.Fuzz(func(t *testing.T, which uint8, status int, contentType, encoding string, body []byte) {
		c := fuzzCalls[int(which)%len(fuzzCalls)]
		r := ParseResponse(c, status, contentType, encoding, body)
		checkUsage(t, r.Usage)
	})
}

// FuzzStream checks that a stream reads the same however it is split, and
// the same as when every event is decoded.
func FuzzStream(f *testing.F) {
	for i, b := range fuzzBodies() {
		f.Add(uint8(i), true, uint16(17), uint16(300), []byte(b))
		f.Add(uint8(i), false, uint16(1), uint16(2), []byte(b))
	}
	f.Fuzz(func(t *testing.T, which uint8, sse bool, cut1, cut2 uint16, body []byte) {
		if len(body) > 1<<14 {
			return
		}
		tc := streamCase{call: fuzzCalls[int(which)%len(fuzzCalls)], contentType: "application/json"}
		if sse {
			tc.contentType = sseType
		}
		whole := runStream(tc, 200, "", string(body), nil)
		checkUsage(t, whole.Usage)
		if exact := exactStream(tc, string(body)); !sameStreamResult(whole, exact) {
			t.Fatalf("read %+v\nevery event decoded: %+v", whole, exact)
		}
		a, b := int(cut1)%(len(body)+1), int(cut2)%(len(body)+1)
		lo, hi := min(a, b), max(a, b)
		splits := [][]int{{lo, hi - lo}}
		if len(body) <= 1<<10 {
			ones := make([]int, len(body))
			for i := range ones {
				ones[i] = 1
			}
			splits = append(splits, ones)
		}
		for _, chunks := range splits {
			got := runStream(tc, 200, "", string(body), chunks)
			if !sameStreamResult(got, whole) {
				t.Fatalf("split %v: %+v\nwhole: %+v", chunks[:min(len(chunks), 4)], got, whole)
			}
		}
		// Told its length (Expect), in one piece or split, it reads the same.
		for _, chunks := range append(splits, nil) {
			s := NewStream(tc.call, 200, tc.contentType, "", nil)
			s.Expect(int64(len(body)))
			rest := body
			for _, n := range chunks {
				_, _ = s.Write(rest[:n])
				rest = rest[n:]
			}
			_, _ = s.Write(rest)
			_ = s.Close()
			if got := s.Result(); !sameStreamResult(got, whole) {
				t.Fatalf("told its length, split %v: %+v\nuntold: %+v", chunks[:min(len(chunks), 4)], got, whole)
			}
		}
	})
}

// FuzzScanner checks that the JSON scanner accepts all valid JSON and walks
// every object in it to its end.
func FuzzScanner(f *testing.F) {
	for _, b := range fuzzBodies() {
		f.Add([]byte(b))
	}
	f.Add([]byte(`{"a":[1,{"b":"\"}"}],"c":"\\"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = wholeJSON(b)
		if !json.Valid(b) {
			return
		}
		if !wholeJSON(b) {
			t.Fatalf("valid JSON not taken whole: %q", b)
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(b, &members) != nil {
			return
		}
		o, ok := objectOf(b)
		if !ok {
			t.Fatalf("object not opened: %q", b)
		}
		n := 0
		for {
			if _, _, ok := o.next(); !ok {
				break
			}
			n++
		}
		if o.bad || n < len(members) {
			t.Fatalf("walked %d members (bad %v), want %d: %q", n, o.bad, len(members), b)
		}
	})
}

// FuzzStringEnd checks stringEnd, which searches for quotes and counts the
// backslashes before each, against a reading of every byte: the same end
// for a string opening at each quote of b.
func FuzzStringEnd(f *testing.F) {
	for _, b := range fuzzBodies() {
		f.Add([]byte(b))
	}
	f.Add([]byte(`"0123456789abcde\"" "0123456789abcdef\\" "0123456789abcde\\\"x"`))
	f.Add([]byte(`"0123456789abcde\`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i, c := range b {
			if c != '"' {
				continue
			}
			want := -1
			for j := i + 1; j < len(b); j++ {
				if b[j] == '"' {
					want = j + 1
					break
				}
				if b[j] == '\\' {
					j++
				}
			}
			if got := stringEnd(b, i); got != want {
				t.Fatalf("stringEnd(%q, %d) = %d, want %d", b, i, got, want)
			}
		}
	})
}
