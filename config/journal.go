package config

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Journal configures the call journal (docs/journal.md): while the agent
// handles an inbound handoff, the answers to its calls to journaled
// destinations are kept, and when it handles the same handoff again (the
// chain resumed) the same calls are answered from the journal instead of
// going out again. A destination is journaled when it is listed in Hosts
// (external hosts) or its outbound edge sets journal: true (a peer, most
// usefully one that runs no Baton and so keeps no dedupe window).
type Journal struct {
	// Hosts are the external hosts whose calls are journaled, written as
	// in external.allow (host:port, a leading "*." for any subdomain); each
	// must be allowed by external.allow.
	Hosts []string `yaml:"hosts"`
	// Retention is how long a handling's journal is kept after its last
	// entry was written. Default: records.retention, so that a dead letter
	// that can be resumed still has its journal.
	Retention Duration `yaml:"retention"`
	// MaxEntryBytes bounds one journaled response body; a larger one is
	// answered as usual and not journaled (its handling's receipt says so).
	MaxEntryBytes int64 `yaml:"max_entry_bytes"`
	// MaxHandlingBytes bounds one handling's journal, all entries together.
	MaxHandlingBytes int64 `yaml:"max_handling_bytes"`
	// Vary names request headers, besides Content-Type, Content-Encoding
	// and the credentials, that take part in a call's digest (a provider's
	// API version header, say). Other headers do not: a client's retry
	// counter or a trace header must not make a re-run's call a miss.
	Vary []string `yaml:"vary"`
	// KeyEnv names the environment variable holding the key the digests
	// are computed with (at least 16 bytes). Unset, the key is derived from
	// this Baton's identity key; with neither, a key is made at start and
	// journals are found only by the process that wrote them.
	KeyEnv string `yaml:"key_env"`
}

// Journal defaults.
const (
	DefaultJournalEntryBytes    = 1 << 20
	DefaultJournalHandlingBytes = 8 << 20
	// MinJournalKeyBytes is the shortest journal key accepted.
	MinJournalKeyBytes = 16
)

func (j *Journal) applyDefaults(records Records) {
	if j.Retention == 0 {
		j.Retention = records.Retention
	}
	if j.MaxEntryBytes == 0 {
		j.MaxEntryBytes = DefaultJournalEntryBytes
	}
	if j.MaxHandlingBytes == 0 {
		j.MaxHandlingBytes = DefaultJournalHandlingBytes
	}
	for i, h := range j.Vary {
		j.Vary[i] = http.CanonicalHeaderKey(strings.TrimSpace(h))
	}
}

// JournalOn reports whether any destination is journaled.
func (c *Config) JournalOn() bool {
	if len(c.Journal.Hosts) > 0 {
		return true
	}
	for _, e := range c.Edges {
		if e.Journal {
			return true
		}
	}
	return false
}

func (c *Config) validateJournal(bad badFunc) {
	j := &c.Journal
	for i, h := range j.Hosts {
		path := fmt.Sprintf("journal.hosts[%d]", i)
		if err := checkAllow(h); err != nil {
			bad(path, h, err.Error())
		} else if !c.allows(strings.ToLower(h)) {
			bad(path, h, "must be allowed by external.allow (a host Baton does not let the agent reach has nothing to journal)")
		}
	}
	if j.Retention < 0 || (j.Retention > 0 && j.Retention.D() < time.Second) {
		bad("journal.retention", j.Retention.D().String(), "must be a duration of at least 1s")
	}
	if j.MaxEntryBytes < 1 {
		bad("journal.max_entry_bytes", j.MaxEntryBytes, "must be > 0")
	}
	if j.MaxHandlingBytes < j.MaxEntryBytes {
		bad("journal.max_handling_bytes", j.MaxHandlingBytes, "must be >= journal.max_entry_bytes")
	}
	for i, h := range j.Vary {
		if h == "" || strings.ContainsAny(h, " \t:") {
			bad(fmt.Sprintf("journal.vary[%d]", i), h, "must be a header name")
		}
	}
	for i, e := range c.Edges {
		if e.Journal && e.From != "" {
			bad(fmt.Sprintf("edges[%d].journal", i), nil, "applies to outbound edges (to) only: the calling agent's Baton keeps the journal")
		}
	}
}

// allows reports whether external.allow (or a route) lets the agent reach
// every host a journal.hosts entry names: the same entry, or a wildcard entry covering
// it.
func (c *Config) allows(h string) bool {
	for _, a := range c.External.Allowed() {
		a = strings.ToLower(a)
		if a == h {
			return true
		}
		if strings.HasPrefix(a, "*.") {
			if strings.HasSuffix(strings.TrimPrefix(h, "*."), a[1:]) {
				return true
			}
		}
	}
	return false
}
