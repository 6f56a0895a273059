// Package etcdtest starts real etcd servers (the etcd-server package's
// /usr/bin/etcd, or $LVS_ETCD) on loopback for tests: one member or a
// cluster, each in its own temporary data directory, on ports chosen
// free for the test. A test is skipped only when the binary is absent and
// LVS_REQUIRE_ETCD is unset (.ci/run installs etcd-server and sets it).
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Binary returns the etcd binary tests run.
func Binary() string {
	if b := os.Getenv("LVS_ETCD"); b != "" {
		return b
	}
	return "/usr/bin/etcd"
}

// Member is one etcd server of a test cluster.
type Member struct {
	Name               string
	ClientURL, PeerURL string
	dir                string
	initialCluster     string
	extra              []string
	t                  testing.TB

	mu  sync.Mutex
	cmd *exec.Cmd
	log *os.File
}

// Cluster is a test's etcd cluster.
type Cluster struct {
	Members []*Member
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.ClientURL)
	}
	return out
}

// freePort returns a loopback port nobody listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Options change how the members serve clients.
type Options struct {
	// TLS: serve clients over https with this certificate and key, and
	// require client certificates signed by CAFile.
	CertFile, KeyFile, CAFile string
}

// Start starts an n-member cluster and waits until it answers; the test's
// cleanup stops it.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, n, Options{})
}

// StartWith is Start with options. With TLS, WaitReady is up to the test
// (its client needs the certificates).
func StartWith(t testing.TB, n int, o Options) *Cluster {
	t.Helper()
	if _, err := os.Stat(Binary()); err != nil {
		if os.Getenv("LVS_REQUIRE_ETCD") != "" {
			t.Fatalf("etcd is required (LVS_REQUIRE_ETCD is set) but %s is absent: apt-get install etcd-server", Binary())
		}
		t.Skipf("%s absent (apt-get install etcd-server; .ci/run does): the fleet's etcd tests need a real etcd", Binary())
	}
	c := &Cluster{}
	var initial []string
	scheme := "http"
	var extra []string
	if o.CertFile != "" {
		scheme = "https"
		extra = []string{"--cert-file", o.CertFile, "--key-file", o.KeyFile, "--trusted-ca-file", o.CAFile, "--client-cert-auth"}
	}
	for i := range n {
		m := &Member{Name: fmt.Sprintf("m%d", i), t: t, extra: extra,
			ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, freePort(t)),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			dir:       filepath.Join(t.TempDir(), fmt.Sprintf("m%d", i))}
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.Members = append(c.Members, m)
	}
	for _, m := range c.Members {
		m.initialCluster = strings.Join(initial, ",")
		m.start("new")
		t.Cleanup(m.Stop)
	}
	if o.CertFile == "" {
		c.WaitReady(60 * time.Second)
	}
	return c
}

func (m *Member) start(state string) {
	m.t.Helper()
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		m.t.Fatal(err)
	}
	// Short heartbeat and election timeout: the shortest lease etcd grants
	// is 1.5 election timeouts, and the tests use 2 s leases.
	cmd := exec.Command(Binary(),
		"--name", m.Name, "--data-dir", filepath.Join(m.dir, "data"),
		"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", m.initialCluster, "--initial-cluster-state", state, "--initial-cluster-token", "lvs-feedback-test",
		"--heartbeat-interval", "50", "--election-timeout", "500", "--logger", "zap", "--log-level", "warn")
	cmd.Args = append(cmd.Args, m.extra...)
	log, err := os.OpenFile(filepath.Join(m.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		m.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("start etcd member %s: %v", m.Name, err)
	}
	m.mu.Lock()
	m.cmd, m.log = cmd, log
	m.mu.Unlock()
}

// Stop kills the member (as a crash or a cut cable would); its data stay
// for Restart.
func (m *Member) Stop() {
	m.mu.Lock()
	cmd, log := m.cmd, m.log
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	log.Close()
}

// Restart starts a stopped member again on its data.
func (m *Member) Restart() { m.start("existing") }

// Stop stops every member.
func (c *Cluster) Stop() {
	for _, m := range c.Members {
		m.Stop()
	}
}

// Restart starts every stopped member again and waits until the cluster
// answers.
func (c *Cluster) Restart(within time.Duration) {
	for _, m := range c.Members {
		m.mu.Lock()
		running := m.cmd != nil
		m.mu.Unlock()
		if !running {
			m.Restart()
		}
	}
	c.WaitReady(within)
}

// Wipe stops every member, deletes its data and starts the cluster anew,
// empty: as after restoring etcd from a backup (etcdctl snapshot restore,
// or the keys put back), revisions start again from the beginning and no
// lease or election key of before survives. It waits until the cluster
// answers.
func (c *Cluster) Wipe(within time.Duration) {
	for _, m := range c.Members {
		m.Stop()
		if err := os.RemoveAll(filepath.Join(m.dir, "data")); err != nil {
			m.t.Fatal(err)
		}
	}
	for _, m := range c.Members {
		m.start("new")
	}
	c.WaitReady(within)
}

// WaitReady waits until a linearizable read succeeds.
func (c *Cluster) WaitReady(within time.Duration) {
	t := c.Members[0].t
	t.Helper()
	cli := c.Client(t)
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Get(ctx, "ready")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd cluster not ready within %v: %v (logs in %s)", within, err, filepath.Dir(c.Members[0].dir))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Client returns a client of the whole cluster, closed at cleanup.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
