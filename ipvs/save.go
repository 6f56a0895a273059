package ipvs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// This file reads a saved IPVS table — what ipvsadm prints — into a Mem,
// so that lvs-monitor -dry-run -table FILE can run against a production
// director's table on a machine without IPVS. Two texts are read, as
// ipvsadm 1.31 prints them (its format strings; the vmtest guest scripts
// run the real binary):
//
//   - the rules of `ipvsadm -S -n` (ipvsadm-save): one `-A` line per
//     virtual service, then one `-a` line per real server, e.g.
//     "-A -t 192.0.2.10:80 -s wrr -p 300" and
//     "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -m -w 10";
//   - the listing of `ipvsadm -L -n`: "TCP  192.0.2.10:80 wrr" and
//     "  -> 198.51.100.11:80   Masq    10     3          7", whose
//     connection counts are kept (Destination.ActiveConns, InactiveConns).
//
// A table holds what the monitor reads: services with their scheduler,
// destinations with their weight. Persistence, netmasks, persistence
// engines, scheduler flags, forwarding methods, tunnel options and
// connection thresholds are checked for form and otherwise ignored: the
// Table interface has no place for them and the monitor never reads them.

// TableSyntaxError is a line ReadTable cannot read.
type TableSyntaxError struct {
	Line int    // 1-based
	Text string // the line as read
	Err  error
}

func (e *TableSyntaxError) Error() string {
	text := e.Text
	if len(text) > maxQuoted {
		text = text[:maxQuoted] + "..."
	}
	return fmt.Sprintf("line %d: %v (in %q)", e.Line, e.Err, text)
}

// maxQuoted is how much of a bad line an error quotes: enough to find it,
// not a screenful of a garbled one.
const maxQuoted = 160

// maxWord bounds a word of a line, so that an error quoting one stays
// short. The longest words ipvsadm prints are an IPv6 address with its
// port (47 bytes) and a list of scheduler flags.
const maxWord = 128

func (e *TableSyntaxError) Unwrap() error { return e.Err }

// ReadTableFile reads a saved table from path; see ReadTable.
func ReadTableFile(path string) (*Mem, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read IPVS table: %w", err)
	}
	defer f.Close()
	m, err := ReadTable(f)
	if err != nil {
		return nil, fmt.Errorf("IPVS table %s: %w", path, err)
	}
	return m, nil
}

// ReadTable reads the output of `ipvsadm -S -n` or of `ipvsadm -L -n`
// (which one is told by its first line) into a new in-memory table.
// Blank lines and lines starting with '#' are skipped. A line it cannot
// read, a name where an address is expected (saved without -n), a real
// server before its service and a text with no virtual service are errors
// (a *TableSyntaxError names the line); no partial table is returned.
func ReadTable(r io.Reader) (*Mem, error) {
	m := NewMem()
	b := &tableBuilder{m: m, seen: make(map[destKey]struct{})}
	sc := bufio.NewScanner(r)
	var read func(fields []string) error // nil until the first line says the format
	var list listReader
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimRight(sc.Text(), "\r")
		fields := strings.Fields(text)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if i := slices.IndexFunc(fields, func(w string) bool { return len(w) > maxWord }); i >= 0 {
			return nil, &TableSyntaxError{Line: n, Text: text,
				Err: fmt.Errorf("word %d is %d bytes long: no word of a saved table is longer than %d", i+1, len(fields[i]), maxWord)}
		}
		if read == nil {
			switch {
			case fields[0] == "-A" || fields[0] == "-a" || fields[0] == "--add-service" || fields[0] == "--add-server":
				read = func(f []string) error { return readRule(b, f) }
			case strings.HasPrefix(text, "IP Virtual Server version") || fields[0] == "Prot" || fields[0] == "->" ||
				len(fields) >= 3 && listProtocol(fields[0]):
				list.b = b
				read = list.line
			default:
				return nil, &TableSyntaxError{Line: n, Text: text,
					Err: errors.New("neither ipvsadm -S -n rules (-A and -a lines) nor an ipvsadm -L -n listing")}
			}
		}
		if err := read(fields); err != nil {
			return nil, &TableSyntaxError{Line: n, Text: text, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read IPVS table: line %d: %w", n+1, err)
	}
	if len(m.order) == 0 {
		return nil, errors.New("no virtual service: want the output of ipvsadm -S -n or ipvsadm -L -n")
	}
	return m, nil
}

// savedService is what a rule says of its virtual service.
type savedService struct {
	key ServiceKey
	set bool // a -t, -u, --sctp-service or -f option was given
	v6  bool // -6: a firewall-mark service of family inet6
}

// tableBuilder fills the new Mem as ReadTable reads. It remembers every
// destination it added, so that a server line costs a map lookup instead
// of Mem.AddDestination's scan of the servers before it, which made a
// table of one large service quadratic to read.
type tableBuilder struct {
	m    *Mem
	seen map[destKey]struct{}
}

// destKey is a destination of a service, both canonical.
type destKey struct {
	svc  ServiceKey
	addr netip.AddrPort
}

func (b *tableBuilder) addService(k ServiceKey, scheduler string) error {
	return b.m.AddService(k, scheduler)
}

// addDestination adds d to service svc with the checks and errors of
// Mem.AddDestination, keeping d's connection counts.
func (b *tableBuilder) addDestination(svc ServiceKey, d Destination) error {
	fail := func(err error) error { return fmt.Errorf("add destination %s to %s: %w", d.Addr, svc, err) }
	if err := checkWeight(d.Weight); err != nil {
		return fail(err)
	}
	if d.ActiveConns < 0 || d.InactiveConns < 0 {
		return fail(fmt.Errorf("negative connection count (%d active, %d inactive)", d.ActiveConns, d.InactiveConns))
	}
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	s, k, err := b.m.service(svc)
	if err != nil {
		return fail(err)
	}
	if d.Addr, err = canonicalDest(k, d.Addr); err != nil {
		return fail(err)
	}
	dk := destKey{k, d.Addr}
	if _, dup := b.seen[dk]; dup {
		return fail(ErrExist)
	}
	b.seen[dk] = struct{}{}
	s.dests = append(s.dests, d)
	return nil
}

// readRule reads one `ipvsadm -S` rule: -A (a virtual service) or -a
// (a real server of one). Options follow ipvsadm(8); long forms are
// accepted too.
func readRule(b *tableBuilder, f []string) error {
	cmd := f[0]
	isService := cmd == "-A" || cmd == "--add-service"
	if !isService && cmd != "-a" && cmd != "--add-server" {
		return fmt.Errorf("rule %q: want -A (a virtual service) or -a (a real server)", cmd)
	}
	var (
		svc       savedService
		scheduler string
		dest      string
		weight    = 1 // ipvsadm's default for -a without -w
	)
	for i := 1; i < len(f); i++ {
		opt := f[i]
		// value returns the option's argument.
		value := func() (string, error) {
			if i+1 >= len(f) {
				return "", fmt.Errorf("option %s: missing its value", opt)
			}
			i++
			return f[i], nil
		}
		serviceOnly := func() error {
			if !isService {
				return fmt.Errorf("option %s belongs to a virtual service (-A), not a real server (-a)", opt)
			}
			return nil
		}
		serverOnly := func() error {
			if isService {
				return fmt.Errorf("option %s belongs to a real server (-a), not a virtual service (-A)", opt)
			}
			return nil
		}
		var err error
		switch opt {
		case "-t", "--tcp-service", "-u", "--udp-service", "--sctp-service":
			var v string
			if v, err = value(); err == nil {
				err = svc.setAddr(opt, v)
			}
		case "-f", "--fwmark-service":
			var v string
			if v, err = value(); err == nil {
				err = svc.setMark(v)
			}
		case "-6", "--ipv6":
			svc.v6 = true
		case "-s", "--scheduler":
			if err = serviceOnly(); err == nil {
				scheduler, err = value()
			}
		case "-p", "--persistent":
			// The timeout is optional: take the next word only if it is one.
			if err = serviceOnly(); err == nil && i+1 < len(f) && !strings.HasPrefix(f[i+1], "-") {
				err = wholeNumber(opt, f[i+1])
				i++
			}
		case "-M", "--netmask", "--pe", "-b", "--sched-flags":
			if err = serviceOnly(); err == nil {
				_, err = value()
			}
		case "-o", "--ops", "ops": // ipvsadm 1.31 saves one-packet scheduling as a bare "ops"
			err = serviceOnly()
		case "-r", "--real-server":
			if err = serverOnly(); err == nil {
				dest, err = value()
			}
		case "-w", "--weight":
			var v string
			if err = serverOnly(); err == nil {
				if v, err = value(); err == nil {
					weight, err = parseWeight(v)
				}
			}
		case "-m", "--masquerading", "-g", "--gatewaying", "-i", "--ipip",
			"--tun-nocsum", "--tun-csum", "--tun-remcsum":
			err = serverOnly()
		case "-x", "--u-threshold", "-y", "--l-threshold", "--tun-port":
			var v string
			if err = serverOnly(); err == nil {
				if v, err = value(); err == nil {
					err = wholeNumber(opt, v)
				}
			}
		case "--tun-type":
			if err = serverOnly(); err == nil {
				_, err = value()
			}
		default:
			err = fmt.Errorf("unknown option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	key, err := svc.finish()
	if err != nil {
		return err
	}
	if isService {
		if scheduler == "" {
			scheduler = "wlc" // ipvsadm's default scheduler
		} else if err := checkScheduler(scheduler); err != nil {
			return err
		}
		return b.addService(key, scheduler)
	}
	if dest == "" {
		return errors.New("a real server (-a) without -r ADDRESS:PORT")
	}
	addr, err := parseDest(dest, key)
	if err != nil {
		return err
	}
	return b.addDestination(key, Destination{Addr: addr, Weight: weight})
}

// setAddr reads the address of -t, -u or --sctp-service.
func (s *savedService) setAddr(opt, v string) error {
	if s.set {
		return fmt.Errorf("option %s: the rule names its virtual service twice", opt)
	}
	ap, err := parseAddrPort(v)
	if err != nil {
		return fmt.Errorf("option %s: %w", opt, err)
	}
	s.key.Addr, s.set = ap, true
	switch opt {
	case "-t", "--tcp-service":
		s.key.Protocol = TCP
	case "-u", "--udp-service":
		s.key.Protocol = UDP
	default:
		s.key.Protocol = SCTP
	}
	return nil
}

// setMark reads the mark of -f.
func (s *savedService) setMark(v string) error {
	if s.set {
		return errors.New("option -f: the rule names its virtual service twice")
	}
	mark, err := strconv.ParseUint(v, 10, 32)
	if err != nil || mark == 0 {
		return fmt.Errorf("option -f %q: a firewall mark is a whole number from 1 to 4294967295", v)
	}
	s.key.FWMark, s.set = uint32(mark), true
	return nil
}

// finish returns the rule's service key.
func (s *savedService) finish() (ServiceKey, error) {
	if !s.set {
		return ServiceKey{}, errors.New("no virtual service: want -t, -u or --sctp-service ADDRESS:PORT, or -f MARK")
	}
	if s.key.IsFWMark() {
		s.key.Family = IPv4
		if s.v6 {
			s.key.Family = IPv6
		}
	}
	return s.key, nil
}

// parseAddrPort reads "192.0.2.10:80" or "[2001:db8::1]:80", numeric only.
func parseAddrPort(v string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(v)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not a numeric ADDRESS:PORT (IPv6 in brackets; save with ipvsadm -S -n, list with -L -n)", v)
	}
	return ap, nil
}

// parseDest reads -r's server: ADDRESS:PORT, or a bare ADDRESS, which takes
// the service's port as ipvsadm does.
func parseDest(v string, svc ServiceKey) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(v); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(v, "["), "]"))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("option -r: %q is not a numeric ADDRESS[:PORT] (IPv6 in brackets; save with ipvsadm -S -n)", v)
	}
	return netip.AddrPortFrom(a, svc.Addr.Port()), nil
}

// checkScheduler refuses what cannot be a kernel scheduler's name: the
// kernel's are short lower-case words (rr, wrr, wlc, mh, ...), at most 15
// bytes (IP_VS_SCHEDNAME_MAXLEN, 16 with the NUL). Which ones a kernel
// has is not checked.
func checkScheduler(name string) error {
	ok := len(name) <= 15
	for _, c := range name {
		ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_')
	}
	if !ok {
		return fmt.Errorf("scheduler %q: want a kernel scheduler's name (rr, wrr, wlc, mh, ...)", name)
	}
	return nil
}

func parseWeight(v string) (int, error) {
	w, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("weight %q is not a whole number", v)
	}
	if err := checkWeight(w); err != nil {
		return 0, err
	}
	return w, nil
}

func wholeNumber(opt, v string) error {
	if _, err := strconv.ParseUint(v, 10, 32); err != nil {
		return fmt.Errorf("option %s %q: want a whole number", opt, v)
	}
	return nil
}

// listProtocol reports whether word starts a service line of ipvsadm -L.
func listProtocol(word string) bool {
	switch word {
	case "TCP", "UDP", "SCTP", "FWM":
		return true
	}
	return false
}

// listReader reads an `ipvsadm -L -n` listing line by line: a header,
// then each service line followed by its real servers' lines.
type listReader struct {
	b       *tableBuilder
	current *ServiceKey // the service the next "->" lines belong to
}

func (l *listReader) line(f []string) error {
	switch {
	case f[0] == "IP" && len(f) > 2 && f[1] == "Virtual" && f[2] == "Server":
		return nil // "IP Virtual Server version 1.2.1 (size=4096)"
	case f[0] == "Prot":
		if len(f) < 3 || f[1] != "LocalAddress:Port" || f[2] != "Scheduler" {
			return errors.New("not the header of ipvsadm -L -n (--stats, --rate and the other column sets are not read: list with plain ipvsadm -L -n)")
		}
		return nil
	case f[0] == "->" && len(f) > 1 && f[1] == "RemoteAddress:Port":
		// ipvsadm -L -n: "Forward Weight ActiveConn InActConn";
		// --tun-info adds TunnelInfo after Forward. Other column sets
		// (--stats, --rate, --thresholds, --persistent-conn) have no Forward.
		if len(f) < 6 || f[2] != "Forward" || strings.Join(f[len(f)-3:], " ") != "Weight ActiveConn InActConn" {
			return errors.New("not the header of ipvsadm -L -n (--stats, --rate, --thresholds and --persistent-conn are not read: list with plain ipvsadm -L -n)")
		}
		return nil
	case f[0] == "->":
		return l.dest(f)
	case listProtocol(f[0]):
		return l.service(f)
	}
	return errors.New("want a service line (TCP, UDP, SCTP or FWM ...) or a real server line (-> ...) of ipvsadm -L -n")
}

// service reads "TCP  192.0.2.10:80 wrr [persistent 300 ...]" or
// "FWM  7 [IPv6] wrr ...".
func (l *listReader) service(f []string) error {
	if len(f) < 2 {
		return fmt.Errorf("a service line wants: %s ADDRESS:PORT SCHEDULER (FWM MARK [IPv6] SCHEDULER)", f[0])
	}
	var k ServiceKey
	rest := f[2:]
	if f[0] == "FWM" {
		var s savedService
		if err := s.setMark(f[1]); err != nil {
			return err
		}
		if len(rest) > 0 && rest[0] == "IPv6" {
			s.v6, rest = true, rest[1:]
		}
		k, _ = s.finish()
	} else {
		ap, err := parseAddrPort(f[1])
		if err != nil {
			return err
		}
		k.Addr = ap
		k.Protocol = map[string]Protocol{"TCP": TCP, "UDP": UDP, "SCTP": SCTP}[f[0]]
	}
	if len(rest) == 0 {
		return errors.New("service line without its scheduler")
	}
	if err := checkScheduler(rest[0]); err != nil {
		return err
	}
	if err := l.b.addService(k, rest[0]); err != nil {
		return err
	}
	l.current = &k
	return nil
}

// dest reads "-> 198.51.100.11:80  Masq  10  3  7": the weight and the
// connection counts are the last three columns (--tun-info adds one
// before them).
func (l *listReader) dest(f []string) error {
	if l.current == nil {
		return errors.New("a real server line before any service line")
	}
	if len(f) < 6 {
		return errors.New("a real server line wants: -> ADDRESS:PORT FORWARD WEIGHT ACTIVECONN INACTCONN")
	}
	addr, err := parseAddrPort(f[1])
	if err != nil {
		return err
	}
	w, err := parseWeight(f[len(f)-3])
	if err != nil {
		return err
	}
	active, err1 := strconv.Atoi(f[len(f)-2])
	inactive, err2 := strconv.Atoi(f[len(f)-1])
	if err1 != nil || err2 != nil || active < 0 || inactive < 0 {
		return fmt.Errorf("connection counts %q %q: want whole numbers", f[len(f)-2], f[len(f)-1])
	}
	return l.b.addDestination(*l.current, Destination{Addr: addr, Weight: w, ActiveConns: active, InactiveConns: inactive})
}
