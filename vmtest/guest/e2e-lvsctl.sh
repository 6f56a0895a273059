# Guest end-to-end test: lvsctl against a running lvs-monitor on real IPVS
# (issue 4, the VM part).
#
# make_topology 3: a director with an IPVS NAT service on the VIP (rr) over
# rs1..rs3, each real server with a busybox httpd and an lvs-agent (host
# source); lvs-monitor in the director namespace with a control socket;
# lvsctl talks to it from the root namespace (the socket is a file).
# Assertions, on the kernel's table (ipvsadm -Ln in the director) and on
# lvsctl's exit status and output:
#   a. with a client holding a connection through the VIP to rs1 (an idle
#      nc, ActiveConn of rs1 > 0), `lvsctl drain --wait --timeout 60s` sets
#      rs1 to 0 at once and does not return while the connection is open,
#      nor while its closing entry (FIN_WAIT, inactive) is in the table;
#      once that is gone lvsctl exits 0 and rs1 stays 0.
#      With a connection held, `--timeout 2s` exits 4 and the drain stays;
#   b. `lvsctl undrain` gives rs1 a non-zero weight again;
#   c. a broken configuration over the monitor's file: `lvsctl reload` exits
#      1, the monitor keeps running with the old configuration (still
#      managing weights: a stopped httpd takes its server to 0 and back) and
#      `lvsctl status -o json` shows the reload error; the file fixed,
#      `lvsctl reload` exits 0 and the error is gone;
#   d. `lvsctl explain SVC RS` exits 0 and prints the formula step.
# docs/developer/testing-kernel.md lists, for each, a change that makes it fail.
set -u
. "${VMTEST_LIB:-/vmtest}/topology.sh"

W=/tmp/lvsctl
CTL=/run/e2e-lvsctl # private directory for the control socket
SOCK=$CTL/control.sock
SVC=$TOPO_VIP:80
SVCT=$SVC/tcp
MONPID=
HOLD= # pids of the nc processes holding connections

rs() { echo "$(topo_rs_ip "$1"):80"; }

cleanup() {
	[ -n "$MONPID" ] && kill "$MONPID" 2>/dev/null
	for p in $HOLD; do kill "$p" 2>/dev/null; done
	exec 7>&- 2>/dev/null
	destroy_topology
}

fail() {
	echo "FAIL: $*"
	echo "--- director: ipvsadm -Ln"
	in_ns director ipvsadm -Ln
	echo "--- director: ipvsadm -Lnc"
	in_ns director ipvsadm -Lnc
	echo "--- monitor.log (last 40 lines)"
	tail -n 40 "$W/monitor.log"
	for f in "$W"/lvsctl*.out "$W"/lvsctl*.err; do
		[ -s "$f" ] && { echo "--- $f"; cat "$f"; }
	done
	cleanup
	exit 1
}

WAIT_POLL=0.3
. "${VMTEST_LIB:-/vmtest}/lib.sh" # now, say, run, wait_for, wait_cycles, pass_cycles, hold_cycles

# field I COL: column COL of rsI's line in ipvsadm -Ln (4 weight, 5 ActiveConn).
field() { in_ns director ipvsadm -Ln -t "$SVC" | awk -v a="$(rs "$1")" -v c="$2" '$1 == "->" && $2 == a { print $c }'; }
weight() { field "$1" 4; }
active() { field "$1" 5; }
weights() { echo "rs1=$(weight 1) rs2=$(weight 2) rs3=$(weight 3)"; }
ctl() { lvsctl -socket "$SOCK" "$@"; }
# cycles: the monitor's cycle counters for lib.sh's waits (it logs nothing
# per cycle at info level): its probes of each server (from the director's
# 10.1.I.1), one per cycle while the server is not drained (rs1 is drained
# in a, rs3's httpd stopped in c).
cycles() { probe_counts '10\.1\.[0-9]+\.1' "$W/httpd1.log" "$W/httpd2.log" "$W/httpd3.log"; }

# hold_rs1: open idle connections through the VIP (nc, its stdin a FIFO
# nobody writes to) until rs1 has an active one; their pids go to HOLD.
hold_rs1() {
	_n=0
	while [ "$(active 1)" = 0 ]; do
		[ "$_n" -lt 12 ] || fail "12 connections through the VIP and none to rs1: $(weights)"
		ip netns exec client nc "$TOPO_VIP" 80 <"$W/hold" >/dev/null 2>&1 &
		HOLD="$HOLD $!"
		_n=$((_n + 1))
		_t=0
		while [ "$(in_ns director ipvsadm -Lnc | grep -c ESTABLISHED)" -lt "$_n" ] && [ "$_t" -lt 20 ]; do
			sleep 0.2
			_t=$((_t + 1))
		done
	done
	say "holding $_n connection(s) through the VIP; rs1 ActiveConn $(active 1)"
	in_ns director ipvsadm -Lnc | grep ESTABLISHED
}
release() {
	for p in $HOLD; do kill "$p" 2>/dev/null; kill -CONT "$p" 2>/dev/null; done
	for p in $HOLD; do wait "$p" 2>/dev/null; done
	HOLD=
}
# close_rs1_server_side: rs1's httpd children (its end of the held
# connection; rs1 is drained, so no probe is being served) are killed with
# the clients stopped: the server's FIN takes the kernel's entry to FIN_WAIT
# (inactive, tcpfin = 5 s, set below) and no client FIN follows it to
# TIME_WAIT (120 s). The stopped nc are killed by release.
close_rs1_server_side() {
	for p in $HOLD; do kill -STOP "$p" 2>/dev/null; done
	# shellcheck disable=SC2046
	kill $(awk -v pp="$(cat "$W/httpd1.pid")" '$4 == pp { print $1 }' /proc/[0-9]*/stat 2>/dev/null) 2>/dev/null
}

# --- setup -----------------------------------------------------------------
t_start=$(now)
destroy_topology
rm -rf "$W" "$CTL"
mkdir -p "$W"
mkdir -m 700 "$CTL"
mkfifo "$W/hold"
exec 7<>"$W/hold" # a writer that never writes: the holders' nc never sees EOF
run make_topology 3
serve_rs
# rr, not wrr: the held connections below must reach rs1 whatever weights
# the monitor writes (rr skips only weight 0: rs1 gets one of every three).
# Under wrr, a weight write resets the scheduler's round (the kernel's
# ip_vs_wrr_dest_changed): on a busy host, where this monitor's formula moves
# the weights every cycle, 12 connections opened a second or more apart all
# went to the heavier servers and none to rs1 at weight 1.
run in_ns director ipvsadm -A -t "$SVC" -s rr
for i in 1 2 3; do run in_ns director ipvsadm -a -t "$SVC" -r "$(rs "$i")" -m -w 10; done
# FIN_WAIT 5 s instead of 120 (0: unchanged), for a's closing entry.
run in_ns director ipvsadm --set 0 5 0

lvsctl_config "$W/monitor.toml"
run lvs-monitor -check -config "$W/monitor.toml"
cp "$W/monitor.toml" "$W/monitor.toml.good"
ip netns exec director lvs-monitor -config "$W/monitor.toml" 2>"$W/monitor.log" &
MONPID=$!
wait_for "lvs-monitor started" grep -qs 'msg="lvs-monitor started"' "$W/monitor.log"
wait_cycles 10 "the monitor adopted the three servers" sh -c "[ \$(grep -c 'reason=\"adopted at its kernel weight\"' $W/monitor.log) -ge 3 ]"
pass_cycles 2
ctl status >"$W/lvsctl-status.out" 2>"$W/lvsctl-status.err" || fail "lvsctl status failed"
cat "$W/lvsctl-status.out"
say "setup done in $(($(now) - t_start)) s: $(weights)"

# --- a. drain --wait with a connection held ---------------------------------
hold_rs1
ctl drain "$SVCT" "$(rs 1)" --wait --timeout 60s >"$W/lvsctl-drain.out" 2>"$W/lvsctl-drain.err" &
LPID=$!
rs1_zero() { [ "$(weight 1)" = 0 ]; }
wait_cycles 10 "lvsctl drain sets rs1 to 0" rs1_zero
# It must not return while the connection is open: watch it for 5 monitor
# cycles (lvsctl polls the monitor every second; 5 s when the host is quiet).
lvsctl_waits() { kill -0 "$LPID" 2>/dev/null || { wait "$LPID"; fail "a: lvsctl drain --wait returned (status $?) with rs1 holding $(active 1) active connection(s)"; }; }
hold_cycles 5 "a: lvsctl drain --wait still waiting" lvsctl_waits
[ "$(active 1)" -gt 0 ] || fail "a: rs1 lost its connection on its own"
grep -q 'waiting: [1-9][0-9]* active' "$W/lvsctl-drain.out" || fail "a: lvsctl drain --wait shows no progress"
say "lvsctl drain --wait still waiting after $held monitor cycles: $(tail -n 1 "$W/lvsctl-drain.out")"
close_rs1_server_side
t0=$(now)
# lvsctl's state first, then the table's: once gone, rs1's entry does not
# come back (the clients are stopped), so lvsctl gone while the kernel
# still shows it means it returned too early.
closing=0
polls=0
while :; do
	alive=1
	kill -0 "$LPID" 2>/dev/null || alive=0
	_a=$(active 1) _i=$(field 1 6)
	[ "$alive" = 0 ] && [ "$((_a + _i))" -gt 0 ] && fail "a: lvsctl drain --wait returned with rs1 holding $_a active, $_i inactive connection(s)"
	[ "$alive" = 0 ] && break
	[ "$_a" = 0 ] && [ "$_i" -gt 0 ] && closing=$((closing + 1))
	polls=$((polls + 1))
	[ "$polls" -lt 600 ] || fail "a: lvsctl drain --wait still waiting after $polls polls: rs1 $_a active, $_i inactive"
	sleep 0.3
done
wait "$LPID"
rc=$?
cat "$W/lvsctl-drain.out"
[ "$rc" = 0 ] || fail "a: lvsctl drain --wait exited $rc after the connection closed"
[ "$closing" -ge 1 ] || fail "a: never saw lvsctl waiting on rs1's closing entry alone ($polls polls)"
grep -q '^waiting: 0 active, [1-9][0-9]* inactive connections' "$W/lvsctl-drain.out" || fail "a: lvsctl did not show the closing entry"
grep -q '^drained: no connections and no persistence templates left' "$W/lvsctl-drain.out" || fail "a: lvsctl drain --wait did not say drained"
release
[ "$(weight 1)" = 0 ] || fail "a: rs1 is $(weight 1) after the drain"
pass_cycles 2
[ "$(weight 1)" = 0 ] || fail "a: rs1 is $(weight 1) two cycles after the drain"
say "a: drain --wait returned 0 within $(($(now) - t0)) s of the close; $(weights)"

# --- b. undrain ----------------------------------------------------------------
l_undrain=$(wc -l <"$W/monitor.log")
ctl undrain "$SVCT" "$(rs 1)" >"$W/lvsctl-undrain.out" 2>"$W/lvsctl-undrain.err" || fail "b: lvsctl undrain exited $?"
cat "$W/lvsctl-undrain.out"
w=$(weight 1)
[ -n "$w" ] && [ "$w" -gt 0 ] || fail "b: rs1 is '$w' after lvsctl undrain"
# managed again: the monitor writes rs1 itself (slow start from the floor)
# and takes it up to the others — to 20 like them on a quiet host; on a busy
# one the formula holds every weight low (the load is over its target), so
# "up to the others" is the lower of rs2's and rs3's weights, not a number —
# within the threshold (1): a step of 1 is never written, so rs1 can stay at
# 19 beside 20.
rs1_up() {
	_w1=$(weight 1) _w2=$(weight 2) _w3=$(weight 3)
	[ -n "$_w1" ] && [ -n "$_w2" ] && [ -n "$_w3" ] && { [ $((_w1 + 1)) -ge "$_w2" ] || [ $((_w1 + 1)) -ge "$_w3" ]; } &&
		tail -n +$((l_undrain + 1)) "$W/monitor.log" | weight_changes | grep -q "^$(rs 1) "
}
wait_cycles 20 "rs1 ramps up to the others after the undrain" rs1_up
say "b: PASS ($(weights))"

# --- a (continued). --timeout with a connection held: exit 4, drain stays -----
hold_rs1
t0=$(now)
c0=$(cycles)
ctl drain "$SVCT" "$(rs 1)" --wait --timeout 2s >"$W/lvsctl-drain2.out" 2>"$W/lvsctl-drain2.err"
rc=$?
cat "$W/lvsctl-drain2.out" "$W/lvsctl-drain2.err"
[ "$rc" = 4 ] || fail "a: lvsctl drain --wait --timeout 2s exited $rc with a connection held, want 4"
# returned at its timeout, not at the end of a longer wait: within 10 of the
# monitor's 1 s cycles (10 s when the host is quiet)
[ "$(cycles_since "$c0")" -le 10 ] || fail "a: lvsctl drain --timeout 2s took $(cycles_since "$c0") monitor cycles ($(($(now) - t0)) s)"
say "lvsctl drain --timeout 2s returned after $(cycles_since "$c0") monitor cycles ($(($(now) - t0)) s)"
grep -q 'stays drained' "$W/lvsctl-drain2.err" || fail "a: lvsctl did not say the server stays drained"
pass_cycles 2
[ "$(weight 1)" = 0 ] || fail "a: rs1 is $(weight 1) after the --wait timeout: the drain did not stay"
release
ctl undrain "$SVCT" "$(rs 1)" >/dev/null || fail "undrain after the timeout test"
say "a: PASS (--timeout 2s: exit 4, rs1 still 0; undrained again: $(weights))"

# --- c. reload with a broken file keeps the old configuration -----------------
json() { ctl status -o json >"$W/status.json" 2>"$W/status.err" || fail "lvsctl status -o json exited $?"; }
# Valid TOML, invalid configuration: the coefficients sum to 1.5.
sed 's/^\[weight\]$/[coefficients]\ninput = 0.1\ncpu = 0.8\nmemory = 0.1\ndisk = 0.1\nresponse = 0.3\nprocess = 0.1\n\n[weight]/' \
	"$W/monitor.toml.good" >"$W/monitor.toml"
lvs-monitor -check -config "$W/monitor.toml" >/dev/null 2>&1 && fail "c: the broken configuration passes -check"
ctl reload >"$W/lvsctl-reload.out" 2>"$W/lvsctl-reload.err"
rc=$?
cat "$W/lvsctl-reload.err"
[ "$rc" = 1 ] || fail "c: lvsctl reload of a broken file exited $rc, want 1"
kill -0 "$MONPID" 2>/dev/null || fail "c: lvs-monitor died after the broken reload"
json
grep -q '"ok": false' "$W/status.json" || fail "c: lvsctl status -o json does not show the failed reload"
grep -q '"error": ".*coefficients' "$W/status.json" || fail "c: lvsctl status -o json does not show the reload error"
sed -n '/"reload"/,/}/p' "$W/status.json"
# a TOML syntax error too
printf 'interval = "1s\n[weight\n' >"$W/monitor.toml"
ctl reload >/dev/null 2>"$W/lvsctl-reload2.err"
rc=$?
[ "$rc" = 1 ] || fail "c: lvsctl reload of a file with a TOML syntax error exited $rc, want 1"
head -n 2 "$W/lvsctl-reload2.err"
# still managing with the old configuration: rs3's httpd stops -> 0 -> back
kill "$(cat "$W/httpd3.pid")"
rs3_zero() { [ "$(weight 3)" = 0 ]; }
wait_cycles 15 "rs3 at 0 after its httpd stopped (monitor running the old configuration)" rs3_zero
ip netns exec rs3 httpd -f -v -p 80 -h "$W/www3" 2>>"$W/httpd3.log" &
rs3_back() { _w=$(weight 3); [ -n "$_w" ] && [ "$_w" -gt 0 ]; }
wait_cycles 15 "rs3 non-zero after its httpd came back" rs3_back
json
grep -q '"ok": false' "$W/status.json" || fail "c: the reload error vanished before a good reload"
grep -q '"interval_seconds": 1,' "$W/status.json" || fail "c: the running interval is not the old 1 s"
say "the monitor ran on with the old configuration: $(weights)"
cp "$W/monitor.toml.good" "$W/monitor.toml"
ctl reload >"$W/lvsctl-reload3.out" 2>"$W/lvsctl-reload3.err" || fail "c: lvsctl reload of the fixed file exited $?"
cat "$W/lvsctl-reload3.out"
json
grep -q '"ok": true' "$W/status.json" || fail "c: lvsctl status -o json does not show the good reload"
grep -q '"error":' "$W/status.json" && fail "c: lvsctl status -o json still shows an error"
say "c: PASS"

# --- d. explain -----------------------------------------------------------------
pass_cycles 1
ctl explain "$SVCT" "$(rs 2)" >"$W/lvsctl-explain.out" 2>"$W/lvsctl-explain.err" || fail "d: lvsctl explain exited $?"
cat "$W/lvsctl-explain.out"
grep -q '^formula  *w + gain·∛(target − load) = [0-9.]* + [0-9.]*·∛(' "$W/lvsctl-explain.out" || fail "d: lvsctl explain printed no formula step"
grep -q '^decision ' "$W/lvsctl-explain.out" || fail "d: lvsctl explain printed no decision"
say "d: PASS"

kill -TERM "$MONPID"
wait "$MONPID"
rc=$?
MONPID=
[ "$rc" = 0 ] || fail "lvs-monitor exited $rc on SIGTERM"
# For whoever reads a run on a busy host: how much the weights moved, and
# every server the monitor took down on failed probes (c stops rs3's httpd).
echo "--- monitor.log: $(grep -c 'msg="weight changed"' "$W/monitor.log") weight changes; down on failed probes:"
grep 'msg="weight changed" .*reason="unreachable' "$W/monitor.log" | sed 's/^time=[^T]*T\([^ ]*\)Z .* server=\([^ ]*\) old=\([0-9]*\) new=\([0-9]*\) reason=/  \1 \2 \3->\4 /'
cleanup
echo "PASS: e2e-lvsctl (a-d) in $(($(now) - t_start)) s"
