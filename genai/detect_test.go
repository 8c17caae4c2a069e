package genai

import (
	"testing"
)

func TestDetect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		api    API
		method string
		path   string
		body   string
		want   Call
		ok     bool
	}{
		{
			name: "openai chat", api: OpenAI, method: "POST", path: "/v1/chat/completions",
			body: `{"model":"gpt-4o","messages":[{"role":"user","content":"hi \"model\": \"x\""}],"max_completion_tokens":256,"temperature":0,"stream":true}`,
			want: Call{API: OpenAI, Endpoint: ChatCompletions, Provider: "openai", Operation: "chat", RequestModel: "gpt-4o",
				Stream: true, MaxTokens: 256, HasTemperature: true}, ok: true,
		},
		{
			name: "openai chat behind a route prefix, trailing slash and query", api: OpenAI, method: "POST",
			path: "/openai/v1/chat/completions/?x=1", body: `{"model":"gpt-4.1-mini","max_tokens":64,"temperature":0.7}`,
			want: Call{API: OpenAI, Endpoint: ChatCompletions, Provider: "openai", Operation: "chat", RequestModel: "gpt-4.1-mini",
				MaxTokens: 64, Temperature: 0.7, HasTemperature: true}, ok: true,
		},
		{
			name: "openai-compatible server without /v1", api: OpenAI, method: "POST", path: "/chat/completions",
			body: `{"model":"llama3.1:8b"}`,
			want: Call{API: OpenAI, Endpoint: ChatCompletions, Provider: "openai", Operation: "chat", RequestModel: "llama3.1:8b"}, ok: true,
		},
		{
			name: "openai responses", api: OpenAI, method: "POST", path: "/v1/responses",
			body: `{"model":"gpt-5","input":"hi","max_output_tokens":1000,"stream":false}`,
			want: Call{API: OpenAI, Endpoint: Responses, Provider: "openai", Operation: "chat", RequestModel: "gpt-5", MaxTokens: 1000}, ok: true,
		},
		{
			name: "openai legacy completions", api: OpenAI, method: "POST", path: "/v1/completions",
			body: `{"model":"gpt-3.5-turbo-instruct","prompt":"x"}`,
			want: Call{API: OpenAI, Endpoint: Completions, Provider: "openai", Operation: "text_completion", RequestModel: "gpt-3.5-turbo-instruct"}, ok: true,
		},
		{
			name: "openai embeddings", api: OpenAI, method: "POST", path: "/v1/embeddings",
			body: `{"model":"text-embedding-3-large","input":["a","b"]}`,
			want: Call{API: OpenAI, Endpoint: Embeddings, Provider: "openai", Operation: "embeddings", RequestModel: "text-embedding-3-large"}, ok: true,
		},
		{name: "openai model list", api: OpenAI, method: "GET", path: "/v1/models"},
		{name: "openai model list posted", api: OpenAI, method: "POST", path: "/v1/models"},
		{name: "openai files", api: OpenAI, method: "POST", path: "/v1/files"},
		{name: "openai response retrieval", api: OpenAI, method: "GET", path: "/v1/responses/resp_123"},
		{name: "openai response cancel", api: OpenAI, method: "POST", path: "/v1/responses/resp_123/cancel"},
		{name: "openai response input tokens", api: OpenAI, method: "POST", path: "/v1/responses/input_tokens"},
		{name: "get is not a call", api: OpenAI, method: "GET", path: "/v1/chat/completions"},
		{name: "unknown dialect", api: 0, method: "POST", path: "/v1/chat/completions"},
		{
			name: "azure deployment", api: AzureOpenAI, method: "POST",
			path: "/openai/deployments/prod-gpt4o/chat/completions?api-version=2024-10-21", body: `{"messages":[],"stream":true}`,
			want: Call{API: AzureOpenAI, Endpoint: ChatCompletions, Provider: "azure.ai.openai", Operation: "chat", RequestModel: "prod-gpt4o", Stream: true}, ok: true,
		},
		{
			name: "azure v1 names the model in the body", api: AzureOpenAI, method: "POST", path: "/openai/v1/responses",
			body: `{"model":"my-gpt-5-deployment"}`,
			want: Call{API: AzureOpenAI, Endpoint: Responses, Provider: "azure.ai.openai", Operation: "chat", RequestModel: "my-gpt-5-deployment"}, ok: true,
		},
		{
			name: "azure embeddings", api: AzureOpenAI, method: "POST", path: "/openai/deployments/emb/embeddings",
			want: Call{API: AzureOpenAI, Endpoint: Embeddings, Provider: "azure.ai.openai", Operation: "embeddings", RequestModel: "emb"}, ok: true,
		},
		{
			name: "anthropic messages", api: Anthropic, method: "POST", path: "/v1/messages",
			body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"temperature":1,"stream":true,"messages":[]}`,
			want: Call{API: Anthropic, Endpoint: Messages, Provider: "anthropic", Operation: "chat", RequestModel: "claude-sonnet-4-5",
				Stream: true, MaxTokens: 1024, Temperature: 1, HasTemperature: true}, ok: true,
		},
		{
			name: "anthropic behind a route", api: Anthropic, method: "POST", path: "/anthropic/v1/messages", body: `{"model":"claude-haiku-4-5"}`,
			want: Call{API: Anthropic, Endpoint: Messages, Provider: "anthropic", Operation: "chat", RequestModel: "claude-haiku-4-5"}, ok: true,
		},
		{
			name: "anthropic openai-compatible endpoint", api: Anthropic, method: "POST", path: "/v1/chat/completions", body: `{"model":"claude-opus-4-5"}`,
			want: Call{API: Anthropic, Endpoint: ChatCompletions, Provider: "anthropic", Operation: "chat", RequestModel: "claude-opus-4-5"}, ok: true,
		},
		{name: "anthropic token counting", api: Anthropic, method: "POST", path: "/v1/messages/count_tokens"},
		{name: "anthropic batches", api: Anthropic, method: "POST", path: "/v1/messages/batches"},
		{
			name: "gemini generateContent", api: Gemini, method: "POST", path: "/v1beta/models/gemini-2.5-flash:generateContent",
			body: `{"contents":[],"generationConfig":{"maxOutputTokens":800,"temperature":0.2}}`,
			want: Call{API: Gemini, Endpoint: GenerateContent, Provider: "gcp.gemini", Operation: "generate_content", RequestModel: "gemini-2.5-flash",
				MaxTokens: 800, Temperature: 0.2, HasTemperature: true}, ok: true,
		},
		{
			name: "gemini stream v1", api: Gemini, method: "POST", path: "/gemini/v1/models/gemini-2.5-pro:streamGenerateContent",
			want: Call{API: Gemini, Endpoint: GenerateContent, Provider: "gcp.gemini", Operation: "generate_content", RequestModel: "gemini-2.5-pro", Stream: true}, ok: true,
		},
		{
			name: "gemini tuned model", api: Gemini, method: "POST", path: "/v1beta/tunedModels/my-model-1:generateContent",
			want: Call{API: Gemini, Endpoint: GenerateContent, Provider: "gcp.gemini", Operation: "generate_content", RequestModel: "my-model-1"}, ok: true,
		},
		{
			name: "gemini openai-compatible endpoint", api: Gemini, method: "POST", path: "/v1beta/openai/chat/completions",
			body: `{"model":"gemini-2.5-flash","stream":true}`,
			want: Call{API: Gemini, Endpoint: ChatCompletions, Provider: "gcp.gemini", Operation: "chat", RequestModel: "gemini-2.5-flash", Stream: true}, ok: true,
		},
		{name: "gemini count tokens", api: Gemini, method: "POST", path: "/v1beta/models/gemini-2.5-flash:countTokens"},
		{name: "gemini embed", api: Gemini, method: "POST", path: "/v1beta/models/text-embedding-004:embedContent"},
		{name: "gemini model get", api: Gemini, method: "GET", path: "/v1beta/models/gemini-2.5-flash"},
		{
			name: "body not json", api: OpenAI, method: "POST", path: "/v1/chat/completions", body: `model=gpt-4o`,
			want: Call{API: OpenAI, Endpoint: ChatCompletions, Provider: "openai", Operation: "chat"}, ok: true,
		},
		{
			name: "body with bad settings", api: OpenAI, method: "POST", path: "/v1/chat/completions",
			body: `{"model":7,"max_tokens":-1,"temperature":"hot","stream":"yes"}`,
			want: Call{API: OpenAI, Endpoint: ChatCompletions, Provider: "openai", Operation: "chat"}, ok: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Detect(tt.api, tt.method, tt.path, []byte(tt.body))
			if ok != tt.ok || got != tt.want {
				t.Errorf("Detect = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestAPIForHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host string
		want API
	}{
		{"api.openai.com", OpenAI},
		{"API.OpenAI.com:443", OpenAI},
		{"api.anthropic.com.", Anthropic},
		{"generativelanguage.googleapis.com:443", Gemini},
		{"my-resource.openai.azure.com", AzureOpenAI},
		{"my-resource.cognitiveservices.azure.com:443", AzureOpenAI},
		{"openai.azure.com", 0},
		{"evilopenai.azure.com", 0},
		{"api.openai.com.evil.example", 0},
		{"localhost:11434", 0},
		{"[::1]:8000", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := APIForHost(tt.host); got != tt.want {
			t.Errorf("APIForHost(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

func TestParseAPI(t *testing.T) {
	t.Parallel()
	for _, a := range []API{OpenAI, Anthropic, Gemini, AzureOpenAI} {
		if got, ok := ParseAPI(a.String()); !ok || got != a {
			t.Errorf("ParseAPI(%q) = %v, %v", a.String(), got, ok)
		}
		if got, ok := ParseAPI(" " + a.Provider() + " "); !ok || got != a {
			t.Errorf("ParseAPI(%q) = %v, %v", a.Provider(), got, ok)
		}
	}
	if _, ok := ParseAPI("GEMINI"); !ok {
		t.Error("ParseAPI is case-sensitive")
	}
	for _, bad := range []string{"", "vllm", "azure", "bedrock"} {
		if _, ok := ParseAPI(bad); ok {
			t.Errorf("ParseAPI(%q) ok", bad)
		}
	}
	if API(0).String() != "" || API(0).Provider() != "" || API(9).Provider() != "" {
		t.Error("the zero API names something")
	}
}
