package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// benchRedisURL is the Redis the -redis rows give Baton B (and, in the
// -redis-both rows, Baton A) as its store: the machine's own, on the
// default port.
const benchRedisURL = "redis://127.0.0.1:6379/0"

// benchRedis is the harness's own connection to the Redis a row's Batons
// use: to check that it answers before the row starts, to count
// redis-server's CPU as the row's rather than as noise, and to remove the
// row's keys afterwards.
type benchRedis struct {
	client *redis.Client
	addr   string
	// prefixes are the key prefixes handed out by newPrefix, one per Baton:
	// unique to the row, so that its keys can be found and removed.
	prefixes []string
	version  string
	pid      int // 0 when redis-server is not a process this harness can read
}

// openRedis connects to rawURL and checks that it answers PING. A Redis
// that does not answer is a skipError: the row cannot run on this machine.
func openRedis(ctx context.Context, rawURL string) (*benchRedis, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = time.Second, 5*time.Second, 5*time.Second
	opt.PoolSize = 2
	r := &benchRedis{client: redis.NewClient(opt), addr: opt.Addr}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := r.client.Ping(pctx).Err(); err != nil {
		r.client.Close()
		return nil, skipError{fmt.Sprintf("no Redis answering PING at %s (%v); start redis-server there to run this row", opt.Addr, err)}
	}
	if info, err := r.client.Info(pctx, "server").Result(); err == nil {
		r.version, r.pid = parseRedisInfo(info)
	}
	return r, nil
}

// parseRedisInfo returns redis_version and process_id from INFO server. The
// pid is kept only if it is a redis-server in this harness's view of /proc
// (a Redis in a container reports a pid of its own namespace).
func parseRedisInfo(info string) (version string, pid int) {
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "redis_version":
			version = v
		case "process_id":
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid > 0 {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err != nil || !strings.HasPrefix(string(comm), "redis-server") {
			pid = 0
		}
	}
	return version, pid
}

// newPrefix returns a fresh key prefix, bench:<12 random hex digits>:, and
// remembers it so that close removes its keys.
func (r *benchRedis) newPrefix() string {
	var id [6]byte
	_, _ = rand.Read(id[:])
	p := "bench:" + hex.EncodeToString(id[:]) + ":"
	r.prefixes = append(r.prefixes, p)
	return p
}

// name describes the server for the report.
func (r *benchRedis) name() string {
	if r.version == "" {
		return "redis-server"
	}
	return "redis-server " + r.version
}

// close removes the row's keys (SCAN for each prefix, UNLINK in batches) and
// closes the connection. Leaving keys behind is harmless, they have TTLs,
// so a failure is only logged.
func (r *benchRedis) close(logf func(string, ...any)) {
	defer r.client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range r.prefixes {
		removed, err := r.removeKeys(ctx, p)
		if err != nil {
			logf("redis: removing keys %s* (they expire by their TTLs): %v", p, err)
			continue
		}
		logf("redis: removed %d keys %s*", removed, p)
	}
}

// removeKeys unlinks every key under prefix.
func (r *benchRedis) removeKeys(ctx context.Context, prefix string) (int64, error) {
	var removed int64
	batch := make([]string, 0, 512)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := r.client.Unlink(ctx, batch...).Result()
		removed += n
		batch = batch[:0]
		return err
	}
	it := r.client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var err error
	for err == nil && it.Next(ctx) {
		if batch = append(batch, it.Val()); len(batch) == cap(batch) {
			err = flush()
		}
	}
	if err == nil {
		err = it.Err()
	}
	if err == nil {
		err = flush()
	}
	return removed, err
}
