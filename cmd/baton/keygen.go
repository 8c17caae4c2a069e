package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/batonproxy/baton/trust"
)

// keygenUsage is the keygen part of baton's usage text.
const keygenUsage = `  baton keygen --id KEYID --out FILE [--force]
                                 create this Baton's Ed25519 identity key: write
                                 the private key to FILE (PKCS#8 PEM, mode 0600;
                                 an existing FILE is kept unless --force) and
                                 print "KEYID PUBLICKEY" (unpadded base64url of
                                 the raw 32-byte key) for peers' trust bundles
`

// keygenCmd runs `baton keygen`. The private key goes only to the file; the
// public key line goes to stdout so that it can be captured by a script,
// and a note of what was written to stderr.
func keygenCmd(args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	id := fl.String("id", "", "key id, as peers' trust bundles will name the key")
	out := fl.String("out", "", "file to write the private key to")
	force := fl.Bool("force", false, "replace FILE if it exists")
	ca := fl.Bool("ca", false, "create a CA for mutual TLS")
	cert := fl.String("cert", "", "issue this agent's TLS certificate")
	td := fl.String("trust-domain", "", "the CA's SPIFFE trust domain")
	caDir := fl.String("ca-dir", "", "the directory of the CA (ca.pem, ca-key.pem)")
	days := fl.Int("days", 0, "validity in days")
	bad, done, err := parseCommand(fl, args, "keygen", keygenUsage+keygenTLSUsage, stdout, stderr)
	if done || err != nil {
		return err
	}
	switch {
	case *ca && *cert != "":
		return bad("--ca and --cert are two steps: the CA first, then each agent's certificate")
	case *ca && (*td == "" || *out == ""):
		return bad("--ca needs --trust-domain DOMAIN and --out DIR")
	case *cert != "" && (*caDir == "" || *out == ""):
		return bad("--cert AGENT needs --ca-dir DIR and --out DIR")
	case *ca || *cert != "":
		n := *days
		if n == 0 {
			n = map[bool]int{true: 365, false: 90}[*ca]
		}
		return keygenTLS(*ca, *cert, *td, *caDir, *out, n, *force, stderr)
	}
	switch {
	case *id == "":
		return bad("--id KEYID is required (e.g. analyst-2026-01)")
	case *out == "":
		return bad("--out FILE is required")
	}
	if err := trust.CheckKeyID(*id); err != nil {
		return bad("--id: " + err.Error())
	}
	k, err := trust.GenerateKey(*id)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	text, err := k.PrivatePEM()
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := writeKeyFile(*out, text, *force); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	fmt.Fprintln(stdout, k.Public())
	fmt.Fprintf(stderr, "baton keygen: wrote private key %s to %s (mode 0600); add the line above to each peer's trust bundle\n", *id, *out)
	return nil
}

// writeKeyFile writes a private key file with mode 0600. Without force it
// creates path exclusively (O_EXCL: no overwrite, no following a symlink
// planted there); with force it writes a temporary file beside path and
// renames it over path, so that the old key stays whole until the new one
// is complete and the file never has looser permissions.
func writeKeyFile(path string, data []byte, force bool) error {
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists; refusing to overwrite a key (--force replaces it)", path)
		}
		if err != nil {
			return err
		}
		if err := writeSync(f, data); err != nil {
			os.Remove(path)
			return err
		}
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".baton-key-*") // mode 0600
	if err != nil {
		return err
	}
	if err := writeSync(f, data); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

func writeSync(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
