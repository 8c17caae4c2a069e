package approval

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/batonproxy/baton/config"
	"github.com/batonproxy/baton/trust"
)

// approvers are the identities that may decide held handoffs
// (docs/gates.md): the holder of admin_token ("admin"), each approver by its
// bearer token, and each approver by requests signed with its keys. The
// agent's own identity key is known too, under the agent's name, so that a
// request it signs is recognised as the agent's, and refused.
type approvers struct {
	tokens   map[string]string // token → approver
	verifier *trust.Verifier   // approvers' keys and the agent's own; nil: none
}

func newApprovers(c *config.Config, env func(string) string, own *trust.Signer) (*approvers, error) {
	a := &approvers{tokens: map[string]string{}}
	lines := map[string][]string{}
	var errs []error
	for _, ap := range c.Approvals.Approvers {
		if ap.TokenEnv != "" {
			tok := env(ap.TokenEnv)
			if len(tok) < config.MinApproverToken {
				errs = append(errs, fmt.Errorf("approvals.approvers %s: %s must hold a token of at least %d characters",
					ap.Name, ap.TokenEnv, config.MinApproverToken))
				continue
			}
			a.tokens[tok] = ap.Name
		}
		if len(ap.Keys) > 0 {
			lines[ap.Name] = ap.Keys
		}
	}
	if len(lines) > 0 || own != nil {
		if own != nil {
			lines[c.Agent] = []string{own.Key().Public().String()}
		}
		b, err := trust.ParseBundle(lines)
		if err == nil {
			a.verifier, err = trust.NewVerifier(b, c.Trust.Skew.D())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("approvals.approvers keys: %w", err))
		}
	}
	return a, errors.Join(errs...)
}

// Identity names who presents token on the admin API: "admin" for
// the admin token, an approver's name for its token. ok is false for any
// other token.
func (a *Approvals) Identity(token string) (who string, ok bool) {
	if a.o.Config.AdminToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(a.o.Config.AdminToken)) == 1 {
		return "admin", true
	}
	if a.approvers != nil {
		for tok, name := range a.approvers.tokens {
			if subtle.ConstantTimeCompare([]byte(token), []byte(tok)) == 1 {
				return name, true
			}
		}
	}
	return "", false
}

// errNonceStore reports a signed decision whose nonce the store could not
// check: the store is down, not the approver unknown.
var errNonceStore = errors.New("state store unavailable")

// errNoIdentity reports a request that names no approver.
var errNoIdentity = errors.New("no approver identity: send Authorization: Bearer <admin or approver token>, or sign the request with an approver's key")

// ApproverOf names who sent r, a request on the admin API with its body,
// as a decision needs: the admin, or an approver by its bearer token or
// signature (whose nonce is then spent); the agent's own signature names
// the agent. For other capabilities' decisions (raising a chain's budget).
func (a *Approvals) ApproverOf(r *http.Request, body []byte) (string, error) {
	return a.approverOf(r, body)
}

// approverOf names who sent r, a request on the admin API, with its body:
// by a bearer token, or by an RFC 9421 signature with an approver's key
// (whose nonce is then spent). A signature that does not verify is an
// error, never a fallback to another identity.
func (a *Approvals) approverOf(r *http.Request, body []byte) (string, error) {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		if who, ok := a.Identity(strings.TrimPrefix(h, "Bearer ")); ok {
			return who, nil
		}
		return "", errors.New("the bearer token is neither the admin token nor an approver's")
	}
	if r.Header.Get(trust.HeaderSignature) != "" {
		if a.approvers == nil || a.approvers.verifier == nil {
			return "", errors.New("the request is signed, and no approver has keys (approvals.approvers[].keys)")
		}
		v, err := a.approvers.verifier.Verify(trust.RequestMessage(r, body), time.Now())
		if err != nil {
			return "", fmt.Errorf("signature: %w", err)
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		ok, _, err := a.o.Store.Claim(ctx, "approval-nonce:"+v.KeyID+":"+v.Nonce, []byte{1}, time.Until(v.NonceUntil))
		switch {
		case err != nil:
			return "", fmt.Errorf("%w: the signature's nonce could not be checked: %w", errNonceStore, err)
		case !ok:
			return "", errors.New("signature: the nonce was used before (a replayed request)")
		}
		return v.Agent, nil
	}
	return "", errNoIdentity
}

// readBody reads an admin request's body, at most 64 KiB.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<10+1))
	if err != nil {
		return nil, err
	}
	if len(b) > 64<<10 {
		return nil, errors.New("the body is over 64 KiB")
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, nil
}
