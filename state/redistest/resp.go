package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The helpers here speak just enough RESP to probe a server, so that
// redistest needs no client library and starts no client goroutines.

var errNotPong = errors.New("redistest: reply to PING was not PONG")

// ping reports whether addr answers PING with PONG within timeout.
func ping(addr string, timeout time.Duration) error {
	reply, err := commandWithin(addr, timeout, "PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("%w: %q", errNotPong, reply)
	}
	return nil
}

// version returns the major version of the Redis at addr.
func version(addr string) (int, error) {
	info, err := command(addr, "INFO", "server")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			major, _, _ := strings.Cut(v, ".")
			return strconv.Atoi(major)
		}
	}
	return 0, errors.New("redistest: INFO server has no redis_version")
}

// command sends one command and returns a simple or bulk string reply.
func command(addr string, args ...string) (string, error) {
	return commandWithin(addr, 2*time.Second, args...)
}

func commandWithin(addr string, timeout time.Duration, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redistest: %s", line[1:])
	case '$', '=':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redistest: bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redistest: unexpected reply %q", line)
}
