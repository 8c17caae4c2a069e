package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonproxy/baton/trust"
)

func TestKeygen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "baton-key.pem")
	var stdout, stderr bytes.Buffer
	if err := keygenCmd([]string{"--id", "analyst-2026-01", "--out", path}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	line := strings.TrimSuffix(stdout.String(), "\n")
	if strings.Contains(line, "\n") {
		t.Fatalf("stdout is more than the public key line: %q", stdout.String())
	}
	pub, err := trust.ParsePublicKeyLine(line)
	if err != nil {
		t.Fatalf("stdout %q: %v", line, err)
	}
	k, err := trust.LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if pub.ID != "analyst-2026-01" || k.ID() != pub.ID || !k.Public().Key.Equal(pub.Key) {
		t.Errorf("printed %v, file holds %v", pub, k)
	}
	if !strings.Contains(stderr.String(), path) || strings.Contains(stderr.String()+stdout.String(), "PRIVATE") {
		t.Errorf("stderr %q", stderr.String())
	}
	before, _ := os.ReadFile(path)

	// A second run without --force keeps the key.
	stdout.Reset()
	err = keygenCmd([]string{"--id", "analyst-2026-02", "--out", path}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "refusing to overwrite") || stdout.Len() > 0 {
		t.Fatalf("overwrite without --force: %v, stdout %q", err, stdout.String())
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the key file changed without --force")
	}

	// --force replaces it, and tightens a loosened mode.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if err := keygenCmd([]string{"--force", "--id", "analyst-2026-02", "--out", path}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	k2, err := trust.LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if k2.ID() != "analyst-2026-02" || k2.Public().Key.Equal(k.Public().Key) || stdout.String() != k2.Public().String()+"\n" {
		t.Errorf("after --force: file %v, stdout %q", k2, stdout.String())
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode after --force %v, want 0600", st.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".baton-key-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestKeygenRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	link := filepath.Join(dir, "link.pem")
	if err := os.Symlink(filepath.Join(dir, "target.pem"), link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantErr  string
		wantCode int
	}{
		{"no id", []string{"--out", filepath.Join(dir, "a.pem")}, "--id KEYID is required", 2},
		{"no out", []string{"--id", "a"}, "--out FILE is required", 2},
		{"bad id", []string{"--id", "a b", "--out", filepath.Join(dir, "b.pem")}, "not allowed", 2},
		{"extra argument", []string{"--id", "a", "--out", filepath.Join(dir, "c.pem"), "more"}, `unexpected argument "more"`, 2},
		{"unknown flag", []string{"--size", "4096"}, "flag provided but not defined", 2},
		{"no such directory", []string{"--id", "a", "--out", filepath.Join(dir, "none", "d.pem")}, "no such file", 1},
		{"dangling symlink", []string{"--id", "a", "--out", link}, "refusing to overwrite", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := keygenCmd(tc.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || exitCode(err) != tc.wantCode {
				t.Errorf("keygen %v = %v (exit %d), want %q (exit %d)", tc.args, err, exitCode(err), tc.wantErr, tc.wantCode)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q on failure", stdout.String())
			}
			if usage := strings.Contains(stderr.String(), "Usage:"); usage != (tc.wantCode == 2) {
				t.Errorf("stderr %q: usage shown %v, want %v", stderr.String(), usage, tc.wantCode == 2)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if err := keygenCmd([]string{"--help"}, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "baton keygen --id KEYID --out FILE") {
		t.Errorf("keygen --help = %v, stdout %q", err, stdout.String())
	}
	if _, err := os.Lstat(filepath.Join(dir, "target.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Error("keygen wrote through a symlink")
	}
}
