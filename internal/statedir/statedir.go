// Package statedir owns how lvs-monitor reaches its state directory
// (state_dir): the directory must be private — owned by the daemon's user
// or root, writable by nobody else, and so are the directories above it,
// unless sticky — and the files the daemon appends to are opened relative
// to the checked directory's descriptor, never through a symbolic link
// and never through a second hard link.
//
// Whoever can write in the state directory can plant a link where the
// daemon writes, and the daemon (root) would write through it; checking
// the directory at start closes that, and the descriptor keeps the check
// true if the path is later swapped. A sticky directory such as /tmp is
// refused as a state directory: it is writable by everyone.
package statedir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Dir is an open, checked state directory.
type Dir struct {
	path string
	f    *os.File
}

// Check reports why the directory at path is not a private state
// directory, or nil. The error names the path and says what to change.
func Check(path string) error {
	d, err := Open(path)
	if err != nil {
		return err
	}
	return d.Close()
}

// Open opens the directory at path and checks it (see Check). Symbolic
// links in path are followed (systemd's DynamicUser= makes
// /var/lib/NAME one), and every directory of the resolved path is checked.
func Open(path string) (*Dir, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkPrivate(path, fi)
	}
	if err == nil {
		err = checkAbove(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Dir{path: path, f: f}, nil
}

// checkPrivate refuses a state directory another user can write or owns.
func checkPrivate(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("state directory %s: no owner to check", path)
	}
	mode := fi.Mode()
	switch {
	case mode&0o002 != 0:
		return fmt.Errorf("state directory %s is writable by others (mode %s): refusing it, anyone could plant a link where lvs-monitor writes; use a private directory (chmod 0700 %s; systemd's StateDirectory= makes one)",
			path, octal(mode), path)
	case mode&0o020 != 0:
		return fmt.Errorf("state directory %s is writable by its group (mode %s): refusing it, the group could plant a link where lvs-monitor writes; chmod 0700 %s",
			path, octal(mode), path)
	case int(st.Uid) != os.Geteuid() && st.Uid != 0:
		return fmt.Errorf("state directory %s is owned by uid %d, not by this process's user (uid %d) or root: refusing it, its owner could plant a link where lvs-monitor writes",
			path, st.Uid, os.Geteuid())
	}
	return nil
}

// checkAbove refuses a state directory whose parent (or any directory
// above) another user could write without the sticky bit: they could
// rename the state directory and put one of theirs in its place.
func checkAbove(path string, opened fs.FileInfo) error {
	real, err := filepath.EvalSymlinks(path)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if fi, err := os.Stat(real); err != nil || !os.SameFile(fi, opened) {
		return fmt.Errorf("state directory %s: changed while it was checked (now %s): refusing it", path, real)
	}
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		fi, err := os.Lstat(dir)
		if err != nil {
			return fmt.Errorf("state directory %s: %w", path, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode()
		switch {
		case !ok:
			return fmt.Errorf("state directory %s: no owner to check for %s", path, dir)
		case mode&0o022 != 0 && mode&fs.ModeSticky == 0:
			return fmt.Errorf("state directory %s: %s above it is writable by others than its owner (mode %s): refusing it, they could replace the state directory; chmod go-w %s",
				path, dir, octal(mode), dir)
		case int(st.Uid) != os.Geteuid() && st.Uid != 0:
			return fmt.Errorf("state directory %s: %s above it is owned by uid %d, not by this process's user (uid %d) or root: refusing it, its owner could replace the state directory",
				path, dir, st.Uid, os.Geteuid())
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// octal formats a mode as chmod reads it: 0700, 1777.
func octal(m fs.FileMode) string {
	v := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	return fmt.Sprintf("%04o", v)
}

// Path is the directory's path as given to Open.
func (d *Dir) Path() string { return d.path }

// Join is the path of name in the directory, for messages.
func (d *Dir) Join(name string) string { return filepath.Join(d.path, name) }

// OpenFile opens name, a file directly in the directory, relative to the
// directory's descriptor (flag and perm as os.OpenFile's), without
// following a symbolic link there. It refuses anything but a regular file
// with one link: a hard link planted there would be written through too.
func (d *Dir) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	var fd int
	err := d.at(func(dirfd int) (err error) {
		for {
			fd, err = unix.Openat(dirfd, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
			if err != unix.EINTR {
				return err
			}
		}
	})
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: refusing to follow it (whoever can put a link in %s can redirect lvs-monitor's writes)", d.Join(name), d.path)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.Join(name), Err: err}
	}
	f := os.NewFile(uintptr(fd), d.Join(name))
	fi, err := f.Stat()
	if err == nil {
		switch st, _ := fi.Sys().(*syscall.Stat_t); {
		case !fi.Mode().IsRegular():
			err = fmt.Errorf("%s is not a regular file (%s): refusing it", d.Join(name), fi.Mode().Type())
		case st != nil && st.Nlink > 1:
			err = fmt.Errorf("%s has %d links: refusing to write through a hard link; remove it", d.Join(name), st.Nlink)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Rename renames from to to within the directory (rename(2): a link at
// either name is renamed or replaced, never followed).
func (d *Dir) Rename(from, to string) error {
	if err := errors.Join(checkName(from), checkName(to)); err != nil {
		return err
	}
	err := d.at(func(dirfd int) error { return unix.Renameat(dirfd, from, dirfd, to) })
	if err != nil {
		return &os.LinkError{Op: "rename", Old: d.Join(from), New: d.Join(to), Err: err}
	}
	return nil
}

// Remove removes the file name from the directory (a link, not its
// target). A missing file is an error wrapping fs.ErrNotExist.
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	err := d.at(func(dirfd int) error { return unix.Unlinkat(dirfd, name, 0) })
	if err != nil {
		return &fs.PathError{Op: "remove", Path: d.Join(name), Err: err}
	}
	return nil
}

// Close closes the directory.
func (d *Dir) Close() error {
	if err := d.f.Close(); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	return nil
}

// at runs fn with the directory's descriptor.
func (d *Dir) at(fn func(dirfd int) error) error {
	rc, err := d.f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// checkName refuses a name that is not one entry of the directory.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("state directory: %q is not a file name", name)
	}
	return nil
}

// ReadFile reads the file at path, refusing a symbolic link there: state
// must come from the file the daemon wrote, not from wherever a planted
// link points. A missing file is fs.ErrNotExist, as for os.ReadFile.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: refusing to follow it", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
