// Package state is Baton's hot-state store: the small, short-lived facts a
// Baton needs while handoffs are in flight (who holds a trace, idempotency
// records, per-trace logs and indexes). Store is the one interface; there are
// two implementations behind it, tested by the shared contract suite in
// state/storetest.
//
// Memory is the default and serves a single Baton. It lives in the process,
// is bounded in entries and bytes, and when a write would cross a bound it
// evicts the least recently written entries that are not held. Redis serves
// several Batons that must agree; it wraps a go-redis UniversalClient, so one
// configuration shape covers a single node (a URL), Sentinel (addrs with a
// master name) and Cluster (several addrs).
//
// # Keys
//
// Keys are opaque strings chosen by callers. The Redis store puts its prefix
// (default "baton:") in front of every key, so a Redis Cluster hash tag in the
// caller's key, such as "{trace-id}" in "idem:{trace-id}:step", still decides
// the slot; the prefix itself must therefore not contain braces. Values,
// logs and indexes share one key space: using a key of one kind with an
// operation of another fails with ErrWrongKind.
//
// # Held entries
//
// Claim writes an entry only if the key is absent, and the entry it writes is
// held: it is a lease owned by whoever knows its value. Renew (by the holder)
// keeps it held; Swap turns it into an ordinary entry; Release deletes it. The
// memory store never evicts a held entry to make room; it goes only when its
// TTL lapses, and a write that could only succeed by evicting held entries
// fails with ErrFull. Redis has no such notion: run it with a maxmemory
// policy of noeviction (or volatile-* with TTLs on everything) so that the
// server does not drop leases.
//
// # Holders
//
// Holder is this process as the holder of leases: an incarnation id that
// the leases it takes name, and a liveness mark it keeps in the store, so
// that a lease whose holder died is known free before its TTL lapses
// (holder.go).
//
// # TTLs
//
// A ttl <= 0 means the entry does not expire. Expiry is exact on read: an
// expired entry is absent to every operation, even before its memory is
// reclaimed. Redis rounds TTLs up to whole milliseconds.
//
// # Versions
//
// The Redis store needs Redis 7.0 or later: Claim is a single
// "SET key val NX PX ttl GET", which older servers reject.
//
// It uses config only; every other package of Baton may use it.
package state
