package record

import (
	"math"
	"strconv"
	"time"
)

// ModelSummary is what the agent's model calls did while it handled a
// handoff (receipts only; docs/model-calls.md): how many it made, what
// their answers reported and what that cost, and each call, so that a
// trace says what each of its agents spent. Journal hits and Baton's own
// refusals spend nothing.
type ModelSummary struct {
	// Calls counts the model calls tied to the handling: JournalHits of
	// them were answered from the journal, Refused by Baton itself (the
	// chain's budget or the handling's cap on calls); the others went out.
	// UnknownUsage of those reported no usage (their tokens and cost are
	// unknown, not zero) and Unpriced, of the others, were to a model
	// without a price (their cost is unknown).
	Calls        int `json:"calls"`
	JournalHits  int `json:"journal_hits,omitempty"`
	Refused      int `json:"refused,omitempty"`
	UnknownUsage int `json:"unknown_usage,omitempty"`
	Unpriced     int `json:"unpriced,omitempty"`
	// The tokens the calls that went out were billed: input (cached input
	// included), output (reasoning included).
	InputTokens     int64 `json:"input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	CachedTokens    int64 `json:"cached_input_tokens,omitempty"`
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
	// CostUSD is what the priced calls cost.
	CostUSD float64 `json:"cost_usd"`
	// Budget is the chain's budget the handling ran under (nil: none);
	// BudgetNote says why a budget the request carried was not taken.
	Budget     *BudgetView `json:"budget,omitempty"`
	BudgetNote string      `json:"budget_note,omitempty"`
	// List holds the first MaxModelCalls calls in the order they began;
	// More counts the others, which the totals include.
	List []ModelCall `json:"list,omitempty"`
	More int         `json:"more,omitempty"`
}

// MaxModelCalls bounds ModelSummary.List.
const MaxModelCalls = 64

// BudgetView is a chain budget as a record shows it: the chain it is
// counted for (baton budget show CHAIN) and its bounds.
type BudgetView struct {
	Chain   string  `json:"chain,omitempty"`
	Tokens  int64   `json:"tokens,omitempty"`
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// ModelCall is one model call of a handling.
type ModelCall struct {
	At time.Time `json:"at"`
	// Ms is how long the call took, to its answer's end; TTFTMs to its
	// first token, for a streamed answer.
	Ms     float64 `json:"ms"`
	TTFTMs float64 `json:"ttft_ms,omitempty"`
	// API is where it went: the route's name or the host:port.
	API       string `json:"api"`
	Provider  string `json:"provider"`
	Operation string `json:"operation"`
	Model     string `json:"model"`
	Status    int    `json:"status,omitempty"`
	// Tokens, when UsageKnown.
	InputTokens     int64 `json:"input_tokens,omitempty"`
	OutputTokens    int64 `json:"output_tokens,omitempty"`
	CachedTokens    int64 `json:"cached_input_tokens,omitempty"`
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
	UsageKnown      bool  `json:"usage_known"`
	// CostUSD, when Priced.
	CostUSD float64 `json:"cost_usd,omitempty"`
	Priced  bool    `json:"priced,omitempty"`
	// Journal: answered from the journal, at no cost. Refused: answered by
	// Baton, and why ("chain budget", "calls per handling").
	Journal bool   `json:"journal,omitempty"`
	Refused string `json:"refused,omitempty"`
	// Finish is why the model stopped; Error the provider's error type.
	Finish string `json:"finish,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Add counts one call into the summary.
func (s *ModelSummary) Add(c ModelCall) {
	s.Calls++
	switch {
	case c.Journal:
		s.JournalHits++
	case c.Refused != "":
		s.Refused++
	default:
		// A call whose usage is unknown has no cost either, but its model
		// may well have a price: it counts as unknown usage only, so that
		// Unpriced says what it claims (a model without a price).
		switch {
		case !c.UsageKnown:
			s.UnknownUsage++
		case !c.Priced:
			s.Unpriced++
		}
		s.InputTokens += c.InputTokens
		s.OutputTokens += c.OutputTokens
		s.CachedTokens += c.CachedTokens
		s.ReasoningTokens += c.ReasoningTokens
		s.CostUSD += c.CostUSD
	}
	if len(s.List) < MaxModelCalls {
		s.List = append(s.List, c)
	} else {
		s.More++
	}
}

// Clone returns a copy of s that shares nothing with it.
func (s *ModelSummary) Clone() *ModelSummary {
	if s == nil {
		return nil
	}
	c := *s
	c.List = append([]ModelCall(nil), s.List...)
	if s.Budget != nil {
		b := *s.Budget
		c.Budget = &b
	}
	return &c
}

func (s *ModelSummary) appendJSON(b []byte) []byte {
	b = append(b, `{"calls":`...)
	b = strconv.AppendInt(b, int64(s.Calls), 10)
	b = appendIntMember(b, `,"journal_hits":`, int64(s.JournalHits))
	b = appendIntMember(b, `,"refused":`, int64(s.Refused))
	b = appendIntMember(b, `,"unknown_usage":`, int64(s.UnknownUsage))
	b = appendIntMember(b, `,"unpriced":`, int64(s.Unpriced))
	b = append(b, `,"input_tokens":`...)
	b = strconv.AppendInt(b, s.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, s.OutputTokens, 10)
	b = appendIntMember(b, `,"cached_input_tokens":`, s.CachedTokens)
	b = appendIntMember(b, `,"reasoning_tokens":`, s.ReasoningTokens)
	b = append(b, `,"cost_usd":`...)
	b = appendFloat(b, s.CostUSD)
	if s.Budget != nil {
		b = append(b, `,"budget":{`...)
		n := len(b)
		if s.Budget.Chain != "" {
			b = append(b, `"chain":`...)
			b = appendString(b, s.Budget.Chain)
		}
		if s.Budget.Tokens != 0 {
			if len(b) > n {
				b = append(b, ',')
			}
			b = append(b, `"tokens":`...)
			b = strconv.AppendInt(b, s.Budget.Tokens, 10)
		}
		if written(s.Budget.CostUSD) {
			if len(b) > n {
				b = append(b, ',')
			}
			b = append(b, `"cost_usd":`...)
			b = appendFloat(b, s.Budget.CostUSD)
		}
		b = append(b, '}')
	}
	if s.BudgetNote != "" {
		b = append(b, `,"budget_note":`...)
		b = appendString(b, s.BudgetNote)
	}
	if len(s.List) != 0 {
		b = append(b, `,"list":[`...)
		for i := range s.List {
			if i > 0 {
				b = append(b, ',')
			}
			b = s.List[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	b = appendIntMember(b, `,"more":`, int64(s.More))
	return append(b, '}')
}

func (c *ModelCall) appendJSON(b []byte) []byte {
	b = append(b, `{"at":`...)
	b = appendTime(b, c.At)
	b = append(b, `,"ms":`...)
	b = appendFloat(b, c.Ms)
	if written(c.TTFTMs) {
		b = append(b, `,"ttft_ms":`...)
		b = appendFloat(b, c.TTFTMs)
	}
	b = append(b, `,"api":`...)
	b = appendString(b, c.API)
	b = append(b, `,"provider":`...)
	b = appendString(b, c.Provider)
	b = append(b, `,"operation":`...)
	b = appendString(b, c.Operation)
	b = append(b, `,"model":`...)
	b = appendString(b, c.Model)
	b = appendIntMember(b, `,"status":`, int64(c.Status))
	b = appendIntMember(b, `,"input_tokens":`, c.InputTokens)
	b = appendIntMember(b, `,"output_tokens":`, c.OutputTokens)
	b = appendIntMember(b, `,"cached_input_tokens":`, c.CachedTokens)
	b = appendIntMember(b, `,"reasoning_tokens":`, c.ReasoningTokens)
	b = append(b, `,"usage_known":`...)
	b = strconv.AppendBool(b, c.UsageKnown)
	if written(c.CostUSD) {
		b = append(b, `,"cost_usd":`...)
		b = appendFloat(b, c.CostUSD)
	}
	if c.Priced {
		b = append(b, `,"priced":true`...)
	}
	if c.Journal {
		b = append(b, `,"journal":true`...)
	}
	if c.Refused != "" {
		b = append(b, `,"refused":`...)
		b = appendString(b, c.Refused)
	}
	if c.Finish != "" {
		b = append(b, `,"finish":`...)
		b = appendString(b, c.Finish)
	}
	if c.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, c.Error)
	}
	return append(b, '}')
}

// written reports whether an omitempty float is written: appendFloat
// writes NaN and the infinities as 0, which omitempty leaves out.
func written(f float64) bool { return f != 0 && !math.IsNaN(f) && !math.IsInf(f, 0) }

// appendIntMember appends member and n when n is not zero (omitempty).
func appendIntMember(b []byte, member string, n int64) []byte {
	if n == 0 {
		return b
	}
	b = append(b, member...)
	return strconv.AppendInt(b, n, 10)
}

// encodedSize is about the size of s's encoding.
func (s *ModelSummary) encodedSize() int {
	n := len(`{"calls":,"journal_hits":,"refused":,"unknown_usage":,"unpriced":,"input_tokens":,"output_tokens":,`+
		`"cached_input_tokens":,"reasoning_tokens":,"cost_usd":,"budget":{"chain":"","tokens":,"cost_usd":},"budget_note":"","more":}`) +
		80 + len(s.BudgetNote)
	if s.Budget != nil {
		n += len(s.Budget.Chain)
	}
	for i := range s.List {
		c := &s.List[i]
		n += len(`{"at":"2006-01-02T15:04:05.999999999Z","ms":,"ttft_ms":,"api":"","provider":"","operation":"","model":"",`+
			`"status":,"input_tokens":,"output_tokens":,"cached_input_tokens":,"reasoning_tokens":,"usage_known":false,`+
			`"cost_usd":,"priced":true,"journal":true,"refused":"","finish":"","error":""},`) + 80 +
			len(c.API) + len(c.Provider) + len(c.Operation) + len(c.Model) + len(c.Refused) + len(c.Finish) + len(c.Error)
	}
	return n
}
