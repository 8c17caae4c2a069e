package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/middleware"
	"github.com/batonproxy/baton/trust"
)

// newCallers builds what names callers that run no Baton, from the inbound
// edges with callers: the matcher (nil when no edge has callers) and the
// background fetches of JWK Set URLs, for Start to run. env reads the
// bearer tokens' variables.
func newCallers(c *config.Config, env func(string) string, log *slog.Logger) (*trust.Callers, []func(context.Context), error) {
	rules, runs, err := callerRules(c, env, log)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy: callers: %w", err)
	}
	if len(rules) == 0 {
		return nil, nil, nil
	}
	m, err := trust.NewCallers(rules, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy: callers: %w", err)
	}
	return m, runs, nil
}

// callerOptions configure the ingress's Callers middleware; with no
// callers edges (m nil) it is not in the chain.
func callerOptions(m *trust.Callers, agent string) middleware.CallersOptions {
	if m == nil {
		return middleware.CallersOptions{}
	}
	return middleware.CallersOptions{Matcher: m, Realm: agent, IdentityHeaders: m.IdentityHeaders()}
}

// CheckCallers loads what the callers edges name, their bearer tokens
// (from the environment, through env) and their JWK Set files, and reports
// every problem, each naming its field; JWK Set URLs are not fetched.
// baton validate runs it, as New does.
func CheckCallers(c *config.Config, env func(string) string) error {
	_, _, err := callerRules(c, env, nil)
	return err
}

func callerRules(c *config.Config, env func(string) string, log *slog.Logger) ([]trust.CallerRule, []func(context.Context), error) {
	var (
		rules []trust.CallerRule
		runs  []func(context.Context)
		errs  []error
	)
	for i, e := range c.Edges {
		k := e.Callers
		if k == nil || e.From == "" {
			continue
		}
		path := fmt.Sprintf("edges[%d].callers", i)
		r := trust.CallerRule{Edge: e.From, Networks: k.ParsedNetworks, Anonymous: k.Anonymous, Forward: k.Forward}
		for _, h := range slices.Sorted(maps.Keys(k.ClaimHeaders)) {
			r.ClaimHeaders = append(r.ClaimHeaders, trust.ClaimHeader{Header: http.CanonicalHeaderKey(h), Claim: k.ClaimHeaders[h]})
		}
		if b := k.Bearer; b != nil {
			toks, err := callerTokens(env(b.TokensEnv), b.TokensEnv)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.bearer.tokens_env: %w", path, err))
			}
			r.Tokens = toks
		}
		if j := k.JWT; j != nil {
			rule := &trust.JWTRule{Issuer: j.Issuer, Audience: j.Audience}
			switch {
			case j.JWKSFile != "":
				f, err := trust.LoadJWKSFile(j.JWKSFile, log)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s.jwt.jwks_file: %s: %w", path, j.JWKSFile, err))
				}
				rule.Keys = f
			case j.ParsedJWKSURL != nil:
				u := trust.NewJWKSURL(trust.JWKSURLOptions{URL: j.ParsedJWKSURL.String(), Log: log})
				rule.Keys = u
				runs = append(runs, u.Run)
			}
			r.JWT = rule
		}
		rules = append(rules, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return rules, runs, nil
}

// callerTokens splits the comma-separated tokens of the variable name.
func callerTokens(v, name string) ([]string, error) {
	var toks []string
	for t := range strings.SplitSeq(v, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if len(t) < config.MinCallerToken {
			return nil, fmt.Errorf("%s holds a token shorter than %d characters: use long random tokens", name, config.MinCallerToken)
		}
		toks = append(toks, t)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%s is empty: set it to the comma-separated tokens callers send as Authorization: Bearer <token>", name)
	}
	return toks, nil
}
