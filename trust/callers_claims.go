package trust

// What the agent learns of a caller's JWT: its subject and the claims its
// edge passes on in headers of their own (claim_headers), rendered as
// Envoy's and Istio's claim-to-header mappings render them.

import (
	"strconv"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// maxClaimValue bounds a claim header's value: a longer claim is not
// passed on (never cut short, which could change what it says).
const maxClaimValue = 4096

// ClaimHeader passes one claim of a caller's verified JWT to the agent.
type ClaimHeader struct {
	// Header is the header's canonical name.
	Header string
	// Claim is the claim's name, or a dot path to a nested one
	// (realm_access.roles).
	Claim string
}

// subject is claims' sub, bounded to maxSubject bytes of valid UTF-8.
func subject(claims jwt.MapClaims) string {
	sub, _ := claims["sub"].(string)
	if len(sub) > maxSubject {
		sub = strings.ToValidUTF8(sub[:maxSubject], "")
	}
	return sub
}

// claimHeaders returns the headers of hs whose claims claims has, with
// their values: a string as it is, a number or a boolean as JSON writes
// it, an array of those joined by commas. An object, a null, a value that
// holds a control character or is longer than maxClaimValue gives no
// header.
func claimHeaders(hs []ClaimHeader, claims jwt.MapClaims) [][2]string {
	var out [][2]string
	for _, h := range hs {
		v, ok := claimAt(claims, h.Claim)
		if !ok {
			continue
		}
		s, ok := claimValue(v)
		if !ok || s == "" || len(s) > maxClaimValue {
			continue
		}
		out = append(out, [2]string{h.Header, s})
	}
	return out
}

// claimAt finds the claim at a dot path.
func claimAt(claims map[string]any, path string) (any, bool) {
	if v, ok := claims[path]; ok {
		return v, true // a name that holds dots itself (https://example.com/roles)
	}
	var cur any = claims
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// claimValue renders a claim for a header.
func claimValue(v any) (string, bool) {
	switch v := v.(type) {
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := scalarClaim(e)
			if !ok {
				return "", false
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), true
	default:
		return scalarClaim(v)
	}
}

func scalarClaim(v any) (string, bool) {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case float64:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		s = strconv.FormatBool(v)
	default:
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return "", false
		}
	}
	return s, true
}
