package config

import (
	"strings"
	"testing"
	"time"
)

func TestGroups(t *testing.T) {
	t.Parallel()
	const peers = "peers: {b: {url: 'http://h:1'}, c: {url: 'http://h:2'}, d: {url: 'http://h:3'}}\n"
	c, err := Parse(strings.NewReader(minimal+peers+"groups:\n  reviewers: {members: [b, c, d]}\n  pair: {members: [b, c], mode: quorum, quorum: 2, concurrency: 1, deadline: 5s}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Groups["reviewers"]; g.Mode != BroadcastAll || g.Deadline.D() != DefaultBroadcastDeadline || g.Concurrency != 0 {
		t.Fatalf("defaults: %+v", g)
	}
	if g := c.Groups["pair"]; g.Mode != BroadcastQuorum || g.Quorum != 2 || g.Concurrency != 1 || g.Deadline.D() != 5*time.Second {
		t.Fatalf("explicit: %+v", g)
	}
	for _, tc := range []struct{ in, want string }{
		{"groups: {r: {members: []}}", "groups.r.members: must list 1 to 64 peers, got 0"},
		{"groups: {r: {members: [b, x]}}", `groups.r.members[1]: must name a peer (peers.<name>), got "x"`},
		{"groups: {r: {members: [b, b]}}", `groups.r.members[1]: is listed twice, got "b"`},
		{"groups: {b: {members: [c]}}", `groups.b: must not be a peer's name too: a handoff to it would be ambiguous, got "b"`},
		{"groups: {analyst: {members: [c]}}", `groups.analyst: must not be the agent's own name, got "analyst"`},
		{"groups: {r: {members: [b], mode: some}}", `groups.r.mode: must be one of all, any, quorum, got "some"`},
		{"groups: {r: {members: [b, c], mode: quorum, quorum: 3}}", "groups.r.quorum: must be between 1 and the 2 members, got 3"},
		{"groups: {r: {members: [b], mode: any, quorum: 1}}", "groups.r.quorum: is only for mode quorum, got 1"},
		{"groups: {r: {members: [b], concurrency: -1}}", "groups.r.concurrency: must be >= 0 (0: every member at once), got -1"},
		{"groups: {r: {members: [b], deadline: -1s}}", `groups.r.deadline: must be a duration > 0, got "-1s"`},
		{"groups: {r: {members: [b], fanout: 2}}", "groups.r.fanout: unknown key"},
	} {
		_, err := Parse(strings.NewReader(minimal+peers+tc.in+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.in, err, tc.want)
		}
	}
}
