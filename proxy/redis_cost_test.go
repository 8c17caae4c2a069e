package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonproxy/baton/state/redistest"
)

// redisCommands returns the commands a Redis served, by name, from INFO
// commandstats.
func redisCommands(t *testing.T, rc *redis.Client) map[string]int {
	t.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, _ := strconv.Atoi(calls)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// redisCost runs n handoffs from a to b (send makes one), both Batons on
// one private Redis, once warmed up, and returns the commands Redis served
// per handoff, by name, and in all.
func redisCost(t *testing.T, n int, send func(i int)) (map[string]float64, float64) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(costRedis.URL(), "redis://")})
	t.Cleanup(func() { rc.Close() })
	for i := range 5 {
		send(-1 - i) // connections, holders, announcements
	}
	time.Sleep(1500 * time.Millisecond) // the warm-up's records flushed
	before := redisCommands(t, rc)
	for i := range n {
		send(i)
	}
	time.Sleep(1500 * time.Millisecond) // the records flushed (the book's flusher)
	after := redisCommands(t, rc)
	per := map[string]float64{}
	total := 0.0
	for name, c := range after {
		if d := c - before[name]; d > 0 && name != "info" {
			per[name] = float64(d) / float64(n)
			total += per[name]
		}
	}
	return per, total
}

var costRedis *redistest.Server

// TestRedisCommandsPerHandoff counts what one handoff between two Batons
// on Redis costs Redis, by kind of handoff, on defaults: the figures
// docs/resilience.md's table shows. The background work of a Baton (its
// holder's mark, its mesh announcement) is in the counts too, spread over
// the handoffs.
func TestRedisCommandsPerHandoff(t *testing.T) {
	costRedis = redistest.Start(t)
	ag := benchAgent(t)
	store := fmt.Sprintf("store: {redis: {url: %q}}\n", costRedis.URL())
	bB := startBaton(t, "agent: b\nupstream: "+ag.URL+"\nlog_level: warn\n"+store+"edges: [{from: a}]\n", nil)
	aB := startBaton(t, "agent: a\nupstream: http://127.0.0.1:1\nlog_level: warn\n"+store+
		"peers: {b: {url: http://"+bB.IngressAddr()+"}}\nedges: [{to: b}]\n", nil)
	client := &http.Client{}
	const n = 200
	for _, kind := range []struct {
		name string
		body func(i int) string
	}{
		{"plain", func(i int) string { return fmt.Sprintf(`{"task":"plain %d"}`, i) }},
		{"a2a", func(i int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, i, i)
		}},
	} {
		per, total := redisCost(t, n, func(i int) {
			req, _ := http.NewRequest(http.MethodPost, "http://"+aB.EgressAddr()+"/task", strings.NewReader(kind.body(i)))
			req.Host = "b"
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
		names := make([]string, 0, len(per))
		for k := range per {
			names = append(names, k)
		}
		sort.Strings(names)
		var parts []string
		for _, k := range names {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, per[k]))
		}
		t.Logf("%s: %.2f commands per handoff: %s", kind.name, total, strings.Join(parts, ", "))
	}
}
