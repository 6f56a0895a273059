package main

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is one process the demo started.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *tailBuffer // its stdout and stderr, the last few KiB

	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done is closed
}

// exited reports whether the process has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// describe is the child's exit and last output, for error messages.
func (c *child) describe() string {
	var b strings.Builder
	if c.exited() {
		fmt.Fprintf(&b, "%s exited (%v)", c.name, c.waitErr)
	} else {
		fmt.Fprintf(&b, "%s (pid %d) still running", c.name, c.cmd.Process.Pid)
	}
	if out := strings.TrimSpace(c.out.String()); out != "" {
		fmt.Fprintf(&b, "; its output:\n%s", out)
	}
	return b.String()
}

// children starts processes and stops them all. Every child runs in its own
// process group, so a Ctrl-C on the terminal reaches only the demo, which
// then stops them in order; and each gets SIGKILL from the kernel if the
// demo dies without cleaning up (Pdeathsig), so none is left behind.
type children struct {
	mu   sync.Mutex
	list []*child
}

// start starts path with args. Its output is kept for error messages.
func (cs *children) start(name, path string, args, extraEnv []string) (*child, error) {
	cmd := exec.Command(path, args...)
	out := &tailBuffer{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	if len(extraEnv) > 0 {
		cmd.Env = append(cmd.Environ(), extraEnv...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	cs.mu.Lock()
	cs.list = append(cs.list, c)
	cs.mu.Unlock()
	return c, nil
}

// stopAll sends SIGTERM to every child's process group, waits up to grace
// for them to exit, then kills what is left, and waits for every child.
func (cs *children) stopAll(grace time.Duration) {
	cs.mu.Lock()
	list := cs.list
	cs.list = nil
	cs.mu.Unlock()
	for _, c := range list {
		if !c.exited() {
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for _, c := range list {
		select {
		case <-c.done:
		case <-deadline.C:
			// Past the grace period: kill every group still there.
			for _, k := range list {
				if !k.exited() {
					_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
				}
			}
			<-c.done
		}
	}
	for _, c := range list {
		<-c.done
	}
}

// tailBuffer is an io.Writer keeping the last max bytes written.
type tailBuffer struct {
	max int

	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// freeLoopbackAddr returns a 127.0.0.1 address with a port that was free a
// moment ago. Another program may take it before the child binds it; the
// callers then see the child exit and try another port.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port on 127.0.0.1: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("find a free port on 127.0.0.1: %w", err)
	}
	return addr, nil
}

// errChildExited marks a child that exited while the demo waited for it.
var errChildExited = errors.New("exited before it was ready")
