// Package control is the control protocol between lvs-monitor and lvsctl:
// HTTP/1.1 with JSON bodies over a unix socket.
//
// # The socket
//
// lvs-monitor listens on control_socket (default
// /run/lvs-monitor/control.sock, in the systemd RuntimeDirectory). Listen
// creates it with mode 0600, owned by the daemon's user (root), so only
// root can talk to it; it also refuses a peer whose uid (SO_PEERCRED) is
// neither 0 nor the daemon's own. Listen refuses a directory that is
// writable by everyone (anyone could replace the socket) and any existing
// file at the path that is not a socket. A socket left behind by a daemon
// that died is removed; a socket that still answers is refused (another
// lvs-monitor is running). The socket is created in a private temporary
// directory, given its mode, and renamed into place, so it is never
// reachable with a wider mode.
//
// # Requests
//
//	GET  /v1/status                                → Status
//	GET  /v1/explain?service=SVC&server=RIP:PORT   → Explanation
//	GET  /v1/connections?service=SVC&server=RIP:PORT → Connections
//	POST /v1/drain    {"service": SVC, "server": RIP:PORT} → Ack
//	POST /v1/undrain  {"service": SVC, "server": RIP:PORT} → Ack
//	POST /v1/reload                                → Reload
//
// SVC is a virtual service as in the configuration and in ipvsadm:
// "VIP:PORT/PROTO" (tcp, udp, sctp; IPv6 in brackets) or "fwmark:N".
// Every reply is JSON. A failed request answers with a 4xx or 5xx status
// and an Error body; its Code says what kind of failure it was
// (CodeBadRequest, CodeNotManaged, CodeNotFound, CodeConflict,
// CodeReloadFailed, CodeInternal). The types in this package are the wire
// format; a field is only ever added, never renamed or retyped, and
// Version in Status says which revision a daemon speaks.
//
// # Server and client
//
// Server serves the protocol for anything that implements Monitor —
// *monitor.Monitor does — plus a reload function that re-reads the
// configuration file. Client is what lvsctl uses.
package control
