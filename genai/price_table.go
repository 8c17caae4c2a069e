package genai

// PricesAsOf dates the default price table: the date of the most recent
// dated copy of a provider's price page the figures were checked against.
// The figures are list prices for standard (not batch, priority or flex)
// processing, for prompts under a model's long-context threshold; they
// were read from public copies of the providers' pages, not from the live
// pages, so override any figure that matters to a budget.
const PricesAsOf = "2026-07-04"

// Sources. The providers' own pages, and the copies they were read from:
//
//   - [openai]: https://platform.openai.com/docs/pricing (now
//     developers.openai.com/api/docs/pricing), per GitHub Copilot's
//     per-token price table (github/docs,
//     data/tables/copilot/models-and-pricing.yml, which lists OpenAI's
//     list prices including GPT-5.6's cache writes), a June 2026 copy at
//     morphllm.com/openai-api-pricing (GPT-5.4, 5.5), a March 2026 copy at
//     deploybase.ai (GPT-5, 5.1, o3, o4-mini, GPT-4.1) and a 2025-06-03 copy
//     in the openai_responses Elixir package (GPT-4.1, GPT-4o).
//   - [anthropic]: https://platform.claude.com/docs/en/docs/about-claude/pricing
//     (was docs.anthropic.com), per its copy at aiwiki.dev updated
//     2025-11-15 (Opus 4.1 and older, Sonnet, Haiku, cache writes at 1.25x
//     and reads at 0.1x input) and GitHub Copilot's table (Opus 4.5 and
//     later, Sonnet 4.6, Sonnet 5, Fable 5). Model ids are those of
//     Anthropic's TypeScript SDK (src/resources/messages/messages.ts).
//   - [gemini]: https://ai.google.dev/gemini-api/docs/pricing, per a
//     2026-07-04 quotation at factquire.com (Gemini 3 Flash), a March 2026
//     copy at deploybase.ai (2.5 Pro, 2.5 Flash), discuss.ai.google.dev
//     threads quoting it (2.5 Pro context caching) and GitHub Copilot's
//     table (3.1 Pro).
//
// Not modelled: long-context tiers (Gemini 2.5 Pro and 3.x Pro above 200K
// input tokens, Claude Sonnet 4 and 4.5 above 200K, GPT-5.4 and later above
// 272K), which cost up to twice as much; Anthropic's 1-hour cache writes
// (2x input, against 1.25x for the 5-minute writes priced here); audio,
// image and realtime tokens; Gemini's cache storage, billed per hour.

// defaultPrices is the shipped table, keyed by model name.
var defaultPrices = map[string]Price{
	// OpenAI [openai].
	"gpt-5.6-sol":            {InputPerMTok: 5, CachedInputPerMTok: 0.50, CacheWritePerMTok: 6.25, OutputPerMTok: 30},
	"gpt-5.6-terra":          {InputPerMTok: 2, CachedInputPerMTok: 0.20, CacheWritePerMTok: 2.50, OutputPerMTok: 12},
	"gpt-5.6-luna":           {InputPerMTok: 0.20, CachedInputPerMTok: 0.02, CacheWritePerMTok: 0.25, OutputPerMTok: 1.20},
	"gpt-5.5":                {InputPerMTok: 5, CachedInputPerMTok: 0.50, OutputPerMTok: 30},
	"gpt-5.5-pro":            {InputPerMTok: 30, OutputPerMTok: 180},
	"gpt-5.4":                {InputPerMTok: 2.50, CachedInputPerMTok: 0.25, OutputPerMTok: 15},
	"gpt-5.4-mini":           {InputPerMTok: 0.75, CachedInputPerMTok: 0.075, OutputPerMTok: 4.50},
	"gpt-5.4-nano":           {InputPerMTok: 0.20, CachedInputPerMTok: 0.02, OutputPerMTok: 1.25},
	"gpt-5.4-pro":            {InputPerMTok: 30, OutputPerMTok: 180},
	"gpt-5.3-codex":          {InputPerMTok: 1.75, CachedInputPerMTok: 0.175, OutputPerMTok: 14},
	"gpt-5.2":                {InputPerMTok: 1.75, CachedInputPerMTok: 0.175, OutputPerMTok: 14},
	"gpt-5.2-pro":            {InputPerMTok: 21, OutputPerMTok: 168},
	"gpt-5.1":                {InputPerMTok: 1.25, CachedInputPerMTok: 0.125, OutputPerMTok: 10},
	"gpt-5":                  {InputPerMTok: 1.25, CachedInputPerMTok: 0.125, OutputPerMTok: 10},
	"gpt-5-mini":             {InputPerMTok: 0.25, CachedInputPerMTok: 0.025, OutputPerMTok: 2},
	"gpt-5-nano":             {InputPerMTok: 0.05, CachedInputPerMTok: 0.005, OutputPerMTok: 0.40},
	"gpt-5-pro":              {InputPerMTok: 15, OutputPerMTok: 120},
	"gpt-4.1":                {InputPerMTok: 2, CachedInputPerMTok: 0.50, OutputPerMTok: 8},
	"gpt-4.1-mini":           {InputPerMTok: 0.40, CachedInputPerMTok: 0.10, OutputPerMTok: 1.60},
	"gpt-4.1-nano":           {InputPerMTok: 0.10, CachedInputPerMTok: 0.025, OutputPerMTok: 0.40},
	"gpt-4o":                 {InputPerMTok: 2.50, CachedInputPerMTok: 1.25, OutputPerMTok: 10},
	"gpt-4o-2024-05-13":      {InputPerMTok: 5, OutputPerMTok: 15},
	"gpt-4o-mini":            {InputPerMTok: 0.15, CachedInputPerMTok: 0.075, OutputPerMTok: 0.60},
	"o3":                     {InputPerMTok: 2, CachedInputPerMTok: 0.50, OutputPerMTok: 8},
	"o3-pro":                 {InputPerMTok: 20, OutputPerMTok: 80},
	"o3-mini":                {InputPerMTok: 1.10, CachedInputPerMTok: 0.55, OutputPerMTok: 4.40},
	"o4-mini":                {InputPerMTok: 1.10, CachedInputPerMTok: 0.275, OutputPerMTok: 4.40},
	"o1":                     {InputPerMTok: 15, CachedInputPerMTok: 7.50, OutputPerMTok: 60},
	"text-embedding-3-small": {InputPerMTok: 0.02},
	"text-embedding-3-large": {InputPerMTok: 0.13},
	"text-embedding-ada-002": {InputPerMTok: 0.10},

	// Anthropic [anthropic]. Only the minor versions are listed, with the
	// official "-0" aliases and dated ids of the 4.0 models, so that a new
	// model (claude-opus-4-9) is not priced as its family's first.
	"claude-opus-5":            {InputPerMTok: 5, CachedInputPerMTok: 0.50, CacheWritePerMTok: 6.25, OutputPerMTok: 25},
	"claude-sonnet-5":          {InputPerMTok: 2, CachedInputPerMTok: 0.20, CacheWritePerMTok: 2.50, OutputPerMTok: 10},
	"claude-fable-5":           {InputPerMTok: 10, CachedInputPerMTok: 1, CacheWritePerMTok: 12.50, OutputPerMTok: 50},
	"claude-opus-4-8":          {InputPerMTok: 5, CachedInputPerMTok: 0.50, CacheWritePerMTok: 6.25, OutputPerMTok: 25},
	"claude-opus-4-7":          {InputPerMTok: 5, CachedInputPerMTok: 0.50, CacheWritePerMTok: 6.25, OutputPerMTok: 25},
	"claude-opus-4-6":          {InputPerMTok: 5, CachedInputPerMTok: 0.50, CacheWritePerMTok: 6.25, OutputPerMTok: 25},
	"claude-opus-4-5":          {InputPerMTok: 5, CachedInputPerMTok: 0.50, CacheWritePerMTok: 6.25, OutputPerMTok: 25},
	"claude-opus-4-1":          {InputPerMTok: 15, CachedInputPerMTok: 1.50, CacheWritePerMTok: 18.75, OutputPerMTok: 75},
	"claude-opus-4-0":          {InputPerMTok: 15, CachedInputPerMTok: 1.50, CacheWritePerMTok: 18.75, OutputPerMTok: 75},
	"claude-opus-4-20250514":   {InputPerMTok: 15, CachedInputPerMTok: 1.50, CacheWritePerMTok: 18.75, OutputPerMTok: 75},
	"claude-sonnet-4-6":        {InputPerMTok: 3, CachedInputPerMTok: 0.30, CacheWritePerMTok: 3.75, OutputPerMTok: 15},
	"claude-sonnet-4-5":        {InputPerMTok: 3, CachedInputPerMTok: 0.30, CacheWritePerMTok: 3.75, OutputPerMTok: 15},
	"claude-sonnet-4-0":        {InputPerMTok: 3, CachedInputPerMTok: 0.30, CacheWritePerMTok: 3.75, OutputPerMTok: 15},
	"claude-sonnet-4-20250514": {InputPerMTok: 3, CachedInputPerMTok: 0.30, CacheWritePerMTok: 3.75, OutputPerMTok: 15},
	"claude-3-7-sonnet":        {InputPerMTok: 3, CachedInputPerMTok: 0.30, CacheWritePerMTok: 3.75, OutputPerMTok: 15},
	"claude-3-5-sonnet":        {InputPerMTok: 3, CachedInputPerMTok: 0.30, CacheWritePerMTok: 3.75, OutputPerMTok: 15},
	"claude-haiku-4-5":         {InputPerMTok: 1, CachedInputPerMTok: 0.10, CacheWritePerMTok: 1.25, OutputPerMTok: 5},
	"claude-3-5-haiku":         {InputPerMTok: 0.80, CachedInputPerMTok: 0.08, CacheWritePerMTok: 1, OutputPerMTok: 4},
	"claude-3-haiku":           {InputPerMTok: 0.25, CachedInputPerMTok: 0.03, CacheWritePerMTok: 0.30, OutputPerMTok: 1.25},
	"claude-3-opus":            {InputPerMTok: 15, CachedInputPerMTok: 1.50, CacheWritePerMTok: 18.75, OutputPerMTok: 75},

	// Gemini [gemini]; output includes thinking tokens. Context caching is
	// billed per cached token read, plus storage (not modelled).
	"gemini-3.1-pro-preview": {InputPerMTok: 2, CachedInputPerMTok: 0.20, OutputPerMTok: 12},
	"gemini-3-pro-preview":   {InputPerMTok: 2, CachedInputPerMTok: 0.20, OutputPerMTok: 12},
	"gemini-3-flash-preview": {InputPerMTok: 0.50, CachedInputPerMTok: 0.05, OutputPerMTok: 3},
	"gemini-2.5-pro":         {InputPerMTok: 1.25, CachedInputPerMTok: 0.125, OutputPerMTok: 10},
	"gemini-2.5-flash":       {InputPerMTok: 0.30, CachedInputPerMTok: 0.03, OutputPerMTok: 2.50},
	"gemini-2.5-flash-lite":  {InputPerMTok: 0.10, CachedInputPerMTok: 0.01, OutputPerMTok: 0.40},
	"gemini-2.0-flash":       {InputPerMTok: 0.10, CachedInputPerMTok: 0.025, OutputPerMTok: 0.40},
	"gemini-2.0-flash-lite":  {InputPerMTok: 0.075, OutputPerMTok: 0.30},
}
