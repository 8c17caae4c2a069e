package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Route is a base-URL route: the egress serves an upstream API under
// /<name>/, so that an SDK whose base URL points there (OPENAI_BASE_URL,
// ANTHROPIC_BASE_URL, ...) sends its calls through the egress chain in
// plain HTTP, and Baton originates TLS to the real server: the journal and
// untrusted-content labelling see the calls with no CA to trust.
type Route struct {
	// Name is the route's path segment on the egress (/<name>/...). The
	// names of RoutePresets need no URL.
	Name string `yaml:"name"`
	// URL is the upstream's base URL (http or https, with an optional base
	// path); a request to /<name>/rest goes to URL + rest.
	URL string `yaml:"url"`
	// API is the model API the upstream speaks, when it serves one
	// (ModelAPIs); a route named for a preset speaks its preset's.
	API string `yaml:"api"`

	// ParsedURL is URL, or the preset's, parsed by Validate; its path ends
	// in "/".
	ParsedURL *url.URL `yaml:"-"`
}

// RoutePreset is what Baton knows of a model API's SDKs: its upstream and
// the variable its SDKs read their base URL from.
type RoutePreset struct {
	// URL is the API's public base URL; "" when each user has their own
	// (Azure OpenAI's resource endpoints), which the route must then give.
	URL string
	// Env is the variable the SDKs read their base URL from, and EnvPath
	// what they expect after the route's own path (the OpenAI SDKs' base
	// URL ends in /v1).
	Env, EnvPath string
}

// RoutePresets are the route names Baton knows.
var RoutePresets = map[string]RoutePreset{
	"openai":       {URL: "https://api.openai.com/", Env: "OPENAI_BASE_URL", EnvPath: "/v1"},
	"anthropic":    {URL: "https://api.anthropic.com/", Env: "ANTHROPIC_BASE_URL"},
	"gemini":       {URL: "https://generativelanguage.googleapis.com/", Env: "GOOGLE_GEMINI_BASE_URL"},
	"azure-openai": {Env: "AZURE_OPENAI_ENDPOINT"},
}

// RoutePresetNames returns the preset names, sorted.
func RoutePresetNames() []string {
	names := make([]string, 0, len(RoutePresets))
	for n := range RoutePresets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// RouteEnv returns the variable that points a preset's SDKs at route name
// on the egress at base (http://127.0.0.1:15001), and its value; ok is
// false for a name that is no preset.
func RouteEnv(base, name string) (env, value string, ok bool) {
	p, ok := RoutePresets[name]
	if !ok {
		return "", "", false
	}
	return p.Env, strings.TrimSuffix(base, "/") + "/" + name + p.EnvPath, true
}

// HostPort returns the route's upstream as host:port, the port defaulted
// by its scheme.
func (r Route) HostPort() string {
	u := r.ParsedURL
	if u.Port() != "" {
		return strings.ToLower(u.Host)
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// Allowed returns the hosts the agent may reach besides its peers:
// external.allow and the upstreams of external.routes (each as host:port).
func (e External) Allowed() []string {
	out := append([]string(nil), e.Allow...)
	for _, r := range e.Routes {
		if r.ParsedURL != nil {
			out = append(out, r.HostPort())
		}
	}
	return out
}

var routeName = bounded{max: 63, re: regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)}

func (c *Config) validateRoutes(bad badFunc) {
	seen := map[string]bool{}
	for i := range c.External.Routes {
		r := &c.External.Routes[i]
		path := fmt.Sprintf("external.routes[%d]", i)
		switch {
		case !routeName.MatchString(r.Name):
			bad(path+".name", r.Name, "must be lowercase letters, digits and dashes, like openai")
			continue
		case seen[r.Name]:
			bad(path+".name", r.Name, "must be unique among external.routes")
			continue
		}
		seen[r.Name] = true
		raw := r.URL
		if raw == "" {
			raw = RoutePresets[r.Name].URL
		}
		if raw == "" {
			if _, preset := RoutePresets[r.Name]; preset {
				bad(path+".url", nil, "must be set: "+r.Name+" has no public endpoint (give your resource's, like https://NAME.openai.azure.com/)")
			} else {
				bad(path+".url", nil, "must be set to the upstream's base URL, like https://llm.example.com/v1/ (known without one: "+
					strings.Join(presetsWithURL(), ", ")+")")
			}
			continue
		}
		u, err := parseHTTPURL(raw)
		switch {
		case err != nil:
			bad(path+".url", redact(raw), "must be an http(s) base URL ("+err.Error()+")")
			continue
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			bad(path+".url", redact(raw), "must be a base URL with no credentials, query or fragment")
			continue
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		u.RawPath = ""
		r.ParsedURL = u
	}
}

func presetsWithURL() []string {
	var out []string
	for _, n := range RoutePresetNames() {
		if RoutePresets[n].URL != "" {
			out = append(out, n)
		}
	}
	return out
}
