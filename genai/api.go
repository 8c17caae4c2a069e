package genai

import (
	"net"
	"strings"
)

// API is the wire dialect a model server speaks. It decides which paths are
// model calls and how their bodies read; the zero value is no known dialect.
type API uint8

// The dialects Baton understands.
const (
	// OpenAI is OpenAI's REST API, and any server that copies it: vLLM,
	// Ollama's /v1, LiteLLM, llama.cpp's server, ...
	OpenAI API = iota + 1
	// Anthropic is Anthropic's Messages API.
	Anthropic
	// Gemini is the Gemini Developer API (generativelanguage.googleapis.com).
	Gemini
	// AzureOpenAI is Azure OpenAI: OpenAI's API under /openai/, addressed
	// by deployment.
	AzureOpenAI
)

// Provider values, as OpenTelemetry's gen_ai.provider.name names them.
const (
	ProviderOpenAI      = "openai"
	ProviderAnthropic   = "anthropic"
	ProviderGemini      = "gcp.gemini"
	ProviderAzureOpenAI = "azure.ai.openai"
)

// Operation values, as OpenTelemetry's gen_ai.operation.name names them.
const (
	OpChat            = "chat"
	OpGenerateContent = "generate_content"
	OpEmbeddings      = "embeddings"
	OpTextCompletion  = "text_completion"
)

// String returns the dialect's configuration name, the name of Baton's
// route preset for it: "openai", "anthropic", "gemini" or "azure-openai".
func (a API) String() string {
	switch a {
	case OpenAI:
		return "openai"
	case Anthropic:
		return "anthropic"
	case Gemini:
		return "gemini"
	case AzureOpenAI:
		return "azure-openai"
	}
	return ""
}

// Provider returns the dialect's gen_ai.provider.name, or "" for no
// dialect. An OpenAI-compatible server reports "openai": OpenTelemetry
// uses the name to tell the telemetry flavour apart, and the model names
// tell the real server.
func (a API) Provider() string {
	switch a {
	case OpenAI:
		return ProviderOpenAI
	case Anthropic:
		return ProviderAnthropic
	case Gemini:
		return ProviderGemini
	case AzureOpenAI:
		return ProviderAzureOpenAI
	}
	return ""
}

// ParseAPI returns the dialect a configuration names: a route preset name
// ("openai", "anthropic", "gemini", "azure-openai") or a gen_ai.provider.name
// value ("gcp.gemini", "azure.ai.openai"), in any case.
func ParseAPI(name string) (API, bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "openai":
		return OpenAI, true
	case "anthropic":
		return Anthropic, true
	case "gemini", ProviderGemini:
		return Gemini, true
	case "azure-openai", ProviderAzureOpenAI:
		return AzureOpenAI, true
	}
	return 0, false
}

// APIForHost returns the dialect of a public model API host, with or
// without a port: api.openai.com, api.anthropic.com,
// generativelanguage.googleapis.com, and Azure OpenAI resources
// (*.openai.azure.com, and *.cognitiveservices.azure.com where Azure AI
// Foundry puts them). Any other host returns 0: a self-hosted
// OpenAI-compatible server is known only by configuration.
func APIForHost(host string) API {
	h := strings.ToLower(host)
	if name, _, err := net.SplitHostPort(h); err == nil {
		h = name
	}
	h = strings.TrimSuffix(h, ".")
	switch {
	case h == "api.openai.com":
		return OpenAI
	case h == "api.anthropic.com":
		return Anthropic
	case h == "generativelanguage.googleapis.com":
		return Gemini
	case subdomainOf(h, "openai.azure.com"), subdomainOf(h, "cognitiveservices.azure.com"):
		return AzureOpenAI
	}
	return 0
}

// subdomainOf reports whether host is a proper subdomain of domain.
func subdomainOf(host, domain string) bool {
	return len(host) > len(domain)+1 && strings.HasSuffix(host, domain) && host[len(host)-len(domain)-1] == '.'
}
