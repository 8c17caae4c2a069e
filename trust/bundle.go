package trust

// Trust bundles: which public keys speak for which agent. An agent may have
// several keys at once, so that a key rotates without downtime: add the new
// public key to every peer's bundle, switch the agent's Baton to the new
// private key, then remove the old public key.

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// PublicKey is one verification key of a peer: its id and the raw Ed25519
// public key.
type PublicKey struct {
	ID  string
	Key ed25519.PublicKey
}

// String returns the public key line that `baton keygen` prints and
// ParsePublicKeyLine reads: the key id, a space, and the key as unpadded
// base64url of its raw 32 bytes (the form of a JWK's "x", RFC 8037).
func (p PublicKey) String() string { return p.ID + " " + encodePublic(p.Key) }

func encodePublic(k ed25519.PublicKey) string { return base64.RawURLEncoding.EncodeToString(k) }

// ParsePublicKey decodes an Ed25519 public key written as unpadded base64url
// of its raw 32 bytes, the form `baton keygen` prints. Only that form is
// accepted, so a key has a single spelling in config and in reviews.
func ParsePublicKey(b64 string) (ed25519.PublicKey, error) {
	if strings.ContainsAny(b64, "+/=") {
		return nil, fmt.Errorf("%w: public key %q: expected unpadded base64url ('-' and '_', no '='), as baton keygen prints", ErrKey, b64)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("%w: public key %q: not base64url: %w", ErrKey, b64, err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: public key %q: %d bytes, expected %d", ErrKey, b64, len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// ParsePublicKeyLine parses "KEYID BASE64URL", the line `baton keygen`
// prints for peers' trust bundles.
func ParsePublicKeyLine(line string) (PublicKey, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return PublicKey{}, fmt.Errorf("%w: public key line %q: expected \"KEYID BASE64URL\"", ErrKey, line)
	}
	if err := CheckKeyID(f[0]); err != nil {
		return PublicKey{}, err
	}
	k, err := ParsePublicKey(f[1])
	if err != nil {
		return PublicKey{}, err
	}
	return PublicKey{ID: f[0], Key: k}, nil
}

// Bundle maps an agent's name to the public keys that speak for it.
type Bundle map[string][]PublicKey

// ParseBundle builds a Bundle from public key lines per agent, as a config
// file would list them. The error names every bad line, and the bundle is
// checked with Validate.
func ParseBundle(lines map[string][]string) (Bundle, error) {
	b := make(Bundle, len(lines))
	var errs []error
	for _, agent := range slices.Sorted(maps.Keys(lines)) {
		b[agent] = make([]PublicKey, 0, len(lines[agent]))
		for i, l := range lines[agent] {
			pk, err := ParsePublicKeyLine(l)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: %w", agent, i, err))
				continue
			}
			b[agent] = append(b[agent], pk)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return b, b.Validate()
}

// Validate reports every problem that would make the bundle ambiguous or
// unusable: an agent with no key, a bad key id or key length, and a key id
// or public key listed twice (within one agent or across agents: a key
// speaks for one agent only).
func (b Bundle) Validate() error {
	var errs []error
	ids := map[string]string{}
	keys := map[string]string{}
	for _, agent := range slices.Sorted(maps.Keys(b)) {
		if agent == "" {
			errs = append(errs, errors.New("trust bundle: empty agent name"))
		}
		if len(b[agent]) == 0 {
			errs = append(errs, fmt.Errorf("trust bundle: %s: no public key", agent))
		}
		for i, pk := range b[agent] {
			at := fmt.Sprintf("trust bundle: %s[%d]", agent, i)
			if err := CheckKeyID(pk.ID); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", at, err))
			}
			if len(pk.Key) != ed25519.PublicKeySize {
				errs = append(errs, fmt.Errorf("%s: public key of %d bytes, expected %d", at, len(pk.Key), ed25519.PublicKeySize))
				continue
			}
			if other, dup := ids[pk.ID]; dup {
				errs = append(errs, fmt.Errorf("%s: key id %q also listed for %s", at, pk.ID, other))
			}
			if other, dup := keys[string(pk.Key)]; dup {
				errs = append(errs, fmt.Errorf("%s: public key %s also listed for %s", at, encodePublic(pk.Key), other))
			}
			ids[pk.ID], keys[string(pk.Key)] = agent, agent
		}
	}
	return errors.Join(errs...)
}
