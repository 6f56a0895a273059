package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
)

// helperRoleEnv makes this test binary a stand-in server process measured
// by an lvs-agent (-source process:PID): "busy" keeps two threads per CPU
// runnable (the agent's process input is runnable threads per CPU, so it
// reads at least 1 whatever else the machine runs), "idle" sleeps.
const helperRoleEnv = "LVS_MONITOR_TEST_ROLE"

// TestHelperProcess is not a test: it is the stand-in server process.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv(helperRoleEnv) {
	case "":
		return
	case "busy":
		for range 2 * runtime.NumCPU() { // GOMAXPROCS set to match by startStandIn
			go func() {
				for x := uint64(1); ; x = x*6364136223846793005 + 1 {
				}
			}()
		}
	}
	select {} // until killed
}

func TestTableNeedsDryRun(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-table", "saved.txt"}, "-table runs against a saved copy of the IPVS table and needs -dry-run"},
		{[]string{"-dry-run", "-table", "saved.txt", "-netns", "/run/netns/x"}, "-table and -netns exclude each other"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if code := run(tt.args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", tt.args, code)
		}
		if !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: stderr %q does not say %q", tt.args, stderr.String(), tt.want)
		}
	}
}

// TestTableUnreadable: a table file with a mistake stops lvs-monitor
// before it starts, naming the line; nothing is created.
func TestTableUnreadable(t *testing.T) {
	tests := []struct{ text, want string }{
		{"-A -t 127.0.0.1:80 -s wrr\n-a -t 127.0.0.1:80 -r 127.0.0.2:80 -m -w lots\n", `line 2: weight \"lots\" is not a whole number`},
		// A listing line that is just its protocol word.
		{"Prot LocalAddress:Port Scheduler Flags\nTCP\n", `line 2: a service line wants: TCP ADDRESS:PORT SCHEDULER`},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		table := filepath.Join(dir, "saved.txt")
		if err := os.WriteFile(table, []byte(tt.text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(dir, "c.toml")
		writeDryRunConfig(t, cfg, dir, nil)
		var stdout, stderr bytes.Buffer
		if code := run([]string{"-dry-run", "-table", table, "-config", cfg}, &stdout, &stderr); code != 1 {
			t.Fatalf("exit %d, want 1; stderr %s", code, stderr.String())
		}
		if want := fmt.Sprintf(`IPVS table %s: %s`, table, tt.want); !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q does not say %q", stderr.String(), want)
		}
		if _, err := os.Stat(filepath.Join(dir, "state")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state directory: %v, want none", err)
		}
	}
}

// server is one real server of the end-to-end test: a TCP listener the
// monitor probes, and the lvs-agent that reports the load of a stand-in
// process.
type server struct {
	addr  string // RIP:PORT
	agent string // the agent's HOST:PORT
}

// writeDryRunConfig writes a configuration for the servers: the LVS
// formula on the agent's process input (0.9) and the probe's response
// time (0.1), target 0.5 and scale 1, so that an idle server stays at its
// weight and a busy one's falls at its first cycle.
func writeDryRunConfig(t *testing.T, path, dir string, servers []server) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `interval = "1s"
agent_timeout = "800ms"
probe_timeout = "800ms"
state_dir = %q
metrics_listen = ""
control_socket = %q

[coefficients]
input = 0
cpu = 0
memory = 0
disk = 0
response = 0.1
process = 0.9

[weight]
controller = "lvs"
gain = 5.0
target = 0.5
scale = 1
threshold = 1

[backlog_guard]
check = "0s"

[[service]]
address = "127.0.0.1:80/tcp"
[service.probe]
type = "tcp"
reference = "100ms"
`, filepath.Join(dir, "state"), filepath.Join(dir, "control.sock"))
	for _, s := range servers {
		fmt.Fprintf(&b, "[[service.server]]\naddress = %q\nweight = 10\nagent = %q\n", s.addr, s.agent)
	}
	if len(servers) == 0 {
		b.WriteString("[[service.server]]\naddress = \"127.0.0.2:80\"\nweight = 10\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// buildBinaries builds the named commands into one temporary directory.
func buildBinaries(t *testing.T, names ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH to build " + strings.Join(names, ", "))
	}
	dir := t.TempDir()
	args := []string{"build", "-o", dir + "/"}
	for _, n := range names {
		args = append(args, "lvs-feedback/cmd/"+n)
	}
	if out, err := exec.Command(goTool, args...).CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", names, err, out)
	}
	return dir
}

// start starts a child process that is killed when the test ends.
func start(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// startStandIn starts this test binary as a stand-in server process
// ("busy" at the lowest CPU priority, so that it takes only idle CPU and
// its threads still count as runnable).
func startStandIn(t *testing.T, role string) int {
	t.Helper()
	var cmd *exec.Cmd
	if nice, err := exec.LookPath("nice"); err == nil && role == "busy" {
		cmd = exec.Command(nice, "-n", "19", os.Args[0], "-test.run=^TestHelperProcess$")
	} else {
		cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	}
	cmd.Env = append(os.Environ(), helperRoleEnv+"="+role, "GOMAXPROCS="+strconv.Itoa(2*runtime.NumCPU()))
	start(t, cmd)
	return cmd.Process.Pid
}

var agentStarted = regexp.MustCompile(`msg="lvs-agent started" listen=(\S+)`)

// startAgent starts lvs-agent on host (a free port) measuring process pid
// and returns its address, read from its start line.
func startAgent(t *testing.T, bin, host string, pid int) string {
	t.Helper()
	cmd := exec.Command(bin, "-listen", host+":0", "-interval", "200ms", "-source", "process:"+strconv.Itoa(pid))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start(t, cmd)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := agentStarted.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return a
	case <-time.After(30 * time.Second):
		t.Fatalf("lvs-agent on %s did not start", host)
		return ""
	}
}

// listen opens a real server's TCP listener on host that accepts and
// closes connections (the probe is a TCP connect).
func listen(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", host, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// lockedBuffer is a bytes.Buffer safe to write and read at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lineBuffer collects a child's output lines and lets a test wait for one.
type lineBuffer struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced at every line
}

func newLineBuffer(r io.Reader) *lineBuffer {
	b := &lineBuffer{more: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			b.mu.Lock()
			b.lines = append(b.lines, sc.Text())
			close(b.more)
			b.more = make(chan struct{})
			b.mu.Unlock()
		}
	}()
	return b
}

func (b *lineBuffer) snapshot() ([]string, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines...), b.more
}

// TestDryRunTable runs the real lvs-monitor with -dry-run -table on a
// saved table of three real servers (real TCP listeners on 127.0.0.2-4),
// each with a real lvs-agent; the third server's process keeps its CPUs
// busy. lvs-monitor must print, within a few cycles, that it would lower
// that server's weight from the saved 10 — and at every later cycle again
// from 10, the table being left as saved — and nothing for the idle ones;
// lvsctl status must list the three servers from its control socket, a
// drain must be refused; the table file must be unchanged and no state
// written.
func TestDryRunTable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs lvs-monitor, lvs-agent and lvsctl")
	}
	bin := buildBinaries(t, "lvs-monitor", "lvs-agent", "lvsctl")
	dir := t.TempDir()

	var servers []server
	for i, role := range []string{"idle", "idle", "busy"} {
		host := fmt.Sprintf("127.0.0.%d", i+2)
		pid := startStandIn(t, role)
		servers = append(servers, server{addr: listen(t, host), agent: startAgent(t, filepath.Join(bin, "lvs-agent"), host, pid)})
	}
	busy := servers[2].addr

	var saved strings.Builder
	saved.WriteString("-A -t 127.0.0.1:80 -s wrr\n")
	for _, s := range servers {
		fmt.Fprintf(&saved, "-a -t 127.0.0.1:80 -r %s -m -w 10\n", s.addr)
	}
	table := filepath.Join(dir, "ipvsadm-save.txt")
	if err := os.WriteFile(table, []byte(saved.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "lvs-monitor.toml")
	writeDryRunConfig(t, cfg, dir, servers)

	mon := exec.Command(filepath.Join(bin, "lvs-monitor"), "-dry-run", "-table", table, "-config", cfg)
	stdoutPipe, err := mon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer // written by exec's copier while the test reads it
	mon.Stderr = &stderr
	if err := mon.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = mon.Process.Kill()
			_ = mon.Wait()
		}
		if t.Failed() {
			t.Logf("lvs-monitor stderr:\n%s", stderr.String())
		}
	}()
	out := newLineBuffer(stdoutPipe)

	// Cycles, counted: wait for two would-be writes of the busy server
	// within the first 8 cycles (its first is due at its first cycle; a
	// slow agent start may cost one or two).
	const maxCycles = 8
	wouldRe := regexp.MustCompile(`^cycle (\d+): 127\.0\.0\.1:80/tcp (\S+) weight (\d+) → (\d+): not written \(dry run\): load (\S+)$`)
	cycleRe := regexp.MustCompile(`^cycle (\d+): `)
	deadline := time.After(2 * time.Minute) // a loaded machine: generous; the count that matters is cycles
	var would []string
	for len(would) < 2 {
		lines, more := out.snapshot()
		would = would[:0]
		cycles := 0
		for _, l := range lines {
			m := cycleRe.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("stdout line %q is not a cycle's line", l)
				continue
			}
			cycles, _ = strconv.Atoi(m[1])
			w := wouldRe.FindStringSubmatch(l)
			switch {
			case w == nil:
				if !strings.Contains(l, "nothing to write (3 servers)") {
					t.Errorf("unexpected line %q", l)
				}
			case w[2] != busy:
				t.Errorf("a would-be write for the idle server %s: %q", w[2], l)
			default:
				to, _ := strconv.Atoi(w[4])
				load, _ := strconv.ParseFloat(w[5], 64)
				if w[3] != "10" || to >= 10 || load <= 0.5 {
					t.Errorf("would-be write %q: want the saved weight 10 → lower, at a load above the target 0.5", l)
				}
				would = append(would, l)
			}
		}
		if t.Failed() {
			return
		}
		if cycles >= maxCycles && len(would) < 2 {
			t.Fatalf("%d cycles and %d would-be writes of %s, want 2:\n%s", cycles, len(would), busy, strings.Join(lines, "\n"))
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("no 2 would-be writes of %s in 2 minutes:\n%s", busy, strings.Join(lines, "\n"))
		}
	}
	t.Logf("would-be writes: %q", would)
	// The log carries the same decision, from the same place.
	if !strings.Contains(stderr.String(), `msg="would change weight (dry run)" service=127.0.0.1:80/tcp server=`+busy+` old=10`) {
		t.Errorf("the log does not say it would change %s's weight from 10", busy)
	}

	// lvsctl against the dry run's control socket.
	lvsctl := func(args ...string) (int, string) {
		cmd := exec.Command(filepath.Join(bin, "lvsctl"), append([]string{"-config", cfg}, args...)...)
		outb, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("lvsctl %v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), string(outb)
	}
	code, status := lvsctl("status")
	if code != 0 {
		t.Errorf("lvsctl status: exit %d\n%s", code, status)
	}
	for _, s := range servers {
		if !strings.Contains(status, s.addr) {
			t.Errorf("lvsctl status does not list %s:\n%s", s.addr, status)
		}
	}
	if code, explain := lvsctl("explain", "127.0.0.1:80/tcp", busy); code != 0 || !strings.Contains(explain, "not written (dry run)") {
		t.Errorf("lvsctl explain %s: exit %d\n%s", busy, code, explain)
	}
	if code, drain := lvsctl("drain", "127.0.0.1:80/tcp", servers[0].addr); code != 1 || !strings.Contains(drain, "lvs-monitor runs with -dry-run: nothing written") {
		t.Errorf("lvsctl drain in a dry run: exit %d, want 1 and a refusal\n%s", code, drain)
	}

	if err := mon.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- mon.Wait() }()
	select {
	case err := <-waited:
		stopped = true
		if err != nil {
			t.Errorf("lvs-monitor after SIGTERM: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("lvs-monitor did not stop after SIGTERM")
	}

	if got, err := os.ReadFile(table); err != nil || string(got) != saved.String() {
		t.Errorf("the table file changed: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state directory after a dry run: %v, want none", err)
	}
}

// TestDryRunExample: the saved table shipped for README's "Try it" holds
// every server of the configuration shipped with it, at its configured
// weight, and the configuration is valid.
func TestDryRunExample(t *testing.T) {
	table, err := ipvs.ReadTableFile("../../docs/examples/ipvsadm-save.txt")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := monitor.LoadConfig("../../docs/examples/lvs-monitor-dry-run.toml")
	if err != nil {
		t.Fatal(err)
	}
	servers := 0
	for _, s := range cfg.Services {
		dests, err := table.Destinations(s.Key)
		if err != nil {
			t.Fatalf("service %s: %v", s.Key, err)
		}
		weights := map[netip.AddrPort]int{}
		for _, d := range dests {
			weights[d.Addr] = d.Weight
		}
		for _, srv := range s.Servers {
			servers++
			if w, ok := weights[srv.Addr]; !ok || w != srv.Weight {
				t.Errorf("%s %s: in the table %v at weight %d, configured weight %d", s.Key, srv.Addr, ok, w, srv.Weight)
			}
		}
	}
	if servers != 3 {
		t.Errorf("%d servers configured, want the 3 of README's Try it", servers)
	}
}
