package ipvs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"
)

// ConnKey names one virtual service's destination in the kernel's
// connection table: the protocol, the virtual address and port the client
// reached, and the real server. A firewall-mark service has no virtual
// address of its own: its connections carry the address each packet was
// sent to.
type ConnKey struct {
	Protocol Protocol
	VAddr    netip.AddrPort
	Dest     netip.AddrPort
}

// ConnCounts is what one destination's TCP entries in the kernel's
// connection table show at a moment. Under NAT the director sees both
// directions, so a connection the server never answered stays in a
// handshake state, and one it refused is reset (CLOSE) before it was ever
// established.
type ConnCounts struct {
	// Handshakes: entries still in the handshake (SYN_RECV, SYN_SENT,
	// SYNACK), which the kernel counts as active.
	Handshakes int
	// Established: entries in ESTABLISHED, whatever their age.
	Established int
	// Progressed: entries past the handshake (ESTABLISHED, FIN_WAIT,
	// TIME_WAIT, CLOSE_WAIT, LAST_ACK) that saw a packet within the last
	// second: the server is exchanging data with somebody.
	Progressed int
	// Resets: entries in CLOSE (a reset) that saw their last packet within
	// the last two seconds.
	Resets int
}

// ConnTimeouts are the kernel's TCP state timeouts that ipvsadm --set can
// change (ESTABLISHED and FIN_WAIT); the others are fixed. An entry's
// remaining time is its state's timeout minus the time since its last
// packet, which is how ConnCounts tells a fresh entry from an old one.
type ConnTimeouts struct {
	TCP, TCPFin time.Duration
}

// ConnReader is implemented by tables that can read the kernel's
// connection table (Kernel; Mem for tests). lvs-monitor reads it only for
// destinations whose counters already look wrong: the table holds every
// connection of the director.
type ConnReader interface {
	// ConnStates counts the TCP entries of the destinations in want
	// (keyed by real server address), per ConnKey.
	ConnStates(want map[netip.AddrPort]struct{}) (map[ConnKey]ConnCounts, error)
}

// tcpTimeout is a TCP state's timeout in seconds (ip_vs_proto_tcp.c's
// tcp_timeouts), with ESTABLISHED and FIN_WAIT from t; 0 for a state whose
// entries are not counted.
func tcpTimeout(state []byte, t ConnTimeouts) (secs int64, kind int) {
	switch string(state) {
	case "SYN_RECV", "SYN_SENT", "SYNACK":
		return 0, kindHandshake
	case "ESTABLISHED":
		return int64(t.TCP / time.Second), kindEstablished
	case "FIN_WAIT":
		return int64(t.TCPFin / time.Second), kindProgress
	case "TIME_WAIT":
		return 120, kindProgress
	case "CLOSE_WAIT":
		return 60, kindProgress
	case "LAST_ACK":
		return 30, kindProgress
	case "CLOSE":
		return 10, kindReset
	}
	return 0, kindNone
}

const (
	kindNone = iota
	kindHandshake
	kindEstablished
	kindProgress
	kindReset
)

// maxConnLine bounds one line of the connection table (an IPv6 entry with
// a persistence engine's data is under 200 bytes).
const maxConnLine = 4096

// ParseConns reads the kernel's connection table in the text of
// /proc/net/ip_vs_conn (IPv4 addresses as 8 hex digits, IPv6 ones as the
// kernel's %pI6, ports as 4 hex digits, the remaining seconds last but the
// persistence engine's columns) and counts the TCP entries of the
// destinations in want. A line it cannot read is an error: a kernel that
// changed the format must not be read as an empty table.
func ParseConns(r io.Reader, t ConnTimeouts, want map[netip.AddrPort]struct{}) (map[ConnKey]ConnCounts, error) {
	out := map[ConnKey]ConnCounts{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxConnLine)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if line == 1 {
			if !bytes.HasPrefix(b, []byte("Pro ")) {
				return nil, fmt.Errorf("connection table: header %q, want \"Pro FromIP ...\"", b)
			}
			continue
		}
		if !bytes.HasPrefix(b, []byte("TCP ")) {
			continue // UDP, SCTP, persistence templates
		}
		var f [9][]byte
		n := fields(b, f[:])
		if n < 9 {
			return nil, fmt.Errorf("connection table line %d: %d fields, want at least 9", line, n)
		}
		dest, err := connAddr(f[5], f[6])
		if err != nil {
			return nil, fmt.Errorf("connection table line %d: destination: %w", line, err)
		}
		if _, ok := want[dest]; !ok {
			continue
		}
		timeout, kind := tcpTimeout(f[7], t)
		if kind == kindNone {
			continue
		}
		left, err := strconv.ParseInt(string(f[8]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("connection table line %d: expiry %q: %w", line, f[8], err)
		}
		vaddr, err := connAddr(f[3], f[4])
		if err != nil {
			return nil, fmt.Errorf("connection table line %d: virtual address: %w", line, err)
		}
		k := ConnKey{Protocol: TCP, VAddr: vaddr, Dest: dest}
		c := out[k]
		// The kernel prints whole seconds left, rounded down: an entry
		// touched within the last second shows its timeout less one
		// (or the timeout itself, read in the same jiffy).
		fresh := timeout > 0 && left >= timeout-1
		switch kind {
		case kindHandshake:
			c.Handshakes++
		case kindEstablished:
			c.Established++
			if fresh {
				c.Progressed++
			}
		case kindProgress:
			if fresh {
				c.Progressed++
			}
		case kindReset:
			if left >= timeout-2 {
				c.Resets++
			}
		}
		out[k] = c
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("connection table: %w", err)
	}
	return out, nil
}

// fields splits b at spaces into f, as many as fit, without allocating: a
// busy director's table has a line per connection. It returns how many.
func fields(b []byte, f [][]byte) int {
	n := 0
	for n < len(f) {
		for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
			b = b[1:]
		}
		if len(b) == 0 {
			break
		}
		end := 0
		for end < len(b) && b[end] != ' ' && b[end] != '\t' {
			end++
		}
		f[n], b = b[:end], b[end:]
		n++
	}
	return n
}

// connAddr reads an address and a port of the connection table: an IPv4
// address as 8 hex digits, or an IPv6 one (bracketed or not); the port as
// hex digits.
func connAddr(a, p []byte) (netip.AddrPort, error) {
	port, err := strconv.ParseUint(string(p), 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: %w", p, err)
	}
	if len(a) == 8 {
		v, err := strconv.ParseUint(string(a), 16, 32)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("address %q: %w", a, err)
		}
		ip := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		return netip.AddrPortFrom(ip, uint16(port)), nil
	}
	// Some kernels print a destination's IPv6 address in brackets.
	a = bytes.TrimSuffix(bytes.TrimPrefix(a, []byte("[")), []byte("]"))
	ip, err := netip.ParseAddr(string(a))
	if err != nil || !ip.Is6() {
		return netip.AddrPort{}, fmt.Errorf("address %q: not 8 hex digits nor an IPv6 address", a)
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}
