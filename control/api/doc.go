// Package api owns the wire format of lvs-monitor's control socket — the
// JSON bodies of its requests and replies, their error codes and the
// protocol version — and a Client for it. lvsctl is built on it; so can
// any other tool that talks to the socket.
//
// The protocol is HTTP/1.1 with JSON bodies over a unix socket
// (DefaultSocket unless control_socket says otherwise; only root may
// connect). The server side is package lvs-feedback/control.
//
// # Requests
//
//	GET  /v1/status                                  → Status
//	GET  /v1/explain?service=SVC&server=RIP:PORT     → Explanation
//	GET  /v1/connections?service=SVC&server=RIP:PORT → Connections
//	POST /v1/drain    {"service": SVC, "server": RIP:PORT} → Ack
//	POST /v1/undrain  {"service": SVC, "server": RIP:PORT} → Ack
//	POST /v1/reload                                  → Reload
//
// In a director pair, drain and undrain answer once the other director
// holds the change, or with Ack.LocalOnly set and the reason in its
// Message: allow twice the daemon's interval and a few seconds more.
//
// SVC is a virtual service as in the configuration and in ipvsadm:
// "VIP:PORT/PROTO" (tcp, udp, sctp; IPv6 in brackets) or "fwmark:N".
// Every reply is JSON. A failed request answers with a 4xx or 5xx status
// and an Error body; its Code says what kind of failure it was
// (CodeBadRequest, CodeNotManaged, CodeNotFound, CodeConflict,
// CodeReloadFailed, CodeUnavailable, CodeInternal). The types in this
// package are the wire format; a field is only ever added, never renamed
// or retyped, and Version in Status says which revision a daemon speaks
// (ProtocolVersion).
//
// # What this package must not do
//
// It imports the standard library only: nothing of the daemon (monitor,
// ipvs, scheduler, agent, control) and none of the libraries they bring
// (netlink, moby/ipvs, Prometheus). A client of the socket then links no
// kernel or metrics code; TestStandardLibraryOnly holds it to that. What
// needs the daemon's types — turning a monitor.Status into a Status — is
// the server's, in package control.
package api
