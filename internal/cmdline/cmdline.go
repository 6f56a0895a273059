// Package cmdline parses the flags of every lvs-feedback command the same
// way:
//
//   - -h or -help prints the usage on stdout and exits 0: help was asked
//     for, and it can be piped into a pager;
//   - a flag that is not defined or has a bad value prints the error and
//     the usage on stderr and exits 2;
//   - -version prints the command's name and its build information
//     (package buildinfo) on stdout and exits 0.
//
// It imports the standard library only: lvsctl links it.
package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"lvs-feedback/internal/buildinfo"
)

// Exit statuses of a command line that ends the program.
const (
	ExitOK    = 0
	ExitUsage = 2
)

// Parse adds -version to fs and parses args. When the command line ends the
// program (help, -version, a flag mistake) it has printed what it must and
// done is true, with the exit status in code; otherwise the program goes
// on with fs parsed.
//
// fs.Usage must write to fs.Output(), as the flag package's default does:
// Parse points that at stdout or stderr before calling it. fs must come
// from flag.NewFlagSet.
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	version := fs.Bool("version", false, "print the version and exit")
	usage := fs.Usage
	// The flag package prints its errors and the usage to one writer;
	// silence it and choose the writer here.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		usage()
		return ExitOK, true
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		fs.SetOutput(stderr)
		usage()
		return ExitUsage, true
	case *version:
		PrintVersion(stdout, fs.Name())
		return ExitOK, true
	}
	fs.SetOutput(stderr)
	fs.Usage = usage
	return ExitOK, false
}

// PrintVersion prints "NAME " and this binary's build information on one
// line.
func PrintVersion(w io.Writer, name string) {
	fmt.Fprintf(w, "%s %s\n", name, buildinfo.Read())
}
