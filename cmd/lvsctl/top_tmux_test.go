package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"lvs-feedback/control/api"
	"lvs-feedback/control/controltest"
)

// tmuxSession is a tmux server of the test's own (its own socket, no
// user configuration) running one command in a 160×40 pane that stays
// after the command exits.
type tmuxSession struct {
	t    *testing.T
	tmux string
	sock string
}

func startTmux(t *testing.T, command ...string) *tmuxSession {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed (apt-get install -y --no-install-recommends tmux): lvsctl top is not driven in a terminal")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "tmux.conf")
	if err := os.WriteFile(conf, []byte("set -g remain-on-exit on\nset -g status off\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &tmuxSession{t: t, tmux: tmux, sock: filepath.Join(dir, "tmux.sock")}
	s.run("-f", conf, "new-session", "-d", "-x", "160", "-y", "40", strings.Join(command, " "))
	t.Cleanup(func() { exec.Command(tmux, "-S", s.sock, "kill-server").Run() })
	return s
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	cmd := exec.Command(s.tmux, append([]string{"-S", s.sock}, args...)...)
	cmd.Env = append(os.Environ(), "TMUX=") // not the tmux the test may run in
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (s *tmuxSession) capture() string { return s.run("capture-pane", "-p") }

// pane returns tmux's format variables of the pane (pane_dead, …).
func (s *tmuxSession) pane(format string) string {
	return strings.TrimSpace(s.run("display-message", "-p", format))
}

// TestTopInTerminal drives the built lvsctl top in a real terminal (tmux)
// against the rig cycling: it waits for frames of three further cycles,
// checks each server's weight/default and state columns and the service's
// summary, then quits with q and checks the terminal is given back.
func TestTopInTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lvsctl and runs it in tmux")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH to build lvsctl")
	}
	bin := filepath.Join(t.TempDir(), "lvsctl")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build lvsctl: %v\n%s", err, out)
	}

	r := controltest.New(t, "")
	// A lightly loaded: the LVS formula raises its weight each cycle. B
	// drained by the operator; C's probe fails: down at its second failure.
	r.Agents.Set(controltest.A, controltest.Load{CPU: 0.3, Memory: 0.3, Disk: 0.3, Processes: 0.3})
	r.Cycle()
	if _, err := api.NewClient(r.Socket, 10*time.Second).Drain(context.Background(), svc, rsB); err != nil {
		t.Fatal(err)
	}
	r.Prober.Down(controltest.C)
	ctx, cancel := context.WithCancel(context.Background())
	done := r.Loop(ctx, 300*time.Millisecond)
	defer func() { cancel(); <-done }()

	// After top, the shell says how it ended and whether the terminal is
	// back in canonical mode, and keeps the pane alive (a dead pane has no
	// cursor to check).
	s := startTmux(t, "sh", "-c", shellQuote("TZ=UTC "+bin+" -socket "+r.Socket+" top -refresh 100ms; echo exited $?; stty -a | grep -o -- '-*icanon'; exec sleep 600"))

	header := regexp.MustCompile(`(?m)^lvs-monitor top  frame (\d+)  cycle (\d\d):(\d\d):(\d\d) `)
	cycleOf := func(screen string) (frame, second int, ok bool) {
		m := header.FindStringSubmatch(screen)
		if m == nil {
			return 0, 0, false
		}
		frame, _ = strconv.Atoi(m[1])
		h, _ := strconv.Atoi(m[2])
		mi, _ := strconv.Atoi(m[3])
		sec, _ := strconv.Atoi(m[4])
		return frame, h*3600 + mi*60 + sec, true
	}
	// Count cycles, not seconds: wait for three cycles after the first
	// frame seen (the rig's clock moves one 1 s interval per cycle), with
	// a generous bound for a loaded machine.
	var screen string
	firstFrame, firstCycle := -1, -1
	deadline := time.Now().Add(90 * time.Second)
	for {
		screen = s.capture()
		if frame, cycle, ok := cycleOf(screen); ok {
			if firstCycle < 0 {
				firstFrame, firstCycle = frame, cycle
			}
			if cycle >= firstCycle+3 && frame >= firstFrame+3 && strings.Contains(screen, "1 down") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no three further cycles on the screen in 90 s (first frame %d, cycle %d); screen:\n%s", firstFrame, firstCycle, screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("screen:\n%s", screen)

	contains(t, "top screen", screen,
		svc+"  scheduler wrr  1 in rotation, 1 drained, 1 down; weights sum ",
		"SERVER            WEIGHT  STATE")
	rows := map[string][]string{}
	for _, l := range strings.Split(screen, "\n") {
		if f := strings.Fields(l); len(f) > 2 {
			rows[f[0]] = f
		}
	}
	a, b, c := rows[rsA], rows[rsB], rows[rsC]
	if a == nil || b == nil || c == nil {
		t.Fatalf("a server row is missing from the screen")
	}
	if w, def, ok := strings.Cut(a[1], "/"); !ok || def != "10" || atoi(w) <= 10 || a[2] != "active" {
		t.Errorf("row of A: %q, want a weight above its default 10, active", strings.Join(a, " "))
	}
	if b[1] != "0/10" || strings.Join(b[2:5], " ") != "drained by operator" {
		t.Errorf("row of B: %q, want 0/10 drained by operator", strings.Join(b, " "))
	}
	if c[1] != "0/10" || c[2] != "down" || !strings.Contains(strings.Join(c, " "), "fail") {
		t.Errorf("row of C: %q, want 0/10 down, its probe failing", strings.Join(c, " "))
	}
	for _, l := range strings.Split(screen, "\n") {
		if len([]rune(l)) > 160 {
			t.Errorf("line wider than the terminal: %q", l)
		}
	}

	// q quits; the terminal leaves the alternate screen and shows the
	// cursor again.
	s.run("send-keys", "q")
	var after string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if after = s.capture(); strings.Contains(after, "icanon") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("top still running 30 s after q; screen:\n%s", after)
		}
	}
	t.Logf("after q:\n%s", after)
	if lines := strings.Fields(after); strings.Join(lines, " ") != "exited 0 icanon" {
		t.Errorf("after q the terminal shows %q, want top's frame gone, exit status 0 and canonical mode (icanon) back", strings.Join(lines, " "))
	}
	if got := s.pane("#{alternate_on} #{cursor_flag}"); got != "0 1" {
		t.Errorf("after q: alternate screen, cursor shown = %q, want \"0 1\"", got)
	}
}

// shellQuote quotes s as one sh word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
