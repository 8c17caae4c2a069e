package genai

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestCost(t *testing.T) {
	t.Parallel()
	sonnet := Price{InputPerMTok: 3, CachedInputPerMTok: 0.30, CacheWritePerMTok: 3.75, OutputPerMTok: 15}
	tests := []struct {
		name  string
		price Price
		usage Usage
		want  int64
		known bool
	}{
		{"plain", Price{InputPerMTok: 2.50, OutputPerMTok: 10}, Usage{Input: 1000, Output: 100, Known: true}, 1000*2500 + 100*10000, true},
		// 10 fresh at $3, 2000 read at $0.30, 100 written at $3.75, 503 out at $15.
		{"anthropic caching", sonnet, Usage{Input: 2110, CachedInput: 2000, CacheCreation: 100, Output: 503, Known: true},
			10*3000 + 2000*300 + 100*3750 + 503*15000, true},
		{"cache prices default to input", Price{InputPerMTok: 1, OutputPerMTok: 2}, Usage{Input: 100, CachedInput: 50, CacheCreation: 10, Output: 1, Known: true},
			100*1000 + 2000, true},
		{"reasoning is output", Price{InputPerMTok: 1, OutputPerMTok: 8}, Usage{Input: 1, Output: 10, Reasoning: 9, Known: true}, 1000 + 80000, true},
		{"fractions of a nano-dollar round", Price{InputPerMTok: 0.0005}, Usage{Input: 3, Known: true}, 2, true},
		{"free", Price{}, Usage{Input: 5, Output: 5, Known: true}, 0, true},
		{"unknown usage", sonnet, Usage{}, 0, false},
		{"negative price", Price{InputPerMTok: -1}, Usage{Input: 1, Known: true}, 0, false},
		{"nan price", Price{OutputPerMTok: math.NaN()}, Usage{Input: 1, Known: true}, 0, false},
		{"absurd price", Price{OutputPerMTok: 10001}, Usage{Input: 1, Known: true}, 0, false},
		{"overflow", Price{InputPerMTok: MaxPricePerMTok}, Usage{Input: maxTokens, Known: true}, 0, false},
		{"incoherent usage", sonnet, Usage{Input: 1, CachedInput: 2, Known: true}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, known := Cost(tt.price, tt.usage)
			if got != tt.want || known != tt.known {
				t.Errorf("Cost = %d, %v; want %d, %v", got, known, tt.want, tt.known)
			}
		})
	}
}

func TestPricesLookup(t *testing.T) {
	t.Parallel()
	p, err := DefaultPrices().With(map[string]Price{
		"gpt-4o":              {InputPerMTok: 1, OutputPerMTok: 1},
		"azure-openai/gpt-4o": {InputPerMTok: 3, OutputPerMTok: 3},
		"openai/meta-llama/Llama-3.1-8B-Instruct": {InputPerMTok: 0.05, OutputPerMTok: 0.05},
		"Qwen/Qwen3-32B":            {InputPerMTok: 0.10, OutputPerMTok: 0.30},
		"anthropic/claude-opus-4-5": {InputPerMTok: 4, OutputPerMTok: 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		api   API
		model string
		want  float64 // input price
		ok    bool
	}{
		{OpenAI, "gpt-4o", 1, true},                     // override for all dialects
		{OpenAI, "gpt-4o-2024-08-06", 1, true},          // its snapshot
		{OpenAI, "gpt-4o-2024-05-13", 5, true},          // a snapshot with its own default
		{AzureOpenAI, "gpt-4o-2024-11-20", 3, true},     // override for the dialect
		{OpenAI, "gpt-4o-mini-2024-07-18", 0.15, true},  // the longest name wins
		{OpenAI, "GPT-4.1-Mini", 0.40, true},            // any case
		{OpenAI, "gpt-5.4-mini-2026-03-17", 0.75, true}, // dated snapshot
		{OpenAI, "gpt-5.3", 0, false},                   // "gpt-5" followed by "." is no snapshot
		{OpenAI, "meta-llama/Llama-3.1-8B-Instruct", 0.05, true},
		{Gemini, "meta-llama/Llama-3.1-8B-Instruct", 0, false},
		{OpenAI, "qwen/qwen3-32b", 0.10, true},
		{Anthropic, "claude-sonnet-4-5-20250929", 3, true},
		{Anthropic, "claude-sonnet-4-5@20250929", 3, true}, // Vertex AI's form
		{Anthropic, "claude-sonnet-4-20250514", 3, true},
		{Anthropic, "claude-opus-4-5-20251101", 4, true},
		{OpenAI, "claude-opus-4-5", 5, true}, // the override is Anthropic's only
		{Anthropic, "claude-opus-4-9", 0, false},
		{Anthropic, "claude-3-5-haiku-20241022", 0.80, true},
		{Gemini, "models/gemini-2.5-flash", 0.30, true},
		{Gemini, "gemini-2.5-flash-lite-preview-06-17", 0.10, true},
		{Gemini, "gemini-2.5-flash-preview-05-20", 0.30, true},
		{OpenAI, "llama3.1:8b", 0, false},
		{OpenAI, "", 0, false},
	}
	for _, tt := range tests {
		got, ok := p.Lookup(tt.api, tt.model)
		if ok != tt.ok || got.InputPerMTok != tt.want {
			t.Errorf("Lookup(%v, %q) = %+v, %v; want input %v, %v", tt.api, tt.model, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := DefaultPrices().Lookup(AzureOpenAI, "prod-deployment"); ok {
		t.Error("a deployment name has a price")
	}
}

func TestPricesWithRejects(t *testing.T) {
	t.Parallel()
	_, err := DefaultPrices().With(map[string]Price{
		"gpt-4o":          {InputPerMTok: -1},
		"openai/":         {InputPerMTok: 1},
		"my-model":        {OutputPerMTok: math.Inf(1)},
		"gemini/gem":      {CachedInputPerMTok: 20000},
		"fine":            {InputPerMTok: 1},
		"anthropic/x-nan": {CacheWritePerMTok: math.NaN()},
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`"gpt-4o": input must be`, `"openai/": must name a model`, `"my-model": output`, `"gemini/gem": cached_input`, `"anthropic/x-nan": cache_write`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "fine") {
		t.Errorf("error names a good price: %v", err)
	}
	// The defaults are unchanged by a rejected or an accepted override.
	p, err := DefaultPrices().With(map[string]Price{"gpt-4o": {InputPerMTok: 9}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.With(map[string]Price{"gpt-4o": {InputPerMTok: 8}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.Lookup(OpenAI, "gpt-4o"); got.InputPerMTok != 9 {
		t.Errorf("an override changed its parent: %+v", got)
	}
	if got, _ := DefaultPrices().Lookup(OpenAI, "gpt-4o"); got.InputPerMTok != 2.50 {
		t.Errorf("an override changed the defaults: %+v", got)
	}
}

func TestDefaultPricesValid(t *testing.T) {
	t.Parallel()
	for name, p := range defaultPrices {
		if msg := p.check(); msg != "" || p.InputPerMTok == 0 {
			t.Errorf("%s: %s %+v", name, msg, p)
		}
		if name != normalModel(name) {
			t.Errorf("%s is not a normal model name", name)
		}
		if p.CachedInputPerMTok > p.InputPerMTok {
			t.Errorf("%s: cached input dearer than input", name)
		}
	}
}

func TestPricesCost(t *testing.T) {
	t.Parallel()
	p := DefaultPrices()
	r := ParseResponse(messagesCall, 200, jsonType, "", []byte(anthropicJSON))
	got, ok := p.Cost(messagesCall, r)
	// claude-sonnet-4-5: 10 fresh at $3, 2000 read at $0.30, 100 written at $3.75, 503 out at $15.
	if want := int64(10*3000 + 2000*300 + 100*3750 + 503*15000); !ok || got != want {
		t.Errorf("Cost = %d, %v; want %d", got, ok, want)
	}
	azure := mustDetect(AzureOpenAI, "/openai/deployments/prod/chat/completions", `{}`)
	r = ParseResponse(azure, 200, jsonType, "", []byte(openAIChatJSON))
	// gpt-4o-2024-08-06 answered: 93 fresh at $2.50, 1024 cached at $1.25, 46 out at $10.
	if got, ok := p.Cost(azure, r); !ok || got != 93*2500+1024*1250+46*10000 {
		t.Errorf("Azure Cost = %d, %v", got, ok)
	}
	r.ResponseModel = ""
	if _, ok := p.Cost(azure, r); ok {
		t.Error("a deployment was priced")
	}
}

func TestLookupRemembers(t *testing.T) {
	t.Parallel()
	p, err := DefaultPrices().With(map[string]Price{"openai/my-model": {InputPerMTok: 1, OutputPerMTok: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time from the memo; one after another from the last entry
		for _, tc := range []struct {
			api   API
			model string
			ok    bool
		}{{OpenAI, "my-model-2025", true}, {OpenAI, "my-model-2025", true}, {OpenAI, "my-model", true}, {Anthropic, "my-model", false},
			{OpenAI, "GPT-4o-2024-08-06", true}, {OpenAI, "no-such-model", false}, {OpenAI, "no-such-model", false}, {OpenAI, "my-model", true}} {
			got, ok := p.Lookup(tc.api, tc.model)
			want, wantOK := p.lookup(tc.api, tc.model)
			if ok != tc.ok || ok != wantOK || got != want {
				t.Errorf("Lookup(%v, %q) = %+v, %v; not remembered %+v, %v", tc.api, tc.model, got, ok, want, wantOK)
			}
		}
	}
	for i := range 2 * maxMemo {
		p.Lookup(OpenAI, fmt.Sprint("model-", i))
	}
	if n := len(*p.memo.Load()); n != maxMemo {
		t.Errorf("%d prices remembered, want the bound, %d", n, maxMemo)
	}
}
