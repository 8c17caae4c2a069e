package config

import (
	"bytes"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic; an error
// must come without a config, read as non-empty lines, and name its field
// whenever the YAML itself was well formed; and a config it
// accepts must validate again, and survive a trip through YAML unchanged
// (which also proves ApplyDefaults idempotent).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		example,
		minimal,
		Sample,
		"",
		"---\n",
		"- a\n",
		"agent: analyst\nagent: planner\n",
		"listen: {egres: 127.0.0.1:15001}\n",
		minimal + "shutdown_grace: abc\n",
		minimal + "edges: [{from: a, max_hops: 0}, {to: b}, ~]\n",
		minimal + "edges: [&e {from: a, max_hops: 3}, {<<: *e, from: b}]\n",
		minimal + "store: {redis: {addrs: [h:1, h:2], db: 2}}\n",
		minimal + "store: {redis: {url: 'redis://:pw@'}}\n",
		minimal + "peers: {x: {url: 'http://h:1'}, x: {}}\n",
		minimal + "external: {allow: ['*.example.com:443', '[::1]:8080', 'a:0']}\n",
		minimal + "timeouts: {read: -1s, idle: [1]}\n",
		minimal + "---\nagent: b\n",
		"agent: !!binary YWdlbnQ=\nupstream: http://h\n",
		"agent: [\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(bytes.NewReader(data), nil)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned a config with its error %v", err)
			}
			// The path checker must catch every shape problem before the
			// backstop decoder, whose messages name no field.
			if strings.HasPrefix(err.Error(), "config: yaml: unmarshal errors") {
				t.Fatalf("shape problem missed by the path checker: %v", err)
			}
			for _, l := range strings.Split(err.Error(), "\n") {
				if strings.TrimSpace(l) == "" {
					t.Fatalf("Parse error has an empty line: %q", err)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate again: %v", err)
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("marshalling an accepted config: %v", err)
		}
		again, err := Parse(bytes.NewReader(out), nil)
		if err != nil {
			t.Fatalf("re-parsing an accepted config: %v\n%s", err, out)
		}
		if out2, err := yaml.Marshal(again); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("config changed on a round trip (%v):\n%s\nthen\n%s", err, out, out2)
		}
	})
}
