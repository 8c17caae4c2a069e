package taint

import (
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Signal is the result of Scan or Detect: a score in [0, 1] and one short
// reason per kind of evidence found, in a fixed order.
type Signal struct {
	Score   float64
	Reasons []string
	// Model is the injection model's score (Detect only; Score is the
	// higher of it and the structural signs').
	Model float64
	// Unscored is how many bytes of the text Detect left out (beyond
	// DetectHead+DetectTail).
	Unscored int
}

// DefaultInjectionScore is the score at or above which a span is flagged. A
// single strong sign reaches it (an "ignore previous instructions" phrase, a
// chat-template role marker, tool-call syntax, tag characters, four or more
// zero-width characters, three or more bidi controls); weak signs ("you are
// now", "act as", a line starting "system:", an encoded blob) need company.
const DefaultInjectionScore = 0.5

// Flagged reports whether s reaches DefaultInjectionScore.
func (s Signal) Flagged() bool { return s.Score >= DefaultInjectionScore }

// A kind is one kind of evidence; its weight w adds to the score as
// 1 - (1-score)(1-w), so scores combine like independent probabilities and
// never exceed 1.
type kind struct {
	reason string // the reason, or its prefix when detail is appended
	weight float64
}

// Kinds in report order. The phrase kinds come first, in the order of
// phrases below.
const (
	kIgnorePrevious = iota
	kDisregardAbove
	kYouAreNow
	kFromNowOn
	kNewInstructions
	kSystemPrompt
	kDoNotTell
	kActAs
	kForwardTo
	kSendToURL
	kRoleMarker
	kRoleLine
	kToolCall
	kZeroWidth
	kBidi
	kTags
	kBase64
	kHex
	kDataURI
	numKinds
)

var kinds = [numKinds]kind{
	kIgnorePrevious:  {"instruction phrase: ignore previous instructions", 0.7},
	kDisregardAbove:  {"instruction phrase: disregard the above", 0.6},
	kYouAreNow:       {"instruction phrase: you are now", 0.3},
	kFromNowOn:       {"instruction phrase: from now on", 0.3},
	kNewInstructions: {"instruction phrase: new instructions", 0.4},
	kSystemPrompt:    {"instruction phrase: system prompt", 0.4},
	kDoNotTell:       {"instruction phrase: do not tell the user", 0.6},
	kActAs:           {"instruction phrase: act as", 0.3},
	kForwardTo:       {"instruction phrase: forward to", 0.3},
	kSendToURL:       {"instruction phrase: send to a URL", 0.6},
	kRoleMarker:      {"role marker: ", 0.6},
	kRoleLine:        {"role marker: ", 0.4},
	kToolCall:        {"tool-call syntax: ", 0.5},
	kZeroWidth:       {"zero-width characters: ", 0}, // 0.15 each, at most 0.9
	kBidi:            {"bidi controls: ", 0},         // 0.2 each, at most 0.9
	kTags:            {"tag characters: ", 0.9},
	kBase64:          {"base64 blob: ", 0.3},
	kHex:             {"hex blob: ", 0.3},
	kDataURI:         {"data URI", 0.3},
}

// marker is a literal looked for in the raw text, case-insensitively.
type marker struct {
	kind int
	text string
}

// markers, grouped by first byte for the raw scan (no marker starts with a
// letter, so the first byte needs no case folding).
var markers = func() (m [256][]marker) {
	for _, mk := range []marker{
		{kRoleMarker, "<|im_start|>"}, {kRoleMarker, "<|im_end|>"}, {kRoleMarker, "<|system|>"},
		{kRoleMarker, "<|assistant|>"}, {kRoleMarker, "<|user|>"}, {kRoleMarker, "<|endoftext|>"},
		{kRoleMarker, "<|begin_of_text|>"}, {kRoleMarker, "<|start_header_id|>"}, {kRoleMarker, "<|eot_id|>"},
		{kRoleMarker, "[INST]"}, {kRoleMarker, "[/INST]"}, {kRoleMarker, "<<SYS>>"}, {kRoleMarker, "<</SYS>>"},
		{kRoleMarker, "<system>"}, {kRoleMarker, "</system>"}, {kRoleMarker, "<assistant>"},
		{kRoleMarker, "### Instruction"}, {kRoleMarker, "### System"}, {kRoleMarker, "### Assistant"},
		{kRoleMarker, "### Response"},
		{kToolCall, `"tool_call`}, {kToolCall, `"function_call`}, {kToolCall, `"tool_use"`},
		{kToolCall, "<tool_call"}, {kToolCall, "<function_call"}, {kToolCall, "<invoke"},
		{kToolCall, "```tool"},
	} {
		m[mk.text[0]] = append(m[mk.text[0]], mk)
	}
	return m
}()

// roleLines are looked for at the start of a line.
var roleLines = []string{"system:", "assistant:"}

// hasPrefixFold reports whether b starts with the ASCII text p, ignoring
// ASCII case.
func hasPrefixFold(b []byte, p string) bool {
	if len(b) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		c, d := b[i], p[i]
		if c != d && lowerASCII(c) != lowerASCII(d) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// Character classes for encoded blobs.
const (
	b64Char = 1 << iota
	hexChar
	digitChar
	upperChar
	lowerChar
	nonHexChar
)

var blobClass = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c >= '0' && c <= '9':
			t[c] = b64Char | hexChar | digitChar
		case c >= 'a' && c <= 'f':
			t[c] = b64Char | hexChar | lowerChar
		case c >= 'A' && c <= 'F':
			t[c] = b64Char | hexChar | upperChar
		case c >= 'a' && c <= 'z':
			t[c] = b64Char | lowerChar | nonHexChar
		case c >= 'A' && c <= 'Z':
			t[c] = b64Char | upperChar | nonHexChar
		case c == '+', c == '/', c == '=', c == '-', c == '_':
			t[c] = b64Char | nonHexChar
		}
	}
	return t
}()

// minBlob is the shortest run counted as an encoded blob.
const minBlob = 200

// scanScratch holds Scan's buffers and findings between calls.
type scanScratch struct {
	norm  []byte
	found [numKinds]bool
	count [numKinds]int    // characters counted, blob lengths
	what  [numKinds]string // the marker found first
}

var scanPool = sync.Pool{New: func() any { return new(scanScratch) }}

// Scan looks in text for signs of a prompt injection addressed to the model
// that will read it:
//
//   - instruction phrases, matched on the normalised text so that case,
//     punctuation and invisible characters do not hide them: "ignore (all)
//     previous instructions", "disregard the above", "you are now", "from now
//     on you", "new instructions", "system prompt", "do not tell the user",
//     "(you|please) act as", "act as (my|your|if)", "pretend to be",
//     "forward ... to", "send ... to http";
//   - role markers, matched in the raw text, case-insensitively: chat-template
//     tokens ("<|im_start|>", "[INST]", "<<SYS>>", "<system>", "### Instruction")
//     and lines starting "system:" or "assistant:";
//   - tool-call syntax: `"tool_call`, `"function_call`, "<tool_call>",
//     "```tool" and the like;
//   - invisible characters: zero-width characters (U+200B..U+200F,
//     U+2060..U+2064, U+FEFF other than a leading byte order mark; a joiner
//     or directional mark after a non-Latin letter, a mark or an emoji is
//     ordinary typography and not counted), bidi
//     controls (U+202A..U+202E, U+2066..U+2069) and tag characters
//     (U+E0000..U+E007F, except in an emoji flag sequence);
//   - encoded blobs: a run of at least 200 base64 characters (digits, both
//     cases, a quarter of it not hex), or of 200 hex digits, and data: URIs.
//
// Each kind found adds its weight to the score and one reason, such as
// "instruction phrase: ignore previous instructions", "role marker:
// <|im_start|>" or "zero-width characters: 3". Scan is deterministic; it is a
// signal, not a guarantee: an injection can be phrased in words no list
// anticipates, and a page about prompt injection scores high.
func Scan(text []byte) Signal {
	sig, _ := scan(text)
	return sig
}

// scan is Scan, and the longest run of base64 characters in text (hex
// digits are among them), which tells Detect whether any run is long
// enough to decode.
func scan(text []byte) (Signal, int) {
	sc := scanPool.Get().(*scanScratch)
	defer scanPool.Put(sc)
	sc.found = [numKinds]bool{}
	sc.count = [numKinds]int{}
	sc.what = [numKinds]string{}

	sc.scanPhrases(text)
	longest := sc.scanRaw(text)

	var sig Signal
	keep := 1.0
	for k := range numKinds {
		if !sc.found[k] {
			continue
		}
		kd := kinds[k]
		w := kd.weight
		reason := kd.reason
		switch k {
		case kRoleMarker, kRoleLine, kToolCall:
			reason += sc.what[k]
		case kZeroWidth:
			w = min(0.9, 0.15*float64(sc.count[k]))
			reason += strconv.Itoa(sc.count[k])
		case kBidi:
			w = min(0.9, 0.2*float64(sc.count[k]))
			reason += strconv.Itoa(sc.count[k])
		case kTags:
			reason += strconv.Itoa(sc.count[k])
		case kBase64, kHex:
			reason += strconv.Itoa(sc.count[k]) + " chars"
		}
		keep *= 1 - w
		sig.Reasons = append(sig.Reasons, reason)
	}
	sig.Score = 1 - keep
	if sig.Score < 0 {
		sig.Score = 0
	}
	return sig, longest
}

func (sc *scanScratch) scanPhrases(text []byte) {
	sc.norm = Normalize(sc.norm[:0], text)
	norm := sc.norm
	for pos := 0; pos < len(norm); {
		w, next := nextWord(norm, pos)
		if k := triggerKey(w); triggers[k/64]&(1<<(k%64)) != 0 {
			for _, pi := range phraseIndex[string(w)] {
				if p := &phrases[pi]; !sc.found[p.kind] && p.match(norm, 1, next) {
					sc.found[p.kind] = true
				}
			}
		}
		pos = next
	}
}

// rawSpecial marks the bytes at which scanRaw looks closer: the first bytes
// of markers, line ends (role lines), ':' (data URIs) and non-ASCII.
var rawSpecial = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= utf8.RuneSelf || len(markers[c]) > 0 || c == '\n' || c == ':'
	}
	return t
}()

// scanRaw looks for the structural signs in text as it is, and returns the
// longest run of base64 characters in it.
func (sc *scanScratch) scanRaw(text []byte) int {
	sc.roleLine(text)
	b64Run, b64Max, hexRun, hexMax := 0, 0, 0, 0
	flagEnd := -1 // the end of the last tag character of an emoji flag
	for i := 0; i < len(text); i++ {
		c := text[i]
		// Branch-free run lengths; runs are looked at closely only if one
		// is long enough.
		cl := blobClass[c]
		b64Run = (b64Run + 1) & -int(cl&b64Char)
		hexRun = (hexRun + 1) & -int(cl&hexChar>>1)
		b64Max = max(b64Max, b64Run)
		hexMax = max(hexMax, hexRun)
		if !rawSpecial[c] {
			continue
		}
		switch {
		case c == '\n':
			sc.roleLine(text[i+1:])
		case c == ':':
			if !sc.found[kDataURI] && i >= 4 && hasPrefixFold(text[i-4:], "data") &&
				(i == 4 || blobClass[text[i-5]]&b64Char == 0) && dataURI(text[i+1:]) {
				sc.found[kDataURI] = true
			}
		case c < utf8.RuneSelf:
			for _, mk := range markers[c] {
				if !sc.found[mk.kind] && hasPrefixFold(text[i:], mk.text) {
					sc.found[mk.kind] = true
					sc.what[mk.kind] = mk.text
				}
			}
		default:
			r, n := utf8.DecodeRune(text[i:])
			if r >= 0x200b {
				flagEnd = sc.invisible(text, i, r, n, flagEnd)
			}
			i += n - 1
		}
	}
	if b64Max >= minBlob || hexMax >= minBlob {
		sc.blobs(text)
	}
	return b64Max
}

// roleLine looks for a role name opening the line that starts text.
func (sc *scanScratch) roleLine(text []byte) {
	if sc.found[kRoleLine] {
		return
	}
	i := 0
	for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
		i++
	}
	for _, r := range roleLines {
		if hasPrefixFold(text[i:], r) {
			sc.found[kRoleLine] = true
			sc.what[kRoleLine] = r
			return
		}
	}
}

// invisible counts r, at text[i:i+n], if it is an invisible character, and
// returns the new end of the current emoji tag sequence (from flagEnd).
func (sc *scanScratch) invisible(text []byte, i int, r rune, n, flagEnd int) int {
	switch {
	case r >= 0x200b && r <= 0x200f, r >= 0x2060 && r <= 0x2064:
		if r >= 0x200c && r <= 0x200f {
			if prev, _ := utf8.DecodeLastRune(text[:i]); prev != utf8.RuneError && joinerContext(prev) {
				return flagEnd
			}
		}
		sc.found[kZeroWidth] = true
		sc.count[kZeroWidth]++
	case r == 0xfeff:
		if i > 0 {
			sc.found[kZeroWidth] = true
			sc.count[kZeroWidth]++
		}
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		sc.found[kBidi] = true
		sc.count[kBidi]++
	case r >= 0xe0000 && r <= 0xe007f:
		// An emoji flag is a black flag and tag characters up to a cancel
		// tag.
		if prev, _ := utf8.DecodeLastRune(text[:i]); prev == 0x1f3f4 || flagEnd == i {
			if r == 0xe007f {
				return -1
			}
			return i + n
		}
		sc.found[kTags] = true
		sc.count[kTags]++
	}
	return flagEnd
}

// blobs finds the encoded blobs of text; scanRaw calls it only when a run of
// blob characters is long enough. A base64 blob must mix digits and both
// cases, and a quarter of it at least must be letters beyond f or symbols
// (else it is hex, maybe with a prefix, or a long word).
func (sc *scanScratch) blobs(text []byte) {
	const mixed = digitChar | upperChar | lowerChar
	b64, nonHex, hex := 0, 0, 0
	var b64Class uint8
	for i := 0; i <= len(text); i++ {
		var cl uint8
		if i < len(text) {
			cl = blobClass[text[i]]
		}
		if cl&b64Char != 0 {
			b64++
			b64Class |= cl
			nonHex += int(cl & nonHexChar / nonHexChar)
		} else {
			if b64 >= minBlob && b64Class&mixed == mixed && 4*nonHex >= b64 {
				sc.found[kBase64] = true
				sc.count[kBase64] = max(sc.count[kBase64], b64)
			}
			b64, nonHex, b64Class = 0, 0, 0
		}
		if cl&hexChar != 0 {
			hex++
		} else {
			if hex >= minBlob {
				sc.found[kHex] = true
				sc.count[kHex] = max(sc.count[kHex], hex)
			}
			hex = 0
		}
	}
}

// joinerContext reports whether a joiner or directional mark after prev is
// ordinary typography: in a non-Latin script (Indic conjuncts, Persian
// ZWNJ, bidi text), or in an emoji sequence.
func joinerContext(prev rune) bool {
	switch {
	case prev < 0x250:
		return false
	case prev == 0xfe0f || prev >= 0x1f3fb && prev <= 0x1f3ff:
		return true
	}
	return unicode.In(prev, unicode.L, unicode.M, unicode.So, unicode.Sk)
}

// dataURI reports whether b (what follows "data:") starts like the rest of
// a data URI: a media type, maybe parameters, then a comma.
func dataURI(b []byte) bool {
	i := 0
	tok := func() int {
		j := i
		for i < len(b) && i-j < 127 {
			c := lowerASCII(b[i])
			if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '+' || c == '-' || c == '_' {
				i++
				continue
			}
			break
		}
		return i - j
	}
	if tok() == 0 || i >= len(b) || b[i] != '/' {
		return false
	}
	i++
	if tok() == 0 {
		return false
	}
	for i < len(b) && b[i] == ';' {
		i++
		if tok() == 0 {
			return false
		}
		if i < len(b) && b[i] == '=' {
			i++
			if tok() == 0 {
				return false
			}
		}
	}
	return i < len(b) && b[i] == ','
}
