package proxy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestOversizedBodyIsAnswered: a client that writes its whole oversized
// body before reading, with a Content-Length or chunked, finishes writing
// and reads Baton's 413 (lingering close, as nginx does), instead of
// meeting a reset that can discard the answer unread.
func TestOversizedBodyIsAnswered(t *testing.T) {
	t.Parallel()
	b := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\nlimits: {max_body_bytes: 65536}\npeers: {b: {url: http://127.0.0.1:1}}\n", nil)
	body := bytes.Repeat([]byte("x"), 8<<20)
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked %v", chunked), func(t *testing.T) {
			conn, err := net.Dial("tcp", b.EgressAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			w := bufio.NewWriterSize(conn, 64<<10)
			if chunked {
				fmt.Fprintf(w, "POST /x HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
				for i := 0; i < len(body); i += 32 << 10 {
					fmt.Fprintf(w, "%x\r\n%s\r\n", 32<<10, body[i:i+32<<10])
				}
				w.WriteString("0\r\n\r\n")
			} else {
				fmt.Fprintf(w, "POST /x HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
				w.Write(body)
			}
			if err := w.Flush(); err != nil {
				t.Fatalf("writing the whole body: %v (Baton closed before the client finished)", err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("answer: %v %v; want 413", err, resp)
			}
		})
	}
}
