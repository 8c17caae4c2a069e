package intercept

import (
	"encoding/binary"
	"errors"
)

// Protocol is what a connection's first bytes say it speaks.
type Protocol int

// The protocols Sniff tells apart. NeedMore means the bytes so far do not
// decide.
const (
	NeedMore Protocol = iota
	HTTP              // an HTTP/1 request line: a method token and a space
	TLS               // a TLS handshake record
	Other             // anything else
)

func (p Protocol) String() string {
	switch p {
	case HTTP:
		return "http"
	case TLS:
		return "tls"
	case Other:
		return "other"
	}
	return "undecided"
}

// maxMethod bounds the method token Sniff waits for; the longest
// registered methods are shorter.
const maxMethod = 24

// Sniff classifies a connection's first bytes. For TLS it also returns the
// server name of the ClientHello ("" when it has none, or when the hello
// is malformed); it asks for more bytes until the whole hello is there.
func Sniff(b []byte) (p Protocol, sni string) {
	if len(b) == 0 {
		return NeedMore, ""
	}
	if b[0] == recordHandshake {
		name, err := ServerName(b)
		if errors.Is(err, ErrIncomplete) {
			return NeedMore, ""
		}
		return TLS, name
	}
	for i, c := range b {
		switch {
		case c == ' ' && i >= 3:
			return HTTP, ""
		case i >= maxMethod || !methodChar(c):
			return Other, ""
		}
	}
	return NeedMore, ""
}

// methodChar reports whether c may appear in a method as agents send them:
// letters and '-' (M-SEARCH).
func methodChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '-'
}

// TLS record and handshake constants (RFC 8446 §5.1, §4, §4.2).
const (
	recordHandshake    = 22
	handshakeHello     = 1
	extServerName      = 0
	nameTypeHostName   = 0
	maxRecordPayload   = 16384 + 2048
	maxClientHelloSize = 64 << 10
)

// ErrIncomplete means the bytes end before the ClientHello does.
var ErrIncomplete = errors.New("intercept: ClientHello incomplete")

// ErrNotClientHello means the bytes are not a well-formed TLS ClientHello.
var ErrNotClientHello = errors.New("intercept: not a TLS ClientHello")

// ServerName returns the host name in the server_name extension of the TLS
// ClientHello that b starts with, "" when the hello has none. The hello
// may span several records. ErrIncomplete asks for more bytes.
func ServerName(b []byte) (string, error) {
	hello, err := clientHello(b)
	if err != nil {
		return "", err
	}
	return helloServerName(hello)
}

// clientHello reassembles the handshake message from the records at the
// start of b and returns its body.
func clientHello(b []byte) ([]byte, error) {
	var msg []byte
	for {
		if len(b) < 5 {
			return nil, ErrIncomplete
		}
		if b[0] != recordHandshake || b[1] != 3 {
			return nil, ErrNotClientHello
		}
		n := int(binary.BigEndian.Uint16(b[3:5]))
		if n == 0 || n > maxRecordPayload {
			return nil, ErrNotClientHello
		}
		if len(b) < 5+n {
			return nil, ErrIncomplete
		}
		msg = append(msg, b[5:5+n]...)
		b = b[5+n:]
		if len(msg) < 4 {
			continue
		}
		if msg[0] != handshakeHello {
			return nil, ErrNotClientHello
		}
		size := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if size > maxClientHelloSize {
			return nil, ErrNotClientHello
		}
		if len(msg) >= 4+size {
			return msg[4 : 4+size], nil
		}
	}
}

// helloServerName walks the ClientHello body (RFC 8446 §4.1.2) to its
// extensions and reads server_name (RFC 6066 §3).
func helloServerName(h []byte) (string, error) {
	r := reader(h)
	if !r.skip(2+32) || // legacy_version, random
		!r.skipVec(1) || // legacy_session_id
		!r.skipVec(2) || // cipher_suites
		!r.skipVec(1) { // legacy_compression_methods
		return "", ErrNotClientHello
	}
	if len(r) == 0 {
		return "", nil // no extensions
	}
	exts, ok := r.vec(2)
	if !ok {
		return "", ErrNotClientHello
	}
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		data, ok2 := exts.vec(2)
		if !ok1 || !ok2 {
			return "", ErrNotClientHello
		}
		if typ != extServerName {
			continue
		}
		list, ok := data.vec(2)
		if !ok {
			return "", ErrNotClientHello
		}
		for len(list) > 0 {
			nameType := list[0]
			list = list[1:]
			name, ok := list.vec(2)
			if !ok {
				return "", ErrNotClientHello
			}
			if nameType == nameTypeHostName {
				if len(name) == 0 || !hostChars(name) {
					return "", ErrNotClientHello
				}
				return string(name), nil
			}
		}
		return "", nil
	}
	return "", nil
}

// hostChars reports whether a server name is plausible DNS text: letters,
// digits, '-', '.', '_'. The name decides what external.allow lets
// through, so anything else is refused rather than matched.
func hostChars(b []byte) bool {
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// reader consumes a byte slice front to back.
type reader []byte

func (r *reader) skip(n int) bool {
	if len(*r) < n {
		return false
	}
	*r = (*r)[n:]
	return true
}

func (r *reader) u16() (uint16, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(*r)
	*r = (*r)[2:]
	return v, true
}

// vec reads a vector with a length prefix of lenBytes (1 or 2) bytes.
func (r *reader) vec(lenBytes int) (reader, bool) {
	if len(*r) < lenBytes {
		return nil, false
	}
	n := int((*r)[0])
	if lenBytes == 2 {
		n = int(binary.BigEndian.Uint16(*r))
	}
	*r = (*r)[lenBytes:]
	if len(*r) < n {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) skipVec(lenBytes int) bool {
	_, ok := r.vec(lenBytes)
	return ok
}
