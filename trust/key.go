package trust

// Identity keys. A Baton signs with one Ed25519 key, named by a key id that
// peers look up in their trust bundles. The private half never leaves a Key
// through fmt, slog or encoding/json: every way of printing one shows the id
// and the public key only.

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// KeyIDPrefix starts the line, before the PEM block of a key file, that
// names the key's id ("baton-key-id: analyst-2026-01"). PEM decoders,
// OpenSSL's included, ignore text before the block, so the file stays a
// plain PKCS#8 key for other tools.
const KeyIDPrefix = "baton-key-id:"

// maxKeyIDLen bounds key ids: they travel in every request's Signature-Input.
const maxKeyIDLen = 128

// ErrKey is wrapped by every error about loading or parsing a key.
var ErrKey = errors.New("identity key")

// Key is this Baton's signing key: an Ed25519 private key and its id. Print
// it, log it or marshal it freely: only the id and the public key show.
type Key struct {
	id  string
	pub ed25519.PublicKey
	// priv returns the private key. It is a closure because fmt's
	// reflection walk, which bypasses the methods below (a Key in an
	// unexported struct field, or under a bad verb), prints a pointer's
	// target but only the address of a func. It returns the same slice for
	// the Key's lifetime: crypto/ed25519 caches the expanded key by the
	// address of its first byte.
	priv func() ed25519.PrivateKey
}

// GenerateKey creates a new random key named id.
func GenerateKey(id string) (*Key, error) {
	if err := CheckKeyID(id); err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%w: generating: %w", ErrKey, err)
	}
	return newKey(id, priv), nil
}

func newKey(id string, priv ed25519.PrivateKey) *Key {
	return &Key{id: id, pub: priv.Public().(ed25519.PublicKey), priv: func() ed25519.PrivateKey { return priv }}
}

// Derive returns a 32-byte secret for purpose, derived from the private
// key (HMAC-SHA256 keyed by its seed): another key for another use, that
// reveals nothing of this one and is the same wherever this key is loaded.
func (k *Key) Derive(purpose string) []byte {
	m := hmac.New(sha256.New, k.priv().Seed())
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// CheckKeyID reports whether id can name a key: 1 to 128 characters among
// letters, digits and ". _ : -", starting with a letter or digit. Key ids
// appear quoted in Signature-Input and unquoted in trust bundle lines, so
// they hold nothing that needs escaping and no space.
func CheckKeyID(id string) error {
	if id == "" || len(id) > maxKeyIDLen {
		return fmt.Errorf("%w: key id must be 1 to %d characters, got %d", ErrKey, maxKeyIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if isAlpha(c) || isDigit(c) || (i > 0 && strings.IndexByte("._:-", c) >= 0) {
			continue
		}
		return fmt.Errorf("%w: key id %q: character %q not allowed (letters, digits, '.', '_', ':', '-'; first a letter or digit)", ErrKey, id, c)
	}
	return nil
}

// LoadKey reads a key file as written by `baton keygen`: a PKCS#8 PEM
// "PRIVATE KEY" block holding an Ed25519 key, preceded by a
// "baton-key-id: ID" line. A key made by other tools
// (openssl genpkey -algorithm ed25519) works once that line is added.
func LoadKey(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	k, err := ParseKey(string(b), "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// ParseKey parses a private key given as text, for a key held in an
// environment variable: either the PEM of a key file (see LoadKey), whose
// line breaks may be written as \n to fit on one line, or the base64
// (standard or URL alphabet, padded or not) of the raw 32-byte Ed25519 seed
// or of the PKCS#8 DER. id names the key; it may be empty when the PEM text
// carries a baton-key-id line, and must agree with that line when both are
// given.
func ParseKey(pemOrBase64, id string) (*Key, error) {
	s := strings.TrimSpace(pemOrBase64)
	if !strings.Contains(s, "\n") {
		// A PEM squeezed onto one line for an environment variable, its
		// line breaks written as \n.
		s = strings.ReplaceAll(s, `\n`, "\n")
	}
	var (
		priv   ed25519.PrivateKey
		fileID string
		err    error
	)
	if i := strings.Index(s, "-----BEGIN"); i >= 0 {
		fileID, err = preambleKeyID(s[:i])
		if err != nil {
			return nil, err
		}
		block, _ := pem.Decode([]byte(s[i:]))
		if block == nil || block.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("%w: expected a PEM \"PRIVATE KEY\" (PKCS#8) block", ErrKey)
		}
		priv, err = parsePKCS8(block.Bytes)
	} else {
		priv, err = parseRawKey(s)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case id == "" && fileID == "":
		return nil, fmt.Errorf("%w: no key id: give one, or put a %q line before the PEM block", ErrKey, KeyIDPrefix+" ID")
	case id == "":
		id = fileID
	case fileID != "" && fileID != id:
		return nil, fmt.Errorf("%w: key id %q given, but the key's own %s line says %q", ErrKey, id, KeyIDPrefix, fileID)
	}
	if err := CheckKeyID(id); err != nil {
		return nil, err
	}
	return newKey(id, priv), nil
}

func preambleKeyID(pre string) (string, error) {
	id := ""
	for line := range strings.Lines(pre) {
		line = strings.TrimSpace(line)
		if len(line) < len(KeyIDPrefix) || !strings.EqualFold(line[:len(KeyIDPrefix)], KeyIDPrefix) {
			continue
		}
		if id != "" {
			return "", fmt.Errorf("%w: more than one %s line", ErrKey, KeyIDPrefix)
		}
		id = strings.TrimSpace(line[len(KeyIDPrefix):])
		if id == "" {
			return "", fmt.Errorf("%w: empty %s line", ErrKey, KeyIDPrefix)
		}
	}
	return id, nil
}

func parsePKCS8(der []byte) (ed25519.PrivateKey, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: PKCS#8: %w", ErrKey, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T, not an Ed25519 key", ErrKey, k)
	}
	return priv, nil
}

func parseRawKey(s string) (ed25519.PrivateKey, error) {
	b, err := decodeAnyBase64(s)
	if err != nil {
		return nil, fmt.Errorf("%w: neither PEM nor base64", ErrKey)
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	default:
		if priv, err := parsePKCS8(b); err == nil {
			return priv, nil
		}
		return nil, fmt.Errorf("%w: base64 of %d bytes is neither a 32-byte Ed25519 seed nor PKCS#8 DER", ErrKey, len(b))
	}
}

// decodeAnyBase64 decodes standard or URL-alphabet base64, padded or not.
func decodeAnyBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// ID returns the key id.
func (k Key) ID() string { return k.id }

// Public returns the public half, as peers list it in their trust bundles.
func (k Key) Public() PublicKey { return PublicKey{ID: k.id, Key: k.pub} }

// PrivatePEM returns the key file text LoadKey reads: the key id line, then
// the PKCS#8 PEM block. It is the one way to get the private key out.
func (k *Key) PrivatePEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	out := []byte(KeyIDPrefix + " " + k.id + "\n")
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...), nil
}

// String shows the key id and the public key.
func (k Key) String() string {
	return "ed25519 key " + k.id + " (public " + encodePublic(k.pub) + ")"
}

// GoString is String for %#v.
func (k Key) GoString() string {
	return fmt.Sprintf("trust.Key{ID:%q, Public:%q}", k.id, encodePublic(k.pub))
}

// Format prints String for every verb and flag (GoString for %#v), so that
// no verb (%x, %d, %+v) can reach the private bytes.
func (k Key) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		fmt.Fprint(f, k.GoString())
	case verb == 'q':
		fmt.Fprintf(f, "%q", k.String())
	default:
		fmt.Fprint(f, k.String())
	}
}

// LogValue makes slog log the key as its id and public key.
func (k Key) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", k.id), slog.String("public_key", encodePublic(k.pub)))
}

// MarshalJSON encodes the key as {"id": …, "public_key": …}.
func (k Key) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID        string `json:"id"`
		PublicKey string `json:"public_key"`
	}{k.id, encodePublic(k.pub)})
}

// Every way of printing a Key, or a *Key, goes through the methods above.
var (
	_ fmt.Formatter  = Key{}
	_ fmt.GoStringer = Key{}
	_ slog.LogValuer = Key{}
	_ json.Marshaler = Key{}
)
