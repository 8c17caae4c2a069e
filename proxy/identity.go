package proxy

import (
	"errors"
	"fmt"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/trust"
)

// trustSetup is what the configuration's identity, bundle and edges make.
type trustSetup struct {
	signer   *trust.Signer   // nil without an identity key
	verifier *trust.Verifier // nil without a trust bundle
	policy   *trust.Policy   // nil without edges: every edge allowed
	grants   map[string]*trust.Grant
}

// newTrust loads the key, parses the bundle and builds the edge policy.
// env reads the variable named by identity.key_env.
func newTrust(c *config.Config, env func(string) string) (*trustSetup, error) {
	t := &trustSetup{grants: map[string]*trust.Grant{}}
	var errs []error
	switch id := c.Identity; {
	case id.KeyFile != "":
		k, err := trust.LoadKey(id.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("identity.key_file: %w", err))
		} else {
			t.signer = trust.NewSigner(k)
		}
	case id.KeyEnv != "":
		v := env(id.KeyEnv)
		if v == "" {
			errs = append(errs, fmt.Errorf("identity.key_env: %s is empty", id.KeyEnv))
		} else if k, err := trust.ParseKey(v, id.KeyID); err != nil {
			errs = append(errs, fmt.Errorf("identity.key_env: %s: %w", id.KeyEnv, err))
		} else {
			t.signer = trust.NewSigner(k)
		}
	}
	if len(c.Trust.Peers) > 0 {
		b, err := trust.ParseBundle(c.Trust.Peers)
		if err == nil {
			t.verifier, err = trust.NewVerifier(b, c.Trust.Skew.D())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("trust.peers: %w", err))
		}
	}
	if len(c.Edges) > 0 {
		var out, in []trust.EdgeRule
		for _, e := range c.Edges {
			r := trust.EdgeRule{Posture: trust.Posture(e.Posture), RequireSignature: c.RequiresSignature(e),
				Callers: e.Callers != nil}
			if e.To != "" {
				r.Peer = e.To
				out = append(out, r)
				if e.Grant != nil {
					t.grants[e.To] = &trust.Grant{MayHandoffTo: e.Grant.MayHandoffTo, SideEffects: e.Grant.SideEffects}
				}
			} else {
				r.Peer = e.From
				in = append(in, r)
			}
		}
		p, err := trust.NewPolicy(out, in)
		if err != nil {
			errs = append(errs, fmt.Errorf("edges: %w", err))
		}
		t.policy = p
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("proxy: trust: %w", err)
	}
	return t, nil
}
