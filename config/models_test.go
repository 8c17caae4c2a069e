package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestModelsValid(t *testing.T) {
	t.Parallel()
	in := minimal + "external:\n  allow: [\"llm.internal:8000\", \"*.llm.example.com:443\"]\n" +
		"  routes: [{name: openai}, {name: local, url: \"http://127.0.0.1:11434/v1/\", api: openai}, {name: docs, url: \"https://docs.example.com/\"}]\n" +
		"models:\n  hosts: {\"llm.internal:8000\": openai, \"*.llm.example.com:443\": anthropic}\n" +
		"  prices: {my-model: {input: 0.5, output: 1.5, cached_input: 0.05}}\n  max_calls_per_handling: 0\n  on_store_error: deny\n" +
		"edges:\n  - {from: web, callers: {anonymous: true}, chain_budget: {tokens: 200000, cost_usd: 2.5, from_header: true}}\n" +
		"  - {from: planner, chain_budget: {cost_usd: 1}}\n"
	c, err := Parse(strings.NewReader(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	apis := []string{c.External.Routes[0].APIOf(), c.External.Routes[1].APIOf(), c.External.Routes[2].APIOf()}
	if !reflect.DeepEqual(apis, []string{"openai", "openai", ""}) {
		t.Errorf("routes' APIs %q", apis)
	}
	if c.Models.CallsPerHandling() != 0 || (Models{}).CallsPerHandling() != DefaultMaxCallsPerHandling {
		t.Errorf("max_calls_per_handling: %d, default %d", c.Models.CallsPerHandling(), (Models{}).CallsPerHandling())
	}
	if b := c.Edges[0].ChainBudget; !b.Set() || b.Tokens != 200000 || b.CostUSD != 2.5 || !b.FromHeader {
		t.Errorf("chain budget %+v", b)
	}
}

func TestModelsInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		conf string
		want []string
	}{
		{
			name: "hosts not allowed, malformed, or of an unknown API",
			conf: "external: {allow: [\"llm.internal:8000\"]}\nmodels: {hosts: {\"other:8000\": openai, \"llm.internal:8000\": mistral, \"nohost\": openai}}\n",
			want: []string{
				`models.hosts.llm.internal:8000: must be one of anthropic, azure-openai, gemini, openai (openai for any OpenAI-compatible server), got "mistral"`,
				`models.hosts.nohost: must be host:port, e.g. api.example.com:443 or *.example.com:443`,
				`models.hosts.other:8000: must be a destination the agent may reach: list it in external.allow`,
			},
		},
		{
			name: "a route of an unknown API",
			conf: "external: {routes: [{name: local, url: \"http://127.0.0.1:1/\", api: llama}]}\n",
			want: []string{`external.routes[0].api: must be one of anthropic, azure-openai, gemini, openai (openai for any OpenAI-compatible server), got "llama"`},
		},
		{
			name: "negative, absurd and NaN prices",
			conf: "models: {prices: {a: {input: -1, output: 20000}, b: {input: .nan, output: 1, cached_input: -0.1, cache_write: .inf}}}\n",
			want: []string{
				`models.prices.a.input: must be USD per million tokens, between 0 and 10000, got -1`,
				`models.prices.a.output: must be USD per million tokens, between 0 and 10000, got 20000`,
				`models.prices.b.input: must be USD per million tokens, between 0 and 10000, got NaN`,
				`models.prices.b.cached_input: must be USD per million tokens, between 0 and 10000, got -0.1`,
				`models.prices.b.cache_write: must be USD per million tokens, between 0 and 10000, got +Inf`,
			},
		},
		{
			name: "a negative cap, an unknown store error mode",
			conf: "models: {max_calls_per_handling: -1, on_store_error: retry}\n",
			want: []string{
				`models.max_calls_per_handling: must be >= 0 (0: no limit), got -1`,
				`models.on_store_error: must be allow or deny, got "retry"`,
			},
		},
		{
			name: "negative, absurd or empty budgets; on an outbound edge; from_header without callers",
			conf: "peers: {b: {url: http://127.0.0.1:1}}\nedges:\n" +
				"  - {from: a, chain_budget: {tokens: -5, cost_usd: 2000000}}\n" +
				"  - {from: c, chain_budget: {}}\n" +
				"  - {to: b, chain_budget: {tokens: 10}}\n" +
				"  - {from: d, chain_budget: {tokens: 10, from_header: true}}\n",
			want: []string{
				`edges[0].chain_budget.tokens: must be between 0 and 1000000000000 (0: no token budget), got -5`,
				`edges[0].chain_budget.cost_usd: must be between 0 and 1e+06 (0: no cost budget), got 2e+06`,
				`edges[1].chain_budget: must set tokens, cost_usd or from_header: true`,
				`edges[2].chain_budget: applies to inbound edges (from) only: a chain's budget is set where it enters`,
				`edges[3].chain_budget.from_header: applies to callers edges only: a Baton's handoff carries its chain's budget itself, got true`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(strings.NewReader(minimal+tt.conf), nil)
			if err == nil {
				t.Fatalf("Parse succeeded, want %q\n%s", tt.want, dump(c))
			}
			if got := lines(err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse error lines\n got: %q\nwant: %q", got, tt.want)
			}
			assertFieldErrors(t, err)
		})
	}
}
