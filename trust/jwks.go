package trust

// JSON Web Key Sets (RFC 7517, RFC 7518 §6, RFC 8037): the public keys a
// token issuer signs with, parsed with the standard library alone. Only the
// keys a caller's token may be checked with are kept: RSA (RS256, at least
// 2048 bits), EC P-256 (ES256) and OKP Ed25519 (EdDSA), for signing. Keys of
// other types, curves or algorithms, and encryption keys, are skipped, as an
// issuer's set often holds some; a key of a kept kind that is malformed, or
// that carries private material, fails the whole set, so that a broken
// rotation is seen at once rather than half applied.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// The token algorithms a caller's JWT may be signed with.
const (
	AlgRS256 = "RS256"
	AlgES256 = "ES256"
	AlgEdDSA = "EdDSA"
)

// jwtAlgs lists the algorithms accepted on a caller's JWT; anything else
// (none, HS256 and the other MACs among them) is refused.
var jwtAlgs = []string{AlgRS256, AlgES256, AlgEdDSA}

// Bounds on a key set, so that a hostile or broken issuer cannot make one
// cost much to hold or search.
const (
	maxJWKSBytes = 1 << 20
	maxJWKs      = 100
	minRSABits   = 2048
	maxRSABits   = 8192
)

// ErrJWKS is wrapped by every error about a key set.
var ErrJWKS = errors.New("jwks")

// JWK is one usable public key of a set.
type JWK struct {
	// KeyID is the key's kid ("" when it has none).
	KeyID string
	// Alg is the token algorithm the key verifies: RS256, ES256 or EdDSA.
	Alg string
	// Key is an *rsa.PublicKey, an *ecdsa.PublicKey or an ed25519.PublicKey.
	Key crypto.PublicKey
}

// KeySet is a parsed key set: the usable keys, in the order of the set.
type KeySet struct {
	keys []JWK
}

// Len returns the number of usable keys.
func (s *KeySet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// Keys returns the usable keys; the slice must not be changed.
func (s *KeySet) Keys() []JWK {
	if s == nil {
		return nil
	}
	return s.keys
}

// Find returns the keys that may verify a token signed with alg and naming
// kid. A token without a kid may be verified by any key of its algorithm.
func (s *KeySet) Find(kid, alg string) []crypto.PublicKey {
	if s == nil {
		return nil
	}
	var out []crypto.PublicKey
	for _, k := range s.keys {
		if k.Alg == alg && (kid == "" || k.KeyID == kid) {
			out = append(out, k.Key)
		}
	}
	return out
}

// HasKeyID reports whether the set holds a key with this kid.
func (s *KeySet) HasKeyID(kid string) bool {
	if s == nil {
		return false
	}
	for _, k := range s.keys {
		if k.KeyID == kid {
			return true
		}
	}
	return false
}

// rawJWK is the members of a JWK that matter here; others (x5c, x5t, …)
// are ignored.
type rawJWK struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	KeyOps []string `json:"key_ops"`
	Alg    string   `json:"alg"`
	Crv    string   `json:"crv"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
	// Private members: a public set must have none.
	D  *string `json:"d"`
	P  *string `json:"p"`
	Q  *string `json:"q"`
	DP *string `json:"dp"`
	DQ *string `json:"dq"`
	QI *string `json:"qi"`
	K  *string `json:"k"`
}

// ParseJWKS parses a JWK Set document ({"keys": [...]}) and keeps the keys
// a caller's token may be verified with. It fails on a document that is
// not a key set, on a kept key that is malformed or private, and on a set
// with no usable key.
func ParseJWKS(data []byte) (*KeySet, error) {
	if len(data) > maxJWKSBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrJWKS, maxJWKSBytes)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: not a JWK Set (a JSON object with a \"keys\" array): %w", ErrJWKS, err)
	}
	if doc.Keys == nil {
		return nil, fmt.Errorf("%w: no \"keys\" array", ErrJWKS)
	}
	if len(doc.Keys) > maxJWKs {
		return nil, fmt.Errorf("%w: %d keys, more than %d", ErrJWKS, len(doc.Keys), maxJWKs)
	}
	set := &KeySet{}
	var errs []error
	for i, raw := range doc.Keys {
		var j rawJWK
		if err := json.Unmarshal(raw, &j); err != nil {
			errs = append(errs, fmt.Errorf("keys[%d]: not a JSON object of string members: %w", i, err))
			continue
		}
		k, ok, err := parseJWK(&j)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("keys[%d] (kid %q): %w", i, j.Kid, err))
		case ok:
			set.keys = append(set.keys, k)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJWKS, err)
	}
	if len(set.keys) == 0 {
		return nil, fmt.Errorf("%w: no signing key of a kind Baton checks (RSA of %d bits or more for RS256, EC P-256 for ES256, OKP Ed25519 for EdDSA)", ErrJWKS, minRSABits)
	}
	return set, nil
}

// parseJWK returns j's key and true when it is one Baton keeps; false with
// no error when it is of another kind (skipped).
func parseJWK(j *rawJWK) (JWK, bool, error) {
	if j.Use != "" && j.Use != "sig" {
		return JWK{}, false, nil
	}
	if j.KeyOps != nil && !slices.Contains(j.KeyOps, "verify") {
		return JWK{}, false, nil
	}
	var alg string
	switch {
	case j.Kty == "RSA":
		alg = AlgRS256
	case j.Kty == "EC" && j.Crv == "P-256":
		alg = AlgES256
	case j.Kty == "OKP" && j.Crv == "Ed25519":
		alg = AlgEdDSA
	default:
		return JWK{}, false, nil
	}
	if j.Alg != "" && j.Alg != alg {
		return JWK{}, false, nil // for another algorithm (RS384, PS256, …)
	}
	for _, m := range []*string{j.D, j.P, j.Q, j.DP, j.DQ, j.QI, j.K} {
		if m != nil {
			return JWK{}, false, errors.New("holds private key material: publish the public key only")
		}
	}
	k := JWK{KeyID: j.Kid, Alg: alg}
	var err error
	switch alg {
	case AlgRS256:
		k.Key, err = rsaKey(j.N, j.E)
	case AlgES256:
		k.Key, err = p256Key(j.X, j.Y)
	case AlgEdDSA:
		k.Key, err = ed25519Key(j.X)
	}
	if err != nil {
		return JWK{}, false, err
	}
	return k, true, nil
}

// b64 decodes a JWK member: base64url without padding (RFC 7515 §2),
// trailing padding tolerated.
func b64(member, s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("%s: missing", member)
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("%s: not base64url: %w", member, err)
	}
	return b, nil
}

func rsaKey(n, e string) (*rsa.PublicKey, error) {
	nb, err := b64("n", n)
	if err != nil {
		return nil, err
	}
	eb, err := b64("e", e)
	if err != nil {
		return nil, err
	}
	mod := new(big.Int).SetBytes(nb)
	if bits := mod.BitLen(); bits < minRSABits || bits > maxRSABits {
		return nil, fmt.Errorf("n: a %d-bit modulus, want %d to %d bits", bits, minRSABits, maxRSABits)
	}
	if mod.Bit(0) == 0 {
		return nil, errors.New("n: an even modulus")
	}
	if len(eb) > 4 {
		return nil, errors.New("e: larger than 32 bits")
	}
	exp := 0
	for _, c := range eb {
		exp = exp<<8 | int(c)
	}
	if exp < 3 || exp%2 == 0 {
		return nil, fmt.Errorf("e: %d, want an odd exponent of at least 3", exp)
	}
	return &rsa.PublicKey{N: mod, E: exp}, nil
}

func p256Key(x, y string) (*ecdsa.PublicKey, error) {
	xb, err := b64("x", x)
	if err != nil {
		return nil, err
	}
	yb, err := b64("y", y)
	if err != nil {
		return nil, err
	}
	if len(xb) != 32 || len(yb) != 32 {
		return nil, fmt.Errorf("x and y: %d and %d bytes, want 32 each for P-256", len(xb), len(yb))
	}
	point := make([]byte, 0, 65)
	point = append(append(append(point, 4), xb...), yb...)
	k, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
	if err != nil {
		return nil, fmt.Errorf("x, y: not a point of P-256: %w", err)
	}
	return k, nil
}

func ed25519Key(x string) (ed25519.PublicKey, error) {
	xb, err := b64("x", x)
	if err != nil {
		return nil, err
	}
	if len(xb) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("x: %d bytes, want %d for Ed25519", len(xb), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(xb), nil
}
