// Package control is the server side of lvs-monitor's control socket:
// it serves the protocol whose wire format and client are in
// lvs-feedback/control/api (HTTP/1.1 with JSON bodies over a unix socket;
// the requests are listed there), converting what the monitor knows into
// those types.
//
// # The socket
//
// lvs-monitor listens on control_socket (default
// /run/lvs-monitor/control.sock, api.DefaultSocket, in the systemd
// RuntimeDirectory). Listen creates it with mode 0600, owned by the
// daemon's user (root), so only root can talk to it; it also refuses a
// peer whose uid (SO_PEERCRED) is neither 0 nor the daemon's own. Listen
// refuses a directory that is writable by everyone (anyone could replace
// the socket) and any existing file at the path that is not a socket. A
// socket left behind by a daemon that died is removed; a socket that still
// answers is refused (another lvs-monitor is running). The socket is
// created in a private temporary directory, given its mode, and renamed
// into place, so it is never reachable with a wider mode.
//
// # Server
//
// Server serves the protocol for anything that implements Monitor —
// *monitor.Monitor does — plus a reload function that re-reads the
// configuration file (FileReloader). Clients, lvsctl among them, use
// api.Client, which does not link this package or the daemon.
package control
