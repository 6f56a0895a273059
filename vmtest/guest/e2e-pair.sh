# Guest end-to-end test: two synchronised directors on real IPVS (issue 5 §5).
#
# Two director namespaces, dirA and dirB, each with its own IPVS table holding
# the same NAT service 10.0.1.100:80 over three real servers 10.2.0.1{1,2,3}:80
# (busybox httpd and one lvs-agent each, all in the namespace "reals", which
# is linked to both directors: dirA routes 10.2.0.0/24 via 10.8.1.2, dirB via
# 10.8.2.2). A veth "sync link" joins the directors (10.9.0.1 <-> 10.9.0.2).
# lvs-monitor runs in each director namespace with [sync] role "vip"; the VIP
# is on dirA's lo first. Assertions, on the kernels' tables (ipvsadm -Ln in
# each director namespace):
#   a. dirB's table (started at weights 1/1/1) mirrors dirA's computed weights;
#      dirB writes none of its own;
#   b. a drain made with ipvsadm on dirB (the standby) reaches dirA's table
#      (the writer replays it) and stays on both;
#   c. failover: dirA's monitor is killed, the VIP moved to dirB; dirB takes
#      over (log, lvsctl status "writer": true) within one interval of the VIP
#      appearing, its table at takeover equals dirA's last table (weights
#      compared one by one; a weight dirB writes at takeover must start from
#      dirA's), the drain is kept; the takeover time is printed;
#   d. dirA's monitor restarted with another key file (and the VIP again, so
#      that it claims to write): dirB counts and logs bad_mac rejections and
#      its table is not changed by dirA.
# docs/developer/testing-kernel.md lists, for each, a change that makes it fail.
set -u

W=/tmp/pair
VIP=10.0.1.100
SVC=$VIP:80
INTERVAL=1 # seconds; the monitors' interval
RS1=10.2.0.11:80
RS2=10.2.0.12:80
RS3=10.2.0.13:80
APID=
BPID=
PAIR_NS="dirA dirB reals"

# wall: the wall clock (the monitors' log clock) in seconds, µs resolution.
wall() { adjtimex | awk '/tv_sec/ { s = $2 } /tv_usec/ { u = $2 } END { printf "%d.%06d\n", s, u }'; }
# log_sod LINE: the time of a slog line as seconds of the day (UTC).
log_sod() { echo "$1" | sed -n 's/^time=[^T]*T\([0-9]*\):\([0-9]*\):\([0-9.]*\)Z .*/\1 \2 \3/p' | awk '{ printf "%.3f\n", $1 * 3600 + $2 * 60 + $3 }'; }
# ms_since SOD WALL: milliseconds from WALL (wall()) to SOD (log_sod), modulo a day.
ms_since() { awk -v a="$1" -v w="$2" 'BEGIN { d = a - (w % 86400); if (d < -43200) d += 86400; printf "%d\n", d * 1000 }'; }
# ms_between SOD1 SOD2: milliseconds from SOD1 to SOD2, modulo a day.
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { d = b - a; if (d < -43200) d += 86400; if (d > 43200) d -= 86400; printf "%d\n", d * 1000 }'; }

cleanup() {
	for p in $APID $BPID; do kill -9 "$p" 2>/dev/null; done
	for ns in $PAIR_NS; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
		ip netns del "$ns" 2>/dev/null
	done
}

fail() {
	echo "FAIL: $*"
	for d in dirA dirB; do
		echo "--- $d: ipvsadm -Ln"
		ip netns exec "$d" ipvsadm -Ln 2>&1
		echo "--- $d: addresses on lo: $(ip -n "$d" -4 -o addr show dev lo 2>&1 | awk '{print $4}' | tr '\n' ' ')"
	done
	for f in monA1 monB monA2; do
		[ -s "$W/$f.log" ] || continue
		echo "--- $f.log (last 40 lines)"
		tail -n 40 "$W/$f.log"
	done
	for i in 1 2 3; do echo "--- agent $i: $(tail -n 2 "$W/agent$i.log" 2>/dev/null | tr '\n' ' ')"; done
	cleanup
	exit 1
}

WAIT_POLL=0.3
. "${VMTEST_LIB:-/vmtest}/lib.sh" # now, say, run, wait_for, wait_cycles, pass_cycles, hold_cycles

# cycles A|B: the cycle counters of dirA's or dirB's monitor for lib.sh's
# waits: its probes of each real server in the httpd logs, from the
# director's address on its link to reals (10.8.1.1 dirA, 10.8.2.1 dirB);
# one per cycle while the server is not drained, writer or follower.
cycles() {
	case $1 in A) _src='10\.8\.1\.1' ;; *) _src='10\.8\.2\.1' ;; esac
	probe_counts "$_src" "$W/httpd1.log" "$W/httpd2.log" "$W/httpd3.log"
}
# counting DIR: the waits that follow count DIR's (A or B) cycles.
counting() { COUNT_CYCLES="cycles $1"; }
# weights NS: "w1 w2 w3", the kernel weights of rs1..rs3 in NS's table ("-" if absent).
weights() { ns_weights "$1" "$SVC" "$RS1" "$RS2" "$RS3"; }
ctl() { _d=$1; shift; lvsctl -socket "$W/ctl$_d/control.sock" "$@"; }
# json_num FILE KEY: the first number after "KEY": in lvsctl's indented JSON.
json_num() { sed -n "s/^ *\"$2\": \([0-9]*\),*\$/\1/p" "$1" | head -n 1; }

# config NAME ID LISTEN PEERID PEERADDR KEYFILE: write $W/NAME.toml.
config() {
	cat >"$W/$1.toml" <<EOF
interval = "${INTERVAL}s"
agent_timeout = "900ms"
probe_timeout = "900ms"
state_dir = "$W/state$2"
metrics_listen = ""
control_socket = "$W/ctl$2/control.sock"

[weight]
controller = "lvs"
gain = 5.0
target = 0.95
scale = 2
min = 1
threshold = 1

[availability]
freeze_share = 0.5
agent_expiry = "30s"
slow_start = "15s"
slow_start_floor = 0.1

[sync]
id = "director-$2"
listen = "$3"
key_file = "$6"
role = "vip"
vips = ["$VIP"]
[[sync.peer]]
id = "director-$4"
address = "$5"

[[service]]
address = "$SVC/tcp"
[service.probe]
type = "http"
path = "/"
expect_status = 200
reference = "100ms"
[[service.server]]
address = "$RS1"
weight = 10
[[service.server]]
address = "$RS2"
weight = 20
[[service.server]]
address = "$RS3"
weight = 30
EOF
}

# start_monitor A|B LOGNAME [CONFIG]: lvs-monitor in dirA or dirB; pid in APID/BPID.
start_monitor() {
	ip netns exec "dir$1" lvs-monitor -config "$W/${3:-mon$1}.toml" 2>"$W/$2.log" &
	eval "${1}PID=\$!"
	eval "_pid=\$${1}PID"
	# up when its sync part runs (the VIP watcher has listed the addresses)
	_log=$2
	sync_started() {
		kill -0 "$_pid" 2>/dev/null || fail "lvs-monitor $_log exited at start: $(grep 'level=ERROR' "$W/$_log.log" | tail -n 1)"
		grep -qs 'msg="synchronised director started"' "$W/$_log.log"
	}
	wait_for "lvs-monitor $2 started its sync part" sync_started
}

# --- setup -----------------------------------------------------------------
t_start=$(now)
cleanup
rm -rf "$W"
mkdir -p "$W"
mkdir -m 700 "$W/ctlA" "$W/ctlB"
for ns in $PAIR_NS; do
	run ip netns add "$ns"
	run ip -n "$ns" link set lo up
done
# reals: the three real servers' addresses, linked to both directors.
for i in 1 2 3; do run ip -n reals addr add "10.2.0.1$i/32" dev lo; done
run ip link add a0 netns reals type veth peer name rs0 netns dirA
run ip link add b0 netns reals type veth peer name rs0 netns dirB
run ip -n reals addr add 10.8.1.2/24 dev a0
run ip -n reals addr add 10.8.2.2/24 dev b0
run ip -n dirA addr add 10.8.1.1/24 dev rs0
run ip -n dirB addr add 10.8.2.1/24 dev rs0
for l in "reals a0" "reals b0" "dirA rs0" "dirB rs0"; do set -- $l; run ip -n "$1" link set "$2" up; done
run ip -n dirA route add 10.2.0.0/24 via 10.8.1.2
run ip -n dirB route add 10.2.0.0/24 via 10.8.2.2
# the sync link
run ip link add sync0 netns dirA type veth peer name sync0 netns dirB
run ip -n dirA addr add 10.9.0.1/24 dev sync0
run ip -n dirB addr add 10.9.0.2/24 dev sync0
run ip -n dirA link set sync0 up
run ip -n dirB link set sync0 up
# the VIP starts on dirA
run ip -n dirA addr add "$VIP/32" dev lo

for i in 1 2 3; do
	mkdir -p "$W/www$i"
	echo "rs$i" >"$W/www$i/index.html"
	: >"$W/httpd$i.log"
	ip netns exec reals httpd -f -v -p "10.2.0.1$i:80" -h "$W/www$i" 2>>"$W/httpd$i.log" &
	echo $! >"$W/httpd$i.pid"
	ip netns exec reals lvs-agent -listen "10.2.0.1$i:9771" 2>"$W/agent$i.log" &
done
answers() { [ "$(ip netns exec "$1" timeout 3 wget -q -O - "http://10.2.0.1$2/" 2>/dev/null)" = "rs$2" ]; }
agent_ok() { ip netns exec "$1" timeout 3 wget -q -O - "http://10.2.0.1$2:9771/v1/load" 2>/dev/null | grep -q '"schema":1'; }
for d in dirA dirB; do
	for i in 1 2 3; do
		wait_for "rs$i answers from $d" answers "$d" "$i"
		wait_for "rs$i's agent answers from $d" agent_ok "$d" "$i"
	done
done

# Each director's own table: the same service; dirA at the configured
# weights, dirB at 1/1/1 so that mirroring shows.
run ip netns exec dirA ipvsadm -A -t "$SVC" -s wrr
run ip netns exec dirB ipvsadm -A -t "$SVC" -s wrr
run ip netns exec dirA ipvsadm -a -t "$SVC" -r "$RS1" -m -w 10
run ip netns exec dirA ipvsadm -a -t "$SVC" -r "$RS2" -m -w 20
run ip netns exec dirA ipvsadm -a -t "$SVC" -r "$RS3" -m -w 30
for r in "$RS1" "$RS2" "$RS3"; do run ip netns exec dirB ipvsadm -a -t "$SVC" -r "$r" -m -w 1; done

# The shared key (and, for d, another one).
(umask 077 && head -c 32 /dev/urandom >"$W/sync.key" && head -c 32 /dev/urandom >"$W/other.key") || fail "key files"
chmod 600 "$W/sync.key" "$W/other.key"
config monA A 10.9.0.1:9773 B 10.9.0.2:9773 "$W/sync.key"
config monB B 10.9.0.2:9773 A 10.9.0.1:9773 "$W/sync.key"
config monA-otherkey A 10.9.0.1:9773 B 10.9.0.2:9773 "$W/other.key"
for c in monA monB monA-otherkey; do run lvs-monitor -check -config "$W/$c.toml" >/dev/null; done
say "setup done in $(($(now) - t_start)) s: dirA $(weights dirA), dirB $(weights dirB)"

# --- a. dirB mirrors dirA ----------------------------------------------------
start_monitor B monB
start_monitor A monA1
counting A
wait_cycles 20 "dirA's monitor writes (took over)" grep -q 'took over at epoch' "$W/monA1.log"
follows_a() { ctl B status -o json 2>/dev/null | grep -q '"leader": "director-A@'; }
counting B
wait_cycles 20 "dirB's monitor follows dirA (lvsctl status: leader director-A)" follows_a
# mirrored: both tables equal at two polls in a row, and dirB's no longer
# its own 1/1/1 nor dirA's starting 10/20/30 (dirA's own computed weights).
mirrored() {
	_a=$(weights dirA)
	_b=$(weights dirB)
	case $_a in *-*) return 1 ;; esac
	[ "$_a" = "$_b" ] && [ "$_a" != "1 1 1" ] && [ "$_a" != "10 20 30" ] || { _m=0; return 1; }
	_m=$((_m + 1))
	[ "$_m" -ge 2 ]
}
_m=0
counting A
wait_cycles 30 "dirB's table mirrors dirA's" mirrored
say "mirrored: dirA $_a = dirB $_b at two polls in a row (now dirA $(weights dirA), dirB $(weights dirB))"
grep -q 'msg="applied the writer.s weights"' "$W/monB.log" || fail "a: dirB never logged applying the writer's weights"
grep -q 'msg="weight changed"' "$W/monB.log" && fail "a: dirB (a follower) wrote weights of its own: $(grep -m1 'msg="weight changed"' "$W/monB.log")"
ctl B status -o json >"$W/statusB.json" || fail "a: lvsctl status on dirB failed"
grep -q '"writer": false' "$W/statusB.json" || fail "a: lvsctl status on dirB does not say writer false"
ctl A status -o json >"$W/statusA.json" || fail "a: lvsctl status on dirA failed"
grep -q '"writer": true' "$W/statusA.json" || fail "a: lvsctl status on dirA does not say writer true"
say "a: PASS"

# --- b. a drain on the standby reaches the writer ----------------------------
run ip netns exec dirB ipvsadm -e -t "$SVC" -r "$RS1" -m -w 0
say "operator on dirB (standby): ipvsadm -e -t $SVC -r $RS1 -m -w 0"
a_rs1_zero() { [ "$(nth 1 "$(weights dirA)")" = 0 ]; }
wait_cycles 15 "the drain made on dirB reaches dirA's table" a_rs1_zero
say "dirA $(weights dirA), dirB $(weights dirB)"
grep -q "msg=\"operator change made on another director replayed here\" .*server=$RS1 .*new=0" "$W/monA1.log" ||
	fail "b: dirA did not log replaying dirB's drain"
wait_cycles 15 "dirA's monitor classifies rs1 as drained by operator" grep -q "msg=ownership .* server=$RS1 .*drained by operator" "$W/monA1.log"
# both stay 0 for six of dirA's cycles
both_drained() {
	[ "$(nth 1 "$(weights dirA)")" = 0 ] || fail "b: drained rs1 on dirA is $(nth 1 "$(weights dirA)")"
	[ "$(nth 1 "$(weights dirB)")" = 0 ] || fail "b: drained rs1 on dirB is $(nth 1 "$(weights dirB)")"
}
hold_cycles 6 "b: rs1 drained on both" both_drained
say "b: PASS (rs1 0 on both: dirA $(weights dirA), dirB $(weights dirB))"

# --- c. failover --------------------------------------------------------------
# Put rs2 into slow start (probe fails -> down -> answers -> ramp), so that
# the weights are moving and dirB must write at once when it takes over.
kill "$(cat "$W/httpd2.pid")"
a_rs2_zero() { [ "$(nth 2 "$(weights dirA)")" = 0 ]; }
wait_cycles 15 "rs2 down (0) on dirA after its httpd stopped" a_rs2_zero
ip netns exec reals httpd -f -v -p 10.2.0.12:80 -h "$W/www2" 2>>"$W/httpd2.log" &
a_rs2_back() { _w=$(nth 2 "$(weights dirA)"); [ "$_w" != 0 ] && [ "$_w" != - ]; }
wait_cycles 15 "rs2 back (ramping) on dirA" a_rs2_back
pass_cycles 1
say "rs2 ramping: dirA $(weights dirA), dirB $(weights dirB)"
# When the VIP appears on dirB: an address monitor there, running before the
# VIP is added, stamps the event as dirB's VIP watcher gets it. (The wall
# clock just before `ip addr add` also counts starting `ip`: over a second
# once, with every host core busy.) It is running when it has seen a
# marker address come and go.
ip netns exec dirB ip -ts monitor address >"$W/addrmon.log" 2>&1 &
addrmon_up() {
	grep -q 'inet 10\.0\.1\.199/32' "$W/addrmon.log" && return 0
	ip -n dirB addr del 10.0.1.199/32 dev lo 2>/dev/null
	ip -n dirB addr add 10.0.1.199/32 dev lo
	return 1
}
wait_for "an address monitor in dirB sees events" addrmon_up
ip -n dirB addr del 10.0.1.199/32 dev lo
# dirA dies. Freeze it first, so that its last table is known; a freeze
# between a write and its push would show dirB one step behind, which is
# the one-interval window the design accepts: let it go on and freeze again.
tries=0
while :; do
	kill -STOP "$APID"
	sleep 0.5
	last_a=$(weights dirA)
	last_b=$(weights dirB)
	[ "$last_a" = "$last_b" ] && break
	tries=$((tries + 1))
	[ "$tries" -lt 10 ] || fail "c: dirB never caught up with dirA before the failover: dirA $last_a, dirB $last_b"
	kill -CONT "$APID"
	sleep 0.3
done
kill -KILL "$APID"
wait "$APID" 2>/dev/null
APID=
say "dirA's monitor killed (after $tries retries); dirA's last table $last_a, dirB's $last_b"
lines_b=$(wc -l <"$W/monB.log")
run ip -n dirA addr del "$VIP/32" dev lo
t_vip=$(wall)
run ip -n dirB addr add "$VIP/32" dev lo
counting B
wait_cycles 10 "dirB takes over after the VIP moved" sh -c "tail -n +$((lines_b + 1)) $W/monB.log | grep -q 'took over at epoch'"
after_vip() { tail -n +$((lines_b + 1)) "$W/monB.log"; }
wait_cycles 10 "dirB writes a weight after taking over" sh -c "tail -n +$((lines_b + 1)) $W/monB.log | grep -q 'msg=\"weight changed\"'"
takeover_line=$(after_vip | grep -m1 'took over at epoch')
write_line=$(after_vip | grep -m1 'msg="weight changed"')
role_line=$(after_vip | grep -m1 'VIP watcher: role changed')
vip_sod=$(sed -n 's/^\[[0-9-]*T\([0-9]*\):\([0-9]*\):\([0-9.]*\)\] .*inet 10\.0\.1\.100\/32 .*/\1 \2 \3/p' "$W/addrmon.log" | head -n 1 | awk '{ printf "%.6f\n", $1 * 3600 + $2 * 60 + $3 }')
[ -n "$vip_sod" ] || fail "c: the address monitor in dirB did not see the VIP added: $(cat "$W/addrmon.log")"
# The VIP was there by the time the first of the two listeners got the
# event (on a busy guest dirB's watcher was once 43 ms ahead of ip monitor).
role_sod=$(log_sod "$role_line")
[ -z "$role_sod" ] || [ "$(ms_between "$vip_sod" "$role_sod")" -ge 0 ] || vip_sod=$role_sod
ms_cmd=$(ms_since "$vip_sod" "$t_vip")
ms_role=$(ms_between "$vip_sod" "$(log_sod "$role_line")")
ms_takeover=$(ms_between "$vip_sod" "$(log_sod "$takeover_line")")
ms_write=$(ms_between "$vip_sod" "$(log_sod "$write_line")")
echo "$takeover_line"
echo "$write_line"
say "TAKEOVER: the VIP appeared on dirB ${ms_cmd} ms after \`ip addr add\` started (the first of ip monitor and dirB's watcher to see it); from there -> dirB sees it ${ms_role} ms, -> dirB is the writer ${ms_takeover} ms, -> dirB's first weight write ${ms_write} ms (interval $((INTERVAL * 1000)) ms)"
[ "$ms_takeover" -le $((INTERVAL * 1000)) ] || fail "c: dirB became the writer ${ms_takeover} ms after the VIP was added (more than one interval)"
[ "$ms_write" -le $((INTERVAL * 1000)) ] || fail "c: dirB's first write came ${ms_write} ms after the VIP was added (more than one interval)"
# dirB's table at takeover: each weight as dirA left it. A weight dirB wrote
# since must have started from dirA's (old=), and the others are unchanged.
now_b=$(weights dirB)
diff=0
for n in 1 2 3; do
	eval "r=\$RS$n"
	la=$(nth "$n" "$last_a")
	first=$(after_vip | grep -m1 "msg=\"weight changed\" .* server=$r ")
	if [ -n "$first" ]; then
		old=$(echo "$first" | sed -n 's/.* old=\([0-9]*\) .*/\1/p')
		[ "$old" = "$la" ] || { diff=$((diff + 1)); say "rs$n: dirA left $la, dirB's first write started from $old"; }
	else
		[ "$(nth "$n" "$now_b")" = "$la" ] || { diff=$((diff + 1)); say "rs$n: dirA left $la, dirB has $(nth "$n" "$now_b") (not written)"; }
	fi
done
say "weight difference between dirA's last table and dirB's at takeover: $diff of 3 differ (dirA $last_a, dirB before its first write $last_b, dirB now $now_b)"
[ "$diff" = 0 ] || fail "c: dirB's table at takeover differs from dirA's last table"
# ... and carries on from dirA's controller state: rs2's slow start (15 s
# from 10 % of its weight) goes on where dirA left it — the write says
# "slow start N%" and moves by a few steps (~2.4 a second), not to the full weight.
l2=$(after_vip | grep -m1 "msg=\"weight changed\" .* server=$RS2 ")
[ -n "$l2" ] || fail "c: dirB did not write rs2 (ramping) after taking over"
set -- $(echo "$l2" | sed -n 's/.* old=\([0-9]*\) new=\([0-9]*\) reason="[^"]*slow start \([0-9]*\)%".*/\1 \2 \3/p')
[ $# = 3 ] || fail "c: dirB's first write of rs2 is not a slow-start step: the ramp was not carried over: $l2"
[ "$2" -gt "$1" ] && [ "$2" -le $(($1 + 15)) ] && [ "$3" -ge 10 ] && [ "$3" -lt 100 ] ||
	fail "c: dirB's first write of rs2 went from $1 to $2 at slow start $3%: the ramp was not carried over"
say "rs2's slow start carried on at takeover: $1 -> $2 (slow start $3%)"
ctl B status -o json >"$W/statusB.json" || fail "c: lvsctl status on dirB failed"
grep -q '"writer": true' "$W/statusB.json" || fail "c: lvsctl status on dirB does not say writer true after the takeover"
own1=$(awk -v s="\"server\": \"$RS1\"" 'index($0, s) { f = 1 } f && /"ownership"/ { gsub(/[",]/, "", $2); print $2; exit }' "$W/statusB.json")
[ "$own1" = drained ] || fail "c: dirB's record of rs1 after the takeover is $own1, not drained"
# the drain is kept through six of dirB's cycles as the writer
b_drained() { [ "$(nth 1 "$(weights dirB)")" = 0 ] || fail "c: the drain of rs1 was lost at the failover: dirB $(weights dirB)"; }
hold_cycles 6 "c: rs1 drained on dirB" b_drained
after_vip | grep -q "msg=\"weight changed\" .* server=$RS1 " && fail "c: dirB wrote drained rs1"
say "c: PASS (dirB writing: $(weights dirB); rs1 still drained)"

# --- d. a wrong key: nothing from dirA reaches dirB ---------------------------
json_num_b() { ctl B status -o json >"$W/statusB.json" 2>/dev/null && json_num "$W/statusB.json" "$1"; }
bad0=$(json_num_b bad_mac)
bad0=${bad0:-0}
acc0=$(json_num "$W/statusB.json" accepted)
lines_b=$(wc -l <"$W/monB.log")
before_b=$(weights dirB)
# dirA's table gets a weight of its own for rs3 (an operator's, which the
# restarted dirA adopts as a new default and claims to write), and dirA
# gets the VIP back, so that it claims the writer role: with the right key
# dirB would follow it (the newer epoch).
run ip netns exec dirA ipvsadm -e -t "$SVC" -r "$RS3" -m -w 7
run ip -n dirA addr add "$VIP/32" dev lo
start_monitor A monA2 monA-otherkey
counting A
wait_cycles 20 "dirA (other key) writes on its own" grep -q 'took over at epoch' "$W/monA2.log"
bad_grew() { _n=$(json_num_b bad_mac); [ "${_n:-0}" -gt "$bad0" ]; }
wait_cycles 15 "dirB counts bad_mac rejections" bad_grew
counting B
pass_cycles 3
# dirB's table is its own. dirB is the writer, so its own cycles may move
# rs2 and rs3 (on a busy host, where the probes are slow and the formula's
# load is over its target, they move every cycle): each weight in dirB's
# table must be the last one dirB logged writing since d began, or as it was
# then; a weight taken from dirA would come with no such line. dirB is
# frozen while its table and log are read, so that both are of one moment;
# a freeze between a write and its log line is tried again.
own_b() { # "w1 w2 w3": what dirB's own log says its table holds
	tail -n +$((lines_b + 1)) "$W/monB.log" | weight_changes | awk -v a="$RS1" -v b="$RS2" -v c="$RS3" -v w="$before_b" '
		BEGIN { split(w, v, " ") }
		$1 == a { v[1] = $3 } $1 == b { v[2] = $3 } $1 == c { v[3] = $3 }
		END { print v[1], v[2], v[3] }'
}
tries=0
while :; do
	kill -STOP "$BPID"
	after_b=$(weights dirB)
	own=$(own_b)
	a_now=$(weights dirA)
	kill -CONT "$BPID"
	[ "$after_b" = "$own" ] && break
	tries=$((tries + 1))
	[ "$tries" -lt 3 ] || fail "d: dirB's table $after_b is not what dirB itself wrote ($own, from $before_b): something else wrote it"
	sleep 0.3
done
bad1=$(json_num_b bad_mac)
acc=$(json_num "$W/statusB.json" accepted)
say "dirB: bad_mac $bad0 -> $bad1 (accepted $acc); dirB $before_b -> $after_b (its own writes), dirA (writing on its own) $a_now"
tail -n +$((lines_b + 1)) "$W/monB.log" | grep -E 'applied the writer|split brain|following it|replayed here' &&
	fail "d: dirB acted on dirA's messages despite the wrong key"
[ "$acc" = "$acc0" ] || fail "d: dirB accepted $((acc - acc0)) frames from dirA with the wrong key"
[ "$(nth 1 "$after_b")" = 0 ] || fail "d: rs1 on dirB is no longer drained"
# dirA started from weights of its own: rs3 at the operator's 7, which dirB
# never had — a frame of dirA's taken by dirB would have shown.
grep -q "msg=ownership .* server=$RS3 weight=7 .*new default weight" "$W/monA2.log" || fail "d: dirA did not take rs3's 7 as its new default"
[ "$(nth 3 "$before_b")" != 7 ] || fail "d: dirB's rs3 was dirA's 7 already: nothing to tell apart"
grep -q '"writer": true' "$W/statusB.json" || fail "d: dirB no longer the writer"
tail -n +$((lines_b + 1)) "$W/monB.log" | grep -m1 'msg="sync frame rejected" .*reason=bad_mac' ||
	fail "d: dirB did not log a bad_mac rejection"
say "d: PASS"

kill -TERM "$APID" "$BPID"
wait "$APID"
ra=$?
wait "$BPID"
rb=$?
APID=
BPID=
[ "$ra/$rb" = 0/0 ] || fail "the monitors exited with $ra/$rb on SIGTERM"
# For whoever reads a run on a busy host: how much the weights moved, and
# every server the monitors took down on failed probes (c stops rs2's httpd).
for f in monA1 monB monA2; do
	echo "--- $f.log: $(grep -c 'msg="weight changed"' "$W/$f.log") weight changes; down on failed probes:"
	grep 'msg="weight changed" .*reason="unreachable' "$W/$f.log" | sed 's/^time=[^T]*T\([^ ]*\)Z .* server=\([^ ]*\) old=\([0-9]*\) new=\([0-9]*\) reason=/  \1 \2 \3->\4 /'
done
cleanup
echo "PASS: e2e-pair (a-d) in $(($(now) - t_start)) s; takeover: writer ${ms_takeover} ms, first write ${ms_write} ms after the VIP was added"
