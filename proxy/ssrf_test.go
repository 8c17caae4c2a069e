package proxy_test

import (
	"io"
	"net"
	"strings"
	"testing"
)

// TestExternalEgressRefusesInternalAddresses drives the agent's external
// fetches at a real server on loopback, reached in the ways an SSRF attempt
// would: only an explicitly listed IP literal gets through.
func TestExternalEgressRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	var got seen
	api := httptestServer(got.handler(200, "internal data"))
	t.Cleanup(api.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(api.URL, "http://"))
	// byName lists the server only by names; literal lists its IP.
	byName := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+
		"external: {allow: ['localhost:"+port+"', '2130706433:"+port+"', '0x7f000001:"+port+"']}\n", nil)
	literal := startBaton(t, "agent: analyst\nupstream: http://127.0.0.1:1\n"+
		"external: {allow: ['127.0.0.1:"+port+"']}\n", nil)
	tests := []struct {
		name string
		via  *baton
		host string
		want int
		typ  string
	}{
		{"a listed name that resolves to loopback", byName, "localhost:" + port, 403, "#denied-address"},
		{"a decimal IP form", byName, "2130706433:" + port, 403, "#denied-address"},
		{"a hex IP form", byName, "0x7f000001:" + port, 403, "#denied-address"},
		{"an IPv4-mapped IPv6 literal, not listed", literal, "[::ffff:127.0.0.1]:" + port, 403, "#unknown-destination"},
		{"an unlisted loopback literal", literal, "127.0.0.2:" + port, 403, "#unknown-destination"},
		{"the metadata address", literal, "169.254.169.254", 403, "#unknown-destination"},
		{"a literal listed explicitly", literal, "127.0.0.1:" + port, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := send(t, tc.via.EgressAddr(), tc.host, "GET", "/secrets", "", nil)
			if resp.StatusCode != tc.want {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, b)
			}
			if tc.typ != "" {
				if pd := readProblem(t, resp); !strings.HasSuffix(pd.Type, tc.typ) {
					t.Errorf("type %s, want %s (%s)", pd.Type, tc.typ, pd.Detail)
				}
			}
		})
	}
	t.Cleanup(func() {
		if n := got.count(); n != 1 {
			t.Errorf("the internal server was reached %d times, want 1 (the explicitly listed literal)", n)
		}
	})
}
