package trust

// Content-Digest (RFC 9530): the signature covers this header, and the
// header binds the body, so the signature covers the body without hashing
// it into the signature base.

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
)

// HeaderContentDigest is the RFC 9530 header carrying the body's digest.
const HeaderContentDigest = "Content-Digest"

// ContentDigest returns the Content-Digest value of body with sha-256, the
// algorithm Baton sends: sha-256=:base64:.
func ContentDigest(body []byte) string {
	sum := sha256.Sum256(body)
	// A buffer of constant size stays on the stack: the string is the one
	// allocation.
	var buf [len("sha-256=::") + (sha256.Size+2)/3*4]byte
	b := append(buf[:0], "sha-256=:"...)
	b = base64.StdEncoding.AppendEncode(b, sum[:])
	return string(append(b, ':'))
}

var (
	errDigestNoAlg    = errors.New("no sha-256 or sha-512 member")
	errDigestMismatch = errors.New("does not match the body")
)

// parseContentDigest parses a Content-Digest value into its algorithm and
// digest pairs. Members that are not byte sequences are an error; unknown
// algorithms are kept (the caller ignores them).
func parseContentDigest(v string) ([]sfMember, error) {
	ms, err := parseDictionary(v)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.inner || m.item.val.kind != sfBytes {
			return nil, fmt.Errorf("%w: member %s is not a byte sequence", errSFV, m.key)
		}
	}
	return ms, nil
}

// checkContentDigest reports whether body matches the Content-Digest value
// v: every member with an algorithm Baton knows must match, and at least one
// must be present. An error says which.
func checkContentDigest(v string, body []byte) error {
	ms, err := parseContentDigest(v)
	if err != nil {
		return err
	}
	checked := false
	for _, m := range ms {
		var sum []byte
		switch m.key { // RFC 9530's active algorithms
		case "sha-256":
			s := sha256.Sum256(body)
			sum = s[:]
		case "sha-512":
			s := sha512.Sum512(body)
			sum = s[:]
		default:
			continue
		}
		if subtle.ConstantTimeCompare(sum, m.item.val.bytes) != 1 {
			return errDigestMismatch
		}
		checked = true
	}
	if !checked {
		return errDigestNoAlg
	}
	return nil
}
