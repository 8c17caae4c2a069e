package genai

// Usage is the token usage a model answer reports, in one meaning across
// providers.
//
// Input counts every input token billed, whatever its price: the prompt as
// sent, the part read from the provider's cache and the part written to
// it. CachedInput and CacheCreation are the parts of Input billed at the
// cache-read and cache-write prices; the rest of Input is billed at the
// input price. Output counts every output token billed, Reasoning the part
// of it the model spent thinking. These are the meanings of OpenTelemetry's
// gen_ai.usage.input_tokens (which includes cached tokens),
// gen_ai.usage.cache_read.input_tokens,
// gen_ai.usage.cache_creation.input_tokens, gen_ai.usage.output_tokens and
// gen_ai.usage.reasoning.output_tokens.
//
// From the providers' fields:
//
//   - OpenAI (and Azure): Input is prompt_tokens (Chat Completions) or
//     input_tokens (Responses), which already include
//     prompt_tokens_details.cached_tokens (CachedInput) and cache_write_tokens
//     (CacheCreation). Output is completion_tokens or output_tokens, which
//     include reasoning_tokens. Embeddings have no output.
//   - Anthropic: input_tokens excludes the cache, so Input is input_tokens +
//     cache_read_input_tokens + cache_creation_input_tokens, CachedInput
//     cache_read_input_tokens and CacheCreation
//     cache_creation_input_tokens. Output is output_tokens, which includes
//     output_tokens_details.thinking_tokens (Reasoning).
//   - Gemini: Input is promptTokenCount (which includes
//     cachedContentTokenCount, CachedInput) + toolUsePromptTokenCount.
//     Output is candidatesTokenCount + thoughtsTokenCount (Reasoning), which
//     Gemini reports apart but bills together as output.
//
// Known is false when the answer reported no usage, or usage Baton does not
// believe: a count missing, negative, fractional, not a number or above 10^12,
// or parts larger than their whole. Then every count is 0, and a zero means
// "unknown", never "free".
type Usage struct {
	Input, CachedInput, CacheCreation int64
	Output, Reasoning                 int64
	Known                             bool
}

// counts gathers a usage object's fields as they are read: each is absent,
// present or garbage.
type counts struct {
	in, cached, write, out, reasoning, toolPrompt int64
	hasIn, hasOut, bad                            bool
}

// set reads v into *n, noting garbage; a null counts as absent.
func (c *counts) set(n *int64, has *bool, v []byte) {
	if isNull(v) {
		return
	}
	x, ok := countOf(v)
	if !ok {
		c.bad = true
		return
	}
	*n = x
	if has != nil {
		*has = true
	}
}

// usage returns the counts as a Usage, Known when they are whole and
// coherent. needOut is false for embeddings, which have no output count.
func (c counts) usage(needOut bool) Usage {
	if c.bad || !c.hasIn || needOut && !c.hasOut {
		return Usage{}
	}
	u := Usage{
		Input:         c.in + c.toolPrompt,
		CachedInput:   c.cached,
		CacheCreation: c.write,
		Output:        c.out,
		Reasoning:     c.reasoning,
	}
	if u.CachedInput+u.CacheCreation > u.Input || u.Reasoning > u.Output || u.Input > maxTokens || u.Output > maxTokens {
		return Usage{}
	}
	u.Known = true
	return u
}

// openAIUsage reads OpenAI's usage object, of Chat Completions, Completions,
// Embeddings or Responses.
func openAIUsage(v []byte, needOut bool) Usage {
	o, ok := objectOf(v)
	if !ok {
		return Usage{}
	}
	var c counts
	for {
		k, v, ok := o.next()
		if !ok {
			break
		}
		switch string(k) {
		case "prompt_tokens", "input_tokens":
			c.set(&c.in, &c.hasIn, v)
		case "completion_tokens", "output_tokens":
			c.set(&c.out, &c.hasOut, v)
		case "prompt_tokens_details", "input_tokens_details":
			c.details(v, "cached_tokens", &c.cached, "cache_write_tokens", &c.write)
		case "completion_tokens_details", "output_tokens_details":
			c.details(v, "reasoning_tokens", &c.reasoning, "", nil)
		}
	}
	if o.bad {
		return Usage{}
	}
	return c.usage(needOut)
}

// details reads up to two counts from a details object (null or absent
// counts are 0).
func (c *counts) details(v []byte, k1 string, n1 *int64, k2 string, n2 *int64) {
	if isNull(v) {
		return
	}
	o, ok := objectOf(v)
	if !ok {
		c.bad = true
		return
	}
	for {
		k, v, ok := o.next()
		if !ok {
			break
		}
		switch string(k) {
		case k1:
			c.set(n1, nil, v)
		case k2:
			if n2 != nil {
				c.set(n2, nil, v)
			}
		}
	}
	if o.bad {
		c.bad = true
	}
}

// anthropicCounts reads Anthropic's usage object into c, over what c holds:
// a streamed message_delta repeats only some counts, cumulatively.
func anthropicCounts(c *counts, v []byte) {
	o, ok := objectOf(v)
	if !ok {
		c.bad = true
		return
	}
	for {
		k, v, ok := o.next()
		if !ok {
			break
		}
		switch string(k) {
		case "input_tokens":
			c.set(&c.in, &c.hasIn, v)
		case "cache_read_input_tokens":
			c.set(&c.cached, nil, v)
		case "cache_creation_input_tokens":
			c.set(&c.write, nil, v)
		case "output_tokens":
			c.set(&c.out, &c.hasOut, v)
		case "output_tokens_details":
			c.details(v, "thinking_tokens", &c.reasoning, "", nil)
		}
	}
	if o.bad {
		c.bad = true
	}
}

// anthropicUsage turns Anthropic's counts into a Usage, whose Input adds the
// cache reads and writes Anthropic counts apart.
func anthropicUsage(c counts) Usage {
	c.in += c.cached + c.write
	return c.usage(true)
}

// geminiUsage reads Gemini's usageMetadata.
func geminiUsage(v []byte) Usage {
	o, ok := objectOf(v)
	if !ok {
		return Usage{}
	}
	var c counts
	var candidates, thoughts int64
	for {
		k, v, ok := o.next()
		if !ok {
			break
		}
		switch string(k) {
		case "promptTokenCount", "prompt_token_count":
			c.set(&c.in, &c.hasIn, v)
		case "cachedContentTokenCount", "cached_content_token_count":
			c.set(&c.cached, nil, v)
		case "candidatesTokenCount", "candidates_token_count":
			c.set(&candidates, nil, v)
		case "thoughtsTokenCount", "thoughts_token_count":
			c.set(&thoughts, nil, v)
		case "toolUsePromptTokenCount", "tool_use_prompt_token_count":
			c.set(&c.toolPrompt, nil, v)
		}
	}
	if o.bad {
		return Usage{}
	}
	// The prompt count is enough: an answer with no candidates (a blocked
	// prompt, or the first chunk of a stream) has no candidate count.
	c.out, c.reasoning, c.hasOut = candidates+thoughts, thoughts, true
	return c.usage(true)
}
