package ipvs

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// A connection table as /proc/net/ip_vs_conn prints it: client 10.0.1.2,
// VIP 10.0.1.100:80, real servers 10.1.1.2:80 (slow: established, fresh
// and old), 10.1.2.2:80 (crashed: reset), 10.1.3.2:80 (hung: handshakes),
// 10.1.4.2:80 (not asked for), one UDP entry, one persistence template and
// two IPv6 entries of [2001:db8::2]:80.
const connText = `Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData
TCP 0A000102 C350 0A000164 0050 0A010102 0050 ESTABLISHED    899
TCP 0A000102 C351 0A000164 0050 0A010102 0050 ESTABLISHED    900
TCP 0A000102 C352 0A000164 0050 0A010102 0050 ESTABLISHED    893
TCP 0A000102 C353 0A000164 0050 0A010102 0050 TIME_WAIT      119
TCP 0A000102 C354 0A000164 0050 0A010102 0050 TIME_WAIT       60
TCP 0A000102 C355 0A000164 0050 0A010102 0050 SYN_RECV        59
TCP 0A000102 C356 0A000164 0050 0A010202 0050 CLOSE            9
TCP 0A000102 C357 0A000164 0050 0A010202 0050 CLOSE            8
TCP 0A000102 C358 0A000164 0050 0A010202 0050 CLOSE            3
TCP 0A000102 C359 0A000164 0050 0A010202 0050 TIME_WAIT       90
TCP 0A000102 C35A 0A000164 0050 0A010302 0050 SYN_RECV        59
TCP 0A000102 C35B 0A000164 0050 0A010302 0050 SYN_RECV        41
TCP 0A000102 C35C 0A000164 0050 0A010302 0050 ESTABLISHED    870
TCP 0A000102 C35D 0A000164 0050 0A010402 0050 SYN_RECV        59
UDP 0A000102 C35E 0A000164 0035 0A010102 0035 UDP            299
IP  0A000102 0000 0A000164 0050 0A010102 0050 NONE           299
TCP 2001:0db8:0000:0000:0000:0000:0000:0001 C35F 2001:0db8:0000:0000:0000:0000:0000:0064 0050 2001:0db8:0000:0000:0000:0000:0000:0002 0050 FIN_WAIT   119 
TCP 2001:0db8:0000:0000:0000:0000:0000:0001 C360 2001:0db8:0000:0000:0000:0000:0000:0064 0050 [2001:0db8:0000:0000:0000:0000:0000:0002] 0050 SYN_RECV    59 
`

// TestParseConns counts each destination's TCP entries by hand: fresh
// means a packet within the last second (expiry at least the state's
// timeout less one), a reset within the last two.
func TestParseConns(t *testing.T) {
	ap := netip.MustParseAddrPort
	want := map[netip.AddrPort]struct{}{ap("10.1.1.2:80"): {}, ap("10.1.2.2:80"): {}, ap("10.1.3.2:80"): {}, ap("[2001:db8::2]:80"): {}}
	got, err := ParseConns(strings.NewReader(connText), ConnTimeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second}, want)
	if err != nil {
		t.Fatal(err)
	}
	vip := ap("10.0.1.100:80")
	exp := map[ConnKey]ConnCounts{
		// 3 established (899, 900 fresh; 893 not), TIME_WAIT 119 fresh,
		// 60 not; one handshake.
		{TCP, vip, ap("10.1.1.2:80")}: {Handshakes: 1, Established: 3, Progressed: 3},
		// CLOSE 9 and 8 within two seconds, 3 not; TIME_WAIT 90 old.
		{TCP, vip, ap("10.1.2.2:80")}: {Resets: 2},
		// Two handshakes, one old established.
		{TCP, vip, ap("10.1.3.2:80")}: {Handshakes: 2, Established: 1},
		// FIN_WAIT 119 of 120: fresh; a handshake, its destination
		// bracketed.
		{TCP, ap("[2001:db8::64]:80"), ap("[2001:db8::2]:80")}: {Handshakes: 1, Progressed: 1},
	}
	if len(got) != len(exp) {
		t.Errorf("got %d keys %+v, want %d", len(got), got, len(exp))
	}
	for k, c := range exp {
		if got[k] != c {
			t.Errorf("%+v: %+v, want %+v", k, got[k], c)
		}
	}
	// ipvsadm --set 300 60 300: an ESTABLISHED entry is fresh at 299, not
	// at 290; a FIN_WAIT one at 59.
	text := "Pro FromIP\n" +
		"TCP 0A000102 C350 0A000164 0050 0A010102 0050 ESTABLISHED    299\n" +
		"TCP 0A000102 C351 0A000164 0050 0A010102 0050 ESTABLISHED    290\n" +
		"TCP 0A000102 C352 0A000164 0050 0A010102 0050 FIN_WAIT        59\n"
	got, err = ParseConns(strings.NewReader(text), ConnTimeouts{TCP: 300 * time.Second, TCPFin: 60 * time.Second}, want)
	if err != nil {
		t.Fatal(err)
	}
	if c := got[ConnKey{TCP, vip, ap("10.1.1.2:80")}]; c != (ConnCounts{Established: 2, Progressed: 2}) {
		t.Errorf("at tcp 300 s, tcpfin 60 s: %+v, want 2 established, 2 progressed", c)
	}
}

// TestParseConnsBad: a table the parser cannot read is an error, never an
// empty count.
func TestParseConnsBad(t *testing.T) {
	want := map[netip.AddrPort]struct{}{netip.MustParseAddrPort("10.1.1.2:80"): {}}
	for name, text := range map[string]string{
		"no header":     "TCP 0A000102 C350 0A000164 0050 0A010102 0050 ESTABLISHED 899\n",
		"short line":    "Pro FromIP\nTCP 0A000102 C350 0A000164 0050 0A010102\n",
		"bad address":   "Pro FromIP\nTCP 0A000102 C350 0A000164 0050 0A01010Z 0050 ESTABLISHED 899\n",
		"bad port":      "Pro FromIP\nTCP 0A000102 C350 0A000164 0050 0A010102 00G0 ESTABLISHED 899\n",
		"bad expiry":    "Pro FromIP\nTCP 0A000102 C350 0A000164 0050 0A010102 0050 ESTABLISHED soon\n",
		"line too long": "Pro FromIP\nTCP " + strings.Repeat("x", maxConnLine) + "\n",
	} {
		if got, err := ParseConns(strings.NewReader(text), ConnTimeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second}, want); err == nil {
			t.Errorf("%s: no error, %+v", name, got)
		}
	}
}

// BenchmarkParseConns: a table of 100,000 entries over 100 destinations,
// four of them wanted — what one read of a busy director's table costs
// lvs-monitor (the kernel's printing not included).
func BenchmarkParseConns(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n")
	states := []string{"ESTABLISHED    899", "TIME_WAIT      100", "SYN_RECV        59", "CLOSE            9"}
	for i := range 100000 {
		fmt.Fprintf(&sb, "TCP 0A00%04X %04X 0A000164 0050 0A01%02X02 0050 %s\n", i%65536, i%65536, i%100, states[i%4])
	}
	text := sb.String()
	want := map[netip.AddrPort]struct{}{}
	for i := range 4 {
		want[netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i), 2}), 80)] = struct{}{}
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		got, err := ParseConns(strings.NewReader(text), ConnTimeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second}, want)
		if err != nil || len(got) != 4 {
			b.Fatalf("%d keys, %v", len(got), err)
		}
	}
}
