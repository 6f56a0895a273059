package cmdline

import (
	"bytes"
	"flag"
	"runtime"
	"strings"
	"testing"

	"lvs-feedback/internal/buildinfo"
)

func TestParse(t *testing.T) {
	newFS := func() (*flag.FlagSet, *int) {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		n := fs.Int("n", 3, "how many")
		return fs, n
	}
	for _, tt := range []struct {
		name     string
		args     []string
		code     int
		done     bool
		stdout   []string // each must appear
		stderr   []string
		quietOut bool // stdout must be empty
		quietErr bool // stderr must be empty
		wantN    int  // -n after parsing; -1: not looked at
	}{
		{name: "-h", args: []string{"-h"}, code: 0, done: true, stdout: []string{"Usage of prog:", "-n int", "how many", "-version"}, quietErr: true, wantN: 3},
		{name: "-help", args: []string{"-help"}, code: 0, done: true, stdout: []string{"-n int"}, quietErr: true, wantN: 3},
		{name: "--help after a flag", args: []string{"-n", "4", "--help"}, code: 0, done: true, stdout: []string{"-n int"}, quietErr: true, wantN: 4},
		{name: "undefined flag", args: []string{"-x"}, code: 2, done: true, stderr: []string{"prog: flag provided but not defined: -x", "Usage of prog:", "-n int"}, quietOut: true, wantN: 3},
		{name: "bad value", args: []string{"-n", "many"}, code: 2, done: true, stderr: []string{`prog: invalid value "many" for flag -n`, "-n int"}, quietOut: true, wantN: -1},
		{name: "-version", args: []string{"-version"}, code: 0, done: true, stdout: []string{"prog " + buildinfo.Read().String() + "\n", " " + runtime.Version() + "\n"}, quietErr: true, wantN: 3},
		{name: "flags", args: []string{"-n", "5", "rest"}, code: 0, done: false, quietOut: true, quietErr: true, wantN: 5},
	} {
		fs, n := newFS()
		var stdout, stderr bytes.Buffer
		code, done := Parse(fs, tt.args, &stdout, &stderr)
		if code != tt.code || done != tt.done || (tt.wantN >= 0 && *n != tt.wantN) {
			t.Errorf("%s: code %d done %v n %d, want %d %v %d", tt.name, code, done, *n, tt.code, tt.done, tt.wantN)
		}
		for _, w := range tt.stdout {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%s: stdout %q lacks %q", tt.name, stdout.String(), w)
			}
		}
		for _, w := range tt.stderr {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr %q lacks %q", tt.name, stderr.String(), w)
			}
		}
		if tt.quietOut && stdout.Len() > 0 {
			t.Errorf("%s: stdout %q, want nothing", tt.name, stdout.String())
		}
		if tt.quietErr && stderr.Len() > 0 {
			t.Errorf("%s: stderr %q, want nothing", tt.name, stderr.String())
		}
	}
}

// TestParseKeepsCustomUsage: a command's own usage is printed to the
// writer Parse chooses, and stays the FlagSet's usage afterwards, on
// stderr, for the command's own mistakes.
func TestParseKeepsCustomUsage(t *testing.T) {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.Usage = func() { fs.Output().Write([]byte("usage: prog FILE\n")) }
	var stdout, stderr bytes.Buffer
	if code, done := Parse(fs, []string{"-h"}, &stdout, &stderr); code != 0 || !done || stdout.String() != "usage: prog FILE\n" || stderr.Len() > 0 {
		t.Errorf("-h: %d %v stdout %q stderr %q", code, done, stdout.String(), stderr.String())
	}
	fs = flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.Usage = func() { fs.Output().Write([]byte("usage: prog FILE\n")) }
	stdout.Reset()
	if _, done := Parse(fs, nil, &stdout, &stderr); done {
		t.Fatal("no arguments ended the program")
	}
	fs.Usage()
	if stderr.String() != "usage: prog FILE\n" || stdout.Len() > 0 {
		t.Errorf("usage after Parse: stdout %q stderr %q, want it on stderr", stdout.String(), stderr.String())
	}
}
