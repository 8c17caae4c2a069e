package tlsintercept

import (
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNoSystemRoots says that a bundle was written with the CA alone: no
// file of system roots was found. The agent then trusts Baton's leaves
// and nothing else, so its TLS to destinations that are not intercepted
// fails; the caller should warn.
var ErrNoSystemRoots = errors.New("no system roots found: the bundle holds the interception CA alone")

// systemRootFiles are the files Go's crypto/x509 reads the system roots
// from on Linux, in its order (crypto/x509/root_linux.go). The directories
// it also reads (/etc/ssl/certs, SSL_CERT_DIR) are not: every distribution
// that has them also has one of these files.
var systemRootFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, distroless
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // OpenSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

// rootSources are the files PublishBundle may take the system roots from,
// first choice first: SSL_CERT_FILE when set (as Go itself does), then the
// system's.
func rootSources() []string {
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		return append([]string{f}, systemRootFiles...)
	}
	return systemRootFiles
}

// PublishBundle writes the bundle an agent trusts, as PEM: the CA's
// certificate (CertPEM), then the system roots, so that the agent's TLS to
// destinations Baton does not intercept keeps working. The roots are the
// certificates of the first of these files that holds any: SSL_CERT_FILE
// when set, then the files Go reads on Linux. A source that is path itself (an
// SSL_CERT_FILE pointing at the bundle, as an agent's environment does) is
// skipped, so that a bundle never grows from its own last copy, and so is a
// file that cannot be read, as Go does. Found none, it writes the CA alone
// and returns an error wrapping ErrNoSystemRoots.
//
// The file is replaced atomically (a temporary file in its directory,
// renamed over it), mode 0644, its directory made if missing: a reader
// sees the old bundle or the new one, never half of one.
func (ca *CA) PublishBundle(path string) error {
	return ca.publishBundle(path, rootSources())
}

func (ca *CA) publishBundle(path string, sources []string) error {
	roots, readErr := readRoots(path, sources)
	bundle := append(ca.CertPEM(), roots...)
	if err := writeAtomic(path, bundle, 0o644); err != nil {
		return fmt.Errorf("tlsintercept: publishing the CA bundle: %w", err)
	}
	if len(roots) == 0 {
		return fmt.Errorf("tlsintercept: %s: %w", path, errors.Join(ErrNoSystemRoots, readErr))
	}
	return nil
}

// readRoots returns the CERTIFICATE blocks of the first source that holds
// any and is not target, re-encoded (comments and other blocks dropped).
// As Go does, it passes over a file it cannot read; when it finds no
// roots, it returns the first such error.
func readRoots(target string, sources []string) (roots []byte, firstErr error) {
	ti, terr := os.Stat(target)
	for _, src := range sources {
		b, err := os.ReadFile(src)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && firstErr == nil {
				firstErr = fmt.Errorf("reading system roots: %w", err)
			}
			continue
		}
		if si, err := os.Stat(src); err == nil && terr == nil && os.SameFile(si, ti) {
			continue
		}
		for {
			var block *pem.Block
			block, b = pem.Decode(b)
			if block == nil {
				break
			}
			if block.Type == "CERTIFICATE" {
				roots = append(roots, pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes})...)
			}
		}
		if len(roots) > 0 {
			return roots, nil
		}
	}
	return nil, firstErr
}

// writeAtomic writes b to path through a temporary file in the same
// directory, renamed over path once complete and synced.
func writeAtomic(path string, b []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails harmlessly once renamed
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename itself survives a crash
		d.Close()
	}
	return nil
}
