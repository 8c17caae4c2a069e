package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateCallers: baton validate loads what callers edges name: the
// bearer tokens from the environment and the JWK Set files.
func TestValidateCallers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	good := `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`
	if err := os.WriteFile(jwks, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := func(jwksFile string) string {
		return writeFile(t, "agent: analyst\nupstream: http://127.0.0.1:9001\nedges:\n"+
			"  - {from: web, callers: {bearer: {tokens_env: WEB_TOKENS}}}\n"+
			"  - {from: app, callers: {jwt: {issuer: i, audience: analyst, jwks_file: "+jwksFile+"}}}\n")
	}
	env := func(tokens string) func(string) string {
		return func(k string) string {
			if k == "WEB_TOKENS" {
				return tokens
			}
			return ""
		}
	}
	tests := []struct {
		name   string
		file   string
		tokens string
		want   []string // the error's lines; none: ok
	}{
		{name: "good", file: conf(jwks), tokens: "0123456789abcdef,fedcba9876543210"},
		{name: "tokens unset, a broken key set", file: conf(broken), want: []string{
			"edges[0].callers.bearer.tokens_env: WEB_TOKENS is empty: set it to the comma-separated tokens callers send as Authorization: Bearer <token>",
			"edges[1].callers.jwt.jwks_file: " + broken + ": jwks: keys[0] (kid \"\"): x and y: 1 and 1 bytes, want 32 each for P-256",
		}},
		{name: "a short token", file: conf(jwks), tokens: "0123456789abcdef,short", want: []string{
			"edges[0].callers.bearer.tokens_env: WEB_TOKENS holds a token shorter than 16 characters: use long random tokens",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := run(context.Background(), []string{"validate", "--config", tc.file}, &out, &out, env(tc.tokens))
			if len(tc.want) == 0 {
				if err != nil || !strings.HasSuffix(out.String(), ": ok\n") {
					t.Fatalf("validate: %v %s", err, out.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("validate passed, want %q", tc.want)
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("validate's lines\n got: %q\nwant: %q", got, tc.want)
			}
			if code := exitCode(err); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
		})
	}
}
