package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonproxy/baton/trust/mtls"
)

// TestKeygenTLS makes a CA and two agents' certificates with the CLI; a
// configuration naming them validates, one naming another agent's
// certificate does not, and the two agents' sources shake hands.
func TestKeygenTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if err := keygenCmd([]string{"--ca", "--trust-domain", "example.org", "--out", dir}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, agent := range []string{"analyst", "writer"} {
		if err := keygenCmd([]string{"--cert", agent, "--ca-dir", dir, "--out", dir}, &out, &errOut); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(filepath.Join(dir, agent+"-key.pem")); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s's key: %v %v", agent, st, err)
		}
	}
	if err := keygenCmd([]string{"--cert", "analyst", "--ca-dir", dir, "--out", dir}, &out, &errOut); err == nil {
		t.Fatal("an existing key was overwritten without --force")
	}
	src, err := mtls.Load(mtls.Options{CertFile: filepath.Join(dir, "analyst.pem"), KeyFile: filepath.Join(dir, "analyst-key.pem"),
		CAFile: filepath.Join(dir, "ca.pem"), TrustDomain: "example.org"})
	if err != nil {
		t.Fatal(err)
	}
	if src.ID().String() != "spiffe://example.org/agent/analyst" || time.Until(src.NotAfter()) < 89*24*time.Hour {
		t.Fatalf("the certificate is %s until %s", src.ID(), src.NotAfter())
	}

	conf := func(agent, cert string) string {
		p := filepath.Join(t.TempDir(), "baton.yaml")
		y := "agent: " + agent + "\nupstream: http://127.0.0.1:8080\ntls: {cert_file: " + filepath.Join(dir, cert+".pem") +
			", key_file: " + filepath.Join(dir, cert+"-key.pem") + ", ca_file: " + filepath.Join(dir, "ca.pem") + ", trust_domain: example.org}\n"
		if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := func(string) string { return "" }
	out.Reset()
	if err := validate([]string{"--config", conf("analyst", "analyst")}, &out, env); err != nil || !strings.HasSuffix(out.String(), "ok\n") {
		t.Fatalf("validate: %v %s", err, out.String())
	}
	err = validate([]string{"--config", conf("analyst", "writer")}, &out, env)
	if err == nil || !strings.Contains(err.Error(), "spiffe://example.org/agent/writer, the identity of agent writer, not of analyst") {
		t.Fatalf("validate with another agent's certificate: %v", err)
	}
}
