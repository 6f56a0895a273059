package main

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lvs-feedback/control/controltest"
	"lvs-feedback/internal/buildinfo"
)

// TestEveryCommandHasHelp: for every entry of the command table, `lvsctl
// NAME -h`, `lvsctl NAME --help` and `lvsctl help NAME` print the same
// help on stdout alone and exit 0 without reaching for lvs-monitor (the
// socket does not exist); the help starts with the command's usage line
// and ends with an Example whose lines run the command. lvsctl -h lists
// every command.
func TestEveryCommandHasHelp(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.sock")
	code, usage, errOut := lvsctl(t, nil, "-socket", none, "-h")
	if code != exitOK || errOut != "" {
		t.Fatalf("lvsctl -h: exit %d, stderr %q", code, errOut)
	}
	if c, out, _ := lvsctl(t, nil, "help"); c != exitOK || out != usage {
		t.Errorf("lvsctl help: exit %d, and not the text of lvsctl -h:\n%s", c, out)
	}
	cmds := commands()
	if len(cmds) < 8 {
		t.Fatalf("only %d commands", len(cmds))
	}
	for _, cmd := range cmds {
		if !strings.Contains(usage, "\n  "+strings.TrimSpace(cmd.name+" "+cmd.args)+"  ") {
			t.Errorf("lvsctl -h does not list %q:\n%s", cmd.synopsis(), usage)
		}
		var helps []string
		for _, args := range [][]string{{cmd.name, "-h"}, {cmd.name, "--help"}, {"help", cmd.name}} {
			code, out, errOut := lvsctl(t, nil, append([]string{"-socket", none}, args...)...)
			if code != exitOK || errOut != "" {
				t.Errorf("lvsctl %s: exit %d, stderr %q; want 0 and nothing on stderr", strings.Join(args, " "), code, errOut)
			}
			helps = append(helps, out)
		}
		if helps[0] != helps[1] || helps[0] != helps[2] {
			t.Errorf("%s: -h, --help and help %s differ:\n%s\n---\n%s\n---\n%s", cmd.name, cmd.name, helps[0], helps[1], helps[2])
		}
		h := helps[0]
		if !strings.HasPrefix(h, "usage: "+cmd.synopsis()+"\n") {
			t.Errorf("%s help does not start with its usage line:\n%s", cmd.name, h)
		}
		_, example, ok := strings.Cut(h, "\nExample:\n")
		if !ok || strings.TrimSpace(example) == "" {
			t.Errorf("%s help has no Example:\n%s", cmd.name, h)
			continue
		}
		for line := range strings.Lines(example) {
			if !strings.HasPrefix(line, "  lvsctl "+cmd.name) {
				t.Errorf("%s example %q does not run lvsctl %s", cmd.name, line, cmd.name)
			}
		}
	}
	// Flags shown are the command's own; the global ones are named once.
	_, h, _ := lvsctl(t, nil, "drain", "-h")
	contains(t, "drain help", h, "-wait", "-timeout duration", "(default 10m0s)", "global flags")
	if strings.Contains(h, "-request-timeout duration") {
		t.Errorf("drain help lists the global flags as its own:\n%s", h)
	}
}

func TestHelpMistakes(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", "-x"}, []string{"lvsctl status: flag provided but not defined: -x", "usage: lvsctl status [-o table|json]", "Example:"}},
		{[]string{"drain", "--timeout", "soon", svc, rsA}, []string{"lvsctl drain: invalid value \"soon\" for flag -timeout", "usage: lvsctl drain SERVICE SERVER"}},
		{[]string{"reload", "now"}, []string{"lvsctl: reload: no arguments", "usage: lvsctl reload", "e.g. lvsctl reload", "lvsctl help reload"}},
		{[]string{"help", "frobnicate"}, []string{`unknown command "frobnicate"`, "commands:"}},
		{[]string{"help", "status", "drain"}, []string{"one command at most"}},
		{[]string{"version", "extra"}, []string{"lvsctl: version: no arguments"}},
		{[]string{"-x"}, []string{"flag provided but not defined: -x", "commands:"}},
	} {
		code, out, errOut := lvsctl(t, nil, append([]string{"-socket", filepath.Join(t.TempDir(), "none.sock")}, tt.args...)...)
		if code != exitUsage || out != "" {
			t.Errorf("lvsctl %s: exit %d, stdout %q; want %d and nothing on stdout", strings.Join(tt.args, " "), code, out, exitUsage)
		}
		contains(t, "lvsctl "+strings.Join(tt.args, " "), errOut, tt.want...)
	}
}

// TestVersion: lvsctl version prints lvsctl's build and the daemon's,
// asked over the socket (here the same binary, so the same build).
func TestVersion(t *testing.T) {
	r := controltest.New(t, "")
	own := buildinfo.Read().String()
	code, out, errOut := lvsctl(t, r, "version")
	if want := "lvsctl " + own + "\nlvs-monitor " + own + "\n"; code != exitOK || out != want || errOut != "" {
		t.Errorf("version: exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, want)
	}
	if code, out, _ := lvsctl(t, nil, "-version"); code != exitOK || out != "lvsctl "+own+"\n" {
		t.Errorf("-version: exit %d, %q", code, out)
	}

	// Nobody listening: lvsctl's version, then the daemon is unreachable.
	code, out, errOut = lvsctl(t, nil, "-socket", filepath.Join(t.TempDir(), "none.sock"), "version")
	if code != exitUnreachable || out != "lvsctl "+own+"\nlvs-monitor unreachable: its version is unknown\n" || !strings.Contains(errOut, "cannot reach lvs-monitor") {
		t.Errorf("version, no daemon: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// A daemon older than the build field answers without it.
	sock := filepath.Join(t.TempDir(), "old.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"version":1,"now":"2026-12-02T00:00:00Z","config":{},"reload":{"ok":true},"services":[]}`))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	code, out, _ = lvsctl(t, nil, "-socket", sock, "version")
	if want := "lvsctl " + own + "\nlvs-monitor unknown: it predates the build field of its status (protocol 1)\n"; code != exitOK || out != want {
		t.Errorf("version, old daemon: exit %d, stdout %q, want %q", code, out, want)
	}
}
