package modelcall

import (
	"strings"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/genai"
	"github.com/batonproxy/baton/middleware"
)

// apis knows which destinations serve a model API, and in which dialect:
// routes by their api, models.hosts by host:port (or a "*." entry), and
// the providers' public hosts.
type apis struct {
	routes   map[string]genai.API // by route name
	hosts    map[string]genai.API // exact host:port
	suffixes []suffixAPI          // "*." entries: ".example.com:443"
}

type suffixAPI struct {
	suffix string
	api    genai.API
}

func newAPIs(c *config.Config) apis {
	a := apis{routes: map[string]genai.API{}, hosts: map[string]genai.API{}}
	for _, r := range c.External.Routes {
		if api, ok := genai.ParseAPI(r.APIOf()); ok {
			a.routes[r.Name] = api
		}
	}
	for h, name := range c.Models.Hosts {
		api, ok := genai.ParseAPI(name)
		if !ok {
			continue
		}
		h = strings.ToLower(h)
		if strings.HasPrefix(h, "*.") {
			a.suffixes = append(a.suffixes, suffixAPI{h[1:], api})
		} else {
			a.hosts[h] = api
		}
	}
	return a
}

// of returns the dialect of the request's destination and its name for
// records and metrics (the route's name, else its host:port); 0 when it is
// no model API.
func (a apis) of(in *middleware.Info) (genai.API, string) {
	if in.Route != "" {
		return a.routes[in.Route], in.Route
	}
	h := in.External
	if api, ok := a.hosts[h]; ok {
		return api, h
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(h, s.suffix) {
			return s.api, h
		}
	}
	return genai.APIForHost(h), h
}
