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

// TestReadTableMalformedLine puts each malformed line after a valid start
// (its line number is then 2 in rules, 4 in a listing) and a valid line
// after it: every one is an error naming its own line, never a panic.
func TestReadTableMalformedLine(t *testing.T) {
	rulesHead := "-A -t 192.0.2.10:80 -s wrr\n"
	rulesTail := "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -m -w 1\n"
	listHead := "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\nTCP  192.0.2.10:80 wrr\n"
	listTail := "  -> 198.51.100.11:80 Masq 10 0 0\n"
	rules := []string{
		"-A", "-a", "--add-service", "--add-server",
		"-A -t", "-A -u", "-A --sctp-service", "-A -f", "-A -f x", "-A -f 4294967296", "-A -f -1",
		"-A -t 192.0.2.11:80 -s", "-A -t 192.0.2.11:80 -p x", "-A -t 192.0.2.11:80 -M", "-A -t 192.0.2.11:80 --pe",
		"-A -t 192.0.2.11:80 -b", "-A -t 192.0.2.11", "-A -t :80", "-A -t [fe80::1%eth0]:80", "-A -t 192.0.2.11:99999",
		"-A -t 192.0.2.11:80 -r 198.51.100.11:80", "-A -t 192.0.2.11:80 -m", "-A -t 192.0.2.11:80 -x 5",
		"-a -t 192.0.2.10:80", "-a -t 192.0.2.10:80 -r", "-a -t 192.0.2.10:80 -r x", "-a -t 192.0.2.10:80 -r []",
		"-a -t 192.0.2.10:80 -r 198.51.100.11:80 -w", "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -w -1",
		"-a -t 192.0.2.10:80 -r 198.51.100.11:80 -w 1e3", "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -w 99999999999999999999",
		"-a -t 192.0.2.10:80 -r 198.51.100.11:80 -x", "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -y -3",
		"-a -t 192.0.2.10:80 -r 198.51.100.11:80 --tun-port", "-a -t 192.0.2.10:80 -r 198.51.100.11:80 --tun-type",
		"-a -t 192.0.2.10:80 -r 198.51.100.11:80 -s wrr", "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -p",
		"-a -t 192.0.2.10:80 -r [2001:db8::1]:80", "-a -t 192.0.2.10:80 -t 192.0.2.10:80 -r 198.51.100.11:80",
		"-a -u 192.0.2.10:80 -r 198.51.100.11:80", "-a -f 7 -r 198.51.100.11:80",
		"TCP", "TCP 192.0.2.11:80 wrr", "->", "-e -t 192.0.2.10:80", "-- -A", "-A -t 192.0.2.10:80 -s wrr",
		"-A -t 192.0.2.11:80 -s WRR", "-A -t 192.0.2.11:80 -s #", "-A -t 192.0.2.11:80 -s a_scheduler_named_long",
	}
	listing := []string{
		"TCP", "UDP", "SCTP", "FWM", "TCP 192.0.2.11:80", "FWM 7", "FWM 7 IPv6", "FWM x wrr", "FWM 0 wrr",
		"FWM 4294967296 wrr", "UDP 192.0.2.11 wrr", "SCTP www.example.com:80 wrr", "TCP 192.0.2.10:80 wrr",
		"->", "-> 198.51.100.12:80", "-> 198.51.100.12:80 Masq 10 0", "-> 198.51.100.12:80 Masq 10 0 -1",
		"-> 198.51.100.12:80 Masq -1 0 0", "-> 198.51.100.12:80 Masq 65536 0 0", "-> 198.51.100.12:80 Masq x 0 0",
		"-> 198.51.100.12:80 Masq 1 0 99999999999999999999", "-> nope Masq 1 0 0", "-> [2001:db8::1]:80 Masq 1 0 0",
		"-> RemoteAddress:Port", "-> RemoteAddress:Port Forward Weight", "-> RemoteAddress:Port Conns InPkts OutPkts InBytes OutBytes",
		"Prot", "Prot LocalAddress:Port", "Prot LocalAddress:Port CPS", "IP", "IP Virtual",
		"-A -t 192.0.2.11:80 -s wrr", "-a -t 192.0.2.10:80 -r 198.51.100.11:80", "hello", "tcp 192.0.2.11:80 wrr",
		"TCP 192.0.2.11:80 #", "FWM 9 IPv6 Wrr", "UDP 192.0.2.11:80 w/rr",
	}
	check := func(format, head, line, tail string, want int) {
		t.Helper()
		m, err := ReadTable(strings.NewReader(head + line + "\n" + tail))
		var se *TableSyntaxError
		switch {
		case err == nil:
			t.Errorf("%s %q: no error", format, line)
		case m != nil:
			t.Errorf("%s %q: a table came back with %v", format, line, err)
		case !errors.As(err, &se):
			t.Errorf("%s %q: %v names no line", format, line, err)
		case se.Line != want || !strings.HasPrefix(err.Error(), fmt.Sprintf("line %d: ", want)):
			t.Errorf("%s %q: %v, want line %d", format, line, err, want)
		}
	}
	for _, line := range rules {
		check("rules", rulesHead, line, rulesTail, 2)
	}
	for _, line := range listing {
		check("listing", listHead, line, listTail, 4)
	}
	// A garbled line of 60,000 bytes is named, and quoted only in part.
	long := "-a -t 192.0.2.10:80 -r " + strings.Repeat("9", 60000)
	check("rules", rulesHead, long, rulesTail, 2)
	if _, err := ReadTable(strings.NewReader(rulesHead + long + "\n")); err == nil || len(err.Error()) > 400 {
		t.Errorf("a 60,000-byte line: an error of %d bytes", len(fmt.Sprint(err)))
	}
}

// FuzzReadTable: no text panics ReadTable; an error is a syntax error
// naming a line of the text (or a whole-text error with no table); a table
// it returns holds only what the Table interface allows, and reads back the
// same from the rules it prints as. The committed seeds are in
// testdata/fuzz/FuzzReadTable.
func FuzzReadTable(f *testing.F) {
	f.Add([]byte(savedRules))
	f.Add([]byte(listing))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadTable(strings.NewReader(string(b)))
		if err != nil {
			if m != nil {
				t.Fatalf("a table came back with %v", err)
			}
			var se *TableSyntaxError
			if errors.As(err, &se) && (se.Line < 1 || se.Line > strings.Count(string(b), "\n")+1) {
				t.Fatalf("line %d of a %d-line text: %v", se.Line, strings.Count(string(b), "\n")+1, err)
			}
			return
		}
		saved := saveRules(t, m)
		again, err := ReadTable(strings.NewReader(saved))
		if err != nil {
			t.Fatalf("the table read back from its own rules:\n%s: %v", saved, err)
		}
		if got := saveRules(t, again); got != saved {
			t.Fatalf("read back as\n%s\nwant\n%s", got, saved)
		}
	})
}

// saveRules prints m as ipvsadm -S -n would (what ReadTable keeps of it),
// checking each value on the way.
func saveRules(t *testing.T, m *Mem) string {
	t.Helper()
	var sb strings.Builder
	svcs := services(t, m)
	if len(svcs) == 0 {
		t.Fatal("a table with no service")
	}
	for _, s := range svcs {
		name := fmt.Sprintf("-t %s", s.Key.Addr)
		switch {
		case s.Key.IsFWMark() && s.Key.Family == IPv6:
			name = fmt.Sprintf("-f %d -6", s.Key.FWMark)
		case s.Key.IsFWMark():
			name = fmt.Sprintf("-f %d", s.Key.FWMark)
		case s.Key.Protocol == UDP:
			name = fmt.Sprintf("-u %s", s.Key.Addr)
		case s.Key.Protocol == SCTP:
			name = fmt.Sprintf("--sctp-service %s", s.Key.Addr)
		}
		if strings.ContainsFunc(s.Scheduler, func(r rune) bool { return r <= ' ' }) || strings.HasPrefix(s.Scheduler, "#") {
			t.Fatalf("%v: scheduler %q", s.Key, s.Scheduler)
		}
		fmt.Fprintf(&sb, "-A %s -s %s\n", name, s.Scheduler)
		for _, d := range destinations(t, m, s.Key) {
			if d.Weight < 0 || d.Weight > MaxWeight || d.ActiveConns < 0 || d.InactiveConns < 0 {
				t.Fatalf("%v: %+v", s.Key, d)
			}
			fmt.Fprintf(&sb, "-a %s -r %s -w %d\n", name, d.Addr, d.Weight)
		}
	}
	return sb.String()
}

// tableText is a saved table of one service with n servers, as rules or as
// a listing.
func tableText(n int, asListing bool) string {
	var sb strings.Builder
	if asListing {
		sb.WriteString("IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n" +
			"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\nTCP  192.0.2.10:80 wrr\n")
	} else {
		sb.WriteString("-A -t 192.0.2.10:80 -s wrr\n")
	}
	for i := range n {
		addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 80)
		if asListing {
			fmt.Fprintf(&sb, "  -> %-28s %-7s %-6d %-10d %-10d\n", addr, "Masq", 1+i%100, i%7, i%11)
		} else {
			fmt.Fprintf(&sb, "-a -t 192.0.2.10:80 -r %s -m -w %d\n", addr, 1+i%100)
		}
	}
	return sb.String()
}

// BenchmarkReadTable reads one service of 40,000 and of 200,000 servers
// (the worst case for a lookup per server) as rules and as a listing, and
// reports the time per server.
func BenchmarkReadTable(b *testing.B) {
	for _, n := range []int{40000, 200000} {
		for _, asListing := range []bool{false, true} {
			name := "rules"
			if asListing {
				name = "listing"
			}
			text := tableText(n, asListing)
			b.Run(fmt.Sprintf("servers=%d/%s", n, name), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					m, err := ReadTable(strings.NewReader(text))
					if err != nil {
						b.Fatal(err)
					}
					if ds, _ := m.Destinations(ServiceKey{Protocol: TCP, Addr: netip.MustParseAddrPort("192.0.2.10:80")}); len(ds) != n {
						b.Fatalf("%d servers read, want %d", len(ds), n)
					}
					i++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*n), "ns/server")
			})
		}
	}
}
