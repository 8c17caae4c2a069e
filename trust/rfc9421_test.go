package trust

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The test key of RFC 9421 Appendix B.1.4 ("test-key-ed25519").
const (
	rfcEd25519Public = `-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=
-----END PUBLIC KEY-----`
	rfcEd25519Private = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----`
)

// rfcTestRequest is the test-request message of RFC 9421 Appendix B.2.
const rfcTestRequest = "POST /foo?param=Value&Pet=dog HTTP/1.1\r\n" +
	"Host: example.com\r\n" +
	"Date: Tue, 20 Apr 2021 02:07:55 GMT\r\n" +
	"Content-Type: application/json\r\n" +
	"Content-Digest: sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:\r\n" +
	"Content-Length: 18\r\n" +
	"\r\n" +
	`{"hello": "world"}`

// Appendix B.2.6, "Signing a Request Using ed25519", with the RFC 8792
// line wrapping undone.
const (
	rfcB26SignatureInput = `sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`
	rfcB26Signature      = `sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:`
	rfcB26Base           = `"date": Tue, 20 Apr 2021 02:07:55 GMT
"@method": POST
"@path": /foo
"@authority": example.com
"content-type": application/json
"content-length": 18
"@signature-params": ("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`
)

func rfcMessage(t *testing.T) Message {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(rfcTestRequest)))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set(HeaderSignatureInput, rfcB26SignatureInput)
	r.Header.Set(HeaderSignature, rfcB26Signature)
	return RequestMessage(r, body)
}

// TestRFC9421Ed25519Vector runs the RFC's own example through the code
// Verify uses: parse the RFC's Signature-Input and Signature from a request
// read off the wire, rebuild the signature base byte for byte, verify the
// RFC's signature with the RFC's public key, and, Ed25519 being
// deterministic, sign the base with the RFC's private key to get the RFC's
// exact signature bytes.
func TestRFC9421Ed25519Vector(t *testing.T) {
	t.Parallel()
	m := rfcMessage(t)

	in, sig, err := findSignature(m.Header, "sig-b26")
	if err != nil {
		t.Fatal(err)
	}
	comps, err := coveredComponents(in)
	if err != nil {
		t.Fatal(err)
	}
	params := appendInnerList(nil, in.list, in.params)
	if got, want := "sig-b26="+string(params), rfcB26SignatureInput; got != want {
		t.Errorf("re-serialized Signature-Input:\n got %s\nwant %s", got, want)
	}
	base, err := appendSignatureBase(nil, &m, comps, params)
	if err != nil {
		t.Fatal(err)
	}
	if string(base) != rfcB26Base {
		t.Fatalf("signature base:\n got %q\nwant %q", base, rfcB26Base)
	}

	block, _ := pem.Decode([]byte(rfcEd25519Public))
	pk, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub := pk.(ed25519.PublicKey)
	if !ed25519.Verify(pub, base, sig) {
		t.Fatal("the RFC's signature does not verify with the RFC's public key")
	}

	key, err := ParseKey(rfcEd25519Private, "test-key-ed25519")
	if err != nil {
		t.Fatal(err)
	}
	if !key.pub.Equal(pub) {
		t.Fatal("the RFC's private key does not match its public key")
	}
	if got := ed25519.Sign(key.priv(), base); !bytes.Equal(got, sig) {
		t.Errorf("signing the RFC's base:\n got %s\nwant %s", base64.StdEncoding.EncodeToString(got), base64.StdEncoding.EncodeToString(sig))
	}
	// The same key in the form keygen prints (and a JWK's "x" holds).
	if got, want := key.Public().String(), "test-key-ed25519 JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"; got != want {
		t.Errorf("public key line = %q, want %q", got, want)
	}

	// The message's own sha-512 Content-Digest (RFC 9530) matches its body.
	if err := checkContentDigest(m.Header.Get(HeaderContentDigest), m.Body); err != nil {
		t.Errorf("the RFC's Content-Digest: %v", err)
	}
}

// TestRFC9421VectorTampered checks that the RFC vector stops verifying when
// any covered part changes.
func TestRFC9421VectorTampered(t *testing.T) {
	t.Parallel()
	block, _ := pem.Decode([]byte(rfcEd25519Public))
	pk, _ := x509.ParsePKIXPublicKey(block.Bytes)
	tests := []struct {
		name   string
		mutate func(*Message)
	}{
		{"method", func(m *Message) { m.Method = "PUT" }},
		{"path", func(m *Message) { m.Path = "/bar" }},
		{"authority", func(m *Message) { m.Authority = "example.org" }},
		{"date", func(m *Message) { m.Header.Set("Date", "Tue, 20 Apr 2021 02:07:56 GMT") }},
		{"created", func(m *Message) {
			m.Header.Set(HeaderSignatureInput, strings.Replace(rfcB26SignatureInput, "1618884473", "1618884474", 1))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := rfcMessage(t)
			tc.mutate(&m)
			in, sig, err := findSignature(m.Header, "sig-b26")
			if err != nil {
				t.Fatal(err)
			}
			comps, _ := coveredComponents(in)
			base, err := appendSignatureBase(nil, &m, comps, appendInnerList(nil, in.list, in.params))
			if err != nil {
				t.Fatal(err)
			}
			if ed25519.Verify(pk.(ed25519.PublicKey), base, sig) {
				t.Error("a tampered message verifies")
			}
		})
	}
}

// TestRFC9530Examples checks Content-Digest against RFC 9530's examples
// for the body {"hello": "world"}.
func TestRFC9530Examples(t *testing.T) {
	t.Parallel()
	body := []byte(`{"hello": "world"}`)
	if got, want := ContentDigest(body), "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"; got != want {
		t.Errorf("ContentDigest = %s, want %s", got, want)
	}
	for _, v := range []string{
		"sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
		"sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:",
		"sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:, sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
		"unixsum=:AA==:, sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
	} {
		if err := checkContentDigest(v, body); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{
		"sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:, sha-512=:AAAA:", // one good, one bad
		"unixsum=:AA==:",
		"sha-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE", // a token, not bytes
		"",
	} {
		if err := checkContentDigest(v, body); err == nil {
			t.Errorf("%s: accepted", v)
		}
	}
}
