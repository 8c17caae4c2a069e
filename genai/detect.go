package genai

import (
	"strings"
)

// Endpoint is the kind of model call: it fixes the shapes of the request,
// the answer and the stream.
type Endpoint uint8

// The endpoints Baton understands.
const (
	// ChatCompletions is OpenAI's POST /chat/completions.
	ChatCompletions Endpoint = iota + 1
	// Responses is OpenAI's POST /responses.
	Responses
	// Completions is OpenAI's legacy POST /completions.
	Completions
	// Embeddings is OpenAI's POST /embeddings.
	Embeddings
	// Messages is Anthropic's POST /v1/messages.
	Messages
	// GenerateContent is Gemini's models/{model}:generateContent and
	// :streamGenerateContent.
	GenerateContent
)

// String names the endpoint as its path does.
func (e Endpoint) String() string {
	switch e {
	case ChatCompletions:
		return "chat/completions"
	case Responses:
		return "responses"
	case Completions:
		return "completions"
	case Embeddings:
		return "embeddings"
	case Messages:
		return "messages"
	case GenerateContent:
		return "generateContent"
	}
	return ""
}

// operation is the endpoint's gen_ai.operation.name.
func (e Endpoint) operation() string {
	switch e {
	case ChatCompletions, Responses, Messages:
		return OpChat
	case Completions:
		return OpTextCompletion
	case Embeddings:
		return OpEmbeddings
	case GenerateContent:
		return OpGenerateContent
	}
	return ""
}

// Call is what Baton knows of a model call from its request.
type Call struct {
	API      API
	Endpoint Endpoint
	// Provider is the gen_ai.provider.name, Operation the
	// gen_ai.operation.name.
	Provider, Operation string
	// RequestModel is the model asked for: the body's "model", else
	// Gemini's model from the path, else Azure's deployment from the path
	// (a deployment is named by its owner and may differ from the model
	// behind it; the answer's model tells).
	RequestModel string
	// Stream is whether the answer is streamed: the body's "stream": true,
	// or Gemini's :streamGenerateContent; a Stream reading an answer of
	// Server-Sent Events takes it as streamed whatever its Call said.
	Stream bool
	// MaxTokens is the output limit the request sets (max_tokens,
	// max_completion_tokens, max_output_tokens, maxOutputTokens), 0 when
	// it sets none.
	MaxTokens int64
	// Temperature is the request's temperature when HasTemperature.
	Temperature    float64
	HasTemperature bool
}

// Detect reports whether a request is a model call in dialect api, and
// what it asks for: DetectPath, then ReadRequest of body.
func Detect(api API, method, path string, body []byte) (Call, bool) {
	c, ok := DetectPath(api, method, path)
	if ok {
		c.ReadRequest(body)
	}
	return c, ok
}

// DetectPath reports whether a request is a model call in dialect api by
// its method and path, and what they tell of it. path is the request's
// path, with or without a base path in front (/openai/v1/chat/completions
// is a chat call); a query is ignored. Only POST requests are calls; paths
// that are no model call (the model list, files, batches, token counting)
// are not. The call's body, read by ReadRequest, may tell more.
//
// Besides its own paths, Anthropic and Gemini accept their OpenAI-compatible
// endpoints (/v1/chat/completions, /v1beta/openai/chat/completions), which
// read as OpenAI calls with the provider's name.
func DetectPath(api API, method, path string) (Call, bool) {
	if method != "POST" || api.Provider() == "" {
		return Call{}, false
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimSuffix(path, "/")

	c := Call{API: api, Provider: api.Provider()}
	switch api {
	case Anthropic:
		if strings.HasSuffix(path, "/v1/messages") {
			c.Endpoint = Messages
		}
	case Gemini:
		c.Endpoint, c.RequestModel, c.Stream = geminiPath(path)
	case AzureOpenAI:
		if d, ok := azureDeployment(path); ok {
			c.RequestModel = d
		}
	}
	if c.Endpoint == 0 {
		c.Endpoint = openAIPath(path)
	}
	if c.Endpoint == 0 {
		return Call{}, false
	}
	c.Operation = c.Endpoint.operation()
	return c, true
}

// openAIPath returns the OpenAI endpoint a path ends with, or 0.
func openAIPath(path string) Endpoint {
	switch {
	case hasSegmentSuffix(path, "/chat/completions"):
		return ChatCompletions
	case hasSegmentSuffix(path, "/responses"):
		return Responses
	case hasSegmentSuffix(path, "/completions"):
		return Completions
	case hasSegmentSuffix(path, "/embeddings"):
		return Embeddings
	}
	return 0
}

// hasSegmentSuffix reports whether path ends with suffix, which starts with
// "/", or is suffix without its slash.
func hasSegmentSuffix(path, suffix string) bool {
	return strings.HasSuffix(path, suffix) || path == suffix[1:]
}

// geminiPath reads .../models/{model}:generateContent and
// :streamGenerateContent (tunedModels too, and Vertex AI's longer
// .../publishers/google/models/{model}:...).
func geminiPath(path string) (e Endpoint, model string, stream bool) {
	colon := strings.LastIndexByte(path, ':')
	if colon < 0 {
		return 0, "", false
	}
	switch path[colon+1:] {
	case "generateContent":
	case "streamGenerateContent":
		stream = true
	default:
		return 0, "", false
	}
	name := path[:colon]
	slash := strings.LastIndexByte(name, '/')
	if slash < 0 {
		return 0, "", false
	}
	if coll := name[:slash]; !strings.HasSuffix(coll, "models") && !strings.HasSuffix(coll, "tunedModels") {
		return 0, "", false
	}
	return GenerateContent, name[slash+1:], stream
}

// azureDeployment returns the deployment of an Azure OpenAI path,
// /openai/deployments/{deployment}/...
func azureDeployment(path string) (string, bool) {
	const seg = "/deployments/"
	i := strings.Index(path, seg)
	if i < 0 {
		return "", false
	}
	d := path[i+len(seg):]
	if j := strings.IndexByte(d, '/'); j >= 0 {
		d = d[:j]
	}
	return d, d != ""
}

// ReadRequest fills c from the request body's model and settings: the
// body's "model" over what the path said, "stream", the output limit and
// the temperature. body may be anything: a body that is not JSON tells
// nothing, and c keeps what the path told.
func (c *Call) ReadRequest(body []byte) {
	o, ok := objectOf(body)
	if !ok {
		return
	}
	for {
		k, v, ok := o.next()
		if !ok {
			return
		}
		switch string(k) {
		case "model":
			if s, ok := stringOf(v); ok && s != "" {
				c.RequestModel = s
			}
		case "stream":
			if c.Endpoint != GenerateContent {
				c.Stream = string(v) == "true"
			}
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			if n, ok := countOf(v); ok {
				c.MaxTokens = n
			}
		case "temperature":
			if f, ok := floatOf(v); ok {
				c.Temperature, c.HasTemperature = f, true
			}
		case "generationConfig", "generation_config":
			readGenerationConfig(c, v)
		}
	}
}

// readGenerationConfig reads Gemini's generationConfig.
func readGenerationConfig(c *Call, v []byte) {
	o, ok := objectOf(v)
	if !ok {
		return
	}
	for {
		k, v, ok := o.next()
		if !ok {
			return
		}
		switch string(k) {
		case "maxOutputTokens", "max_output_tokens":
			if n, ok := countOf(v); ok {
				c.MaxTokens = n
			}
		case "temperature":
			if f, ok := floatOf(v); ok {
				c.Temperature, c.HasTemperature = f, true
			}
		}
	}
}
