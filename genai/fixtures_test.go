package genai

// Answers shaped as the providers document them and as their SDKs' test
// fixtures show them, written for these tests, trimmed to a few content
// events. Comments say what each one exercises.

// openAIChatJSON: a Chat Completions answer with cached input and
// reasoning tokens.
const openAIChatJSON = `{
  "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
  "object": "chat.completion",
  "created": 1741570283,
  "model": "gpt-4o-2024-08-06",
  "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "The image shows a wooden boardwalk.", "refusal": null, "annotations": []}, "logprobs": null, "finish_reason": "stop"},
    {"index": 1, "message": {"role": "assistant", "content": "A boardwalk through tall grass", "refusal": null, "annotations": []}, "logprobs": null, "finish_reason": "length"}
  ],
  "usage": {
    "prompt_tokens": 1117,
    "completion_tokens": 46,
    "total_tokens": 1163,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 12, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_fc9f1d7035"
}`

// openAIChatSSE: a chat stream with stream_options.include_usage: the role
// chunk (no token), content, a tool call, the finish chunk, the usage
// chunk with no choices, [DONE].
const openAIChatSSE = `data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" wörld 🌍"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":"! \"finish_reason\": \"usage\":{}"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_44709d6fcb","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

data: [DONE]

`

// openAIChatSSENoUsage: a chat stream without include_usage.
const openAIChatSSENoUsage = `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}

data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`

// azureChatSSE: Azure's stream opens with a chunk of prompt filter results,
// with an empty model and id, and ends with a usage chunk.
const azureChatSSE = "data: {\"choices\":[],\"created\":0,\"id\":\"\",\"model\":\"\",\"object\":\"\",\"prompt_filter_results\":[{\"prompt_index\":0,\"content_filter_results\":{\"hate\":{\"filtered\":false,\"severity\":\"safe\"}}}]}\r\n\r\n" +
	"data: {\"choices\":[{\"content_filter_results\":{},\"delta\":{\"content\":\"\",\"role\":\"assistant\"},\"finish_reason\":null,\"index\":0,\"logprobs\":null}],\"created\":1727000000,\"id\":\"chatcmpl-AAz\",\"model\":\"gpt-4o-2024-11-20\",\"object\":\"chat.completion.chunk\",\"system_fingerprint\":\"fp_a\"}\r\n\r\n" +
	"data: {\"choices\":[{\"content_filter_results\":{\"hate\":{\"filtered\":false,\"severity\":\"safe\"}},\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},\"finish_reason\":null,\"index\":0,\"logprobs\":null}],\"created\":1727000000,\"id\":\"chatcmpl-AAz\",\"model\":\"gpt-4o-2024-11-20\",\"object\":\"chat.completion.chunk\",\"system_fingerprint\":\"fp_a\"}\r\n\r\n" +
	"data: {\"choices\":[{\"content_filter_results\":{},\"delta\":{},\"finish_reason\":\"tool_calls\",\"index\":0,\"logprobs\":null}],\"created\":1727000000,\"id\":\"chatcmpl-AAz\",\"model\":\"gpt-4o-2024-11-20\",\"object\":\"chat.completion.chunk\",\"system_fingerprint\":\"fp_a\"}\r\n\r\n" +
	"data: {\"choices\":[],\"created\":1727000000,\"id\":\"chatcmpl-AAz\",\"model\":\"gpt-4o-2024-11-20\",\"object\":\"chat.completion.chunk\",\"usage\":{\"completion_tokens\":17,\"completion_tokens_details\":null,\"prompt_tokens\":81,\"prompt_tokens_details\":null,\"total_tokens\":98}}\r\n\r\n" +
	"data: [DONE]\r\n\r\n"

// openAIResponsesJSON: a Responses answer with cache reads and writes and
// reasoning.
const openAIResponsesJSON = `{
  "id": "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41",
  "object": "response",
  "created_at": 1741476777,
  "status": "completed",
  "error": null,
  "incomplete_details": null,
  "instructions": "You are terse.",
  "model": "gpt-5.4-2026-03-05",
  "output": [
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "message", "id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "A wooden boardwalk.", "annotations": []}]}
  ],
  "usage": {
    "input_tokens": 12033,
    "input_tokens_details": {"cached_tokens": 11904, "cache_write_tokens": 64},
    "output_tokens": 544,
    "output_tokens_details": {"reasoning_tokens": 512},
    "total_tokens": 12577
  },
  "metadata": {"usage": "not the usage"}
}`

// openAIResponsesSSE: a Responses stream, every event named.
const openAIResponsesSSE = `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","created_at":1741290958,"status":"in_progress","error":null,"incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":[],"usage":null}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","status":"in_progress","model":"gpt-4.1-2025-04-14","output":[],"usage":null}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","type":"message","status":"in_progress","role":"assistant","content":[]}}

event: response.content_part.added
data: {"type":"response.content_part.added","sequence_number":3,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":"Hi"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":" there!"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":6,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"text":"Hi there!"}

event: response.completed
data: {"type":"response.completed","sequence_number":8,"response":{"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","status":"completed","error":null,"incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":[{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi there!","annotations":[]}]}],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}}

`

// openAIResponsesIncomplete: a Responses stream cut at max_output_tokens,
// its events not named by an SSE event field.
const openAIResponsesIncomplete = `data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_2","object":"response","status":"in_progress","model":"o4-mini-2025-04-16","output":[],"usage":null}}

data: {"type":"response.reasoning_summary_text.delta","sequence_number":1,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Thinking"}

data: {"type":"response.incomplete","sequence_number":2,"response":{"id":"resp_2","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"model":"o4-mini-2025-04-16","output":[],"usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":0},"output_tokens":16,"output_tokens_details":{"reasoning_tokens":16},"total_tokens":36}}}

`

// openAIResponsesFailed: a Responses stream that fails on the server.
const openAIResponsesFailed = `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_3","object":"response","status":"in_progress","model":"gpt-5","output":[],"usage":null}}

event: response.failed
data: {"type":"response.failed","sequence_number":1,"response":{"id":"resp_3","object":"response","status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"model":"gpt-5","output":[],"usage":null}}

`

// openAICompletionsJSON: a legacy Completions answer.
const openAICompletionsJSON = `{"id":"cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7","object":"text_completion","created":1589478378,"model":"gpt-3.5-turbo-instruct","system_fingerprint":"fp_44709d6fcb","choices":[{"text":"\n\nThis is indeed a test","index":0,"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`

// openAIEmbeddingsJSON: an Embeddings answer, which has no output count.
const openAIEmbeddingsJSON = `{
  "object": "list",
  "data": [{"object": "embedding", "embedding": [0.0023064255, -0.009327292, -0.0028842222, 1.5e-05], "index": 0}],
  "model": "text-embedding-3-small",
  "usage": {"prompt_tokens": 8, "total_tokens": 8}
}`

// openAIErrorJSON: OpenAI's rate limit error.
const openAIErrorJSON = `{
    "error": {
        "message": "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.",
        "type": "tokens",
        "param": null,
        "code": "rate_limit_exceeded"
    }
}`

// azureErrorJSON: Azure's error, whose code is the status as a string.
const azureErrorJSON = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier."}}`

// anthropicJSON: a Messages answer with cache reads and writes and
// thinking.
const anthropicJSON = `{
  "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [{"type": "thinking", "thinking": "Let me think.", "signature": "EqQB"}, {"type": "text", "text": "Hi! My name is Claude."}],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {"input_tokens": 10, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000, "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0}, "output_tokens": 503, "output_tokens_details": {"thinking_tokens": 120}, "service_tier": "standard"}
}`

// anthropicSSE: a Messages stream: thinking, text, a tool call, pings,
// message_delta counts that grow and repeat the input counts.
const anthropicSSE = `event: message_start
data: {"type":"message_start","message":{"id":"msg_019Q1hrJbZG26Fb9BQhrkHEr","type":"message","role":"assistant","model":"claude-opus-4-8","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":377,"cache_creation_input_tokens":0,"cache_read_input_tokens":1200,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants the weather."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"I'll check the weather in Paris."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01NRLabsLyVHZPKxbKvkfSMn","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"Paris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":377,"cache_creation_input_tokens":0,"cache_read_input_tokens":1200,"output_tokens":89,"output_tokens_details":{"thinking_tokens":30}}}

event: message_stop
data: {"type":"message_stop"}

`

// anthropicSSEOverloaded: a stream that fails mid-way with an error event.
const anthropicSSEOverloaded = `event: message_start
data: {"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}

event: error
data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

`

// anthropicErrorJSON: Anthropic's error answer.
const anthropicErrorJSON = `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`

// geminiJSON: a generateContent answer with thoughts, cached content and
// tool-use prompt tokens.
const geminiJSON = `{
  "candidates": [{"content": {"parts": [{"text": "Once upon a time"}], "role": "model"}, "finishReason": "STOP", "avgLogprobs": -0.1, "index": 0}],
  "usageMetadata": {
    "promptTokenCount": 1010,
    "candidatesTokenCount": 20,
    "totalTokenCount": 1135,
    "cachedContentTokenCount": 1000,
    "thoughtsTokenCount": 100,
    "toolUsePromptTokenCount": 5,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1010}],
    "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 1000}]
  },
  "modelVersion": "gemini-2.5-flash",
  "responseId": "mIvOaMuZJ8eJ1dkPp7mXuQ0"
}`

// geminiSSE: streamGenerateContent?alt=sse, events separated by CRLF CRLF,
// usage cumulative in every chunk.
const geminiSSE = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 8,\"totalTokenCount\": 8},\"modelVersion\": \"gemini-2.5-pro\",\"responseId\": \"x9i2aKDZBJ2Y1dkP7rqUoQ4\"}\r\n\r\n" +
	"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"The quick brown fox\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 8,\"candidatesTokenCount\": 12,\"totalTokenCount\": 20,\"thoughtsTokenCount\": 40},\"modelVersion\": \"gemini-2.5-pro\",\"responseId\": \"x9i2aKDZBJ2Y1dkP7rqUoQ4\"}\r\n\r\n" +
	"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" jumps.\"}],\"role\": \"model\"},\"finishReason\": \"MAX_TOKENS\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 8,\"candidatesTokenCount\": 30,\"totalTokenCount\": 78,\"thoughtsTokenCount\": 40,\"promptTokensDetails\": [{\"modality\": \"TEXT\",\"tokenCount\": 8}]},\"modelVersion\": \"gemini-2.5-pro\",\"responseId\": \"x9i2aKDZBJ2Y1dkP7rqUoQ4\"}\r\n\r\n"

// geminiArray: streamGenerateContent without alt=sse is one JSON array,
// written an element at a time.
const geminiArray = `[{
  "candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}], "role": "model"}, "index": 0}],
  "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
  "modelVersion": "gemini-2.5-flash-lite"
}
,
{
  "candidates": [{"content": {"parts": [{"text": " fox jumps.]\"}"}], "role": "model"}, "finishReason": "STOP", "index": 0}],
  "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 30, "thoughtsTokenCount": 5, "totalTokenCount": 43},
  "modelVersion": "gemini-2.5-flash-lite",
  "responseId": "abc"
}
]`

// geminiErrorJSON: Gemini's error answer.
const geminiErrorJSON = `{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count"}]}]
  }
}`

// geminiBlockedJSON: a prompt blocked before any candidate.
const geminiBlockedJSON = `{"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]}, "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7}, "modelVersion": "gemini-2.5-flash"}`
