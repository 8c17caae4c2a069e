package intercept

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"
)

// helloFrom captures the records crypto/tls sends to open a connection
// to serverName ("" for none).
func helloFrom(t testing.TB, serverName string) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		tc := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == "", MinVersion: tls.VersionTLS12})
		tc.Handshake() // fails when the pipe closes
		c.Close()
	}()
	var buf bytes.Buffer
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 4096)
	for {
		n, err := s.Read(b)
		buf.Write(b[:n])
		if p, _ := Sniff(buf.Bytes()); p != NeedMore || err != nil {
			break
		}
	}
	return buf.Bytes()
}

// fragment re-frames a single-record hello into records of at most n bytes
// of payload each, as a client may.
func fragment(t *testing.T, hello []byte, n int) []byte {
	t.Helper()
	size := int(binary.BigEndian.Uint16(hello[3:5]))
	payload := hello[5 : 5+size]
	var out []byte
	for len(payload) > 0 {
		k := min(n, len(payload))
		out = append(out, hello[0], hello[1], hello[2], byte(k>>8), byte(k))
		out = append(out, payload[:k]...)
		payload = payload[k:]
	}
	return out
}

func TestSniffTLS(t *testing.T) {
	t.Parallel()
	withName := helloFrom(t, "api.example.com")
	tests := []struct {
		name  string
		bytes []byte
		sni   string
	}{
		{"one record", withName, "api.example.com"},
		{"one byte per record", fragment(t, withName, 1), "api.example.com"},
		{"seven bytes per record", fragment(t, withName, 7), "api.example.com"},
		{"no server name", helloFrom(t, ""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, sni := Sniff(tt.bytes)
			if p != TLS || sni != tt.sni {
				t.Fatalf("Sniff = %v %q, want tls %q", p, sni, tt.sni)
			}
			// Every strict prefix asks for more.
			for i := range len(tt.bytes) {
				if p, _ := Sniff(tt.bytes[:i]); p != NeedMore {
					t.Fatalf("a prefix of %d of %d bytes: %v", i, len(tt.bytes), p)
				}
			}
		})
	}
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		bad := bytes.Clone(withName)
		bad[5] = 2 // a ServerHello
		if _, err := ServerName(bad); !errors.Is(err, ErrNotClientHello) {
			t.Errorf("a ServerHello: %v", err)
		}
		if p, sni := Sniff(bad); p != TLS || sni != "" {
			t.Errorf("Sniff of a ServerHello = %v %q, want tls without a name", p, sni)
		}
		if _, err := ServerName([]byte{22, 3, 1, 0, 0}); !errors.Is(err, ErrNotClientHello) {
			t.Errorf("an empty record: %v", err)
		}
	})
}

func TestSniffPlain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Protocol
	}{
		{"GET / HTTP/1.1\r\n", HTTP},
		{"POST ", HTTP},
		{"M-SEARCH * HTTP/1.1", HTTP},
		{"PATCH", NeedMore},
		{"", NeedMore},
		{"GE", NeedMore},
		{"\x00\x01binary", Other},
		{"SSH-2.0-OpenSSH_9.6\r\n", Other},
		{"A B", Other},
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZ ", Other},
		{"*1\r\n$4\r\nPING\r\n", Other},
	}
	for _, tt := range tests {
		if p, _ := Sniff([]byte(tt.in)); p != tt.want {
			t.Errorf("Sniff(%q) = %v, want %v", tt.in, p, tt.want)
		}
	}
}

func FuzzSniff(f *testing.F) {
	f.Add(helloFrom(f, "a.example"))
	f.Add(helloFrom(f, ""))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, sni := Sniff(b)
		if sni != "" && (p != TLS || !hostChars([]byte(sni))) {
			t.Fatalf("Sniff = %v %q", p, sni)
		}
		if p == NeedMore {
			return
		}
		// More bytes never change a decision.
		if p2, sni2 := Sniff(append(bytes.Clone(b), 'x', 0, 22)); p2 != p || sni2 != sni {
			t.Fatalf("Sniff changed its mind with more bytes: %v %q then %v %q", p, sni, p2, sni2)
		}
	})
}
