package main

import (
	"os"
	"os/exec"
	"testing"
)

// The systemd units verify cleanly and meet their exposure targets
// (systemd/check.sh, also `make systemd-check`).
func TestSystemdUnits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both daemons and runs systemd-analyze (about 4 s)")
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed (make systemd-check installs it)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not in PATH: systemd/check.sh builds the binaries the units name")
	}
	cmd := exec.Command("../../systemd/check.sh")
	cmd.Env = append(os.Environ(), "GO="+goBin)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("systemd/check.sh: %v", err)
	}
}
