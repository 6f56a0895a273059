# Guest end-to-end test: how soon a dead server is taken out (weight 0),
# lvs-monitor's backlog guard beside keepalived's TCP_CHECK on the same
# service (docs/developer/design.md "The backlog guard", docs/developer/testing-kernel.md).
#
# make_topology 4: keepalived (checker only) owns the NAT service on the VIP
# over rs1..rs4 at weight 10, TCP_CHECK delay_loop 6, retry 1,
# connect_timeout 3, inhibit_on_failure; lvs-monitor runs beside it with its
# defaults (1 s backlog check, 5 s interval, TCP probe), no agents, and
# health_checker = "keepalived". Each server runs busybox httpd with a CGI
# page; a client opens about 40 connections a second through the VIP. Each case makes one server fail and reads, from both daemons' logs
# (each line stamped with the guest's uptime as it is written), the seconds
# from the failure to the monitor's weight 0 and to keepalived's failed
# check; then the server is mended and both put it back.
#   a. crash under wlc (httpd killed: the host resets every connection);
#   b. crash under wrr;
#   c. a server that answers nobody (its routes to the client and to the
#      director gone): new connections stay in their handshake;
#   d. a server that answers the director but not the clients (its default
#      route gone): keepalived's check passes, the monitor's probe too; the
#      monitor takes it to 0 from the connection table;
#   e. a slow server (5 s a request, many established connections): never
#      weight 0, by either daemon.
# The monitor's weight 0 must be the guard's (its reason names the probe at
# a backlog check or the unanswered handshakes), within a bound far below
# keepalived's delay_loop. E2E_TRIALS repeats a-d (default 1).
set -u
. "${VMTEST_LIB:-/vmtest}/topology.sh"

W=/tmp/e2e-to
STATE=/run/e2e-to-state
CTL=/run/e2e-to-ctl
SVC=$TOPO_VIP:80
N=4
TRIALS=${E2E_TRIALS:-1}
MONPID=

rs() { echo "$(topo_rs_ip "$1"):80"; }
rsre() { echo "\\[$(topo_rs_ip "$1" | sed 's/\./\\./g')\\]:tcp:80"; } # keepalived's name of rsI

cleanup() {
	touch "$W/stop" 2>/dev/null
	[ -s "$W/mon.pid" ] && kill "$(cat "$W/mon.pid")" 2>/dev/null
	[ -s "$W/ka.pid" ] && kill "$(cat "$W/ka.pid")" 2>/dev/null
	sleep 0.5
	destroy_topology
}

fail() {
	echo "FAIL: $*"
	echo "--- director: ipvsadm -Ln"
	in_ns director ipvsadm -Ln
	echo "--- monitor.log (last 30 lines)"
	tail -n 30 "$W/monitor.log" 2>/dev/null
	echo "--- keepalived.log (last 20 lines)"
	tail -n 20 "$W/keepalived.log" 2>/dev/null
	cleanup
	exit 1
}

cycles() { metric_cycles director 127.0.0.1:9772; }

. "${VMTEST_LIB:-/vmtest}/lib.sh"

up() { cut -d' ' -f1 /proc/uptime; }
# stamp: each line of standard input prefixed with the uptime it was read at.
stamp() { while IFS= read -r _l; do read -r _u _ </proc/uptime; echo "$_u $_l"; done; }
weight() { in_ns director ipvsadm -Ln -t "$SVC" | awk -v a="$(rs "$1")" '$1 == "->" && $2 == a { print $4 }'; }
start_httpd() { ip netns exec "rs$1" httpd -f -p 80 -h "$W/www$1" & }
answers() { [ "$(in_ns director timeout 3 wget -q -O - "http://$(topo_rs_ip "$1")/" 2>/dev/null)" = "rs$1" ]; }
marks() { mm=$(wc -l <"$W/monitor.log"); km=$(wc -l <"$W/keepalived.log"); }
# mon_zero I: the uptime of the monitor's first weight 0 on rsI since the mark.
mon_zero() { sed -n "$((mm + 1)),\$p" "$W/monitor.log" | grep "msg=\"weight changed\" .* server=$(rs "$1") old=[0-9]* new=0 " | head -n 1; }
ka_fail() { sed -n "$((km + 1)),\$p" "$W/keepalived.log" | grep -E "TCP_CHECK on service $(rsre "$1") failed" | head -n 1; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# zeroed_by I: who took rsI to weight 0 since the mark, from the monitor's
# log: "monitor" for its own write; "keepalived" when keepalived's failed
# check zeroed it first and the monitor recorded that 0 as the health
# checker's (it never writes over a checker's down); nothing yet.
zeroed_by() {
	if [ -n "$(mon_zero "$1")" ]; then
		echo monitor
	elif sed -n "$((mm + 1)),\$p" "$W/monitor.log" | grep -q "msg=ownership .* server=$(rs "$1") weight=0 .*set_by=health-checker"; then
		echo keepalived
	fi
}
is_zeroed() { [ -n "$(zeroed_by "$1")" ]; }
ka_failed() { [ -n "$(ka_fail "$1")" ]; }
# mon_sees_up I: the monitor logged rsI managed again at a weight above 0
# since the mark (the checker's return).
mon_sees_up() { sed -n "$((mm + 1)),\$p" "$W/monitor.log" | grep -q "msg=ownership .* server=$(rs "$1") weight=[1-9][0-9]* state=managed"; }

# take_out CASE I BOUND KA: after rsI was broken at $t0, wait for the
# monitor's weight 0 (reason matching $why) and, with KA=yes, keepalived's
# failed check; the monitor's must come within BOUND seconds. keepalived's
# check runs every 6 s and fails a crashed server a second after its
# first refused connect: when that lands just after the failure, keepalived
# zeroes the server before the monitor can, and the monitor rightly leaves
# the checker's 0 alone. Then the case proves nothing about the monitor:
# $first is "keepalived" and the caller runs it again; unless keepalived
# came after BOUND, which means the monitor missed its bound.
take_out() {
	wait_for "$1: rs$2 goes to 0 (by the monitor, or keepalived first)" is_zeroed "$2"
	first=$(zeroed_by "$2")
	if [ "$first" = keepalived ]; then
		wait_for "$1: keepalived's failed check of rs$2 in its log" ka_failed "$2"
		_k=$(ka_fail "$2")
		tk=$(secs "$t0" "${_k%% *}")
		awk -v t="$tk" -v b="$3" 'BEGIN { exit !(t <= b) }' || fail "$1: the monitor did not take rs$2 to 0 within $3 s; keepalived's check did, at $tk s"
		say "$1: keepalived's check zeroed rs$2 first, at $tk s: the monitor leaves a checker's 0 alone; the case runs again"
		echo "$1 - $tk keepalived-first" >>"$W/results"
		return 0
	fi
	_m=$(mon_zero "$2")
	echo "$_m" | grep -qE "reason=\"($why)" || fail "$1: rs$2's weight 0 was not the guard's: $_m"
	tm=$(secs "$t0" "${_m%% *}")
	awk -v t="$tm" -v b="$3" 'BEGIN { exit !(t <= b) }' || fail "$1: the monitor took $tm s (bound $3 s): $_m"
	tk=never
	if [ "$4" = yes ]; then
		wait_for "$1: keepalived's check of rs$2 fails" ka_failed "$2"
		_k=$(ka_fail "$2")
		tk=$(secs "$t0" "${_k%% *}")
	fi
	_by=cycle
	echo "$_m" | grep -q 'reason="unreachable' || _by=guard
	say "$1: rs$2 to weight 0: lvs-monitor $tm s (its $_by), keepalived $tk s"
	echo "$1 $tm $tk $_by" >>"$W/results"
}
# crash CASE I: kill every process of rsI, take_out (bound 3 s, keepalived's
# time too), start its httpd again and wait for it back in rotation; again,
# at most 3 times, while keepalived's check came first.
crash() {
	_try=1
	while :; do
		marks
		for p in $(ip netns pids "rs$2"); do kill "$p" 2>/dev/null; done
		t0=$(up)
		take_out "$1" "$2" 3 yes
		start_httpd "$2"
		back "$2"
		[ "$first" = keepalived ] || return 0
		[ "$_try" -lt 3 ] || fail "$1: keepalived's check came first $_try times in a row"
		# The monitor must have seen the checker's return, or the next
		# try's 0 is no change to it.
		wait_for "$1: the monitor sees keepalived put rs$2 back" mon_sees_up "$2"
		_try=$((_try + 1))
		sleep 3
	done
}
back() { wait_for "rs$1 back in rotation" sh -c "w=\$(ip netns exec director ipvsadm -Ln -t $SVC | awk '\$2 == \"$(rs "$1")\" { print \$4 }'); [ -n \"\$w\" ] && [ \"\$w\" -gt 0 ]"; }

# --- setup -----------------------------------------------------------------
t_start=$(now)
destroy_topology
rm -rf "$W" "$STATE" "$CTL"
mkdir -p "$W" "$STATE"
mkdir -m 700 "$CTL"
: >"$W/keepalived.log"
: >"$W/monitor.log"
: >"$W/results"
WAIT_CEILING=60 # each wait: a take-out or a return takes seconds
run make_topology "$N"
for i in 1 2 3 4; do
	run mkdir -p "$W/www$i/cgi-bin"
	echo "rs$i" >"$W/www$i/index.html"
	: >"$W/slow$i"
	# Builtins only while fast: one exec per request.
	printf '#!/bin/sh\necho "Content-Type: text/plain"\necho\n[ -s %s ] && sleep 5\necho rs%s\n' "$W/slow$i" "$i" >"$W/www$i/cgi-bin/page"
	chmod +x "$W/www$i/cgi-bin/page"
	start_httpd "$i"
done
for i in 1 2 3 4; do wait_for "rs$i answers" answers "$i"; done
say "keepalived: $(keepalived --version 2>&1 | head -n 1)"
{
	printf 'global_defs {\n\trouter_id vmtest\n}\n'
	printf 'virtual_server %s 80 {\n\tdelay_loop 6\n\tlb_algo wlc\n\tlb_kind NAT\n\tprotocol TCP\n\tinhibit_on_failure\n' "$TOPO_VIP"
	for i in 1 2 3 4; do
		printf '\treal_server %s 80 {\n\t\tweight 10\n\t\tTCP_CHECK {\n\t\t\tconnect_timeout 3\n\t\t\tretry 1\n\t\t}\n\t}\n' "$(topo_rs_ip "$i")"
	done
	printf '}\n'
} >"$W/keepalived.conf"
ip netns exec director sh -c 'echo $$ >"$0/ka.pid"; exec keepalived -n -l -D -G -C -f "$0/keepalived.conf" -p "$0/ka-main.pid" -c "$0/ka-checkers.pid" -r "$0/ka-vrrp.pid" -b "$0/ka-bfd.pid"' "$W" 2>&1 | stamp >>"$W/keepalived.log" &
all_ten() { for i in 1 2 3 4; do [ "$(weight "$i")" = 10 ] || return 1; done; }
wait_for "keepalived builds the table" all_ten

cat >"$W/monitor.toml" <<EOF
state_dir = "$STATE"
metrics_listen = "127.0.0.1:9772"
control_socket = "$CTL/control.sock"
agent_port = 9

[[service]]
address = "$SVC/tcp"
health_checker = "keepalived"
EOF
for i in 1 2 3 4; do printf '[[service.server]]\naddress = "%s"\nweight = 10\n' "$(rs "$i")" >>"$W/monitor.toml"; done
run lvs-monitor -check -config "$W/monitor.toml"
ip netns exec director sh -c 'echo $$ >"$0/mon.pid"; exec lvs-monitor -config "$0/monitor.toml"' "$W" 2>&1 | stamp >>"$W/monitor.log" &
wait_for "lvs-monitor started" grep -qs 'msg="lvs-monitor started"' "$W/monitor.log"
wait_cycles 10 "the monitor adopted the four servers" sh -c "[ \$(grep -c 'reason=\"adopted at its kernel weight\"' $W/monitor.log) -ge 4 ]"

# The client (vmtest/diskserver's: no process per request, which a TCG
# guest cannot afford at this rate): at most 40 requests a second for /, a
# new connection each, 64 loops so that a few waiting on a dead server do
# not slow the others.
in_ns client diskserver client -url "http://$TOPO_VIP/" -workers 64 -rate 40 -stop "$W/stop" -counts "$W/counts" 2>"$W/client.log" &
served() { awk '$1 != "fail" { n += $2 } END { print n + 0 }' "$W/counts" 2>/dev/null; }
wait_for "the client gets answers through the VIP" sh -c "[ \$(awk '\$1 != \"fail\" { n += \$2 } END { print n + 0 }' $W/counts 2>/dev/null || echo 0) -ge 40 ]"
h0=$(served)
sleep 5
say "setup done in $(($(now) - t_start)) s; the client made $((($(served) - h0) / 5)) requests a second"
sleep 3 # the guard's first readings, keepalived's first checks

trial=1
while [ "$trial" -le "$TRIALS" ]; do
	# --- a. crash under wlc --------------------------------------------------
	run in_ns director ipvsadm -E -t "$SVC" -s wlc
	sleep 2
	# The guard's probe, or the cycle's when it comes first: both are the
	# monitor's own refused probe.
	why="refused a probe at a backlog check|unreachable \\(1 failed probes in a row\\): .*connection refused"
	crash "a.wlc-crash" 1

	# --- b. crash under wrr --------------------------------------------------
	run in_ns director ipvsadm -E -t "$SVC" -s wrr
	sleep 3
	crash "b.wrr-crash" 2

	# --- c. answers nobody ---------------------------------------------------
	sleep 2
	marks
	why="its connections never complete|unreachable"
	run ip -n rs3 route del default
	run ip -n rs3 route add blackhole "$(topo_rs_gw 3)/32"
	t0=$(up)
	take_out "c.wrr-hung" 3 6 yes
	[ "$first" = monitor ] || fail "c: keepalived's check took rs3 to 0 before the monitor"
	echo "$(mon_zero 3)" | grep -q 'reason="its connections never complete' || fail "c: rs3 went to 0 for another reason: $(mon_zero 3)"
	run ip -n rs3 route del blackhole "$(topo_rs_gw 3)/32"
	run ip -n rs3 route add default via "$(topo_rs_gw 3)"
	back 3

	# --- d. answers the director only ----------------------------------------
	sleep 2
	marks
	why="its connections never complete"
	run ip -n rs4 route del default
	t0=$(up)
	take_out "d.wrr-director-only" 4 6 no
	[ "$first" = monitor ] || fail "d: keepalived's check took rs4 to 0: its route to the director is intact"
	sleep 3
	[ -z "$(ka_fail 4)" ] || fail "d: keepalived's check of rs4 failed: its route to the director is intact"
	run ip -n rs4 route add default via "$(topo_rs_gw 4)"
	back 4
	trial=$((trial + 1))
	# Another trial: every server back at its full weight first (the
	# monitor's 30 s slow start), or a victim at weight 1 gets a trickle.
	[ "$trial" -le "$TRIALS" ] && wait_for "every server back at 10" all_ten
done

# --- e. a slow server: never 0 ---------------------------------------------
# A second client fetches the CGI page, 20 a second: rs1 answers it after
# 5 s, the others at once; rs1's connections pile up established.
marks
echo 1 >"$W/slow1"
in_ns client diskserver client -url "http://$TOPO_VIP/cgi-bin/page" -workers 128 -rate 20 -stop "$W/stop" -counts "$W/counts-slow" 2>"$W/client-slow.log" &
t0=$(up)
say "rs1 now takes 5 s a request for /cgi-bin/page"
never0() { w=$(weight 1); [ -n "$w" ] && [ "$w" -gt 0 ] || fail "e: the slow rs1 went to weight $w: $(sed -n "$((mm + 1)),\$p" "$W/monitor.log" | grep 'server=10.1.1.2:80' | tail -n 3)"; }
# The most established connections rs1 held, sampled every ~2 s: once the
# backlog guard cuts it, it receives few new ones.
established() { in_ns director ipvsadm -Lnc | awk -v a="$(rs 1)" '$6 == a && $3 == "ESTABLISHED"' | wc -l; }
est=0
_end=$(($(now) + 15))
_n=0
while [ "$(now)" -lt "$_end" ]; do
	never0
	_n=$((_n + 1))
	if [ $((_n % 4)) = 0 ]; then
		_e=$(established)
		[ "$_e" -gt "$est" ] && est=$_e
	fi
	sleep 0.5
done
say "e: rs1 slow for 15 s: weight $(weight 1) now, at most $est established connections; never 0 ($(sed -n "$((mm + 1)),\$p" "$W/monitor.log" | grep -c 'server=10.1.1.2:80') monitor log lines about it)"
[ "$est" -ge 5 ] || fail "e: rs1 held at most $est established connections: not the slow server this case needs"
[ -z "$(ka_fail 1)" ] || fail "e: keepalived failed the slow rs1"
: >"$W/slow1"

# c's and d's servers fail the clients while the director's probe may
# still pass (d's always, c's only while the server's reply to a probe
# still gets out): a cycle may bring one back (slow start) before it is
# mended, and the guard take it out again. Mended, each must end at its
# weight, 10, not at the slow-start step it was on when it went down the
# second time.
is_weight() { [ "$(weight "$1")" = "$2" ]; }
for i in 3 4; do
	wait_for "rs$i back at its weight 10 after its slow start" is_weight "$i" 10
	say "rs$i back at 10: $(grep -c "server=$(rs "$i") .*reason=\"reachable again" "$W/monitor.log") returns, $(grep -c "server=$(rs "$i") .*down during its slow start" "$W/monitor.log") after a relapse"
done

echo "--- case, seconds to weight 0: lvs-monitor, keepalived, the monitor's part that did it"
cat "$W/results"
echo "--- client answers: $(tr '\n' ' ' <"$W/counts"); slow page: $(tr '\n' ' ' <"$W/counts-slow")"
cleanup
echo "PASS: e2e-takeout in $(($(now) - t_start)) s"
