// Package genai understands model API calls as bytes on the wire: which
// requests are calls to a model, what they ask for, and what their answers
// report (the model that answered, why it stopped, the tokens it billed),
// whether the answer comes whole or streamed. It speaks OpenAI's API (and
// the many servers that copy it), Azure OpenAI, Anthropic's Messages API and
// the Gemini API, and names what it finds as OpenTelemetry's GenAI semantic
// conventions do (gen_ai.provider.name, gen_ai.operation.name,
// gen_ai.usage.*).
//
//   - Detect tells a model call from its method, path and body: a Call.
//   - ParseResponse reads a whole answer into a Result; a Stream reads one
//     as it passes, with bounded memory, and also tells when the first
//     token came and whether the answer ended or was cut off.
//   - Usage has one meaning across providers: Input is every input token
//     billed, CachedInput and CacheCreation the parts of it billed at the
//     cache prices. Usage that is missing or not believable is not Known,
//     never zero.
//   - Prices turns usage into a cost in nano-dollars, from a dated default
//     table (PricesAsOf) with configured overrides.
//   - WriteRefusal answers a call Baton refuses (a chain over its budget)
//     in the provider's own error shape, so that the agent's SDK raises its
//     usual error and does not retry.
//
// The package reads JSON with a small scanner that decodes only the fields
// it needs and skips the rest by bytes, so that a large prompt, answer or
// embedding costs a scan and no allocation. It imports nothing else of
// Baton.
package genai
