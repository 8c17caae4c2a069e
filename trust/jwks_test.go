package trust_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/batonproxy/baton/trust"
)

var b64u = base64.RawURLEncoding

// ecJWK is pub as a JWK.
func ecJWK(kid string, pub *ecdsa.PublicKey) map[string]any {
	b, err := pub.Bytes()
	if err != nil {
		panic(err)
	}
	return map[string]any{"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
		"x": b64u.EncodeToString(b[1:33]), "y": b64u.EncodeToString(b[33:])}
}

func rsaJWK(kid string, pub *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "n": b64u.EncodeToString(pub.N.Bytes()),
		"e": b64u.EncodeToString(big.NewInt(int64(pub.E)).Bytes())}
}

func edJWK(kid string, pub ed25519.PublicKey) map[string]any {
	return map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64u.EncodeToString(pub)}
}

func jwksJSON(keys ...map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		panic(err)
	}
	return b
}

func with(k map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for n, v := range k {
		out[n] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

func mustEC(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParseJWKS(t *testing.T) {
	t.Parallel()
	ec := mustEC(t)
	ec384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	good := ecJWK("ec-1", &ec.PublicKey)
	p384, _ := ec384.PublicKey.Bytes()
	tests := []struct {
		name    string
		doc     string
		algs    []string // the kept keys' algorithms, in order
		wantErr string
	}{
		{name: "one of each kind", doc: string(jwksJSON(good, rsaJWK("rsa-1", &rk.PublicKey), edJWK("ed-1", edPub))),
			algs: []string{trust.AlgES256, trust.AlgRS256, trust.AlgEdDSA}},
		{name: "other kinds skipped", doc: string(jwksJSON(
			map[string]any{"kty": "EC", "crv": "P-384", "kid": "p384", "x": b64u.EncodeToString(p384[1:49]), "y": b64u.EncodeToString(p384[49:])},
			with(rsaJWK("enc", &rk.PublicKey), "use", "enc"),
			with(rsaJWK("rs384", &rk.PublicKey), "alg", "RS384"),
			with(good, "key_ops", []string{"encrypt"}),
			map[string]any{"kty": "oct", "kid": "mac"},
			good)), algs: []string{trust.AlgES256}},
		{name: "padding tolerated", doc: string(jwksJSON(with(good, "x", good["x"].(string)+"="))), algs: []string{trust.AlgES256}},
		{name: "nothing usable", doc: string(jwksJSON(with(good, "use", "enc"))), wantErr: "no signing key"},
		{name: "empty set", doc: `{"keys":[]}`, wantErr: "no signing key"},
		{name: "not JSON", doc: `keys`, wantErr: "not a JWK Set"},
		{name: "no keys member", doc: `{"kty":"EC"}`, wantErr: `no "keys" array`},
		{name: "a key not an object", doc: `{"keys":[1]}`, wantErr: "keys[0]"},
		{name: "private key", doc: string(jwksJSON(with(good, "d", "AAAA"))), wantErr: "private key material"},
		{name: "bad base64", doc: string(jwksJSON(with(good, "x", "!!!"))), wantErr: "x: not base64url"},
		{name: "missing y", doc: string(jwksJSON(with(good, "y", nil))), wantErr: "y: missing"},
		{name: "short coordinate", doc: string(jwksJSON(with(good, "x", "AAAA"))), wantErr: "want 32 each"},
		{name: "not on the curve", doc: string(jwksJSON(with(good, "x", b64u.EncodeToString(make([]byte, 32))))), wantErr: "not a point of P-256"},
		{name: "small RSA", doc: string(jwksJSON(rsaJWK("small", &small.PublicKey))), wantErr: "1024-bit modulus"},
		{name: "even exponent", doc: string(jwksJSON(with(rsaJWK("r", &rk.PublicKey), "e", b64u.EncodeToString([]byte{1, 0, 0})))), wantErr: "odd exponent"},
		{name: "short Ed25519", doc: string(jwksJSON(with(edJWK("ed", edPub), "x", "AAAA"))), wantErr: "want 32 for Ed25519"},
		{name: "one bad key fails the set", doc: string(jwksJSON(good, with(good, "kid", "bad", "y", "AA"))), wantErr: `kid "bad"`},
		{name: "too many keys", doc: `{"keys":[` + strings.Repeat(`{},`, 100) + `{}]}`, wantErr: "more than 100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set, err := trust.ParseJWKS([]byte(tc.doc))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, trust.ErrJWKS) {
					t.Fatalf("ParseJWKS = %v, want an ErrJWKS error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var algs []string
			for _, k := range set.Keys() {
				algs = append(algs, k.Alg)
			}
			if !slices.Equal(algs, tc.algs) {
				t.Errorf("kept %v, want %v", algs, tc.algs)
			}
		})
	}
}

func TestKeySetFind(t *testing.T) {
	t.Parallel()
	a, b := mustEC(t), mustEC(t)
	set, err := trust.ParseJWKS(jwksJSON(ecJWK("a", &a.PublicKey), ecJWK("b", &b.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kid, alg string
		n        int
	}{{"a", trust.AlgES256, 1}, {"", trust.AlgES256, 2}, {"c", trust.AlgES256, 0}, {"a", trust.AlgRS256, 0}} {
		if got := len(set.Find(tc.kid, tc.alg)); got != tc.n {
			t.Errorf("Find(%q, %q) found %d keys, want %d", tc.kid, tc.alg, got, tc.n)
		}
	}
	if !set.HasKeyID("b") || set.HasKeyID("c") {
		t.Error("HasKeyID is wrong")
	}
}

// FuzzParseJWKS: whatever parses holds only keys of the kinds Baton checks,
// each found again by its kid and algorithm.
func FuzzParseJWKS(f *testing.F) {
	ec := mustEC(f)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	f.Add(string(jwksJSON(ecJWK("a", &ec.PublicKey), edJWK("b", edPub))))
	f.Add(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`)
	f.Add(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`)
	f.Add(`{"keys":[{"kty":"EC","crv":"P-256","x":"","y":"","d":""}]}`)
	f.Add(`{"keys":null}`)
	f.Fuzz(func(t *testing.T, doc string) {
		set, err := trust.ParseJWKS([]byte(doc))
		if err != nil {
			if set != nil {
				t.Fatal("a set with an error")
			}
			return
		}
		if set.Len() == 0 || set.Len() > 100 {
			t.Fatalf("a set of %d keys", set.Len())
		}
		for _, k := range set.Keys() {
			switch key := k.Key.(type) {
			case *rsa.PublicKey:
				if k.Alg != trust.AlgRS256 || key.N.BitLen() < 2048 || key.E < 3 {
					t.Fatalf("RSA key %+v", k)
				}
			case *ecdsa.PublicKey:
				if k.Alg != trust.AlgES256 || key.Curve != elliptic.P256() {
					t.Fatalf("EC key %+v", k)
				}
			case ed25519.PublicKey:
				if k.Alg != trust.AlgEdDSA || len(key) != ed25519.PublicKeySize {
					t.Fatalf("Ed25519 key %+v", k)
				}
			default:
				t.Fatalf("a key of type %T", k.Key)
			}
			if len(set.Find(k.KeyID, k.Alg)) == 0 {
				t.Fatalf("key %q not found again", k.KeyID)
			}
		}
	})
}
