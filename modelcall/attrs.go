package modelcall

import (
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"

	"github.com/batonproxy/baton/genai"
	"github.com/batonproxy/baton/handoff/record"
)

// Span attributes of a model call, as OpenTelemetry's GenAI semantic
// conventions name them, and Baton's own.
const (
	attrProvider       = attribute.Key("gen_ai.provider.name")
	attrRequestModel   = attribute.Key("gen_ai.request.model")
	attrMaxTokens      = attribute.Key("gen_ai.request.max_tokens")
	attrTemperature    = attribute.Key("gen_ai.request.temperature")
	attrResponseModel  = attribute.Key("gen_ai.response.model")
	attrResponseID     = attribute.Key("gen_ai.response.id")
	attrFinishReasons  = attribute.Key("gen_ai.response.finish_reasons")
	attrInputTokens    = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens   = attribute.Key("gen_ai.usage.output_tokens")
	attrCacheRead      = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	attrCacheCreation  = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	attrReasoning      = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	attrServerAddress  = attribute.Key("server.address")
	attrServerPort     = attribute.Key("server.port")
	attrErrorType      = attribute.Key("error.type")
	attrCost           = attribute.Key("baton.genai.cost_usd")
	attrUsage          = attribute.Key("baton.genai.usage")
	attrTTFT           = attribute.Key("baton.genai.time_to_first_token_ms")
	attrRefused        = attribute.Key("baton.genai.refused")
	attrAPI            = attribute.Key("baton.genai.api")
	attrSavedTokensIn  = attribute.Key("baton.genai.saved.input_tokens")
	attrSavedTokensOut = attribute.Key("baton.genai.saved.output_tokens")
)

// attributes gives the span what the request and the answer said, in one
// call once the answer is in: each call allocates and grows the span's
// attributes. The span ends after the call is counted.
func (c *call) attributes(r genai.StreamResult, rec record.ModelCall) {
	if !c.span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 20)
	attrs = c.requestAttributes(attrs)
	attrs = responseAttributes(attrs, r, rec)
	c.span.SetAttributes(attrs...)
}

// requestAttributes appends what the request says; the name and
// gen_ai.operation.name are set on the request's Info, which the egress
// span is annotated from when it ends.
func (c *call) requestAttributes(attrs []attribute.KeyValue) []attribute.KeyValue {
	attrs = append(attrs, attrProvider.String(c.c.Provider), attrAPI.String(c.dest))
	if c.c.RequestModel != "" {
		attrs = append(attrs, attrRequestModel.String(c.c.RequestModel))
	}
	if host, port, err := net.SplitHostPort(c.in.External); err == nil {
		attrs = append(attrs, attrServerAddress.String(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attrServerPort.Int(p))
		}
	}
	if c.c.MaxTokens > 0 {
		attrs = append(attrs, attrMaxTokens.Int64(c.c.MaxTokens))
	}
	if c.c.HasTemperature {
		attrs = append(attrs, attrTemperature.Float64(c.c.Temperature))
	}
	return attrs
}

// responseAttributes appends what the answer said. A journal hit's tokens
// are saved ones, not usage: a backend that sums gen_ai.usage.* over spans
// counts only what was paid.
func responseAttributes(attrs []attribute.KeyValue, r genai.StreamResult, rec record.ModelCall) []attribute.KeyValue {
	if r.ResponseModel != "" {
		attrs = append(attrs, attrResponseModel.String(r.ResponseModel))
	}
	if r.ResponseID != "" {
		attrs = append(attrs, attrResponseID.String(r.ResponseID))
	}
	if len(r.FinishReasons) > 0 {
		attrs = append(attrs, attrFinishReasons.StringSlice(r.FinishReasons))
	}
	if r.ErrorType != "" {
		attrs = append(attrs, attrErrorType.String(r.ErrorType))
	}
	if rec.TTFTMs > 0 {
		attrs = append(attrs, attrTTFT.Float64(rec.TTFTMs))
	}
	u := r.Usage
	switch {
	case rec.Refused != "":
		attrs = append(attrs, attrRefused.String(rec.Refused))
	case rec.Journal:
		if u.Known {
			attrs = append(attrs, attrSavedTokensIn.Int64(u.Input), attrSavedTokensOut.Int64(u.Output))
		}
	case u.Known:
		attrs = append(attrs, attrInputTokens.Int64(u.Input), attrOutputTokens.Int64(u.Output), attrUsage.String("reported"))
		if u.CachedInput > 0 {
			attrs = append(attrs, attrCacheRead.Int64(u.CachedInput))
		}
		if u.CacheCreation > 0 {
			attrs = append(attrs, attrCacheCreation.Int64(u.CacheCreation))
		}
		if u.Reasoning > 0 {
			attrs = append(attrs, attrReasoning.Int64(u.Reasoning))
		}
	default:
		attrs = append(attrs, attrUsage.String("unknown"))
	}
	if rec.Priced {
		attrs = append(attrs, attrCost.Float64(rec.CostUSD))
	}
	return attrs
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
