package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// The sample texts are built with the format strings of ipvsadm 1.31
// (Debian's ipvsadm 1:1.31-1, read with `strings /sbin/ipvsadm`), the
// binary the vmtest guest scripts run; this host's kernel has no IPVS to
// print a real table. Rules (-S): "-A %s -s %s" then " -p %u", " -M %s",
// " --pe %s"; "-a %s -r %s %s -w %d", with " --tun-type %s --tun-port %d
// %s" for a tunnel. Listing (-L): the service as "%-4s %s" (protocol,
// ADDR:PORT) or "FWM  %d" / "FWM  %d IPv6", then " %s" the scheduler and
// " persistent %u", " mask %s"; a real server as
// "  -> %-28s %-7s %-6d %-10u %-10u".

func rule(format string, a ...any) string { return fmt.Sprintf(format, a...) + "\n" }

// savedRules is `ipvsadm -S -n` of the table wantTable describes.
var savedRules = rule("-A %s -s %s", "-t 192.0.2.10:80", "wrr") +
	rule("-a %s -r %s %s -w %d", "-t 192.0.2.10:80", "198.51.100.11:80", "-m", 10) +
	rule("-a %s -r %s %s -w %d", "-t 192.0.2.10:80", "198.51.100.12:80", "-m", 0) +
	rule("-a %s -r %s %s -w %d", "-t 192.0.2.10:80", "198.51.100.13:8080", "-m", 20) +
	rule("-A %s -s %s -p %d -M %s", "-u 192.0.2.10:53", "sh", 300, "255.255.255.0") +
	rule("-a %s -r %s %s -w %d", "-u 192.0.2.10:53", "198.51.100.11:53", "-g", 1) +
	rule("-A %s -s %s", "-t [2001:db8::10]:443", "wlc") +
	rule("-a %s -r %s %s -w %d", "-t [2001:db8::10]:443", "[2001:db8::11]:443", "-m", 5) +
	rule("-A %s -s %s -p %d --pe %s", "-f 7", "rr", 60, "sip") +
	rule("-a %s -r %s %s -w %d --tun-type %s --tun-port %d %s", "-f 7", "198.51.100.21:0", "-i", 3, "gue", 6080, "--tun-nocsum") +
	rule("-A %s -s %s", "-f 8 -6", "mh") +
	rule("-a %s -r %s %s -w %d", "-f 8 -6", "[2001:db8::21]:0", "-g", 65535)

// listing is `ipvsadm -L -n` of the same table, with connection counts.
var listing = "IP Virtual Server version 1.2.1 (size=4096)\n" +
	"Prot LocalAddress:Port Scheduler Flags\n" +
	"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n" +
	rule("%-4s %s %s", "TCP", "192.0.2.10:80", "wrr") +
	rule("  -> %-28s %-7s %-6d %-10d %-10d", "198.51.100.11:80", "Masq", 10, 3, 7) +
	rule("  -> %-28s %-7s %-6d %-10d %-10d", "198.51.100.12:80", "Masq", 0, 0, 2) +
	rule("  -> %-28s %-7s %-6d %-10d %-10d", "198.51.100.13:8080", "Masq", 20, 41, 120) +
	rule("%-4s %s %s persistent %d mask %s", "UDP", "192.0.2.10:53", "sh", 300, "255.255.255.0") +
	rule("  -> %-28s %-7s %-6d %-10d %-10d", "198.51.100.11:53", "Route", 1, 0, 0) +
	rule("%-4s %s %s", "TCP", "[2001:db8::10]:443", "wlc") +
	rule("  -> %-28s %-7s %-6d %-10d %-10d", "[2001:db8::11]:443", "Masq", 5, 1, 0) +
	rule("FWM  %d %s persistent %d pe %s", 7, "rr", 60, "sip") +
	rule("  -> %-28s %-7s %-6d %-10d %-10d", "198.51.100.21:0", "Tunnel", 3, 0, 0) +
	rule("FWM  %d IPv6 %s", 8, "mh") +
	rule("  -> %-28s %-7s %-6d %-10d %-10d", "[2001:db8::21]:0", "Route", 65535, 0, 0)

type wantService struct {
	key       string
	scheduler string
	dests     []Destination
}

func dst(addr string, weight, active, inactive int) Destination {
	return Destination{Addr: netip.MustParseAddrPort(addr), Weight: weight, ActiveConns: active, InactiveConns: inactive}
}

// wantTable is the table both texts describe; counts are the listing's
// (the rules carry none).
func wantTable(counts bool) []wantService {
	c := func(n int) int {
		if counts {
			return n
		}
		return 0
	}
	return []wantService{
		{"192.0.2.10:80/tcp", "wrr", []Destination{dst("198.51.100.11:80", 10, c(3), c(7)), dst("198.51.100.12:80", 0, 0, c(2)), dst("198.51.100.13:8080", 20, c(41), c(120))}},
		{"192.0.2.10:53/udp", "sh", []Destination{dst("198.51.100.11:53", 1, 0, 0)}},
		{"[2001:db8::10]:443/tcp", "wlc", []Destination{dst("[2001:db8::11]:443", 5, c(1), 0)}},
		{"fwmark:7/inet", "rr", []Destination{dst("198.51.100.21:0", 3, 0, 0)}},
		{"fwmark:8/inet6", "mh", []Destination{dst("[2001:db8::21]:0", 65535, 0, 0)}},
	}
}

func checkTable(t *testing.T, m *Mem, want []wantService) {
	t.Helper()
	svcs := services(t, m)
	if len(svcs) != len(want) {
		t.Fatalf("%d services %v, want %d", len(svcs), svcs, len(want))
	}
	for i, w := range want {
		if got := svcs[i].Key.String(); got != w.key || svcs[i].Scheduler != w.scheduler {
			t.Errorf("service %d: %s %s, want %s %s", i, got, svcs[i].Scheduler, w.key, w.scheduler)
			continue
		}
		ds := destinations(t, m, svcs[i].Key)
		if fmt.Sprint(ds) != fmt.Sprint(w.dests) {
			t.Errorf("%s: destinations\n%v, want\n%v", w.key, ds, w.dests)
		}
	}
}

func TestReadTableRules(t *testing.T) {
	m, err := ReadTable(strings.NewReader(savedRules))
	if err != nil {
		t.Fatal(err)
	}
	checkTable(t, m, wantTable(false))
}

func TestReadTableListing(t *testing.T) {
	m, err := ReadTable(strings.NewReader(listing))
	if err != nil {
		t.Fatal(err)
	}
	checkTable(t, m, wantTable(true))
}

// Forms ipvsadm -S does not print but ipvsadm-restore reads (and a hand
// edit may hold): long options, defaults, a bare server address, the
// thresholds, comments, blank lines and CRLF ends.
func TestReadTableRuleForms(t *testing.T) {
	text := "# saved on director-a\r\n\r\n" +
		"--add-service --tcp-service 192.0.2.10:80\r\n" + // default scheduler wlc
		"-a -t 192.0.2.10:80 -r 198.51.100.11 -m\r\n" + // port from the service, default weight 1
		"--add-server --tcp-service 192.0.2.10:80 --real-server 198.51.100.12:80 --weight 7 -x 100 -y 50\r\n" +
		"-A --sctp-service 192.0.2.10:9 -s wrr -p -o -b sh-fallback,sh-port\n" + // -p without a timeout
		"-a --sctp-service 192.0.2.10:9 -r 198.51.100.11:9 -w 2\n" +
		"-A -t 192.0.2.10:81 -s wrr ops\n"
	m, err := ReadTable(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	checkTable(t, m, []wantService{
		{"192.0.2.10:80/tcp", "wlc", []Destination{dst("198.51.100.11:80", 1, 0, 0), dst("198.51.100.12:80", 7, 0, 0)}},
		{"192.0.2.10:9/sctp", "wrr", []Destination{dst("198.51.100.11:9", 2, 0, 0)}},
		{"192.0.2.10:81/tcp", "wrr", nil},
	})
}

func TestReadTableErrors(t *testing.T) {
	svc := "-A -t 192.0.2.10:80 -s wrr\n"
	head := "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n"
	tests := []struct {
		name string
		text string
		line int    // 0: not a line's error
		want string // in the message
		is   error  // if set, errors.Is
	}{
		{"empty", "", 0, "no virtual service", nil},
		{"comments only", "# nothing\n\n", 0, "no virtual service", nil},
		{"empty listing", head, 0, "no virtual service", nil},
		{"neither format", "hello\n", 1, "neither ipvsadm -S -n rules", nil},
		{"saved without -n", "-A -t www.example.com:http -s wrr\n", 1, "save with ipvsadm -S -n", nil},
		{"server before its service", "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -m -w 1\n", 1, "service not in the table", ErrNotFound},
		{"server of another service", svc + "-a -t 192.0.2.11:80 -r 198.51.100.11:80 -m -w 1\n", 2, "192.0.2.11:80/tcp", ErrNotFound},
		{"service twice", svc + svc, 2, "already exists", ErrExist},
		{"server twice", svc + "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -w 1\n-a -t 192.0.2.10:80 -r 198.51.100.11:80 -w 2\n", 3, "already exists", ErrExist},
		{"unknown option", svc + "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -m -w 1 --frobnicate\n", 2, `unknown option "--frobnicate"`, nil},
		{"weight too large", svc + "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -w 65536\n", 2, "out of range", ErrWeightRange},
		{"weight not a number", svc + "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -w ten\n", 2, `weight "ten"`, nil},
		{"weight without value", svc + "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -w\n", 2, "option -w: missing its value", nil},
		{"server without -r", svc + "-a -t 192.0.2.10:80 -w 1\n", 2, "without -r", nil},
		{"rule without service", "-A -s wrr\n", 1, "no virtual service: want -t", nil},
		{"two services in a rule", "-A -t 192.0.2.10:80 -f 3 -s wrr\n", 1, "names its virtual service twice", nil},
		{"fwmark 0", "-A -f 0 -s wrr\n", 1, "firewall mark is a whole number", nil},
		{"server option on a service", "-A -t 192.0.2.10:80 -s wrr -w 3\n", 1, "belongs to a real server", nil},
		{"service option on a server", svc + "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -s wrr\n", 2, "belongs to a virtual service", nil},
		{"families differ", svc + "-a -t 192.0.2.10:80 -r [2001:db8::1]:80 -w 1\n", 2, "address family differs", nil},
		{"other command", svc + "-e -t 192.0.2.10:80 -r 198.51.100.11:80 -w 1\n", 2, `rule "-e"`, nil},
		{"listing in rules", svc + "TCP  192.0.2.11:80 wrr\n", 2, `rule "TCP"`, nil},
		{"threshold not a number", svc + "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -x lots\n", 2, `option -x "lots"`, nil},

		{"stats listing", head + "  -> RemoteAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes\n", 3, "plain ipvsadm -L -n", nil},
		{"rate listing", "Prot LocalAddress:Port                 CPS    InPPS   OutPPS    InBPS   OutBPS\n", 1, "plain ipvsadm -L -n", nil},
		{"server line first", head + "  -> 198.51.100.11:80 Masq 10 0 0\n", 3, "before any service line", nil},
		{"listed without -n", head + "TCP  www.example.com:http wrr\n", 3, "list with -L -n", nil},
		{"short server line", head + "TCP  192.0.2.10:80 wrr\n  -> 198.51.100.11:80 Masq 10\n", 4, "FORWARD WEIGHT ACTIVECONN INACTCONN", nil},
		{"bad counts", head + "TCP  192.0.2.10:80 wrr\n  -> 198.51.100.11:80 Masq 10 x 0\n", 4, "connection counts", nil},
		{"service without scheduler", head + "TCP  192.0.2.10:80\n", 3, "without its scheduler", nil},
		{"stray line", head + "TCP  192.0.2.10:80 wrr\nhello world\n", 4, "want a service line", nil},
	}
	for _, tt := range tests {
		m, err := ReadTable(strings.NewReader(tt.text))
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		if m != nil {
			t.Errorf("%s: a partial table came back with the error", tt.name)
		}
		var se *TableSyntaxError
		switch {
		case tt.line == 0 && errors.As(err, &se):
			t.Errorf("%s: %v names a line", tt.name, err)
		case tt.line != 0 && !errors.As(err, &se):
			t.Errorf("%s: %v names no line", tt.name, err)
		case tt.line != 0 && se.Line != tt.line:
			t.Errorf("%s: line %d, want %d (%v)", tt.name, se.Line, tt.line, err)
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %q does not say %q", tt.name, err, tt.want)
		}
		if tt.line != 0 && !strings.HasPrefix(err.Error(), fmt.Sprintf("line %d: ", tt.line)) {
			t.Errorf("%s: %q does not start with its line", tt.name, err)
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: %v is not %v", tt.name, err, tt.is)
		}
	}
}

func TestReadTableFile(t *testing.T) {
	if _, err := ReadTableFile(t.TempDir() + "/missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
}
