package chaos

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// redisCluster is a Redis Cluster of three masters, each with a replica, on
// throwaway redis-servers: the store a production Baton deployment runs on.
// Killing a master makes the cluster fail it over to its replica.
type redisCluster struct {
	nodes []*redis
	cli   string
	down  *redis // the node a failover fault killed
}

// startCluster starts six nodes and joins them with redis-cli (from the
// same directory as redis-server, or on the PATH).
func startCluster(dir, bin string, persist bool) (*redisCluster, error) {
	cli := filepath.Join(filepath.Dir(bin), "redis-cli")
	if _, err := exec.LookPath(cli); err != nil {
		if cli, err = exec.LookPath("redis-cli"); err != nil {
			return nil, fmt.Errorf("chaos: --cluster needs redis-cli (Debian: redis-tools)")
		}
	}
	c := &redisCluster{cli: cli}
	for i := range 6 {
		n, err := startRedis(dir, bin, persist, fmt.Sprintf("redis-%d", i+1), "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000")
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("chaos: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitOK(30 * time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *redisCluster) addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr()
	}
	return out
}

// info runs a redis-cli command against node n.
func (c *redisCluster) info(n *redis, args ...string) string {
	out, _ := exec.Command(c.cli, append([]string{"-p", fmt.Sprint(n.port)}, args...)...).Output()
	return string(out)
}

// waitOK waits until every running node says cluster_state:ok.
func (c *redisCluster) waitOK(within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ok := true
		for _, n := range c.nodes {
			if n == c.down {
				continue
			}
			if !strings.Contains(c.info(n, "cluster", "info"), "cluster_state:ok") {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("chaos: the Redis Cluster is not ok after %v", within)
}

// failover kills a master; its replica takes over.
func (c *redisCluster) failover() error {
	for _, n := range c.nodes {
		if strings.Contains(c.info(n, "role"), "master") {
			c.down = n
			n.signal(syscall.SIGKILL, 5*time.Second)
			return nil
		}
	}
	return fmt.Errorf("chaos: no Redis Cluster master found")
}

// rejoin starts the killed node again (it comes back as a replica) and
// waits for the cluster to be ok.
func (c *redisCluster) rejoin() error {
	n := c.down
	if n == nil {
		return nil
	}
	if err := n.restart(); err != nil {
		return err
	}
	c.down = nil
	return c.waitOK(30 * time.Second)
}

func (c *redisCluster) stop() {
	for _, n := range c.nodes {
		n.stop()
	}
}
