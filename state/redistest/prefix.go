package redistest

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Prefix returns a key prefix unique to this test and deletes every key
// under it from the Redis at url once the test ends: the shared Redis
// outlives the tests, and records written with a retention of days would
// otherwise stay in it that long.
func Prefix(t testing.TB, url string) string {
	t.Helper()
	prefix := "test:" + rand.Text()[:12] + ":"
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() {
		c := redis.NewClient(opts)
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == 1000 {
				c.Unlink(ctx, batch...)
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			c.Unlink(ctx, batch...)
		}
		if err := iter.Err(); err != nil {
			t.Errorf("redistest: removing %s*: %v", prefix, err)
		}
	})
	return prefix
}
