package trust_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonproxy/baton/trust"
)

// privateOf digs the private key out of k the one sanctioned way.
func privateOf(t *testing.T, k *trust.Key) ed25519.PrivateKey {
	t.Helper()
	p, err := k.PrivatePEM()
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(p)
	priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return priv.(ed25519.PrivateKey)
}

func TestKeyNeverShowsPrivatePart(t *testing.T) {
	t.Parallel()
	k, err := trust.GenerateKey("analyst-2026-01")
	if err != nil {
		t.Fatal(err)
	}
	priv := privateOf(t, k)
	seed := priv.Seed()
	pemText, _ := k.PrivatePEM()
	block, _ := pem.Decode(pemText)
	// Every spelling of the secret that a printer could produce.
	secrets := []string{
		hex.EncodeToString(seed), strings.ToUpper(hex.EncodeToString(seed)),
		base64.StdEncoding.EncodeToString(seed), base64.RawURLEncoding.EncodeToString(seed),
		base64.StdEncoding.EncodeToString(priv)[:40], base64.RawURLEncoding.EncodeToString(priv)[:40],
		base64.StdEncoding.EncodeToString(block.Bytes)[:40],
		strings.Trim(fmt.Sprint([]byte(seed[:8])), "[]"), // decimal bytes, as %v prints a []byte
		fmt.Sprintf("%x", seed[:8]),
	}
	public := base64.RawURLEncoding.EncodeToString(k.Public().Key)

	type exported struct{ K trust.Key }
	type exportedPtr struct{ K *trust.Key }
	type unexported struct{ k trust.Key }
	type unexportedPtr struct{ k *trust.Key }
	var outputs []struct{ how, out string }
	add := func(how, out string) { outputs = append(outputs, struct{ how, out string }{how, out}) }
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3v", "%T"} {
		add("*Key "+verb, fmt.Sprintf(verb, k))
		add("Key "+verb, fmt.Sprintf(verb, *k))
		add("exported field "+verb, fmt.Sprintf(verb, exported{*k}))
		add("exported pointer field "+verb, fmt.Sprintf(verb, exportedPtr{k}))
		add("unexported field "+verb, fmt.Sprintf(verb, unexported{*k}))
		add("unexported pointer field "+verb, fmt.Sprintf(verb, unexportedPtr{k}))
		add("slice "+verb, fmt.Sprintf(verb, []*trust.Key{k}))
		add("map "+verb, fmt.Sprintf(verb, map[string]trust.Key{"k": *k}))
	}
	add("String", k.String())
	add("error", fmt.Errorf("loading %v: %w", k, errors.New("boom")).Error())
	for _, v := range []any{k, *k, exported{*k}, exportedPtr{k}, []*trust.Key{k}} {
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		add(fmt.Sprintf("json %T", v), string(js))
	}
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&logs, nil), slog.NewTextHandler(&logs, nil)} {
		l := slog.New(h)
		l.Info("key", "key", k, "value", *k, "struct", exported{*k})
		l.Info("key", slog.Any("key", k), slog.Group("g", "k", k))
	}
	add("slog", logs.String())

	for _, o := range outputs {
		for _, s := range secrets {
			if strings.Contains(o.out, s) {
				t.Errorf("%s shows the private key (%q) in %q", o.how, s, o.out)
			}
		}
	}
	for _, o := range outputs[:4] { // the Key itself, printed directly
		if !strings.Contains(o.out, "analyst-2026-01") || !strings.Contains(o.out, public) {
			t.Errorf("%s = %q, want the key id and public key", o.how, o.out)
		}
	}
	js, _ := json.Marshal(k)
	if want := `{"id":"analyst-2026-01","public_key":"` + public + `"}`; string(js) != want {
		t.Errorf("json = %s, want %s", js, want)
	}
	if !strings.Contains(logs.String(), `"key":{"id":"analyst-2026-01","public_key":"`+public+`"}`) {
		t.Errorf("slog JSON does not show the key as id and public key:\n%s", logs.String())
	}
}

func TestLoadKey(t *testing.T) {
	t.Parallel()
	k, err := trust.GenerateKey("analyst-1")
	if err != nil {
		t.Fatal(err)
	}
	text, err := k.PrivatePEM()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(text, []byte("baton-key-id: analyst-1\n-----BEGIN PRIVATE KEY-----\n")) {
		t.Errorf("key file:\n%s", text)
	}
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := trust.LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID() != "analyst-1" || !got.Public().Key.Equal(k.Public().Key) {
		t.Errorf("LoadKey = %v, want %v", got, k)
	}
	if _, err := trust.LoadKey(filepath.Join(t.TempDir(), "absent.pem")); !errors.Is(err, trust.ErrKey) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadKey(absent) = %v", err)
	}

	seed := privateOf(t, k).Seed()
	der, _ := x509.MarshalPKCS8PrivateKey(privateOf(t, k))
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	pemOnly := string(text[strings.Index(string(text), "-----BEGIN"):])
	tests := []struct {
		name    string
		text    string
		id      string
		wantID  string
		wantErr string
	}{
		{name: "pem with its id", text: string(text), wantID: "analyst-1"},
		{name: "pem, same id given", text: string(text), id: "analyst-1", wantID: "analyst-1"},
		{name: "pem, other id given", text: string(text), id: "analyst-2", wantErr: `says "analyst-1"`},
		{name: "pem without id line, id given", text: pemOnly, id: "analyst-3", wantID: "analyst-3"},
		{name: "pem on one line", text: strings.ReplaceAll(string(text), "\n", `\n`), wantID: "analyst-1"},
		{name: "pem without any id", text: pemOnly, wantErr: "no key id"},
		{name: "id line twice", text: "baton-key-id: a\nbaton-key-id: b\n" + pemOnly, wantErr: "more than one"},
		{name: "seed, std base64", text: base64.StdEncoding.EncodeToString(seed), id: "env", wantID: "env"},
		{name: "seed, url base64 unpadded", text: base64.RawURLEncoding.EncodeToString(seed) + "\n", id: "env", wantID: "env"},
		{name: "pkcs8 der, base64", text: base64.StdEncoding.EncodeToString(der), id: "env", wantID: "env"},
		{name: "base64 without id", text: base64.StdEncoding.EncodeToString(seed), wantErr: "no key id"},
		{name: "bad id", text: base64.StdEncoding.EncodeToString(seed), id: "has space", wantErr: "not allowed"},
		{name: "not base64", text: "hello, world", id: "x", wantErr: "neither PEM nor base64"},
		{name: "wrong length", text: base64.StdEncoding.EncodeToString(seed[:31]), id: "x", wantErr: "neither a 32-byte"},
		{name: "ecdsa key", text: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})), id: "x", wantErr: "not an Ed25519 key"},
		{name: "public key pem", text: "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=\n-----END PUBLIC KEY-----\n", id: "x", wantErr: `"PRIVATE KEY"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := trust.ParseKey(tc.text, tc.id)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, trust.ErrKey) {
					t.Fatalf("ParseKey = %v, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID() != tc.wantID || !got.Public().Key.Equal(k.Public().Key) {
				t.Errorf("ParseKey = %v, want id %s and %v", got, tc.wantID, k.Public())
			}
		})
	}
}

func TestCheckKeyID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "analyst-2026-01", "k1.v2:x_y", strings.Repeat("a", 128)} {
		if err := trust.CheckKeyID(id); err != nil {
			t.Errorf("CheckKeyID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "-a", "a b", `a"b`, `a\b`, "é", strings.Repeat("a", 129), "a\n"} {
		if err := trust.CheckKeyID(id); err == nil {
			t.Errorf("CheckKeyID(%q) accepted", id)
		}
	}
}
