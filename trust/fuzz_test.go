package trust

import (
	"bytes"
	"net/http"
	"testing"
)

// appendDictionary serializes a parsed dictionary (RFC 8941 §4.1.2), for
// the round-trip property the fuzz targets check: whatever parses,
// serializes to text that parses back to the same serialization.
func appendDictionary(dst []byte, ms []sfMember) []byte {
	for i, m := range ms {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(dst, m.key...)
		switch {
		case m.inner:
			dst = append(dst, '=')
			dst = appendInnerList(dst, m.list, m.params)
		case m.item.val.kind == sfBoolean && m.item.val.num != 0:
			dst = appendParams(dst, m.item.params)
		default:
			dst = append(dst, '=')
			dst = appendBare(dst, m.item.val)
			dst = appendParams(dst, m.item.params)
		}
	}
	return dst
}

func checkRoundTrip(t *testing.T, in string, ms []sfMember) {
	t.Helper()
	out := appendDictionary(nil, ms)
	again, err := parseDictionary(string(out))
	if err != nil {
		t.Fatalf("%q parsed, but its serialization %q does not: %v", in, out, err)
	}
	if out2 := appendDictionary(nil, again); !bytes.Equal(out, out2) {
		t.Fatalf("%q: serialization not stable: %q then %q", in, out, out2)
	}
}

func FuzzParseSignatureInput(f *testing.F) {
	for _, s := range []string{
		rfcB26SignatureInput,
		`baton=("@method" "@authority" "@path" "@query" "content-digest" "baton-agent");created=1800000000;keyid="analyst-1";nonce="q1w2e3";alg="ed25519"`,
		`a=(), b=("x";sf "y";key="k");tag=tok/en:1;expires=-12;d=1.50;f=?0;t, c=:AAAA:`,
		`  sig1=( "a"  "b" )  ,sig2=?1`,
		`x=(1 2.0 "s" tok :YQ==: ?1);p`,
		`a=1, a=2`,
		`k=("\"q\\")`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := parseDictionary(s)
		if err != nil {
			return
		}
		checkRoundTrip(t, s, ms)
		for _, m := range ms {
			if !m.inner {
				continue
			}
			p, err := readParams(m)
			if err != nil {
				continue
			}
			// A parsed input always builds a base (or names an absent field).
			h := http.Header{"Baton-Agent": {"a"}}
			msg := Message{Method: "GET", Authority: "h", Header: h}
			_, _ = appendSignatureBase(nil, &msg, p.components, appendInnerList(nil, m.list, m.params))
		}
	})
}

func FuzzParseSignature(f *testing.F) {
	for _, s := range []string{
		rfcB26Signature,
		`baton=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:, other=:AA:`,
		`baton=:YQ:`,
		`baton=:::`,
		`baton=("a")`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ms, err := parseDictionary(s); err == nil {
			checkRoundTrip(t, s, ms)
		}
		h := http.Header{HeaderSignatureInput: {rfcB26SignatureInput}, HeaderSignature: {s}}
		in, sig, err := findSignature(h, "sig-b26")
		if err == nil && (len(sig) != 64 || !in.inner) {
			t.Fatalf("findSignature(%q) = %d bytes, inner %v", s, len(sig), in.inner)
		}
	})
}

func FuzzParseContentDigest(f *testing.F) {
	body := []byte(`{"hello": "world"}`)
	for _, s := range []string{
		"sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
		"sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:, sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE:",
		"md5=:AAAA:;p=1",
		"sha-256=abc",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := checkContentDigest(s, body)
		ms, perr := parseContentDigest(s)
		if perr != nil {
			if err == nil {
				t.Fatalf("%q: unparsable but accepted", s)
			}
			return
		}
		checkRoundTrip(t, s, ms)
		if err == nil {
			// Accepted: then its sha-256 or sha-512 member is the body's.
			ok := false
			for _, m := range ms {
				ok = ok || m.key == "sha-256" || m.key == "sha-512"
			}
			if !ok {
				t.Fatalf("%q accepted without a known algorithm", s)
			}
		}
	})
}

func FuzzDecodeGrant(f *testing.F) {
	for _, s := range []string{
		"eyJtYXlfaGFuZG9mZl90byI6W10sInNpZGVfZWZmZWN0cyI6W119",
		"e30",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := DecodeGrant(s)
		if err != nil {
			return
		}
		enc, err := EncodeGrant(g)
		if err != nil {
			t.Fatalf("%q decoded to %+v, which does not encode: %v", s, g, err)
		}
		if _, err := DecodeGrant(enc); err != nil {
			t.Fatalf("re-encoded %q does not decode: %v", enc, err)
		}
	})
}
