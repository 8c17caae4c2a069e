package trust_test

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/batonproxy/baton/trust"
)

// rfcPublic is RFC 9421's test-key-ed25519 (Appendix B.1.4) as unpadded
// base64url, the form of its JWK "x".
const rfcPublic = "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"

func TestParsePublicKey(t *testing.T) {
	t.Parallel()
	k, err := trust.ParsePublicKey(rfcPublic)
	if err != nil || len(k) != ed25519.PublicKeySize {
		t.Fatalf("ParsePublicKey = %x, %v", k, err)
	}
	tests := []struct {
		name, in, wantErr string
	}{
		{"standard alphabet", "JrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs", "base64url"},
		{"padded", rfcPublic + "=", "base64url"},
		{"short", rfcPublic[:40], "bytes, expected 32"},
		{"not base64", "not a key!", "not base64url"},
		{"empty", "", "0 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := trust.ParsePublicKey(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, trust.ErrKey) {
				t.Errorf("ParsePublicKey(%q) = %v, want error with %q", tc.in, err, tc.wantErr)
			}
		})
	}
}

func TestParsePublicKeyLine(t *testing.T) {
	t.Parallel()
	pk, err := trust.ParsePublicKeyLine("  test-key-ed25519   " + rfcPublic + "\n")
	if err != nil || pk.ID != "test-key-ed25519" || pk.String() != "test-key-ed25519 "+rfcPublic {
		t.Fatalf("ParsePublicKeyLine = %v, %v", pk, err)
	}
	for _, bad := range []string{rfcPublic, "a b c", "bad/id " + rfcPublic, "id " + rfcPublic[1:], ""} {
		if _, err := trust.ParsePublicKeyLine(bad); err == nil {
			t.Errorf("ParsePublicKeyLine(%q) accepted", bad)
		}
	}
}

func TestBundle(t *testing.T) {
	t.Parallel()
	k1, _ := trust.GenerateKey("a-1")
	k2, _ := trust.GenerateKey("a-2")
	b, err := trust.ParseBundle(map[string][]string{
		"analyst": {k1.Public().String(), k2.Public().String()},
		"planner": {"test-key-ed25519 " + rfcPublic},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(b["analyst"]) != 2 || !b["analyst"][1].Key.Equal(k2.Public().Key) || b["planner"][0].ID != "test-key-ed25519" {
		t.Errorf("ParseBundle = %v", b)
	}

	tests := []struct {
		name    string
		lines   map[string][]string
		wantErr []string
	}{
		{"bad lines named", map[string][]string{"analyst": {"a-1 nope", k2.Public().String()}, "planner": {"x"}},
			[]string{"analyst[0]", "planner[0]"}},
		{"key id twice", map[string][]string{"analyst": {k1.Public().String()}, "planner": {"a-1 " + rfcPublic}},
			[]string{`key id "a-1" also listed for analyst`}},
		{"one key, two agents", map[string][]string{"analyst": {k1.Public().String()}, "planner": {"other " + k1.Public().String()[4:]}},
			[]string{"also listed for analyst"}},
		{"agent without keys", map[string][]string{"analyst": {}}, []string{"analyst: no public key"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := trust.ParseBundle(tc.lines)
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("ParseBundle = %v, want an error with %q", err, w)
				}
			}
		})
	}
	if err := (trust.Bundle{"a": {{ID: "k", Key: make([]byte, 31)}}}).Validate(); err == nil {
		t.Error("Validate accepted a 31-byte key")
	}
}
