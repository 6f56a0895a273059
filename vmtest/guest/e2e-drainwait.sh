# Guest end-to-end test: lvsctl drain --wait on a persistent service (ipvsadm
# -p) waits for the server's persistence templates as well as its
# connections (docs/operator-guide.md, "Draining and undraining").
#
# make_topology 3: a director with an IPVS NAT service on the VIP, rr,
# persistent for 15 s, over rs1..rs3 (busybox httpd and an lvs-agent each);
# ipvsadm --set 3 3 3, so that an idle connection leaves the table 3 s after
# its last packet while its template lives on until 15 s after the
# connection was made. lvs-monitor in the director namespace, lvsctl from
# the root namespace. The client holds idle connections (nc, stdin a FIFO
# nobody writes to); the kernel's own view is ipvsadm -Ln --persistent-conn
# in the director (PersistConn, ActiveConn, InActConn).
#   a. a held connection makes a template to server S; `lvsctl drain S
#      --wait --timeout 120s` does not return while S has a template, not
#      even after the connection has left the table (seen at least once:
#      0 connections, 1 template, lvsctl still waiting), prints that state,
#      and returns 0 once the template is gone — never while the kernel
#      still shows it;
#   b. undrained, a new held connection makes a template to S2; once the
#      connection has left the table, `lvsctl drain S2 --wait --timeout 2s`
#      exits 4 and names what is left: 0 active, 0 inactive connections,
#      1 persistence template, removed 15 s (ipvsadm -p) after ...;
#   c. the kernel facts docs/operator-guide.md states: with
#      net.ipv4.vs.expire_quiescent_template = 0 (the default) the
#      persistent client's next connection still goes to the drained S2;
#      with 1 it goes to another server, and S2's template is unhooked (its
#      ports 65535) but still counted until its timer ends.
# docs/developer/testing-kernel.md lists, for each, a change that makes it fail.
set -u
. "${VMTEST_LIB:-/vmtest}/topology.sh"

W=/tmp/drainwait
CTL=/run/e2e-drainwait
SOCK=$CTL/control.sock
SVC=$TOPO_VIP:80
SVCT=$SVC/tcp
PTIMEOUT=15
MONPID=
HOLD=
LPID=

rs() { echo "$(topo_rs_ip "$1"):80"; }

cleanup() {
	[ -n "$MONPID" ] && kill "$MONPID" 2>/dev/null
	[ -n "$LPID" ] && kill "$LPID" 2>/dev/null
	for p in $HOLD; do kill "$p" 2>/dev/null; done
	exec 7>&- 2>/dev/null
	destroy_topology
}

fail() {
	echo "FAIL: $*"
	echo "--- director: ipvsadm -Ln --persistent-conn"
	in_ns director ipvsadm -Ln --persistent-conn
	echo "--- director: ipvsadm -Lnc"
	in_ns director ipvsadm -Lnc
	echo "--- monitor.log (last 30 lines)"
	tail -n 30 "$W/monitor.log"
	for f in "$W"/lvsctl*.out "$W"/lvsctl*.err; do
		[ -s "$f" ] && { echo "--- $f"; cat "$f"; }
	done
	cleanup
	exit 1
}

WAIT_POLL=0.3
. "${VMTEST_LIB:-/vmtest}/lib.sh"

# col ADDR N: column N of ADDR's line in ipvsadm -Ln --persistent-conn
# (3 weight, 4 PersistConn, 5 ActiveConn, 6 InActConn).
col() { in_ns director ipvsadm -Ln --persistent-conn -t "$SVC" | awk -v a="$1" -v c="$2" '$1 == "->" && $2 == a { print $c }'; }
weight() { col "$1" 3; }
templates() { col "$1" 4; }
# conns ADDR: active + inactive.
conns() { in_ns director ipvsadm -Ln --persistent-conn -t "$SVC" | awk -v a="$1" '$1 == "->" && $2 == a { print $5 + $6 }'; }
ctl() { lvsctl -socket "$SOCK" "$@"; }
cycles() { probe_counts '10\.1\.[0-9]+\.1' "$W/httpd1.log" "$W/httpd2.log" "$W/httpd3.log"; }

# hold: one idle connection from the client through the VIP; prints the
# real server it reached (ADDR:PORT), as the kernel's table shows it.
hold() {
	_before=$(in_ns director ipvsadm -Lnc | grep -c ESTABLISHED)
	ip netns exec client nc "$TOPO_VIP" 80 <"$W/hold" >/dev/null 2>&1 &
	HOLD="$HOLD $!"
	_t=0
	while [ "$(in_ns director ipvsadm -Lnc | grep -c ESTABLISHED)" -le "$_before" ] && [ "$_t" -lt 50 ]; do
		sleep 0.2
		_t=$((_t + 1))
	done
	in_ns director ipvsadm -Lnc | awk '$3 == "ESTABLISHED" { print $6; exit }'
}
release() {
	for p in $HOLD; do kill "$p" 2>/dev/null; done
	for p in $HOLD; do wait "$p" 2>/dev/null; done
	HOLD=
}
# template_of: the real server of the client's (live) template.
template_of() { in_ns director ipvsadm -Lnc | awk '$4 ~ /:0$/ && $6 !~ /:65535$/ { print $6; exit }'; }

# --- setup -----------------------------------------------------------------
t_start=$(now)
destroy_topology
rm -rf "$W" "$CTL"
mkdir -p "$W"
mkdir -m 700 "$CTL"
mkfifo "$W/hold"
exec 7<>"$W/hold"
run make_topology 3
serve_rs
run in_ns director ipvsadm -A -t "$SVC" -s rr -p "$PTIMEOUT"
for i in 1 2 3; do run in_ns director ipvsadm -a -t "$SVC" -r "$(rs "$i")" -m -w 10; done
run in_ns director ipvsadm --set 3 3 3
in_ns director ipvsadm -L --timeout
[ "$(in_ns director cat /proc/sys/net/ipv4/vs/expire_quiescent_template)" = 0 ] || fail "expire_quiescent_template is not 0 by default"

lvsctl_config "$W/monitor.toml"
run lvs-monitor -check -config "$W/monitor.toml"
ip netns exec director lvs-monitor -config "$W/monitor.toml" 2>"$W/monitor.log" &
MONPID=$!
wait_for "lvs-monitor started" grep -qs 'msg="lvs-monitor started"' "$W/monitor.log"
wait_cycles 10 "the monitor adopted the three servers" sh -c "[ \$(grep -c 'reason=\"adopted at its kernel weight\"' $W/monitor.log) -ge 3 ]"
say "setup done in $(($(now) - t_start)) s"

# --- a. --wait waits for the template, returns 0 once it is gone -------------
S=$(hold)
[ -n "$S" ] || fail "a: no connection through the VIP"
[ "$(template_of)" = "$S" ] || fail "a: the connection to $S made no template: $(in_ns director ipvsadm -Lnc)"
say "a: connection and template to $S: $(templates "$S") template(s), $(conns "$S") connection(s)"
ctl drain "$SVCT" "$S" --wait --timeout 120s >"$W/lvsctl-drain.out" 2>"$W/lvsctl-drain.err" &
LPID=$!
# Poll: lvsctl's state first, then the table's. A template never comes back
# once gone (nothing connects), so lvsctl gone while the kernel still shows
# one means it returned too early.
only_templates=0
polls=0
while :; do
	alive=1
	kill -0 "$LPID" 2>/dev/null || alive=0
	tp=$(templates "$S")
	cn=$(conns "$S")
	[ "$alive" = 0 ] && [ "${tp:-0}" -gt 0 ] && fail "a: lvsctl drain --wait returned with $tp template(s) to $S in the kernel"
	[ "$alive" = 0 ] && break
	[ "$cn" = 0 ] && [ "${tp:-0}" -gt 0 ] && only_templates=$((only_templates + 1))
	polls=$((polls + 1))
	[ "$polls" -lt 1000 ] || fail "a: lvsctl drain --wait still waiting after $polls polls: $tp template(s), $cn connection(s)"
	sleep 0.3
done
wait "$LPID"
rc=$?
LPID=
cat "$W/lvsctl-drain.out" "$W/lvsctl-drain.err"
[ "$rc" = 0 ] || fail "a: lvsctl drain --wait exited $rc, want 0"
[ "$only_templates" -ge 1 ] || fail "a: never saw lvsctl waiting with no connection and a template left ($polls polls)"
grep -q '^waiting: 0 active, 0 inactive connections, 1 persistence template' "$W/lvsctl-drain.out" || fail "a: lvsctl did not show the template alone"
grep -q '^drained: no connections and no persistence templates left after ' "$W/lvsctl-drain.out" || fail "a: lvsctl did not say drained"
[ "$(weight "$S")" = 0 ] || fail "a: $S is $(weight "$S") after the drain"
say "a: PASS (waited through $only_templates polls with only the template left)"
release

# --- b. --timeout shorter than the template's life: exit 4, named ----------------
ctl undrain "$SVCT" "$S" >/dev/null || fail "b: undrain $S"
up() { _w=$(weight "$S"); [ -n "$_w" ] && [ "$_w" -gt 0 ]; }
wait_cycles 10 "b: $S back in rotation" up
S2=$(hold)
[ -n "$S2" ] || fail "b: no connection through the VIP"
[ "$(template_of)" = "$S2" ] || fail "b: the connection to $S2 made no template"
conn_gone() { [ "$(conns "$S2")" = 0 ]; }
wait_for "b: the idle connection to $S2 leaves the table (tcp timeout 3 s)" conn_gone
[ "$(templates "$S2")" = 1 ] || fail "b: the template to $S2 went with its connection"
c0=$(cycles)
ctl drain "$SVCT" "$S2" --wait --timeout 2s >"$W/lvsctl-drain2.out" 2>"$W/lvsctl-drain2.err"
rc=$?
cat "$W/lvsctl-drain2.out" "$W/lvsctl-drain2.err"
[ "$rc" = 4 ] || fail "b: lvsctl drain --wait --timeout 2s exited $rc with a template left, want 4"
[ "$(cycles_since "$c0")" -le 10 ] || fail "b: lvsctl drain --timeout 2s took $(cycles_since "$c0") monitor cycles"
grep -q "still 0 active, 0 inactive connections, 1 persistence template after 2s; the server stays drained" "$W/lvsctl-drain2.err" ||
	fail "b: lvsctl did not name the template left"
grep -q "persistence templates: each removed $PTIMEOUT s (ipvsadm -p) after the last new connection" "$W/lvsctl-drain2.err" ||
	fail "b: lvsctl did not name the template's timer"
[ "$(weight "$S2")" = 0 ] || fail "b: $S2 is $(weight "$S2") after the --wait timeout"
say "b: PASS"
release

# --- c. expire_quiescent_template -------------------------------------------------
[ "$(templates "$S2")" = 1 ] || fail "c: the template to $S2 is gone already"
D=$(hold)
[ "$D" = "$S2" ] || fail "c: expire_quiescent_template=0: the persistent client's new connection went to $D, not to the drained $S2"
say "c: expire_quiescent_template=0: the client's new connection went to the drained $S2 (weight $(weight "$S2"))"
# Left idle, not closed: a closed connection would sit in TIME_WAIT (120 s)
# and keep the template alive as long.
conn2_gone() { [ "$(conns "$S2")" = 0 ]; }
wait_for "c: the connection to $S2 leaves the table" conn2_gone
[ "$(templates "$S2")" = 1 ] || fail "c: the template to $S2 is gone already"
run in_ns director sh -c 'echo 1 >/proc/sys/net/ipv4/vs/expire_quiescent_template'
D=$(hold)
[ -n "$D" ] && [ "$D" != "$S2" ] || fail "c: expire_quiescent_template=1: the new connection went to '$D', want another server than $S2"
in_ns director ipvsadm -Lnc
in_ns director ipvsadm -Lnc | grep -q "10.0.1.2:0 .*$TOPO_VIP:65535 *${S2%:*}:65535" || fail "c: no unhooked template to $S2"
[ "$(templates "$S2")" = 1 ] || fail "c: the unhooked template to $S2 is no longer counted"
gone() { [ "$(templates "$S2")" = 0 ]; }
wait_for "c: the unhooked template to $S2 expires" gone
say "c: PASS (expire_quiescent_template=1: new connection to $D; $S2's template unhooked, counted until its timer ended)"
release
in_ns director sh -c 'echo 0 >/proc/sys/net/ipv4/vs/expire_quiescent_template'

kill -TERM "$MONPID"
wait "$MONPID"
rc=$?
MONPID=
[ "$rc" = 0 ] || fail "lvs-monitor exited $rc on SIGTERM"
cleanup
echo "PASS: e2e-drainwait (a-c) in $(($(now) - t_start)) s"
