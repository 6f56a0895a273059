package control

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// SocketMode is the mode of the control socket: owner (root) only.
const SocketMode fs.FileMode = 0o600

// listenSocket creates the control socket at path (see the package
// documentation for the rules) and returns its listener. The caller
// removes path when done.
func listenSocket(path string, log *slog.Logger) (*net.UnixListener, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("control socket %q: must be an absolute path", path)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("control socket directory: %w (systemd creates it with RuntimeDirectory=lvs-monitor)", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("control socket directory %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return nil, fmt.Errorf("control socket directory %s is writable by everyone (mode %04o): refusing, anyone could replace the socket; use a private directory such as /run/lvs-monitor",
			dir, fi.Mode().Perm())
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("control socket %s: a %s is in the way (not a socket): refusing to remove it", path, kind(fi.Mode()))
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("control socket %s: another process is serving it (is lvs-monitor already running?)", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove stale control socket: %w", err)
		}
		log.Info("removed a stale control socket", "path", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("control socket: %w", err)
	}

	// Create the socket where nobody else can reach it, set its mode, then
	// move it into place: it is never reachable with the umask's mode.
	tmp, err := os.MkdirTemp(dir, ".lvsctl-")
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	defer os.RemoveAll(tmp)
	tmpPath := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmpPath, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(false) // it is renamed; the Server removes path
	if err := os.Chmod(tmpPath, SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.Type()&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsRegular():
		return "regular file"
	}
	return "file of mode " + m.String()
}

// peerListener accepts only peers whose uid is 0 or the daemon's own: the
// socket's mode already says so; this holds even if the mode is changed.
type peerListener struct {
	*net.UnixListener
	uid int
	log *slog.Logger
}

func (l peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && (uid == 0 || uid == l.uid) {
			return c, nil
		}
		l.log.Warn("control socket: refused a connection", "peer_uid", uid, "error", err)
		c.Close()
	}
}

func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if credErr != nil {
		return -1, credErr
	}
	return int(cred.Uid), nil
}
