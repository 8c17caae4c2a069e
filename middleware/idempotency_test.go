package middleware

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/batonproxy/baton/problem"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	k255 := strings.Repeat("k", 255)
	tests := []struct {
		name   string
		values []string
		want   string // "" means ErrBadKey
	}{
		{name: "quoted", values: []string{`"order-42"`}, want: "order-42"},
		{name: "unquoted", values: []string{"order-42"}, want: "order-42"},
		{name: "quoted with escaped quote", values: []string{`"a\"b"`}, want: `a"b`},
		{name: "quoted with escaped backslash", values: []string{`"a\\b"`}, want: `a\b`},
		{name: "quoted, escapes only", values: []string{`"\"\\"`}, want: `"\`},
		{name: "quoted keeps inner space", values: []string{`"a b"`}, want: "a b"},
		{name: "quoted keeps comma", values: []string{`"a,b"`}, want: "a,b"},
		{name: "quoted single space", values: []string{`" "`}, want: " "},
		{name: "unquoted, spaces trimmed", values: []string{" \tk1 \t"}, want: "k1"},
		{name: "quoted, spaces trimmed", values: []string{"  \"k1\"\t"}, want: "k1"},
		{name: "unquoted, all visible ASCII but quote, backslash, comma",
			values: []string{"!#$%&'()*+-./:;<=>?@[]^_`{|}~"}, want: "!#$%&'()*+-./:;<=>?@[]^_`{|}~"},
		{name: "255 unquoted", values: []string{k255}, want: k255},
		{name: "255 quoted", values: []string{`"` + k255 + `"`}, want: k255},
		{name: "255 quoted, escaped", values: []string{`"` + strings.Repeat(`\\`, 255) + `"`},
			want: strings.Repeat(`\`, 255)},

		{name: "256 unquoted", values: []string{k255 + "k"}},
		{name: "256 quoted", values: []string{`"` + k255 + `k"`}},
		{name: "256 quoted, escaped", values: []string{`"` + strings.Repeat(`\"`, 256) + `"`}},
		{name: "no value", values: nil},
		{name: "empty", values: []string{""}},
		{name: "blank", values: []string{" \t "}},
		{name: "empty quoted", values: []string{`""`}},
		{name: "one quote", values: []string{`"`}},
		{name: "only quotes", values: []string{`""""`}},
		{name: "escaped closing quote", values: []string{`"\"`}},
		{name: "unterminated", values: []string{`"abc`}},
		{name: "trailing lone backslash", values: []string{`"abc\"`}},
		{name: "unknown escape", values: []string{`"a\nb"`}},
		{name: "unescaped inner quote", values: []string{`"a"b"`}},
		{name: "quote after unquoted key", values: []string{`abc"`}},
		{name: "backslash unquoted", values: []string{`a\b`}},
		{name: "comma unquoted", values: []string{"a,b"}},
		{name: "inner space unquoted", values: []string{"a b"}},
		{name: "tab unquoted", values: []string{"a\tb"}},
		{name: "control char unquoted", values: []string{"a\x01b"}},
		{name: "DEL unquoted", values: []string{"a\x7fb"}},
		{name: "control char quoted", values: []string{"\"a\x01b\""}},
		{name: "tab quoted", values: []string{"\"a\tb\""}},
		{name: "DEL quoted", values: []string{"\"a\x7fb\""}},
		{name: "control char quoted with escapes", values: []string{"\"\\\\\x00\""}},
		{name: "non-ASCII unquoted", values: []string{"clé"}},
		{name: "non-ASCII quoted", values: []string{`"clé"`}},
		{name: "non-ASCII quoted with escapes", values: []string{`"\"clé"`}},
		{name: "list of two strings", values: []string{`"a", "b"`}},
		{name: "two values", values: []string{"a", "b"}},
		{name: "two equal values", values: []string{"a", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseKey(tc.values)
			if tc.want == "" {
				if !errors.Is(err, ErrBadKey) {
					t.Errorf("ParseKey(%q) = %q, %v; want ErrBadKey", tc.values, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseKey(%q) = %q, %v; want %q", tc.values, got, err, tc.want)
			}
		})
	}
}

func TestQuoteKeyRoundTrip(t *testing.T) {
	t.Parallel()
	var visible strings.Builder
	for c := byte(0x20); c < 0x7f; c++ {
		visible.WriteByte(c)
	}
	tests := []struct {
		name  string
		key   string
		quote string // QuoteKey(key), when checked
	}{
		{name: "plain", key: "k1", quote: `"k1"`},
		{name: "quote", key: `a"b`, quote: `"a\"b"`},
		{name: "backslash", key: `a\b`, quote: `"a\\b"`},
		{name: "lone quote", key: `"`, quote: `"\""`},
		{name: "lone backslash", key: `\`, quote: `"\\"`},
		{name: "surrounding spaces", key: " k ", quote: `" k "`},
		{name: "every visible ASCII character and space", key: visible.String()},
		{name: "255 characters", key: strings.Repeat("k", 255)},
		{name: "255 quotes", key: strings.Repeat(`"`, 255)},
		{name: "a derived key", key: "bk-0123456789abcdef0123456789abcdef"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := QuoteKey(tc.key)
			if tc.quote != "" && q != tc.quote {
				t.Errorf("QuoteKey(%q) = %s, want %s", tc.key, q, tc.quote)
			}
			got, err := ParseKey([]string{q})
			if err != nil || got != tc.key {
				t.Errorf("ParseKey(QuoteKey(%q)) = %q, %v", tc.key, got, err)
			}
		})
	}
}

// a2aBody is an A2A JSON-RPC request of method with messageId id.
func a2aBody(method, id string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{"message":{"role":"user",` +
		`"parts":[{"kind":"text","text":"summarise"}],"messageId":"` + id + `"}}}`
}

var derivedKeyRE = regexp.MustCompile(`^(bk|a2a)-[0-9a-f]{32}$`)

// keyInput is what DeriveKey reads.
type keyInput struct {
	in          Info
	method, url string
	contentType string
	body        string
}

func (k keyInput) derive(t *testing.T) string {
	t.Helper()
	r := httptest.NewRequest(k.method, k.url, nil)
	if k.contentType != "" {
		r.Header.Set("Content-Type", k.contentType)
	}
	key := DeriveKey(&k.in, r, []byte(k.body))
	if !derivedKeyRE.MatchString(key) {
		t.Fatalf("DeriveKey = %q, want %s", key, derivedKeyRE)
	}
	return key
}

func baseKeyInput() keyInput {
	return keyInput{
		in:     Info{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", From: "analyst", To: "summarizer"},
		method: http.MethodPost, url: "http://summarizer/tasks?lang=en",
		contentType: "application/json", body: `{"task":"summarise","doc":42}`,
	}
}

func TestDeriveKeyIsDeterministicAndSensitive(t *testing.T) {
	t.Parallel()
	base := baseKeyInput()
	baseKey := base.derive(t)
	if again := base.derive(t); again != baseKey {
		t.Fatalf("DeriveKey not deterministic: %s then %s", baseKey, again)
	}
	if !strings.HasPrefix(baseKey, "bk-") {
		t.Fatalf("DeriveKey of a plain JSON body = %s, want a bk- key", baseKey)
	}
	tests := []struct {
		name   string
		change func(*keyInput)
	}{
		{name: "trace id", change: func(k *keyInput) { k.in.TraceID = "0af7651916cd43dd8448eb211c80319c" }},
		{name: "from", change: func(k *keyInput) { k.in.From = "planner" }},
		{name: "to", change: func(k *keyInput) { k.in.To = "critic" }},
		{name: "method", change: func(k *keyInput) { k.method = http.MethodPatch }},
		{name: "path", change: func(k *keyInput) { k.url = "http://summarizer/tasks/1?lang=en" }},
		{name: "query", change: func(k *keyInput) { k.url = "http://summarizer/tasks?lang=fr" }},
		{name: "one body byte", change: func(k *keyInput) { k.body = `{"task":"summarise","doc":43}` }},
		{name: "empty body", change: func(k *keyInput) { k.body = "" }},
		{name: "field boundary moved", change: func(k *keyInput) { k.in.From, k.in.To = "analystsum", "marizer" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := baseKeyInput()
			tc.change(&k)
			if got := k.derive(t); got == baseKey {
				t.Errorf("changing the %s left the key at %s", tc.name, got)
			}
		})
	}
}

// TestDeriveKeyIsStable pins derived keys: a retry that spans a Baton
// upgrade must get the key its first attempt got.
func TestDeriveKeyIsStable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*keyInput)
		want   string
	}{
		{name: "JSON body", change: func(*keyInput) {}, want: "bk-79ec0a653f0799964bd5778fe2862682"},
		{name: "A2A SendMessage", change: func(k *keyInput) { k.body = a2aBody("SendMessage", "m-1") },
			want: "a2a-8e086a763a15f56079df680220da719b"},
		{name: "PATCH without a body", change: func(k *keyInput) { k.method, k.body = http.MethodPatch, "" },
			want: "bk-2d0a1da96401c2abd03066f14af0ec76"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := baseKeyInput()
			tc.change(&k)
			if got := k.derive(t); got != tc.want {
				t.Errorf("DeriveKey = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDeriveKeyA2A(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		contentType string
		body        string
		want        string // prefix: "a2a-" when the message id is the key, "bk-" otherwise
	}{
		{name: "SendMessage", body: a2aBody("SendMessage", "m-1"), want: "a2a-"},
		{name: "SendStreamingMessage", body: a2aBody("SendStreamingMessage", "m-1"), want: "a2a-"},
		{name: "v0.3 message/send", body: a2aBody("message/send", "m-1"), want: "a2a-"},
		{name: "v0.3 message/stream", body: a2aBody("message/stream", "m-1"), want: "a2a-"},
		{name: "JSON with parameters", contentType: "application/json; charset=utf-8",
			body: a2aBody("SendMessage", "m-1"), want: "a2a-"},
		{name: "GetTask falls back to the body", body: a2aBody("GetTask", "m-1"), want: "bk-"},
		{name: "CancelTask falls back to the body", body: a2aBody("CancelTask", "m-1"), want: "bk-"},
		{name: "empty message id", body: a2aBody("SendMessage", ""), want: "bk-"},
		{name: "not JSON-RPC", body: `{"method":"SendMessage","params":{"message":{"messageId":"m-1"}}}`, want: "bk-"},
		{name: "malformed JSON", body: a2aBody("SendMessage", "m-1")[1:], want: "bk-"},
		{name: "text/plain is not parsed", contentType: "text/plain", body: a2aBody("SendMessage", "m-1"), want: "bk-"},
		{name: "no content type is not parsed", contentType: "-", body: a2aBody("SendMessage", "m-1"), want: "bk-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := baseKeyInput()
			k.body = tc.body
			switch tc.contentType {
			case "":
			case "-":
				k.contentType = ""
			default:
				k.contentType = tc.contentType
			}
			key := k.derive(t)
			if !strings.HasPrefix(key, tc.want) {
				t.Fatalf("key = %s, want prefix %s", key, tc.want)
			}

			// A new trace id: the same message must keep its key; anything
			// else is keyed by the trace too.
			other := k
			other.in.TraceID = "0af7651916cd43dd8448eb211c80319c"
			other.url = "http://summarizer/a2a"
			if same := other.derive(t); (same == key) != (tc.want == "a2a-") {
				t.Errorf("another trace and target gave %s, first %s", same, key)
			}
			if tc.want != "a2a-" {
				return
			}
			for _, change := range []func(*keyInput){
				func(k *keyInput) { k.body = strings.Replace(k.body, `"m-1"`, `"m-2"`, 1) },
				func(k *keyInput) { k.in.From = "planner" },
				func(k *keyInput) { k.in.To = "critic" },
			} {
				c := k
				change(&c)
				if c.derive(t) == key {
					t.Errorf("message id, from or to changed but the key did not: %+v", c)
				}
			}
		})
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	const body = `{"task":"summarise"}`
	handoff := func() *Info {
		return &Info{Side: Egress, Agent: "analyst", From: "analyst", To: "summarizer",
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
	}
	tests := []struct {
		name        string
		in          *Info
		method      string
		body        string
		key         []string // Idempotency-Key values the agent sent
		want        int
		wantHeader  []string // sent on; nil: none
		wantKey     string   // Info.Key; "derived" for any derived key
		wantDerived bool
	}{
		{name: "agent key kept, quoted", in: handoff(), method: "POST", body: body, key: []string{"k1"},
			want: 200, wantHeader: []string{`"k1"`}, wantKey: "k1"},
		{name: "quoted agent key kept", in: handoff(), method: "POST", body: body, key: []string{`"k1"`},
			want: 200, wantHeader: []string{`"k1"`}, wantKey: "k1"},
		{name: "agent key with escapes normalised", in: handoff(), method: "POST", body: body,
			key: []string{` "a\"b\\c" `}, want: 200, wantHeader: []string{`"a\"b\\c"`}, wantKey: `a"b\c`},
		{name: "agent key on an idempotent method kept", in: handoff(), method: "PUT", body: body,
			key: []string{"k1"}, want: 200, wantHeader: []string{`"k1"`}, wantKey: "k1"},
		{name: "malformed agent key", in: handoff(), method: "POST", body: body, key: []string{`"open`},
			want: 400},
		{name: "two agent keys", in: handoff(), method: "POST", body: body, key: []string{"a", "b"}, want: 400},
		{name: "POST derives", in: handoff(), method: "POST", body: body, want: 200,
			wantKey: "derived", wantDerived: true},
		{name: "POST without a body derives", in: handoff(), method: "POST", want: 200,
			wantKey: "derived", wantDerived: true},
		{name: "PATCH derives", in: handoff(), method: "PATCH", body: body, want: 200,
			wantKey: "derived", wantDerived: true},
		{name: "custom method derives", in: handoff(), method: "SUBSCRIBE", body: body, want: 200,
			wantKey: "derived", wantDerived: true},
		{name: "GET", in: handoff(), method: "GET", want: 200},
		{name: "HEAD", in: handoff(), method: "HEAD", want: 200},
		{name: "OPTIONS", in: handoff(), method: "OPTIONS", want: 200},
		{name: "TRACE", in: handoff(), method: "TRACE", want: 200},
		{name: "PUT", in: handoff(), method: "PUT", body: body, want: 200},
		{name: "DELETE", in: handoff(), method: "DELETE", want: 200},
		{name: "external fetch gets none", in: &Info{Side: Egress, Agent: "analyst", From: "analyst",
			External: "api.example.com:443"}, method: "POST", body: body, want: 200},
		{name: "external fetch: agent's header untouched", in: &Info{Side: Egress, Agent: "analyst",
			From: "analyst", External: "api.example.com:443"}, method: "POST", body: body,
			key: []string{"not, an sf-string"}, want: 200, wantHeader: []string{"not, an sf-string"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var rd io.Reader
			if tc.body != "" {
				rd = strings.NewReader(tc.body)
			}
			r := withInfo(httptest.NewRequest(tc.method, "http://summarizer/tasks", rd), tc.in)
			r.Header.Set("Content-Type", "application/json")
			if tc.key != nil {
				r.Header[HeaderIdempotencyKey] = tc.key
			}
			var (
				served  bool
				gotHdr  []string
				gotBody []byte
			)
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served = true
				gotHdr = r.Header[HeaderIdempotencyKey]
				var err error
				if gotBody, err = io.ReadAll(r.Body); err != nil {
					t.Errorf("reading the body downstream: %v", err)
				}
			})
			rec := httptest.NewRecorder()
			IdempotencyKey(newMemBook(nil), 1<<20, false)(next).ServeHTTP(rec, r)

			if rec.Code != tc.want {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tc.want, rec.Body)
			}
			if tc.want != 200 {
				readProblem(t, rec, problem.BadIdempotencyKey)
				if served {
					t.Error("a malformed key went on down the chain")
				}
				return
			}
			if string(gotBody) != tc.body {
				t.Errorf("downstream body = %q, want %q", gotBody, tc.body)
			}
			if tc.in.KeyDerived != tc.wantDerived {
				t.Errorf("KeyDerived = %v, want %v", tc.in.KeyDerived, tc.wantDerived)
			}
			switch tc.wantKey {
			case "derived":
				if !derivedKeyRE.MatchString(tc.in.Key) {
					t.Fatalf("Info.Key = %q, want a derived key", tc.in.Key)
				}
				tc.wantHeader = []string{`"` + tc.in.Key + `"`}
			default:
				if tc.in.Key != tc.wantKey {
					t.Errorf("Info.Key = %q, want %q", tc.in.Key, tc.wantKey)
				}
			}
			if !slices.Equal(gotHdr, tc.wantHeader) {
				t.Errorf("Idempotency-Key sent on = %q, want %q", gotHdr, tc.wantHeader)
			}
		})
	}
}

// TestIdempotencyKeyDerivedFromWhatAgentSent checks that the key derived by
// the middleware is DeriveKey of the request as the agent sent it.
func TestIdempotencyKeyDerivedFromWhatAgentSent(t *testing.T) {
	t.Parallel()
	body := a2aBody("SendMessage", "m-1")
	in := &Info{Side: Egress, Agent: "analyst", From: "analyst", To: "summarizer", TraceID: "t1"}
	r := withInfo(httptest.NewRequest(http.MethodPost, "http://summarizer/", strings.NewReader(body)), in)
	r.Header.Set("Content-Type", "application/json")
	IdempotencyKey(newMemBook(nil), 1<<20, false)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).
		ServeHTTP(httptest.NewRecorder(), r)
	if want := DeriveKey(in, r, []byte(body)); in.Key != want || !strings.HasPrefix(want, "a2a-") {
		t.Errorf("Info.Key = %q, want %q", in.Key, want)
	}
}

// TestIdempotencyKeyReplayableBody checks what the reverse proxy relies on
// after the body was read to derive the key: the body, its length and
// GetBody for retries.
func TestIdempotencyKeyReplayableBody(t *testing.T) {
	t.Parallel()
	big := strings.Repeat(`{"chunk":"0123456789"},`, 2000) // larger than any single read
	tests := []struct {
		name    string
		body    string
		chunked bool // ContentLength unknown (-1), as with Transfer-Encoding: chunked
	}{
		{name: "with Content-Length", body: `{"task":"summarise"}`},
		{name: "chunked", body: `{"task":"summarise"}`, chunked: true},
		{name: "large, with Content-Length", body: big},
		{name: "large, chunked", body: big, chunked: true},
		{name: "chunked, empty", body: "", chunked: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := &Info{Side: Egress, Agent: "analyst", From: "analyst", To: "summarizer", TraceID: "t1"}
			r := withInfo(httptest.NewRequest(http.MethodPost, "http://summarizer/", nil), in)
			// One byte per read, to prove the whole body is read.
			r.Body = io.NopCloser(iotest.OneByteReader(strings.NewReader(tc.body)))
			r.ContentLength = int64(len(tc.body))
			if tc.chunked {
				r.ContentLength = -1
			}
			served := false
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served = true
				if r.ContentLength != int64(len(tc.body)) {
					t.Errorf("ContentLength = %d, want %d", r.ContentLength, len(tc.body))
				}
				if got, err := io.ReadAll(r.Body); err != nil || string(got) != tc.body {
					t.Errorf("body read downstream: %d bytes, %v; want %d bytes", len(got), err, len(tc.body))
				}
				if r.GetBody == nil {
					t.Fatal("GetBody is nil: the proxy cannot replay the body")
				}
				for i := range 2 {
					rc, err := r.GetBody()
					if err != nil {
						t.Fatal(err)
					}
					got, err := io.ReadAll(rc)
					if err != nil || string(got) != tc.body {
						t.Errorf("GetBody #%d: %d bytes, %v; want %d bytes", i+1, len(got), err, len(tc.body))
					}
					rc.Close()
				}
			})
			rec := httptest.NewRecorder()
			IdempotencyKey(newMemBook(nil), 1<<20, false)(next).ServeHTTP(rec, r)
			if !served || rec.Code != http.StatusOK {
				t.Fatalf("status %d, served %v", rec.Code, served)
			}
		})
	}
}

func TestIdempotencyKeyBodyErrors(t *testing.T) {
	t.Parallel()
	readErr := errors.New("connection reset by peer")
	tests := []struct {
		name      string
		limit     int64 // Limit before IdempotencyKey; 0: none
		body      io.Reader
		length    int64
		wantClass problem.Class
		wantErr   error // Info.Err
	}{
		{name: "chunked body past Limit", limit: 64, body: strings.NewReader(strings.Repeat("x", 65)), length: -1,
			wantClass: problem.BodyTooLarge},
		{name: "read error", body: iotest.ErrReader(readErr), length: -1,
			wantClass: problem.BadRequest, wantErr: readErr},
		{name: "body shorter than Content-Length", body: strings.NewReader("short"), length: 10,
			wantClass: problem.BadRequest, wantErr: io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := &Info{Side: Egress, Agent: "analyst", From: "analyst", To: "summarizer", TraceID: "t1"}
			r := withInfo(httptest.NewRequest(http.MethodPost, "http://summarizer/", nil), in)
			r.Body, r.ContentLength = io.NopCloser(tc.body), tc.length
			h := IdempotencyKey(newMemBook(nil), 1<<20, false)(mustNotServe(t))
			if tc.limit > 0 {
				h = Limit(tc.limit)(h)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			doc := readProblem(t, rec, tc.wantClass)
			if tc.wantClass == problem.BodyTooLarge && doc["limit_bytes"] != float64(tc.limit) {
				t.Errorf("limit_bytes = %v, want %d", doc["limit_bytes"], tc.limit)
			}
			if !errors.Is(in.Err, tc.wantErr) {
				t.Errorf("Info.Err = %v, want %v", in.Err, tc.wantErr)
			}
		})
	}
}
