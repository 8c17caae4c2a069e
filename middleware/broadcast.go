package middleware

import (
	"crypto/sha256"
	"net/url"
)

// MemberKey is the key of a broadcast's handoff to member: derived from the
// broadcast's key (unquoted) and the member, so that each member's window
// sees its own key and a retry of the broadcast sends each the same one.
// It is returned quoted, as an RFC 8941 string.
func MemberKey(key, member string) string {
	msg := appendField(nil, "broadcast")
	msg = appendField(msg, key)
	msg = appendField(msg, member)
	return keyString("bm-", sha256.Sum256(msg))
}

// ForMember returns the Info of a broadcast's handoff to one member: a copy
// of the broadcast's, made out to member with its key (quoted, as
// MemberKey returns it), and with nothing the rest of the chain fills in
// per handoff (record, grant, contract, labels, outcome). An empty key
// leaves the member's handoff without one (a GET). The member's
// handoff takes no position among the handling's calls: the broadcast did.
func (i *Info) ForMember(member string, target *url.URL, maxHops int, quotedKey string) *Info {
	m := *i
	m.To, m.Target, m.MaxHops = member, target, maxHops
	m.Key = ""
	if len(quotedKey) >= 2 {
		m.Key = quotedKey[1 : len(quotedKey)-1]
	}
	m.Call = nil
	m.RecordID, m.DeadLetter, m.Delivered, m.Err = "", "", false, nil
	m.GrantOut, m.Contract, m.Labels, m.Injection = "", nil, nil, nil
	m.SignatureFailure, m.PolicyDenial = "", ""
	m.Dedupe = ""
	m.StoppedAt, m.KeyMismatch = "", false
	m.rec = nil
	if i.RPC != nil {
		rpc := *i.RPC
		m.RPC = &rpc
	}
	return &m
}
