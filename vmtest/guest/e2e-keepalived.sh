# Guest end-to-end test: lvs-monitor beside keepalived's health checker on
# real IPVS (docs/keepalived.md).
#
# make_topology 3; in the director namespace keepalived 2.2 (Debian's, checker
# only: keepalived -C) owns the table: the NAT service on the VIP over rs1..rs3
# at weight 10, a TCP_CHECK of a health port (81) every 2 s. lvs-monitor runs
# beside it with health_checker = "keepalived" on the service, a 1 s interval,
# a 4 s slow start and a TCP probe of port 80. A failure is made by stopping
# a server's health port: keepalived sees it, lvs-monitor's probe does not,
# so keepalived's move always comes first — the case that used to pass for
# an operator's. Each real server runs a busybox httpd in its own cgroup v2 group with
# an lvs-agent measuring that group, and a client fetches the VIP (as in
# e2e-monitor.sh). Assertions, on
# the kernel's table (ipvsadm -Ln in the director), the monitor's log and
# state file, and keepalived's log:
#   a. steady state: neither daemon writes over several monitor cycles;
#   b. a CPU hog in rs2 lowers its weight through lvs-monitor and it comes
#      back when the hog stops, while keepalived does nothing;
#   c. keepalived's SIGHUP (reload) changes nothing in the kernel, and the
#      monitor sees no edit;
#   d. a failure without inhibit_on_failure, seen by keepalived first:
#      keepalived removes rs3 (still managed); the monitor logs the
#      disappearance, records no drain, and when keepalived re-adds rs3 at
#      10 it logs the return and slow-starts it;
#   e. an operator's drain (lvsctl drain rs1) survives rs1's health flap:
#      keepalived removes rs1 and re-adds it at 10, the monitor writes 0 back;
#   f. keepalived restarting (it deletes the service on stop, re-adds all at
#      10 on start, now with inhibit_on_failure): the drain stands, the others
#      go through slow start;
#   g. a failure with inhibit_on_failure, seen by keepalived first:
#      keepalived's 0 on rs3 is the health checker's down, never an operator
#      drain (in the log and the state file), and stays while the monitor's
#      probe answers; its re-enable at 10 is slow-started and does not
#      become a new default weight;
#   h. the drained rs1's health flap under inhibit_on_failure: keepalived's
#      re-enable at 10 is not an undrain; the monitor writes 0 back.
set -u
. "${VMTEST_LIB:-/vmtest}/topology.sh"

W=/tmp/e2e-ka
STATE=/run/e2e-ka-state
CTL=/run/e2e-ka-ctl
CG=/sys/fs/cgroup
SVC=$TOPO_VIP:80
QUOTA=${E2E_QUOTA:-30000 100000}
MONPID=
KAPID=
HOG=

rs() { echo "$(topo_rs_ip "$1"):80"; }
rsre() { echo "\\[$(topo_rs_ip "$1" | sed 's/\./\\./g')\\]:tcp:80"; } # keepalived's name of rsI, as a regex

cleanup() {
	touch "$W/stop" 2>/dev/null
	[ -n "$HOG" ] && kill "$HOG" 2>/dev/null
	[ -n "$MONPID" ] && kill "$MONPID" 2>/dev/null
	[ -n "$KAPID" ] && kill "$KAPID" 2>/dev/null
	destroy_topology
	for i in 1 2 3; do
		[ -d "$CG/rs$i" ] && echo 1 >"$CG/rs$i/cgroup.kill" 2>/dev/null
	done
	sleep 0.3
	for i in 1 2 3; do rmdir "$CG/rs$i" 2>/dev/null; done
}

fail() {
	echo "FAIL: $*"
	echo "--- director: ipvsadm -Ln"
	in_ns director ipvsadm -Ln
	echo "--- monitor.log (last 40 lines)"
	tail -n 40 "$W/monitor.log" 2>/dev/null
	echo "--- keepalived.log (last 30 lines)"
	tail -n 30 "$W/keepalived.log" 2>/dev/null
	echo "--- state file: $(cat "$STATE/state.json" 2>/dev/null)"
	cleanup
	exit 1
}

# cycles: the monitor's completed cycles, from its metrics (one process
# per call: a wget in the director); with _lw_since set (lib.sh's waits),
# the cycles since that mark.
cycles() { metric_cycles director 127.0.0.1:9772; }

. "${VMTEST_LIB:-/vmtest}/lib.sh"

read_weights() { read_dests "$SVC" "$(rs 1)" "$(rs 2)" "$(rs 3)"; }
show_weights() { read_weights; say "kernel weights: rs1=$w1 rs2=$w2 rs3=$w3 ${1:-}"; }
in_cg() {
	_i=$1
	shift
	exec sh -c 'echo $$ >"$0" && exec "$@"' "$CG/rs$_i/cgroup.procs" ip netns exec "rs$_i" "$@"
}
start_httpd() {
	in_cg "$1" httpd -f -p 80 -h "$W/www$1" &
	echo $! >"$W/httpd$1.pid"
}
# keepalived checks a separate health port, 81 (a second httpd): stopping
# it fails keepalived's check while lvs-monitor's probe (port 80) still
# answers, so keepalived sees the failure first, every time.
start_health() {
	in_cg "$1" httpd -f -p 81 -h "$W/www$1" &
	echo $! >"$W/health$1.pid"
}
stop_health() { kill "$(cat "$W/health$1.pid")"; }
answers() { [ "$(in_ns director timeout 3 wget -q -O - "http://$(topo_rs_ip "$1")/" 2>/dev/null)" = "rs$1" ]; }

# write_ka [inhibit_on_failure]: keepalived's configuration, checker only.
write_ka() {
	{
		printf 'global_defs {\n\trouter_id vmtest\n}\n'
		printf 'virtual_server %s 80 {\n\tdelay_loop 2\n\tlb_algo wrr\n\tlb_kind NAT\n\tprotocol TCP\n' "$TOPO_VIP"
		[ -n "${1:-}" ] && printf '\t%s\n' "$1"
		for i in 1 2 3; do
			printf '\treal_server %s 80 {\n\t\tweight 10\n\t\tTCP_CHECK {\n\t\t\tconnect_port 81\n\t\t\tconnect_timeout 1\n\t\t\tretry 0\n\t\t}\n\t}\n' "$(topo_rs_ip "$i")"
		done
		printf '}\n'
	} >"$W/keepalived.conf"
}
start_ka() {
	ip netns exec director keepalived -n -l -D -G -C -f "$W/keepalived.conf" \
		-p "$W/ka.pid" -c "$W/ka-checkers.pid" -r "$W/ka-vrrp.pid" -b "$W/ka-bfd.pid" >>"$W/keepalived.log" 2>&1 &
	KAPID=$!
}
stop_ka() {
	kill -TERM "$KAPID"
	wait "$KAPID"
	_rc=$?
	KAPID=
	[ "$_rc" = 0 ] || fail "keepalived exited with status $_rc on SIGTERM"
}
# ka_lines: keepalived's log lines about the real servers (adds, removals,
# weight changes, failed checks).
ka_lines() { grep -cE 'service \[|TCP_CHECK|TCP connection' "$W/keepalived.log"; }
since_ka() { sed -n "$(($1 + 1)),\$p" "$W/keepalived.log"; } # since_ka LINES: keepalived's log after line LINES
since_mon() { sed -n "$(($1 + 1)),\$p" "$W/monitor.log"; }
mon_mark() { wc -l <"$W/monitor.log"; }
ka_mark() { wc -l <"$W/keepalived.log"; }
lvsctl_() { lvsctl -socket "$CTL/control.sock" "$@"; } # the socket is a file: no namespace needed
# state_of I: rsI's record in the monitor's state file ("state set_by default_override").
state_of() {
	tr '{}' '\n\n' <"$STATE/state.json" | awk -v a="\"$(rs "$1")\":" '
		index($0, a) { getline; print; exit }'
}

# --- setup -----------------------------------------------------------------
t_start=$(now)
destroy_topology
rm -rf "$W" "$STATE" "$CTL"
mkdir -p "$W" "$STATE"
mkdir -m 700 "$CTL"
: >"$W/keepalived.log"
: >"$W/monitor.log"
run make_topology 3
run sh -c "echo '+cpu +memory' >$CG/cgroup.subtree_control"
for i in 1 2 3; do
	run mkdir -p "$CG/rs$i" "$W/www$i"
	run sh -c "echo '$QUOTA' >$CG/rs$i/cpu.max"
	echo "rs$i" >"$W/www$i/index.html"
	start_httpd "$i"
	start_health "$i"
	ip netns exec "rs$i" sh -c 'mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec lvs-agent -listen :9771 -source "cgroup:/sys/fs/cgroup/rs$0"' "$i" 2>"$W/agent$i.log" &
done
for i in 1 2 3; do
	wait_for "rs$i's httpd answers" answers "$i"
	wait_for "rs$i's agent serves a load" sh -c "ip netns exec director timeout 3 wget -q -O - http://$(topo_rs_ip "$i"):9771/v1/load 2>/dev/null | grep -q '\"schema\":1'"
done
say "keepalived: $(keepalived --version 2>&1 | head -n 1)"

write_ka
start_ka
all_ten() { read_weights; [ "$w1" = 10 ] && [ "$w2" = 10 ] && [ "$w3" = 10 ]; }
wait_for "keepalived builds the table (three servers at 10)" all_ten
show_weights "(keepalived started)"

cat >"$W/monitor.toml" <<EOF
interval = "1s"
agent_timeout = "900ms"
probe_timeout = "900ms"
state_dir = "$STATE"
metrics_listen = "127.0.0.1:9772"
control_socket = "$CTL/control.sock"

[coefficients]
input = 0.1
cpu = 0.6
memory = 0.0
disk = 0.0
response = 0.1
process = 0.2

[availability]
freeze_share = 0.5
agent_expiry = "30s"
slow_start = "4s"
slow_start_floor = 0.1

[[service]]
address = "$SVC/tcp"
health_checker = "keepalived"
[service.probe]
type = "tcp"
reference = "100ms"
EOF
append_servers "$W/monitor.toml"
run lvs-monitor -check -config "$W/monitor.toml"
ip netns exec director lvs-monitor -config "$W/monitor.toml" 2>>"$W/monitor.log" &
MONPID=$!
wait_for "lvs-monitor started" grep -qs 'msg="lvs-monitor started"' "$W/monitor.log"
wait_cycles 10 "the monitor adopted the three servers" sh -c "[ \$(grep -c 'reason=\"adopted at its kernel weight\"' $W/monitor.log) -ge 3 ]"
# The client: a new connection through the VIP every ~0.1 s, at most 3000,
# until $W/stop exists (the capacity controller weighs the connections each
# server serves per unit of CPU: it needs some).
: >"$W/hits"
in_ns client sh -c '
	i=0
	while [ $i -lt 3000 ] && [ ! -e "$0/stop" ]; do
		b=$(timeout 3 wget -q -O - "http://$1/" 2>/dev/null) || b=fail
		echo "$b" >>"$0/hits"
		i=$((i + 1))
		sleep 0.1
	done' "$W" "$TOPO_VIP" &
wait_for "the client gets answers through the VIP" sh -c "[ \$(grep -c '^rs' $W/hits) -ge 3 ]"
say "setup done in $(($(now) - t_start)) s"

# --- a. steady state: no fight ------------------------------------------------
# keepalived may log each server's first check ("TCP connection to …
# success") up to a delay_loop after it starts, and a quick setup can end
# before that: the quiet window starts once its log has not grown for 5 s
# (two delay_loops and more).
ka_prev=$(ka_lines)
ka_still=$(now)
ka_settled() {
	_c=$(ka_lines)
	if [ "$_c" != "$ka_prev" ]; then
		ka_prev=$_c
		ka_still=$(now)
	fi
	[ $(($(now) - ka_still)) -ge 5 ]
}
wait_for "keepalived's log settles after its first checks" ka_settled
ka0=$(ka_lines)
m0=$(mon_mark)
quiet() {
	all_ten || fail "a: steady state: weights moved to rs1=$w1 rs2=$w2 rs3=$w3 after $held monitor cycles"
	! since_mon "$m0" | grep -qE 'msg="weight changed"|msg=ownership' || fail "a: the monitor wrote or saw an edit in steady state: $(since_mon "$m0" | grep -E 'weight changed|ownership' | head -n 2)"
	[ "$(ka_lines)" = "$ka0" ] || fail "a: keepalived logged in steady state: $(since_ka 0 | tail -n 2)"
}
hold_cycles 4 "a: steady state" quiet
say "a: PASS (neither daemon wrote over $held monitor cycles)"

# --- b. a hog: lvs-monitor moves rs2's weight, keepalived does nothing --------
in_cg 2 sh -c 'while :; do :; done' &
HOG=$!
rs2_low() { read_weights; [ -n "$w2" ] && [ "$w2" -gt 0 ] && [ "$w2" -le 5 ]; }
wait_cycles 30 "b: rs2 (hogged) lowered to at most 5 by the monitor" rs2_low
show_weights "(rs2 hogged)"
kill "$HOG"
wait "$HOG" 2>/dev/null
HOG=
rs2_back() { read_weights; [ "$w2" = 10 ]; }
wait_cycles 40 "b: rs2 back at 10 after the hog stopped" rs2_back
show_weights "(hog stopped)"
[ "$(ka_lines)" = "$ka0" ] || fail "b: keepalived acted during the hog: $(since_ka 0 | grep -E 'service \[|TCP' | tail -n 3)"
since_mon "$m0" | grep -q 'msg=ownership' && fail "b: the monitor saw someone else's edit during the hog: $(since_mon "$m0" | grep ownership | head -n 1)"
say "b: PASS (rs2 $(weight_changes "$W/monitor.log" | awk -v a="$(rs 2)" '$1 == a { printf "%s->%s ", $2, $3 }'); keepalived logged nothing)"

# --- c. keepalived's SIGHUP changes nothing ----------------------------------
read_weights
before="$w1 $w2 $w3"
k0=$(ka_mark)
m0=$(mon_mark)
kill -HUP "$KAPID"
wait_for "c: keepalived reloads" sh -c "sed -n '$((k0 + 1)),\$p' $W/keepalived.log | grep -q 'Reloading'"
pass_cycles 3
read_weights
[ "$w1 $w2 $w3" = "$before" ] || fail "c: keepalived's reload changed the weights: $before -> $w1 $w2 $w3"
since_mon "$m0" | grep -q 'msg=ownership' && fail "c: the monitor saw an edit after keepalived's reload: $(since_mon "$m0" | grep ownership | head -n 1)"
say "c: PASS (weights $before before and after keepalived's SIGHUP)"

# --- d. a failure without inhibit_on_failure: removed, re-added, slow start ----
# keepalived's check fails (its health port stopped) while the monitor's
# probe answers: keepalived removes rs3 before lvs-monitor marks it down.
m0=$(mon_mark)
stop_health 3
rs3_gone() { read_weights; [ -z "$w3" ]; }
wait_for "d: keepalived removes rs3 (its health port stopped)" rs3_gone
wait_cycles 5 "d: the monitor logs rs3's disappearance" sh -c "sed -n '$((m0 + 1)),\$p' $W/monitor.log | grep -q 'msg=\"configured real server not in the IPVS table; skipped until it appears\" .*server=$(rs 3)'"
since_mon "$m0" | grep -q "msg=\"weight changed\" .*server=$(rs 3) .*new=0 " && fail "d: the monitor marked rs3 down although its probe answers"
start_health 3
rs3_in() { read_weights; [ -n "$w3" ]; }
wait_for "d: keepalived re-adds rs3" rs3_in
# rs3_ramped: since $m0 the monitor wrote rs3 a slow-start step below 10
# over keepalived's 10 (its re-add or re-enable).
rs3_ramped() { since_mon "$m0" | grep -qE "msg=\"weight changed\" .*server=$(rs 3) old=10 new=[1-9] reason=\"[^\"]*slow start"; }
wait_cycles 10 "d: the monitor slow-starts rs3, removed while managed and re-added at 10" rs3_ramped
since_mon "$m0" | grep -q "msg=\"configured real server appeared in the IPVS table\" .*server=$(rs 3) weight=10" || fail "d: rs3's return not logged"
since_mon "$m0" | grep -E "server=$(rs 3) .*(drained by operator|new default weight)" && fail "d: keepalived's removal or re-add of rs3 taken for an operator's"
since_mon "$m0" | grep -E "server=$(rs 3) " | sed 's/^time=[^ ]* //' | head -n 4
say "d: PASS"

# --- e. an operator's drain survives a health flap -----------------------------
m0=$(mon_mark)
run lvsctl_ drain "$SVC/tcp" "$(rs 1)"
rs1_zero() { read_weights; [ "$w1" = 0 ]; }
rs1_zero || fail "e: lvsctl drain did not set rs1 to 0"
stop_health 1
rs1_gone() { read_weights; [ -z "$w1" ]; }
wait_for "e: keepalived removes the drained rs1" rs1_gone
start_health 1
rs1_in() { read_weights; [ -n "$w1" ]; }
wait_for "e: keepalived re-adds rs1" rs1_in
wait_cycles 5 "e: the monitor writes the drained rs1 back to 0" rs1_zero
since_mon "$m0" | grep -q "msg=ownership .*server=$(rs 1) .*state=drained set_by=operator reason=\"re-added at 10 by the health checker (keepalived; it was missing from the table): still drained" ||
	fail "e: the monitor did not say why rs1 stays drained"
rs1_held() { rs1_zero || fail "e: drained rs1 at $w1 after $held monitor cycles"; }
hold_cycles 3 "e: rs1 stays drained" rs1_held
say "e: PASS (rs1 drained by lvsctl, removed and re-added at 10 by keepalived, back to 0)"

# --- f. keepalived restarts ------------------------------------------------------
m0=$(mon_mark)
stop_ka
svc_gone() { ! in_ns director ipvsadm -Ln -t "$SVC" >/dev/null 2>&1; }
svc_gone || fail "f: keepalived left the service in the table on stop"
wait_cycles 5 "f: the monitor logs the service's disappearance" sh -c "sed -n '$((m0 + 1)),\$p' $W/monitor.log | grep -q 'msg=\"configured service not in the IPVS table'"
write_ka inhibit_on_failure
start_ka
rs_all_in() { read_weights; [ -n "$w1" ] && [ -n "$w2" ] && [ -n "$w3" ]; }
wait_for "f: keepalived re-adds the three servers" rs_all_in
wait_cycles 5 "f: the monitor writes the drained rs1 back to 0 after keepalived's restart" rs1_zero
for i in 2 3; do
	since_mon "$m0" | grep -q "msg=\"weight changed\" .*server=$(rs "$i") old=10 new=[1-9] reason=\"[^\"]*slow start" ||
		wait_cycles 5 "f: rs$i slow-started after keepalived's restart" sh -c "sed -n '$((m0 + 1)),\$p' $W/monitor.log | grep -q 'msg=\"weight changed\" .*server=$(rs "$i") old=10 new=[1-9] reason=\"[^\"]*slow start'"
	since_mon "$m0" | grep -q "msg=\"configured real server appeared in the IPVS table\" .*server=$(rs "$i")" || fail "f: rs$i's return not logged"
done
show_weights "(after keepalived's restart)"
say "f: PASS"

# --- g. a failure with inhibit_on_failure: keepalived's 0 is not a drain ------
# keepalived's check fails first (its health port stopped; the monitor's
# probe answers): its 0 is the health checker's down, in the log and the
# state file, and stays while the monitor's probe answers.
ramp_done() { read_weights; [ "$w2" = 10 ] && [ "$w3" = 10 ]; }
wait_cycles 20 "g: rs2 and rs3 at 10 again after the slow start" ramp_done
m0=$(mon_mark)
stop_health 3
rs3_zero() { read_weights; [ "$w3" = 0 ]; }
wait_for "g: keepalived sets rs3 to 0" rs3_zero
rs3_checker_down() { case $(state_of 3) in *'"state":"down","set_by":"health-checker"'*) ;; *) return 1 ;; esac; }
wait_cycles 5 "g: rs3 recorded down by the health checker in the state file" rs3_checker_down
say "g: rs3 in the state file: $(state_of 3)"
since_mon "$m0" | grep -q "msg=ownership .*server=$(rs 3) weight=0 state=down set_by=health-checker reason=\"set to 0 by the health checker (keepalived)" ||
	fail "g: the monitor did not log keepalived's 0 on rs3 as the health checker's"
rs3_held() { rs3_zero || fail "g: rs3, down by keepalived, at $w3 after $held cycles: the monitor put it back"; }
hold_cycles 3 "g: rs3 stays at 0 while the monitor's probe answers" rs3_held
since_mon "$m0" | grep -E "server=$(rs 3) .*(state=drained|set_by=operator|weight set to 0 by another tool)" && fail "g: keepalived's 0 on rs3 taken for an operator drain"
start_health 3
wait_cycles 15 "g: the monitor slow-starts rs3 re-enabled by keepalived" rs3_ramped
rs3_full() { read_weights; [ "$w3" = 10 ]; }
wait_cycles 10 "g: rs3 at its default weight 10 after the slow start" rs3_full
case $(state_of 3) in *default_override*) fail "g: keepalived's re-enable became rs3's default weight: $(state_of 3)" ;; esac
since_mon "$m0" | grep "server=$(rs 3) " | sed 's/^time=[^ ]* //' | head -n 3
say "g: PASS"

# --- h. the drained rs1's health flap under inhibit_on_failure ------------------
m0=$(mon_mark)
k0=$(ka_mark)
stop_health 1
wait_for "h: keepalived sees the drained rs1 fail" sh -c "sed -n '$((k0 + 1)),\$p' $W/keepalived.log | grep -qE 'TCP_CHECK on service $(rsre 1) failed'"
k1=$(ka_mark)
start_health 1
wait_for "h: keepalived sees rs1 answer again" sh -c "sed -n '$((k1 + 1)),\$p' $W/keepalived.log | grep -qE 'TCP connection to $(rsre 1) success'"
# keepalived sets its 10 on rs1; the monitor must see it as the checker's,
# not an undrain, and write 0 back.
wait_cycles 5 "h: the monitor keeps rs1 drained over keepalived's re-enable" sh -c "sed -n '$((m0 + 1)),\$p' $W/monitor.log | grep -q 'msg=ownership .*server=$(rs 1) weight=10 state=drained set_by=operator reason=\"set to 10 by the health checker (keepalived): still drained'"
wait_cycles 5 "h: rs1 at 0 after keepalived's re-enable" rs1_zero
hold_cycles 3 "h: rs1 stays drained" rs1_held
since_mon "$m0" | grep -q "undrained by operator" && fail "h: keepalived's re-enable of rs1 taken for an undrain"
case $(state_of 1) in *'"state":"drained"'*) ;; *) fail "h: rs1 not drained in the state file: $(state_of 1)" ;; esac
say "h: PASS"

kill -TERM "$MONPID"
wait "$MONPID"
MONPID=
echo "--- what the monitor wrote and saw (time server: what)"
sed -n 's/^time=[^T]*T\([^ ]*\)Z .* msg=\(ownership\|"weight changed"\|"configured[^"]*"\) .*server=\([^ ]*\) \(.*\)/\1 \3 \2 \4/p' "$W/monitor.log" | sed 's/ load=.*//' | tail -n 40
echo "--- keepalived's lines about the servers"
grep -E 'service \[|TCP_CHECK' "$W/keepalived.log" | tail -n 20
stop_ka
cleanup
echo "PASS: e2e-keepalived (a-h) in $(($(now) - t_start)) s"
