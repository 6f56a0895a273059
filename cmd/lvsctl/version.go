package main

import (
	"context"
	"flag"
	"fmt"

	"lvs-feedback/control/api"
	"lvs-feedback/internal/buildinfo"
	"lvs-feedback/internal/cmdline"
)

// version is `lvsctl version`: lvsctl's build, then the running
// lvs-monitor's from its status reply.
func (c *cli) version(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(pos) > 0 {
		return c.commandUsage("version", "no arguments, got %q", pos)
	}
	cmdline.PrintVersion(c.stdout, "lvsctl")
	st, err := c.client().Status(ctx)
	if err != nil {
		fmt.Fprintln(c.stdout, "lvs-monitor unreachable: its version is unknown")
		return c.fail(err)
	}
	if st.Build == nil {
		fmt.Fprintf(c.stdout, "lvs-monitor unknown: it predates the build field of its status (protocol %d)\n", st.Version)
		return exitOK
	}
	fmt.Fprintf(c.stdout, "lvs-monitor %s\n", buildOf(*st.Build))
	return exitOK
}

// buildOf is the daemon's build as package buildinfo writes it, so that
// both lines of lvsctl version read alike.
func buildOf(b api.Build) buildinfo.Info {
	return buildinfo.Info{Version: b.Version, Revision: b.Revision, Time: b.Time, Modified: b.Modified, GoVersion: b.GoVersion}
}
