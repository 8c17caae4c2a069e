package genai_test

import (
	"fmt"
	"strings"

	"github.com/batonproxy/baton/genai"
)

// A proxy tells a model call from its request, reads the streamed answer
// as it passes, and prices it.
func Example() {
	api := genai.APIForHost("api.anthropic.com:443")
	call, ok := genai.Detect(api, "POST", "/v1/messages", []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true}`))
	if !ok {
		return
	}
	s := genai.NewStream(call, 200, "text/event-stream", "", nil)
	answer := strings.Join([]string{
		`event: message_start`,
		`data: {"type":"message_start","message":{"id":"msg_1","model":"claude-sonnet-4-5-20250929","usage":{"input_tokens":10,"cache_read_input_tokens":2000,"output_tokens":1}}}`,
		``,
		`event: content_block_delta`,
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		``,
		`event: message_delta`,
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":12}}`,
		``,
		`event: message_stop`,
		`data: {"type":"message_stop"}`,
		``, ``,
	}, "\n")
	for i := 0; i < len(answer); i += 40 { // as the bytes pass
		_, _ = s.Write([]byte(answer[i:min(i+40, len(answer))]))
	}
	_ = s.Close()
	r := s.Result()
	cost, _ := genai.DefaultPrices().Cost(call, r.Result)
	fmt.Println(call.Provider, call.Operation, call.RequestModel)
	fmt.Println(r.ResponseModel, r.FinishReasons, r.Ended, !r.FirstTokenAt.IsZero())
	fmt.Printf("%+v\n", r.Usage)
	fmt.Printf("$%.6f\n", float64(cost)/1e9)
	// Output:
	// anthropic chat claude-sonnet-4-5
	// claude-sonnet-4-5-20250929 [end_turn] true true
	// {Input:2010 CachedInput:2000 CacheCreation:0 Output:12 Reasoning:0 Known:true}
	// $0.000810
}
