package middleware

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The bodies of an LLM agent's day, as the OpenAI Agents SDK and the A2A
// JS SDK write them, for request i: the task it is given, its model calls
// (instructions, two tools, the conversation so far), the model's answers
// (which, as the Responses API does, repeat the instructions and tools),
// and a peer's answer.
var (
	benchInstructions = `You coordinate an offsite for a team. Book what the task needs with the book tool: venue, rooms, catering. ` +
		`Then notify everyone concerned with the notify tool, saying what was booked and when. Keep the budget; ask for nothing twice. Then summarise.`
	benchTools = `[{"type":"function","name":"book","description":"Has agent C book what the task needs. Returns what C did.",` +
		`"parameters":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"request":{"type":"string"}},"required":["request"],"additionalProperties":false},"strict":true},` +
		`{"type":"function","name":"notify","description":"Has agent D tell everyone concerned. Returns what D did.",` +
		`"parameters":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"request":{"type":"string"}},"required":["request"],"additionalProperties":false},"strict":true}]`
	benchVenues = []string{"the lakeside lodge", "the harbour hall", "the mountain inn", "the city loft"}
)

func benchTaskText(i int) string {
	return fmt.Sprintf("Plan the spring offsite for the %s team (%d people) at %s on day %d: a room for each, dinner on the first night, "+
		"a workshop room with a projector, and a budget of %d euros; the team lead is %s and wants it settled this week.",
		teamOf(i), 8+i%12, benchVenues[i%len(benchVenues)], 100+i, 4000+250*i, leadOf(i))
}

func teamOf(i int) string {
	return [...]string{"platform", "payments", "search", "mobile", "data", "growth", "security", "design"}[i%8] + fmt.Sprint(i)
}

func leadOf(i int) string {
	return [...]string{"Ana Ruiz", "Ben Okafor", "Chen Wei", "Dana Levi", "Emre Kaya", "Fatima Noor", "Gus Berg", "Hana Sato"}[i%8]
}

func benchTask(i int) []byte {
	return []byte(`{"id":1,"jsonrpc":"2.0","method":"SendMessage","params":{"configuration":{},"message":{"messageId":"msg-` +
		fmt.Sprintf("%016x", 0x9e3779b97f4a7c15*uint64(i+1)) + `","metadata":{},"parts":[{"mediaType":"text/plain","text":"` +
		benchTaskText(i) + `"}],"role":"ROLE_USER"},"metadata":{}}}`)
}

// benchRequest is what the model asks C to do for request i.
func benchRequest(i int) string {
	return fmt.Sprintf("book %s for the %s team, %d rooms, dinner on day %d, a workshop room with a projector",
		benchVenues[i%len(benchVenues)], teamOf(i), 8+i%12, 100+i)
}

func benchArgs(i int) string { return `{\"request\":\"` + benchRequest(i) + `\"}` }

// benchModelCall is the model call of request i at step (0: the task
// only; 1: with the book tool's call and its output).
func benchModelCall(i, step int) []byte {
	input := `[{"role":"user","content":"` + benchTaskText(i) + `"}`
	if step > 0 {
		input += `,{"type":"function_call","id":"fc_1","call_id":"call_1","name":"book","arguments":"` + benchArgs(i) + `","status":"completed"},` +
			`{"type":"function_call_output","call_id":"call_1","output":"` + string(benchPeerText(i)) + `"}`
	}
	return []byte(`{"model":"gpt-4.1-mini","instructions":"` + benchInstructions + `","input":` + input + `],"include":[],"tools":` + benchTools +
		`,"parallel_tool_calls":false,"store":false,"stream":false}`)
}

func benchModelAnswer(i int) []byte {
	return []byte(`{"id":"resp_` + fmt.Sprintf("%08x", 77*i+1) + `","object":"response","created_at":1767225600,"status":"completed",` +
		`"model":"gpt-4.1-mini-2025-04-14","instructions":"` + benchInstructions + `","tools":` + benchTools + `,` +
		`"output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"book","arguments":"` + benchArgs(i) + `","status":"completed"}],` +
		`"parallel_tool_calls":false,"temperature":1.0,"tool_choice":"auto","top_p":1.0,"truncation":"disabled",` +
		`"usage":{"input_tokens":812,"input_tokens_details":{"cached_tokens":0},"output_tokens":61,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":873}}`)
}

func benchPeerText(i int) string {
	return fmt.Sprintf("c booked %s for the %s team: %d rooms, dinner for %d on day %d, the workshop room; confirmation C-%05d",
		benchVenues[i%len(benchVenues)], teamOf(i), 8+i%12, 8+i%12, 100+i, 31*i+7)
}

func benchHandoff(i int) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"messageId":"` + fmt.Sprintf("%08x-%04x", 13*i+5, i) +
		`","role":"ROLE_USER","parts":[{"text":"` + benchRequest(i) + `","mediaType":"text/plain"}],"metadata":{}},"configuration":{},"metadata":{}},"id":1}`)
}

func benchPeerAnswer(i int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"` + fmt.Sprintf("%08x-%04x", 17*i+3, i) +
		`","contextId":"ctx-` + fmt.Sprint(i) + `","role":"ROLE_AGENT","parts":[{"text":"` + benchPeerText(i) +
		`","mediaType":"text/plain"}],"metadata":{},"extensions":[],"referenceTaskIds":[]}}}`)
}

// benchHandling is request i's handling once the agent has read its task,
// its model's first answer and C's answer, each kept with its call.
func benchHandling(i int) *Handling {
	h := &Handling{ID: fmt.Sprintf("4bf92f35%024x.00f067aa0ba902b7", i), Work: true}
	h.lineage.read("its task", benchTask(i), nil, true)
	h.Reading("the answer of llm", benchModelCall(i, 0)).Read(benchModelAnswer(i))
	h.Reading("the answer of c", benchHandoff(i)).Read(benchPeerAnswer(i))
	return h
}

// sliceHandlings is a Handlings of handlings all in flight.
type sliceHandlings struct {
	memBook
	hs []*Handling
}

func (s *sliceHandlings) Working(buf []*Handling) []*Handling {
	if len(s.hs) < 2 {
		return buf
	}
	return append(buf, s.hs...)
}

// BenchmarkTieByLineage is what lineage costs a call that carries no
// context, made while n handlings are in flight (tieByLineage: the body's
// head read and put back, its phrases, the lookup in every handling's):
// request 1's second model call (4.6 KB: its task, the book tool's call
// and output, the instructions and tools), each handling having read 2.8
// KB (its task, its model's answer, C's answer). "hashed" is a call after
// which no handling read anything new: every handling's phrases are
// hashed; "new answer" is a call after its own handling read one (its
// phrases hashed again, as after every read).
func BenchmarkTieByLineage(b *testing.B) {
	call := benchModelCall(1, 1)
	for _, n := range []int{2, 4, 16} {
		for _, fresh := range []bool{false, true} {
			name := fmt.Sprintf("%d/hashed", n)
			if fresh {
				name = fmt.Sprintf("%d/new_answer", n)
			}
			b.Run(name, func(b *testing.B) {
				hs := &sliceHandlings{}
				for i := range n {
					hs.hs = append(hs.hs, benchHandling(i))
				}
				own := hs.hs[1]
				r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:15001/llm/v1/responses", nil)
				body := bytes.NewReader(call)
				b.ReportAllocs()
				b.SetBytes(int64(len(call)))
				for b.Loop() {
					if fresh {
						own.lineage.mu.Lock()
						own.lineage.phrases = nil
						own.lineage.mu.Unlock()
					}
					body.Reset(call)
					r.Body, r.ContentLength = readCloser{body, http.NoBody}, int64(len(call))
					in := &Info{Side: Egress}
					if !tieByLineage(hs, in, r) || in.Handling != own {
						b.Fatalf("tied to %v (%s)", id(in.Handling), in.CorrelationEvidence)
					}
				}
			})
		}
	}
}

// BenchmarkLineageKept is what one in-flight handling keeps: the bytes of
// what the agent read and of the calls that fetched it, and its phrases
// once hashed (8 bytes each), for the handling of BenchmarkTieByLineage
// (its task, its model's answer, C's answer) and for one that read as much
// as it may (maxLineageBytes of short distinct words).
func BenchmarkLineageKept(b *testing.B) {
	kept := func(h *Handling) (text, phrases int) {
		h.lineage.mu.Lock()
		defer h.lineage.mu.Unlock()
		return h.lineage.size, cap(h.lineage.hashed())
	}
	var words strings.Builder
	for i := 0; words.Len() < 2*maxLineageBytes; i++ {
		fmt.Fprintf(&words, "w%x ", i)
	}
	full := []byte(words.String())
	for _, bc := range []struct {
		name string
		make func() *Handling
	}{
		{"realistic", func() *Handling { return benchHandling(1) }},
		{"full", func() *Handling {
			h := &Handling{Work: true}
			for off := 0; off+MaxLineageRead <= len(full); off += MaxLineageRead {
				h.Reading("the answer of c", nil).Read(full[off : off+MaxLineageRead])
			}
			return h
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var text, phrases int
			b.ReportAllocs()
			for b.Loop() {
				text, phrases = kept(bc.make())
			}
			b.ReportMetric(float64(text), "text-B")
			b.ReportMetric(float64(phrases), "phrases")
			b.ReportMetric(float64(text+8*phrases), "kept-B")
		})
	}
}
