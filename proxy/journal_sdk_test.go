package proxy_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/batonproxy/baton/journal"
)

// TestJournalOpenAIClientStream: an agent using the official OpenAI Go SDK,
// with its Baton as the HTTP proxy, streams a chat completion from a model
// server. On the re-run of the same handoff the SDK gets the same stream
// from the journal, chunk for chunk, usage included, and the model server
// is not called again.
func TestJournalOpenAIClientStream(t *testing.T) {
	t.Parallel()
	model := &modelServer{}
	ms := httptest.NewServer(model)
	t.Cleanup(ms.Close)
	host := ms.Listener.Addr().String()
	var runs []chatRun
	var g *journalRig
	g = newJournalRig(t, journalYAML(host), sharedStore(t)(), func(n int, _ caller) int {
		runs = append(runs, streamChat(t, n,
			option.WithBaseURL("http://"+host+"/v1/"),
			option.WithAPIKey("sk-test-0123456789"),
			option.WithHTTPClient(&http.Client{Transport: &http.Transport{
				Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: g.b.EgressAddr()})}}),
			option.WithHeader("Baggage", *g.baggage.Load())))
		return failFirst(n)
	})
	g.handle("k-sdk")
	g.handle("k-sdk")
	if len(runs) != 2 {
		t.Fatalf("the agent ran %d times, want 2", len(runs))
	}
	first, second := runs[0], runs[1]
	if first.text == "" || first.chunks != 3 || first.tokens != 74 || first.replayed != "" {
		t.Errorf("first run: %+v; want the model's 3 chunks, 74 tokens, not replayed", first)
	}
	if second.text != first.text || second.chunks != first.chunks || second.tokens != first.tokens || second.replayed != "true" {
		t.Errorf("re-run: %+v; want the first run's stream %+v, replayed", second, first)
	}
	if n := model.calls.Load(); n != 1 {
		t.Errorf("the model was called %d times, want 1", n)
	}
}

// chatRun is what one streamed chat completion gave the agent: its text,
// chunks and tokens, whether the journal replayed it, and the protocol its
// answer came in.
type chatRun struct {
	text     string
	chunks   int
	tokens   int64
	replayed string
	proto    string
	tls      *tls.ConnectionState
}

// streamChat streams a chat completion with the official OpenAI Go SDK as
// an agent would, the client made with opts (no retries), in run n.
func streamChat(t *testing.T, n int, opts ...option.RequestOption) chatRun {
	var resp *http.Response
	client := openai.NewClient(append(opts, option.WithMaxRetries(0), option.WithResponseInto(&resp))...)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "m-1",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("plan the offsite")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	r := chatRun{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
		r.chunks++
	}
	if err := stream.Err(); err != nil {
		t.Errorf("run %d: stream: %v", n, err)
	}
	if len(acc.Choices) > 0 {
		r.text = acc.Choices[0].Message.Content
	}
	r.tokens = acc.Usage.TotalTokens
	if resp != nil {
		r.replayed, r.proto, r.tls = resp.Header.Get(journal.HeaderReplayed), resp.Proto, resp.TLS
	}
	return r
}
