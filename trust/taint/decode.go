package taint

import (
	"encoding/base64"
	"encoding/hex"
	"unicode/utf8"
)

// Encoded payloads: an instruction hidden in base64 or hex reads as noise to
// the model's features, but a model that reads the text decodes it. Detect
// decodes the runs that look encoded and scores what they say.

// Bounds on decoding: runs shorter than minEncoded bytes are words, not
// payloads; at most maxDecoded bytes of each run and maxDecodedTotal of a
// text are decoded, so a megabyte blob costs no more than a short one.
const (
	minEncoded      = 24
	maxDecoded      = 4 << 10
	maxDecodedTotal = 16 << 10
)

// encodedRuns calls fn with every run of text that may be base64 (at least
// minEncoded characters of the base64 alphabets, mixing letters and digits
// or both cases) or hex (at least minEncoded hex digits), with the kind.
func encodedRuns(text []byte, fn func(run []byte, isHex bool) bool) {
	const mixed = digitChar | upperChar | lowerChar
	start := -1
	var class uint8
	for i := 0; i <= len(text); i++ {
		var cl uint8
		if i < len(text) {
			cl = blobClass[text[i]]
		}
		if cl&b64Char != 0 {
			if start < 0 {
				start, class = i, 0
			}
			class |= cl
			continue
		}
		if start >= 0 && i-start >= minEncoded {
			run := text[start:i]
			isHex := class&nonHexChar == 0
			// Base64 mixes at least two of digits, capitals and small
			// letters; a long word or a path of small letters is no payload.
			if isHex || class&mixed == mixed || (class&upperChar != 0 && class&lowerChar != 0) {
				if !fn(run, isHex) {
					return
				}
			}
		}
		start = -1
	}
}

// decodeRun decodes run into dst (at most maxDecoded bytes of it) and
// reports whether the result reads as text: valid UTF-8, nearly all of it
// printable.
func decodeRun(dst, run []byte, isHex bool) ([]byte, bool) {
	var n int
	var err error
	if isHex {
		run = run[:min(len(run), 2*maxDecoded)&^1]
		dst = dst[:hex.DecodedLen(len(run))]
		n, err = hex.Decode(dst, run)
	} else {
		run = run[:min(len(run), maxDecoded*4/3)&^3]
		for len(run) > 0 && (run[len(run)-1] == '=') {
			run = run[:len(run)-1]
		}
		enc := base64.RawStdEncoding
		for _, c := range run {
			if c == '-' || c == '_' {
				enc = base64.RawURLEncoding
				break
			}
		}
		dst = dst[:enc.DecodedLen(len(run))]
		n, err = enc.Decode(dst, run)
	}
	if err != nil && n == 0 {
		return dst[:0], false
	}
	dst = dst[:n]
	if n < minEncoded/2 || !utf8.Valid(dst) {
		return dst, false
	}
	printable := 0
	for _, c := range dst {
		if c >= ' ' || c == '\n' || c == '\t' || c == '\r' {
			printable++
		}
	}
	return dst, printable*20 >= n*19
}
