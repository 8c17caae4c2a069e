package taint

import "bytes"

// The injection model's features are hashed into one table: every word of
// the normalised text, every pair of consecutive words, every word paired
// with the word that opens its sentence (up to HeadWords words on), and
// every run of FeatureChars bytes of " word " (the word with a space either
// side), so that a word in an inflected language or a script written
// without spaces shares features with its neighbours. The pair with the
// sentence's first word ties a verb to its objects ("send … password",
// "transfer … account") and a question to its topic, wherever they sit in
// the sentence. Training (trust/taint/train) and
// scoring compute them with the same code, here.

// SentenceMark is the word ModelText puts where a sentence or a line
// starts, so that the pair it forms with the next word says how the
// sentence opens ("write", "ignore" and "please" open an instruction).
const SentenceMark = "xqsb"

// ModelText appends to dst the text the model reads: src with SentenceMark
// at its start and after every line break and every '.', '!', '?', ':' or
// ';' that a space follows, normalised (Normalize). The escapes \n, \r
// and \t of JSON text quoted in text count as the characters they stand
// for. mark is scratch for the
// marked copy; both are returned for reuse.
func ModelText(dst, mark, src []byte) (norm, marked []byte) {
	mark = append(mark[:0], SentenceMark...)
	mark = append(mark, ' ')
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '\\' && i+1 < len(src) && (src[i+1] == 'n' || src[i+1] == 'r' || src[i+1] == 't') {
			// A JSON or C escape in text that carries JSON: a line break.
			i++
			c = '\n'
			if src[i] == 't' {
				c = ' '
			}
		}
		mark = append(mark, c)
		switch c {
		case '\n':
			mark = append(mark, SentenceMark...)
			mark = append(mark, ' ')
		case '.', '!', '?', ':', ';':
			if i+1 < len(src) && (src[i+1] == ' ' || src[i+1] == '\n' || src[i+1] == '\t') {
				mark = append(mark, ' ')
				mark = append(mark, SentenceMark...)
			}
		}
	}
	return Normalize(dst, mark), mark
}

// FeatureChars is the length of the character n-grams, in bytes of the
// normalised text.
const FeatureChars = 4

// maxGramWord bounds the bytes of one word that give character n-grams, so
// that a blob of a million letters costs no more than a long word.
const maxGramWord = 32

// maxWord is the longest word, in bytes, that has word and pair features;
// a longer one has only character n-grams (its features index slot 0,
// which training keeps at zero).
const maxWord = 24

// HeadWords is how many words after a sentence's first word are paired
// with it.
const HeadWords = 12

// Salts keep the four kinds of feature apart in the table.
const (
	saltWord  = 0x9e3779b97f4a7c15
	saltPair  = 0xc2b2ae3d27d4eb4f
	saltChars = 0x165667b19e3779f9
	saltHead  = 0x27d4eb2f165667c5
)

func featureMix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

func hashBytes(b []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, c := range b {
		h ^= uint64(c)
		h *= 0x100000001b3
	}
	return h
}

// Token is one word of the normalised text and its features' table indexes.
type Token struct {
	// Start and End delimit the word in the normalised text.
	Start, End int32
	// Word, Pair and Head index the word's, the (previous word, word)
	// pair's and the (sentence's first word, word) pair's weights;
	// Chars[CharsFrom:CharsTo] of the slice Tokenize returns index its
	// character n-grams.
	Word, Pair, Head   uint32
	CharsFrom, CharsTo int32
}

// tokenizer walks the words of normalised text and hashes their features.
type tokenizer struct {
	norm []byte
	pos  int
	prev uint64
	mask uint64
	// head is the hash of the current sentence's first word, 0 before it;
	// since counts the words after it.
	head  uint64
	since int
	pad   [maxGramWord + 2]byte
}

// markHash is the hash of SentenceMark.
var markHash = hashBytes([]byte(SentenceMark))

// next returns the next word's bounds, its word, pair and head indexes,
// and the length of t.pad's copy of the word with a space either side, for
// its character n-grams (charIndex); ok is false at the end. (Returning a
// slice of t.pad would move t to the heap.)
func (t *tokenizer) next() (start, end int, word, pair, head uint32, padded int, ok bool) {
	if t.pos >= len(t.norm) {
		return 0, 0, 0, 0, 0, 0, false
	}
	start = t.pos
	end = bytes.IndexByte(t.norm[start:], ' ')
	if end < 0 {
		end = len(t.norm)
	} else {
		end += start
	}
	w := t.norm[start:end]
	h := hashBytes(w)
	word = signedIndex(featureMix(h^saltWord), t.mask)
	pair = signedIndex(featureMix(t.prev*0x9e3779b97f4a7c15^h^saltPair), t.mask)
	switch {
	case h == markHash:
		t.head, t.since = 0, 0
	case t.head == 0:
		t.head = h
	default:
		t.since++
		if t.since <= HeadWords {
			head = signedIndex(featureMix(t.head*0xff51afd7ed558ccd^h^saltHead), t.mask)
		}
	}
	if len(w) > maxWord {
		// A clause of a script written without spaces, an identifier or
		// a blob: unique, so its word features would only ever hear
		// noise. Its character n-grams speak for it.
		word, pair, head = 0, 0, 0
	}
	t.prev = h
	t.pos = end + 1
	n := copy(t.pad[1:], w[:min(len(w), maxGramWord)])
	t.pad[0], t.pad[n+1] = ' ', ' '
	return start, end, word, pair, head, n + 2, true
}

// charIndex is the signed table index of the character n-gram at
// padded[i:].
func charIndex(padded []byte, i int, mask uint64) uint32 {
	g := uint64(padded[i]) | uint64(padded[i+1])<<8 | uint64(padded[i+2])<<16 | uint64(padded[i+3])<<24
	return signedIndex((g*0x9e3779b97f4a7c15^saltChars)*0xff51afd7ed558ccd, mask)
}

// A feature's index carries a sign in its top bit: the feature adds its
// weight, or subtracts it. Two features that share a weight then cancel
// as often as they add up, so that the features training never saw (a
// script it has no text in, a long identifier) add noise around zero
// instead of a bias.
const signBit = 1 << 31

func signedIndex(h uint64, mask uint64) uint32 {
	return uint32(h>>40&mask) | uint32(h>>63)<<31
}

// Weight is the signed weight of feature f (an index Tokenize returns) in
// the table w.
func Weight(w []int8, f uint32) int32 {
	v := int32(w[f&^signBit])
	if f&signBit != 0 {
		return -v
	}
	return v
}

// Tokenize appends to toks the words of norm (ModelText's output) and to
// chars their character n-grams' indexes, each index masked to bits bits:
// the features the trainer sees, the same that Model scores. It allocates
// only to grow toks and chars.
func Tokenize(toks []Token, chars []uint32, norm []byte, bits uint) ([]Token, []uint32) {
	t := tokenizer{norm: norm, mask: uint64(1)<<bits - 1}
	for {
		start, end, word, pair, head, padded, ok := t.next()
		if !ok {
			return toks, chars
		}
		tok := Token{Start: int32(start), End: int32(end), Word: word, Pair: pair, Head: head, CharsFrom: int32(len(chars))}
		for i := 0; i+FeatureChars <= padded; i++ {
			chars = append(chars, charIndex(t.pad[:padded], i, t.mask))
		}
		tok.CharsTo = int32(len(chars))
		toks = append(toks, tok)
	}
}
