# Guest end-to-end test: lvs-monitor and lvs-agent on real IPVS (issue 3 §3).
#
# make_topology 3: a director with an IPVS NAT service on the VIP (wrr) over
# rs1..rs3. Each real server runs a busybox httpd inside its own cgroup v2
# group /sys/fs/cgroup/rsI (cpu.max = 0.3 CPU) and an lvs-agent measuring that
# group (-source cgroup:...), so each server has its own genuine CPU load even
# though the namespaces share one /proc/stat. A client fetches the VIP in a
# bounded loop (each answer names the server); lvs-monitor runs in the
# director namespace with a 1 s interval. Assertions, on the kernel's table
# (ipvsadm -Ln in the director):
#   a. a CPU hog in rs2's group lowers rs2's weight below the others, and
#      rs2's share of the client's new connections falls;
#   b. an operator drain (ipvsadm -e ... -w 0) of rs1 stays 0 for several
#      monitor cycles, also across a monitor restart on the same state_dir
#      over a table rebuilt while the monitor was down (ipvsadm -C, the
#      service re-added with rs1 at weight 10: the monitor writes rs1 back to
#      0 and says why), and the undrain (ipvsadm -e ... -w 5) is picked up
#      and managed again;
#   c. stopping rs3's httpd brings its weight to 0, starting it again
#      restores a non-zero weight;
#   d. the last "weight changed" each server got in the monitor's logs is the
#      weight ipvsadm -Ln shows at the end.
# docs/developer/testing-kernel.md lists, for each, a change that makes it fail.
set -u
. "${VMTEST_LIB:-/vmtest}/topology.sh"

W=/tmp/e2e       # logs, config, web roots
STATE=/run/e2e-state
CTL=/run/e2e-monitor # private directory for the control socket
CG=/sys/fs/cgroup
SVC=$TOPO_VIP:80
QUOTA=${E2E_QUOTA:-30000 100000} # cpu.max of each real server's group
CYCLES=${E2E_CYCLES:-4}          # monitor cycles a drain must survive (each side of the restart)
MONPID=

rs() { echo "$(topo_rs_ip "$1"):80"; } # rs I -> RIP:80 as in ipvsadm -Ln

cleanup() {
	[ -n "$MONPID" ] && kill "$MONPID" 2>/dev/null
	touch "$W/stop" 2>/dev/null
	destroy_topology
	for i in 1 2 3; do
		[ -d "$CG/rs$i" ] || continue
		echo 1 >"$CG/rs$i/cgroup.kill" 2>/dev/null
	done
	sleep 0.3
	for i in 1 2 3; do rmdir "$CG/rs$i" 2>/dev/null; done
}

fail() {
	echo "FAIL: $*"
	echo "--- director: ipvsadm -Ln --stats"
	in_ns director ipvsadm -Ln --stats
	echo "--- director: ipvsadm -Ln"
	in_ns director ipvsadm -Ln
	for f in monitor1 monitor2; do
		[ -s "$W/$f.log" ] || continue
		echo "--- $f.log (last 40 lines)"
		tail -n 40 "$W/$f.log"
	done
	for i in 1 2 3; do
		echo "--- agent rs$i: $(tail -n 2 "$W/agent$i.log" 2>/dev/null | tr '\n' ' ')"
		echo "--- rs$i cpu.stat: $(tr '\n' ' ' <"$CG/rs$i/cpu.stat" 2>/dev/null)"
	done
	echo "--- client answers: $(sort "$W/hits" 2>/dev/null | uniq -c | tr '\n' ' ')"
	cleanup
	exit 1
}

. "${VMTEST_LIB:-/vmtest}/lib.sh" # now, say, run, wait_for, wait_cycles, pass_cycles, hold_cycles

# read_weights: sets w1 w2 w3 to the kernel weights of rs1..rs3 ("" if absent).
read_weights() { read_dests "$SVC" "$(rs 1)" "$(rs 2)" "$(rs 3)"; }
show_weights() { read_weights; say "kernel weights: rs1=$w1 rs2=$w2 rs3=$w3 ${1:-}"; }

# in_cg I CMD... &: run CMD in rsI's network namespace and cgroup. Only in
# the background: it execs, so that $! is CMD's pid (a backgrounded function
# is a subshell, and dash would otherwise leave CMD as its child).
in_cg() {
	_i=$1
	shift
	exec sh -c 'echo $$ >"$0" && exec "$@"' "$CG/rs$_i/cgroup.procs" ip netns exec "rs$_i" "$@"
}
start_httpd() { # start_httpd I: busybox httpd on :80 in rsI's group; pid in $W/httpdI.pid
	in_cg "$1" httpd -f -v -p 80 -h "$W/www$1" 2>>"$W/httpd$1.log" &
	echo $! >"$W/httpd$1.pid"
}
answers() { [ "$(in_ns director timeout 3 wget -q -O - "http://$(topo_rs_ip "$1")/" 2>/dev/null)" = "rs$1" ]; }
# cycles: the monitor's cycle counters for lib.sh's waits: the requests
# each rsI's httpd got from the director (10.1.I.1; the client's come from
# 10.0.1.2 through NAT), i.e. the monitor's probes, one per cycle while the
# server is not drained (rs1 is drained in b, rs3's httpd stopped in c: the
# others go on counting).
cycles() { probe_counts '10\.1\.[0-9]+\.1' "$W/httpd1.log" "$W/httpd2.log" "$W/httpd3.log"; }
hits() { wc -l <"$W/hits"; }
# share FROM TO NAME: "N/M" = answers by NAME among client answers FROM+1..TO.
share() { sed -n "$(($1 + 1)),$2p" "$W/hits" | awk -v n="$3" '$1 == n { k++ } END { printf "%d/%d\n", k, NR }'; }
start_monitor() { # start_monitor LOGNAME
	ip netns exec director lvs-monitor -config "$W/monitor.toml" 2>"$W/$1.log" &
	MONPID=$!
	wait_for "lvs-monitor ($1) started" grep -qs 'msg="lvs-monitor started"' "$W/$1.log"
}
stop_monitor() { # stop_monitor TERM|KILL
	kill -"$1" "$MONPID"
	wait "$MONPID"
	_rc=$?
	MONPID=
	case $1/$_rc in TERM/0 | KILL/137) ;; *) fail "lvs-monitor exited with status $_rc on SIG$1" ;; esac
}

# --- setup -----------------------------------------------------------------
t_start=$(now)
destroy_topology
rm -rf "$W" "$STATE" "$CTL"
mkdir -p "$W" "$STATE"
mkdir -m 700 "$CTL"
run make_topology 3
run sh -c "echo '+cpu +memory' >$CG/cgroup.subtree_control"
for i in 1 2 3; do
	run mkdir -p "$CG/rs$i" "$W/www$i"
	run sh -c "echo '$QUOTA' >$CG/rs$i/cpu.max"
	echo "rs$i" >"$W/www$i/index.html"
	: >"$W/httpd$i.log"
	start_httpd "$i"
	# ip netns exec mounts a fresh /sys for the namespace, without the
	# cgroup2 mount under it: mount it again (same hierarchy) for the agent.
	ip netns exec "rs$i" sh -c 'mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec lvs-agent -listen :9771 -source "cgroup:/sys/fs/cgroup/rs$0"' "$i" 2>"$W/agent$i.log" &
done
for i in 1 2 3; do
	wait_for "rs$i's httpd answers" answers "$i"
	wait_for "rs$i's agent serves a load" sh -c "ip netns exec director timeout 3 wget -q -O - http://$(topo_rs_ip "$i"):9771/v1/load 2>/dev/null | grep -q '\"schema\":1'"
done
say "agent rs1: $(in_ns director timeout 3 wget -q -O - "http://$(topo_rs_ip 1):9771/v1/load")"

run in_ns director ipvsadm -A -t "$SVC" -s wrr
for i in 1 2 3; do run in_ns director ipvsadm -a -t "$SVC" -r "$(rs "$i")" -m -w 10; done

cat >"$W/monitor.toml" <<EOF
interval = "1s"
agent_timeout = "900ms"
probe_timeout = "900ms"
state_dir = "$STATE"
metrics_listen = ""
control_socket = "$CTL/control.sock"

# CPU (usage over the group's quota) and runnable tasks per quota CPU carry
# the hog; memory and disk are the guest's and say nothing about one server.
[coefficients]
input = 0.1
cpu = 0.6
memory = 0.0
disk = 0.0
response = 0.1
process = 0.2

# [weight]: the default controller ("capacity"): each server's connections
# served per unit of CPU decide; the hog makes rs2's CPU high for the same
# connections.

[availability]
freeze_share = 0.5
agent_expiry = "30s"
slow_start = "3s"
slow_start_floor = 0.1

[[service]]
address = "$SVC/tcp"
[service.probe]
type = "http"
path = "/"
expect_status = 200
reference = "100ms"
EOF
append_servers "$W/monitor.toml"
run lvs-monitor -check -config "$W/monitor.toml"

# The client: one new connection through the VIP every ~0.1 s (plus the
# time wget takes), at most 3000,
# until $W/stop exists. Each line of $W/hits is the answering server's name.
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
say "setup done in $(($(now) - t_start)) s; client answers so far: $(sort "$W/hits" | uniq -c | tr '\n' ' ')"

# --- a. a CPU hog in rs2's cgroup lowers rs2's weight ------------------------
start_monitor monitor1
wait_cycles 10 "the monitor adopted the three servers" sh -c "[ \$(grep -c 'reason=\"adopted at its kernel weight\"' $W/monitor1.log) -ge 3 ]"
# Let it run a few cycles unloaded.
pass_cycles 2
show_weights "(before the hog)"
hits_hog=$(hits)
log_hog=$(wc -l <"$W/monitor1.log")
in_cg 2 sh -c 'while :; do :; done' &
HOG=$!
say "hog started in rs2's group (pid $HOG)"

# rs2_below K: rs2's weight is not 0 (not down) and at most 1/K of rs1's
# and rs3's.
rs2_below() {
	read_weights
	[ -n "$w2" ] && [ "$w2" -gt 0 ] && [ $(($1 * w2)) -le "$w1" ] && [ $(($1 * w2)) -le "$w3" ]
}
wait_cycles 30 "rs2 (hogged) at most half of rs1's and rs3's weights" rs2_below 2
show_weights "(rs2 hogged)"
# ... and it is the load the monitor acted on: it lowered rs2 for its load
# since the hog started.
sed -n "$((log_hog + 1)),\$p" "$W/monitor1.log" | grep "msg=\"weight changed\" .* server=$(rs 2) .* reason=\"capacity" |
	awk '{ o = $0; sub(/.* old=/, "", o); sub(/ .*/, "", o); n = $0; sub(/.* new=/, "", n); sub(/ .*/, "", n)
		if (n + 0 < o + 0) { print; found = 1; exit } } END { exit !found }' ||
	fail "a: the monitor did not lower rs2's weight for its load after the hog started"
# rs2's share of new connections: before the hog (equal weights) vs. once
# the monitor has cut rs2 to a tenth of the others.
wait_cycles 30 "rs2 (hogged) at most a tenth of rs1's and rs3's weights" rs2_below 10
show_weights "(rs2 cut)"
hits_low=$(hits)
# ... and stays there while they are counted: the hog goes on, so a weight
# back up is the monitor's doing, and the share below would not say much.
counted_cut() {
	read_weights # down (0, its probes starved by the hog) is as low as cut
	[ -n "$w2" ] && [ $((10 * w2)) -le "$w1" ] && [ $((10 * w2)) -le "$w3" ] || fail "a: the hogged rs2 went back up to $w2 (rs1 $w1, rs3 $w3) while its share was counted; its last writes: $(grep "msg=\"weight changed\" .* server=$(rs 2) " "$W/monitor1.log" | tail -n 3)"
	[ "$(hits)" -ge $((hits_low + 20)) ]
}
wait_for "20 more client connections" counted_cut
hits_end=$(hits)
before=$(share 0 "$hits_hog" rs2)
after=$(share "$hits_low" "$hits_end" rs2)
say "rs2's share of new connections: $before before the hog, $after with it"
# after/before must be below half: a_k*b_n*2 < b_k*a_n.
[ $((${after%/*} * ${before#*/} * 2)) -lt $((${before%/*} * ${after#*/})) ] ||
	fail "rs2's share of new connections did not fall below half: $before before the hog, $after with it"
kill "$HOG"
wait "$HOG" 2>/dev/null
say "a: PASS (hog stopped); the monitor's weight changes so far:"
grep 'msg="weight changed"' "$W/monitor1.log" | sed 's/^time=[^ ]*T\([^ ]*\)Z /  \1 /; s/ load=.*//'

# --- b. an operator drain is left alone, across a restart; undrain picked up --
run in_ns director ipvsadm -e -t "$SVC" -r "$(rs 1)" -m -w 0
say "operator: ipvsadm -e -t $SVC -r $(rs 1) -m -w 0"
# hold_drain LABEL: rs1 stays at 0 while the monitor runs $CYCLES cycles.
hold_drain() {
	_label=$1
	rs1_drained() { read_weights; [ "$w1" = 0 ] || fail "b: drained rs1 has weight $w1 after $held monitor cycles ($_label)"; }
	hold_cycles "$CYCLES" "b: drained rs1 at 0 ($_label)" rs1_drained
	say "rs1 still 0 after $held monitor cycles ($_label)"
}
hold_drain "first monitor"
grep -q "msg=ownership .* server=$(rs 1) .*drained by operator" "$W/monitor1.log" ||
	fail "b: the monitor did not log the drain of rs1"
stop_monitor KILL
say "monitor killed (SIGKILL); state file: $(cat "$STATE/state.json" 2>/dev/null | head -c 300)"
# The table is rebuilt while the monitor is down, as a director reboot or a
# restore from a stale save would: rs1 comes back at its configured 10, with
# fresh counters; rs2 and rs3 at the weights they had.
read_weights
run in_ns director ipvsadm -C
run in_ns director ipvsadm -A -t "$SVC" -s wrr
run in_ns director ipvsadm -a -t "$SVC" -r "$(rs 1)" -m -w 10
run in_ns director ipvsadm -a -t "$SVC" -r "$(rs 2)" -m -w "$w2"
run in_ns director ipvsadm -a -t "$SVC" -r "$(rs 3)" -m -w "$w3"
say "table rebuilt: ipvsadm -C, the service re-added with rs1 at 10 (rs2 $w2, rs3 $w3)"
start_monitor monitor2
grep -q 'starting safe' "$W/monitor2.log" && fail "b: the restarted monitor did not load its state file"
rs1_zero() { read_weights; [ "$w1" = 0 ]; }
wait_cycles 15 "the restarted monitor writes rs1 back to 0" rs1_zero
grep -q "msg=ownership .* server=$(rs 1) .*reason=\"created anew at weight 10 (its connection counter went back" "$W/monitor2.log" ||
	fail "b: the restarted monitor did not log why rs1's drain was kept over the rebuilt table"
grep "msg=ownership .* server=$(rs 1) " "$W/monitor2.log" | tail -n 1
hold_drain "restarted monitor, rebuilt table"
run in_ns director ipvsadm -e -t "$SVC" -r "$(rs 1)" -m -w 5
say "operator: ipvsadm -e -t $SVC -r $(rs 1) -m -w 5"
wait_cycles 15 "the monitor logs the undrain of rs1" grep -q "msg=ownership .* server=$(rs 1) .*reason=\"undrained by operator at weight 5" "$W/monitor2.log"
grep "msg=ownership .* server=$(rs 1) " "$W/monitor2.log" | tail -n 1
# managed again: the monitor has written rs1 from the operator's 5 (its
# first slow-start step) and the kernel holds what it last wrote, not 0.
# (Not "the kernel's weight is not 5": 5 is rs1's new default, where the
# capacity controller brings it back once the ramp is over, and a poll on a
# busy host can miss the ramp.)
rs1_managed() {
	read_weights
	_last=$(weight_changes "$W/monitor2.log" | awk -v a="$(rs 1)" '$1 == a { n = $3 } END { print n }')
	[ -n "$w1" ] && [ "$w1" -gt 0 ] && [ "$w1" = "$_last" ] &&
		weight_changes "$W/monitor2.log" | grep -q "^$(rs 1) 5 [0-9]* "
}
wait_cycles 20 "the monitor moves rs1's weight from the operator's 5" rs1_managed
grep "msg=\"weight changed\" .* server=$(rs 1) " "$W/monitor2.log" | head -n 1
show_weights "(rs1 undrained)"
say "b: PASS"

# --- c. a stopped httpd goes to 0, a restarted one comes back ------------------
kill "$(cat "$W/httpd3.pid")"
say "rs3's httpd stopped"
rs3_zero() { read_weights; [ "$w3" = 0 ]; }
wait_cycles 20 "rs3's weight 0 after its httpd stopped" rs3_zero
show_weights "(rs3 down)"
grep "msg=\"weight changed\" .* server=$(rs 3) .* new=0 " "$W/monitor2.log" | tail -n 1
start_httpd 3
say "rs3's httpd started again"
rs3_back() { read_weights; [ -n "$w3" ] && [ "$w3" -gt 0 ]; }
wait_cycles 20 "rs3's weight non-zero after its httpd came back" rs3_back
show_weights "(rs3 back)"
say "c: PASS"

# --- d. ipvsadm agrees with what the monitor says it wrote --------------------
pass_cycles 2 # let rs3's slow start write a step or two more
stop_monitor TERM
read_weights
say "kernel weights after the monitor stopped: rs1=$w1 rs2=$w2 rs3=$w3"
weight_changes "$W/monitor1.log" "$W/monitor2.log" >"$W/changes"
say "the monitor logged $(wc -l <"$W/changes") weight changes"
for i in 1 2 3; do
	eval "k=\$w$i"
	last=$(awk -v a="$(rs "$i")" '$1 == a { n = $3 } END { print n }' "$W/changes")
	[ -n "$last" ] || fail "d: the monitor never logged a weight change for rs$i"
	[ "$last" = "$k" ] || fail "d: rs$i: the monitor last logged new=$last, ipvsadm -Ln shows $k"
	say "rs$i: last logged new=$last = ipvsadm $k"
done
say "d: PASS"

echo "--- what the monitor wrote (time server old->new reason)"
cat "$W/monitor1.log" "$W/monitor2.log" | sed -n 's/^time=[^T]*T\([^ ]*\)Z .* msg="weight changed" .* server=\([^ ]*\) old=\([0-9]*\) new=\([0-9]*\) reason=\("[^"]*"\).*/\1 \2 \3->\4 \5/p'
echo "--- director: ipvsadm -Ln --stats"
in_ns director ipvsadm -Ln --stats
echo "--- client answers: $(sort "$W/hits" | uniq -c | tr '\n' ' ')"
cleanup
echo "PASS: e2e-monitor (a-d) in $(($(now) - t_start)) s"
