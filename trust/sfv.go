package trust

// A small parser and serializer for the part of RFC 8941 (Structured Field
// Values) that Signature-Input, Signature and Content-Digest need: a
// dictionary whose members are items or inner lists, with parameters. Bare
// items are all five RFC 8941 types (integers, decimals, strings, tokens,
// byte sequences, booleans), because another signer's parameters may use any
// of them and the signature base holds their canonical serialization.
//
// It is stricter than RFC 8941 in one way: a key repeated in a dictionary or
// in one parameter list is an error instead of "the last one wins". Two
// "baton" labels, or two "created" parameters, are never legitimate, and
// letting the last win invites a proxy and a verifier to disagree about which
// one was checked.

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// errSFV is wrapped by every structured-field parse error.
var errSFV = errors.New("structured field")

type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBoolean
)

// sfBare is a bare item. str holds the value of a string or token and the
// canonical text of a decimal; num an integer; bytes a byte sequence; num != 0
// a true boolean.
type sfBare struct {
	kind  sfKind
	str   string
	num   int64
	bytes []byte
}

type sfParam struct {
	key string
	val sfBare
}

type sfItem struct {
	val    sfBare
	params []sfParam
}

// sfMember is a dictionary member: an item, or an inner list (inner set)
// with the inner list's own parameters in params.
type sfMember struct {
	key    string
	inner  bool
	item   sfItem
	list   []sfItem
	params []sfParam
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) fail(what string) error {
	return &sfError{what: what, at: p.i}
}

// sfError is a parse error at a byte offset.
type sfError struct {
	what string
	at   int
}

func (e *sfError) Error() string {
	return "structured field: " + e.what + " at offset " + strconv.Itoa(e.at)
}

func (e *sfError) Unwrap() error { return errSFV }

func (p *sfParser) eof() bool { return p.i >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *sfParser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// parseDictionary parses a whole field value as a dictionary (RFC 8941
// §4.2, with §4.2's leading and trailing SP). Field lines of one field must
// have been joined with ", " first.
func parseDictionary(s string) ([]sfMember, error) {
	p := sfParser{s: s}
	p.skipSP()
	var out []sfMember
	for !p.eof() {
		key, err := p.parseKey()
		if err != nil {
			return nil, err
		}
		for i := range out {
			if out[i].key == key {
				return nil, p.fail("duplicate key " + strconv.Quote(key))
			}
		}
		m := sfMember{key: key}
		if p.peek() == '=' {
			p.i++
			if p.peek() == '(' {
				m.inner = true
				if m.list, err = p.parseInnerList(); err != nil {
					return nil, err
				}
				if m.params, err = p.parseParams(); err != nil {
					return nil, err
				}
			} else if m.item, err = p.parseItem(); err != nil {
				return nil, err
			}
		} else {
			m.item.val = sfBare{kind: sfBoolean, num: 1}
			if m.item.params, err = p.parseParams(); err != nil {
				return nil, err
			}
		}
		out = append(out, m)
		p.skipOWS()
		if p.eof() {
			return out, nil
		}
		if p.peek() != ',' {
			return nil, p.fail("expected ',' between dictionary members")
		}
		p.i++
		p.skipOWS()
		if p.eof() {
			return nil, p.fail("trailing ','")
		}
	}
	return out, nil
}

func (p *sfParser) parseInnerList() ([]sfItem, error) {
	p.i++ // '('
	var items []sfItem
	for !p.eof() {
		p.skipSP()
		if p.peek() == ')' {
			p.i++
			return items, nil
		}
		it, err := p.parseItem()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		if c := p.peek(); c != ' ' && c != ')' {
			return nil, p.fail("expected ' ' or ')' in inner list")
		}
	}
	return nil, p.fail("unterminated inner list")
}

func (p *sfParser) parseItem() (sfItem, error) {
	v, err := p.parseBare()
	if err != nil {
		return sfItem{}, err
	}
	ps, err := p.parseParams()
	return sfItem{val: v, params: ps}, err
}

func (p *sfParser) parseParams() ([]sfParam, error) {
	var ps []sfParam
	for p.peek() == ';' {
		p.i++
		p.skipSP()
		key, err := p.parseKey()
		if err != nil {
			return nil, err
		}
		for i := range ps {
			if ps[i].key == key {
				return nil, p.fail("duplicate parameter " + strconv.Quote(key))
			}
		}
		v := sfBare{kind: sfBoolean, num: 1}
		if p.peek() == '=' {
			p.i++
			if v, err = p.parseBare(); err != nil {
				return nil, err
			}
		}
		ps = append(ps, sfParam{key: key, val: v})
	}
	return ps, nil
}

func isLcalpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool   { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool   { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func (p *sfParser) parseKey() (string, error) {
	start := p.i
	if c := p.peek(); !isLcalpha(c) && c != '*' {
		return "", p.fail("expected a key")
	}
	p.i++
	for !p.eof() {
		c := p.s[p.i]
		if !isLcalpha(c) && !isDigit(c) && c != '_' && c != '-' && c != '.' && c != '*' {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) parseBare() (sfBare, error) {
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.parseNumber()
	case c == '"':
		return p.parseString()
	case c == '*' || isAlpha(c):
		return p.parseToken(), nil
	case c == ':':
		return p.parseBytes()
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			v := sfBare{kind: sfBoolean, num: int64(p.s[p.i+1] - '0')}
			p.i += 2
			return v, nil
		}
		return sfBare{}, p.fail("expected ?0 or ?1")
	default:
		return sfBare{}, p.fail("expected an item")
	}
}

func (p *sfParser) parseNumber() (sfBare, error) {
	start := p.i
	neg := p.peek() == '-'
	if neg {
		p.i++
	}
	digits, dot := 0, -1
	for !p.eof() {
		c := p.s[p.i]
		if isDigit(c) {
			digits++
		} else if c == '.' && dot < 0 {
			if digits > 12 {
				return sfBare{}, p.fail("decimal with more than 12 integer digits")
			}
			dot = p.i
		} else {
			break
		}
		p.i++
		if dot < 0 && digits > 15 {
			return sfBare{}, p.fail("integer with more than 15 digits")
		}
		if dot >= 0 && digits > 15 {
			return sfBare{}, p.fail("decimal with more than 15 digits")
		}
	}
	if digits == 0 || (dot >= 0 && (dot == start+boolInt(neg) || dot == p.i-1)) {
		return sfBare{}, p.fail("malformed number")
	}
	if dot < 0 {
		n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
		if err != nil {
			return sfBare{}, p.fail("malformed integer")
		}
		return sfBare{kind: sfInteger, num: n}, nil
	}
	frac := p.s[dot+1 : p.i]
	if len(frac) > 3 {
		return sfBare{}, p.fail("decimal with more than 3 fractional digits")
	}
	// Canonical text (RFC 8941 §4.1.5): no leading zeros, trailing zeros of
	// the fraction dropped but one digit kept, no sign on zero.
	ip, _ := strconv.ParseInt(p.s[start+boolInt(neg):dot], 10, 64)
	frac = strings.TrimRight(frac, "0")
	if frac == "" {
		frac = "0"
	}
	text := strconv.FormatInt(ip, 10) + "." + frac
	if neg && (ip != 0 || frac != "0") {
		text = "-" + text
	}
	return sfBare{kind: sfDecimal, str: text}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (p *sfParser) parseString() (sfBare, error) {
	p.i++ // '"'
	var b *strings.Builder
	start := p.i
	for !p.eof() {
		c := p.s[p.i]
		switch {
		case c == '"':
			s := p.s[start:p.i]
			if b != nil {
				b.WriteString(s)
				s = b.String()
			}
			p.i++
			return sfBare{kind: sfString, str: s}, nil
		case c == '\\':
			if p.i+1 >= len(p.s) || (p.s[p.i+1] != '"' && p.s[p.i+1] != '\\') {
				return sfBare{}, p.fail("bad escape in string")
			}
			if b == nil {
				b = &strings.Builder{}
			}
			b.WriteString(p.s[start:p.i])
			b.WriteByte(p.s[p.i+1])
			p.i += 2
			start = p.i
		case c < 0x20 || c > 0x7e:
			return sfBare{}, p.fail("non-printable character in string")
		default:
			p.i++
		}
	}
	return sfBare{}, p.fail("unterminated string")
}

func isTchar(c byte) bool {
	if isAlpha(c) || isDigit(c) {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (p *sfParser) parseToken() sfBare {
	start := p.i
	p.i++
	for !p.eof() && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
		p.i++
	}
	return sfBare{kind: sfToken, str: p.s[start:p.i]}
}

func (p *sfParser) parseBytes() (sfBare, error) {
	p.i++ // ':'
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return sfBare{}, p.fail("unterminated byte sequence")
	}
	enc := p.s[p.i : p.i+end]
	for i := 0; i < len(enc); i++ {
		if c := enc[i]; !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=' {
			return sfBare{}, p.fail("invalid character in byte sequence")
		}
	}
	// RFC 8941 §4.2.7: parsers SHOULD NOT fail when "=" padding is absent.
	enc = strings.TrimRight(enc, "=")
	b, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil {
		return sfBare{}, p.fail("invalid base64 in byte sequence")
	}
	p.i += end + 1
	return sfBare{kind: sfBytes, bytes: b}, nil
}

// appendBare appends the RFC 8941 §4.1 serialization of v.
func appendBare(dst []byte, v sfBare) []byte {
	switch v.kind {
	case sfInteger:
		return strconv.AppendInt(dst, v.num, 10)
	case sfDecimal, sfToken:
		return append(dst, v.str...)
	case sfString:
		return appendSFString(dst, v.str)
	case sfBytes:
		dst = append(dst, ':')
		dst = base64.StdEncoding.AppendEncode(dst, v.bytes)
		return append(dst, ':')
	case sfBoolean:
		if v.num != 0 {
			return append(dst, "?1"...)
		}
		return append(dst, "?0"...)
	}
	return dst
}

// appendSFString appends s as an sf-string. s must hold printable ASCII
// only; the callers check that (key ids, nonces) or got s from the parser.
func appendSFString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	return append(appendSFChars(dst, s), '"')
}

// appendSFChars appends s escaped as the inside of a string.
func appendSFChars(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, s[i])
	}
	return dst
}

func appendParams(dst []byte, ps []sfParam) []byte {
	for _, p := range ps {
		dst = append(dst, ';')
		dst = append(dst, p.key...)
		if p.val.kind == sfBoolean && p.val.num != 0 {
			continue // a true boolean parameter is its key alone
		}
		dst = append(dst, '=')
		dst = appendBare(dst, p.val)
	}
	return dst
}

// appendInnerList appends the serialization of an inner list and its
// parameters: the value of @signature-params.
func appendInnerList(dst []byte, items []sfItem, ps []sfParam) []byte {
	dst = append(dst, '(')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = appendBare(dst, it.val)
		dst = appendParams(dst, it.params)
	}
	dst = append(dst, ')')
	return appendParams(dst, ps)
}
