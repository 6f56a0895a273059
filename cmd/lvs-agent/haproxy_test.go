package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// backendEnv makes TestHAProxyBackendProcess a stand-in real server (see
// backendMain) instead of a test.
const backendEnv = "LVS_AGENT_TEST_HAPROXY_BACKEND"

// TestHAProxyBackendProcess is not a test: run by TestHAProxyAgentCheck
// as a child with backendEnv set to a name, it is one real server.
func TestHAProxyBackendProcess(t *testing.T) {
	name := os.Getenv(backendEnv)
	if name == "" {
		return
	}
	os.Exit(backendMain(name))
}

// backendMain serves HTTP on a loopback port and prints the address:
// GET / answers the backend's name; POST /hog starts one goroutine that
// spins until the process ends. It exits when stdin reaches EOF (the test
// closed it, or died).
func backendMain(name string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var hogging atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, name) })
	mux.HandleFunc("POST /hog", func(w http.ResponseWriter, r *http.Request) {
		if hogging.CompareAndSwap(false, true) {
			go func() {
				var spins atomic.Uint64
				for { // burns one CPU until the process exits
					spins.Add(1)
				}
			}()
		}
		fmt.Fprintln(w, "hogging")
	})
	go func() { _ = http.Serve(ln, mux) }()
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// proc is a child process of the test and its output, line by line.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	lines []string
	fresh chan string // every line, for whoever waits on one
}

// startProc starts path; every line it writes to stdout or stderr is kept.
// It is killed when the test ends (and by the kernel if the test dies).
func startProc(t *testing.T, env []string, path string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	p := &proc{cmd: cmd, stdin: stdin, fresh: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			select {
			case p.fresh <- sc.Text():
			default:
			}
		}
	}()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		w.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return p
}

// waitLine returns the first line (from now on) containing want.
func (p *proc) waitLine(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l := <-p.fresh:
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line with %q from %s; output:\n%s", want, p.cmd.Path, p.output())
		}
	}
}

// count returns how many lines so far contain s.
func (p *proc) count(s string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// last returns the last line containing s, or "".
func (p *proc) last(s string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		if strings.Contains(p.lines[i], s) {
			return p.lines[i]
		}
	}
	return ""
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// serverState is one row of HAProxy's "show servers state".
type serverState struct {
	opState, adminState, uweight int
}

// drainFlag is HAProxy's SRV_ADMF_FDRAIN: drain forced by the CLI or an agent.
const drainFlag = 0x08

// haproxyCommand sends one command to HAProxy's stats socket and returns
// the reply (HAProxy closes the connection after it).
func haproxyCommand(sock, cmd string) (string, error) {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// serverStates parses "show servers state BACKEND": its second line names
// the columns.
func serverStates(reply string) (map[string]serverState, error) {
	lines := strings.Split(strings.TrimSpace(reply), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "# ") {
		return nil, fmt.Errorf("unexpected reply %q", reply)
	}
	col := map[string]int{}
	for i, name := range strings.Fields(strings.TrimPrefix(lines[1], "# ")) {
		col[name] = i
	}
	out := map[string]serverState{}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		get := func(name string) (int, error) {
			i, ok := col[name]
			if !ok || i >= len(f) {
				return 0, fmt.Errorf("no column %s in %q", name, l)
			}
			return strconv.Atoi(f[i])
		}
		var s serverState
		var err1, err2, err3 error
		s.opState, err1 = get("srv_op_state")
		s.adminState, err2 = get("srv_admin_state")
		s.uweight, err3 = get("srv_uweight")
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("row %q: %v %v %v", l, err1, err2, err3)
		}
		out[f[col["srv_name"]]] = s
	}
	return out, nil
}

// freePort returns a loopback TCP port nothing listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// buildAgent builds lvs-agent into dir.
func buildAgent(t testing.TB, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Fatalf("no go tool to build lvs-agent: %v", err)
	}
	bin := filepath.Join(dir, "lvs-agent")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestHAProxyAgentCheck runs a real HAProxy in front of two stand-in
// servers, each with a real lvs-agent (built from this package) that
// measures it and answers HAProxy's agent-check. It checks, through
// HAProxy's runtime API, that the weight of the server whose process is
// hogged falls below the other's, and that the drain file drains a server
// (HAProxy sends it no new request) and its removal brings it back.
// Every wait is bounded by agent-check rounds (answers the agent logged),
// not by time.
func TestHAProxyAgentCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs HAProxy and two agents for tens of seconds")
	}
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy not installed (apt-get install -y --no-install-recommends haproxy)")
	}
	dir := t.TempDir()
	agentBin := buildAgent(t, dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	type server struct {
		name    string
		backend *proc
		addr    string // the backend's HTTP address
		agent   *proc
		check   string // the agent's agent-check address
		drain   string // its drain file
	}
	servers := []*server{{name: "s1"}, {name: "s2"}}
	for _, s := range servers {
		s.backend = startProc(t, []string{backendEnv + "=" + s.name}, self, "-test.run=^TestHAProxyBackendProcess$")
		s.addr = s.backend.waitLine(t, "127.0.0.1:")
		s.drain = filepath.Join(dir, "drain-"+s.name)
		s.agent = startProc(t, nil, agentBin, "-listen", "127.0.0.1:0", "-interval", "250ms",
			"-source", "process:"+strconv.Itoa(s.backend.cmd.Process.Pid), "-log-level", "debug",
			"-agent-check-listen", "127.0.0.1:0", "-drain-file", s.drain)
		l := s.agent.waitLine(t, `msg="agent-check listening"`)
		_, after, ok := strings.Cut(l, "listen=")
		if !ok {
			t.Fatalf("no address in %q", l)
		}
		s.check = strings.Fields(after)[0]
	}

	// A unix socket path has at most 107 bytes; t.TempDir's can be longer.
	sockDir, err := os.MkdirTemp("", "lvs-hap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "admin.sock")
	front := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `global
    stats socket %s level admin
    stats timeout 30s

defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend fe
    bind %s
    default_backend be

backend be
    balance roundrobin
`, sock, front)
	for _, s := range servers {
		_, port, _ := net.SplitHostPort(s.check)
		fmt.Fprintf(&cfg, "    server %s %s weight 100 check inter 1s agent-check agent-addr 127.0.0.1 agent-port %s agent-inter 1s\n",
			s.name, s.addr, port)
	}
	cfgPath := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	hap := startProc(t, nil, haproxy, "-db", "-f", cfgPath)

	answers := func(s *server) int { return s.agent.count(`msg="agent-check answered"`) }
	// waitFor polls HAProxy until cond holds, for at most rounds more
	// agent-check answers of s (HAProxy's checks of s), or 3 minutes if
	// HAProxy stops checking altogether.
	var states map[string]serverState
	waitFor := func(what string, s *server, rounds int, cond func(map[string]serverState) bool) {
		t.Helper()
		start, deadline := answers(s), time.Now().Add(3*time.Minute)
		for {
			reply, err := haproxyCommand(sock, "show servers state be")
			if err == nil {
				states, err = serverStates(reply)
			}
			if err == nil && cond(states) {
				t.Logf("%s: after %d agent-check rounds of %s: %+v; %s answered %q", what, answers(s)-start, s.name,
					states, s.name, s.agent.last(`msg="agent-check answered"`))
				return
			}
			if n := answers(s) - start; n > rounds || time.Now().After(deadline) {
				t.Fatalf("%s: not after %d agent-check rounds of %s: states %+v (%v)\nagent's last answer: %s\nhaproxy:\n%s",
					what, n, s.name, states, err, s.agent.last(`msg="agent-check answered"`), hap.output())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// fetch sends n requests through HAProxy, each on a new connection,
	// and counts the answers per server.
	fetch := func(n int) map[string]int {
		t.Helper()
		cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
		got := map[string]int{}
		for range n {
			resp, err := cl.Get("http://" + front + "/")
			if err != nil {
				t.Fatalf("GET through haproxy: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got[strings.TrimSpace(string(b))]++
		}
		return got
	}

	s1, s2 := servers[0], servers[1]
	// Both idle: both up, weights set by their agents and close.
	waitFor("both up, idle weights close", s1, 30, func(st map[string]serverState) bool {
		a, b := st["s1"], st["s2"]
		return a.opState == 2 && b.opState == 2 && answers(s1) >= 3 && answers(s2) >= 3 &&
			a.uweight >= b.uweight-10 && b.uweight >= a.uweight-10
	})
	if got := fetch(10); got["s1"] == 0 || got["s2"] == 0 {
		t.Errorf("10 requests through HAProxy reached %v, want both servers", got)
	}

	// Hog s1's process: its agent measures the spinning thread and its
	// weight falls below s2's.
	resp, err := http.Post("http://"+s1.addr+"/hog", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor("hogged s1 below idle s2", s1, 30, func(st map[string]serverState) bool {
		return st["s1"].uweight < st["s2"].uweight-5
	})
	hogged, idle := states["s1"].uweight, states["s2"].uweight

	// Drain s2 with its drain file: HAProxy puts it in DRAIN and sends it
	// nothing new.
	if err := os.WriteFile(s2.drain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("s2 drained", s2, 20, func(st map[string]serverState) bool {
		return st["s2"].adminState&drainFlag != 0
	})
	if stat, err := haproxyCommand(sock, "show stat be 4 -1"); err != nil || !strings.Contains(stat, ",s2,") {
		t.Errorf("show stat: %v %q", err, stat)
	} else if !strings.HasPrefix(statusOf(stat, "s2"), "DRAIN") { // "DRAIN (agent)" in 2.6
		t.Errorf("show stat does not say DRAIN for s2:\n%s", stat)
	}
	if got := fetch(10); got["s1"] != 10 {
		t.Errorf("10 requests with s2 drained reached %v, want all on s1", got)
	}

	// Remove the file: the agent says "ready" and s2 is back.
	if err := os.Remove(s2.drain); err != nil {
		t.Fatal(err)
	}
	waitFor("s2 ready again", s2, 20, func(st map[string]serverState) bool {
		return st["s2"].adminState&drainFlag == 0 && st["s2"].uweight > 0
	})
	if got := fetch(10); got["s2"] == 0 {
		t.Errorf("10 requests after the drain reached %v, want some on s2", got)
	}
	t.Logf("weights under the hog: s1 (hogged) %d, s2 (idle) %d", hogged, idle)
}

// statusOf returns the status column of server srv in a "show stat" CSV
// reply, or "".
func statusOf(csv, srv string) string {
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if len(lines) < 2 {
		return ""
	}
	hdr := strings.Split(strings.TrimPrefix(lines[0], "# "), ",")
	col := -1
	for i, h := range hdr {
		if h == "status" {
			col = i
		}
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) > 1 && f[1] == srv && col >= 0 && col < len(f) {
			return f[col]
		}
	}
	return ""
}

func TestAgentCheckFlagsRefused(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-agent-check-listen", "nowhere"}, "-agent-check-listen"},
		{[]string{"-agent-check-listen", "127.0.0.1:70000"}, "bad port"},
		{[]string{"-drain-file", "/run/drain"}, "-drain-file needs -agent-check-listen"},
		{[]string{"-listen", "127.0.0.1:0", "-agent-check-listen", "127.0.0.1:0", "-drain-file", "drain"}, "not an absolute path"},
		{[]string{"-listen", "127.0.0.1:0", "-agent-check-listen", "127.0.0.1:0", "-drain-file", "/no/such/dir/drain"}, "no such file or directory"},
	} {
		var stderr strings.Builder
		code := run(t.Context(), tt.args, io.Discard, &stderr, nil)
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}
