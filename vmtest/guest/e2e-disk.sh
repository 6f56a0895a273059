# Guest end-to-end test: a real server held back by its disk while its CPU
# stays low; the coefficients decide whether its weight falls
# (docs/developer/testing-kernel.md, "The disk-bound server test").
#
# make_topology 3: a director with an IPVS NAT service on the VIP (wrr) over
# rs1..rs3, weight 10 each. Each real server has a block device of its own,
# a null_blk device made through configfs (nullb-rsI): rs2's completes every I/O after
# $SLOW_NS ns on a timer, one at a time (hw_queue_depth 1), so it serves at
# most 1e9/$SLOW_NS reads a second and is busy all the time under load;
# rs1's and rs3's complete at once. Each runs `diskserver serve`: GET / reads
# one random 4 KiB block of its device with O_DIRECT, then answers its name
# (GET /health, the monitor's probe, does no I/O). Each has an lvs-agent
# measuring the server's process (-source process:PID: its own CPU) and its
# own device alone (-disk-devices nullb-rsI: all namespaces share one
# /proc/diskstats). A client (`diskserver client`) runs $WORKERS closed
# loops through the VIP, $RATE requests a second at most, each on a new
# connection: rs2's queue never empties, so its disk stays busy while every
# CPU stays low. Assertions:
#   agent. rs2's agent reports cpu < 0.3 and disk_io_busy > 0.7 (device
#      nullb-rs2, its own); rs1's and rs3's report disk_io_busy < 0.3;
#   a. with the default [coefficients] (disk = 0.1), lvs-monitor lowers rs2's
#      weight below its configured 10 within $CYCLES monitor cycles;
#   b. with disk = 0 (cpu 0.4, the others as default, sum 1) — a new monitor,
#      a fresh state directory, the weights back at 10 — rs2's weight stays
#      10 for $CYCLES cycles, as do rs1's and rs3's.
# The backlog guard is off in both runs ([backlog_guard] check = "0s"):
# rs2's waiting connections would be a backlog; the test is about the
# coefficient, not the guard (e2e-guard.sh tests the guard).
# Cycles are counted as the monitor's probes in the servers' probe logs,
# not in seconds (lib.sh).
set -u
. "${VMTEST_LIB:-/vmtest}/topology.sh"

W=/tmp/e2ed # logs, configs, counts
CTL=/run/e2ed-monitor
NB=/sys/kernel/config/nullb
SVC=$TOPO_VIP:80
SLOW_NS=${E2E_SLOW_NS:-400000000} # rs2's device: 400 ms a read, 2.5 reads a second
WORKERS=${E2E_WORKERS:-8}
# The client's requests a second, all servers: a third of 12 is more than
# rs2 can serve, so its queue fills (holding workers, which then send
# nothing); the guest's CPU is not spent on the fast servers. Unpaced, under
# TCG on a loaded host, the guest managed about 23 a second in all, its CPU
# full: rs2's share then kept a 50 ms device only 0.6 busy, and an agent
# took 3 s to answer a fetch.
RATE=${E2E_RATE:-12}
CYCLES=${E2E_CYCLES:-20}
MONPID=
CLIENT=

rs() { echo "$(topo_rs_ip "$1"):80"; }

cleanup() {
	[ -n "$MONPID" ] && kill "$MONPID" 2>/dev/null
	touch "$W/stop" 2>/dev/null
	[ -n "$CLIENT" ] && wait "$CLIENT" 2>/dev/null
	destroy_topology
	for i in 1 2 3; do
		[ -d "$NB/nullb-rs$i" ] || continue
		echo 0 >"$NB/nullb-rs$i/power" 2>/dev/null
		rmdir "$NB/nullb-rs$i" 2>/dev/null
	done
}

fail() {
	echo "FAIL: $*"
	echo "--- director: ipvsadm -Ln"
	in_ns director ipvsadm -Ln
	for f in monitor-a monitor-b; do
		[ -s "$W/$f.log" ] || continue
		echo "--- $f.log (last 30 lines)"
		tail -n 30 "$W/$f.log"
	done
	for i in 1 2 3; do
		echo "--- agent rs$i: $(load "$i" 2>/dev/null)"
		echo "--- agent rs$i log: $(tail -n 3 "$W/agent$i.log" 2>/dev/null | tr '\n' ' ')"
		echo "--- server rs$i log: $(grep -v 'GET /health' "$W/server$i.log" 2>/dev/null | tail -n 3 | tr '\n' ' ')"
	done
	echo "--- client answers: $(tr '\n' ' ' <"$W/counts" 2>/dev/null)"
	cleanup
	exit 1
}

. "${VMTEST_LIB:-/vmtest}/lib.sh" # now, say, run, wait_for, wait_cycles, hold_cycles, read_dests

read_weights() { read_dests "$SVC" "$(rs 1)" "$(rs 2)" "$(rs 3)"; }
# cycles: the monitor's probes (GET /health from the director's 10.1.I.1)
# in each server's probe log, one per cycle.
cycles() { probe_counts '10\.1\.[0-9]+\.1' "$W/server1.log" "$W/server2.log" "$W/server3.log"; }
# load I: rsI's agent's report (JSON), fetched from the director.
load() { in_ns director timeout 5 wget -q -O - "http://$(topo_rs_ip "$1"):9771/v1/load"; }
# field JSON NAME: a number of the report ("cpu" is the top-level load;
# "disk_io_busy" in raw; both appear once).
field() { echo "$1" | sed -n "s/.*\"$2\":\([0-9.e+-]*\).*/\1/p"; }
# mknullb NAME COMPLETION_NS: a 1 GiB null_blk device through configfs;
# COMPLETION_NS > 0: every I/O completes after that long on a timer
# (irqmode 2), one at a time; 0: at once. Prints the disk's name.
mknullb() {
	_d=$NB/$1
	mkdir "$_d" || return 1
	echo 1024 >"$_d/size" && echo 4096 >"$_d/blocksize" || return 1
	if [ "$2" -gt 0 ]; then
		echo 2 >"$_d/irqmode" && echo "$2" >"$_d/completion_nsec" &&
			echo 1 >"$_d/submit_queues" && echo 1 >"$_d/hw_queue_depth" || return 1
	else
		echo 0 >"$_d/irqmode" || return 1
	fi
	_before=$(ls /sys/block)
	echo 1 >"$_d/power" || return 1
	# Its name: the disk that appeared (6.1 names it after the configfs
	# directory; older kernels nullbN, by its index).
	_n=$(ls /sys/block | grep -vxF "$_before")
	[ -n "$_n" ] && [ -b "/dev/$_n" ] || {
		echo "no new block device after powering $1 on (index $(cat "$_d/index"); /sys/block: $(ls /sys/block | tr '\n' ' '))" >&2
		return 1
	}
	echo "$_n"
}
# monitor_toml FILE STATE COEFFICIENTS: the monitor's configuration.
monitor_toml() {
	cat >"$1" <<EOF
interval = "2s"
agent_timeout = "1500ms"
probe_timeout = "1500ms"
state_dir = "$2"
metrics_listen = ""
control_socket = "$CTL/control.sock"

$3

[availability]
slow_start = "0s"

# Off: rs2's waiting connections are a backlog the guard would cut; this
# test is about the coefficients (e2e-guard.sh tests the guard).
[backlog_guard]
check = "0s"

[[service]]
address = "$SVC/tcp"
[service.probe]
type = "http"
path = "/health"
expect_status = 200
reference = "100ms"
EOF
	append_servers "$1"
	lvs-monitor -check -config "$1" || fail "lvs-monitor -check refused $1"
}
# start_monitor NAME CONFIG: lvs-monitor in the director, log $W/NAME.log.
start_monitor() {
	ip netns exec director lvs-monitor -config "$2" 2>"$W/$1.log" &
	MONPID=$!
	wait_for "lvs-monitor ($1) started" grep -qs 'msg="lvs-monitor started"' "$W/$1.log"
	wait_cycles 10 "the monitor ($1) adopted the three servers" sh -c "[ \$(grep -c 'reason=\"adopted at its kernel weight\"' $W/$1.log) -ge 3 ]"
}
stop_monitor() {
	kill "$MONPID"
	wait "$MONPID"
	MONPID=
}
# history STATE I: rsI's records (time, weight, the controller's figures).
history() { lvsctl history -dir "$1" -n 0 "$SVC/tcp" "$(rs "$2")"; }

# --- setup -----------------------------------------------------------------
t_start=$(now)
destroy_topology
rm -rf "$W" "$CTL" /run/e2ed-state-a /run/e2ed-state-b
mkdir -p "$W" /run/e2ed-state-a /run/e2ed-state-b
mkdir -m 700 "$CTL"
# nr_devices=0: no nullb0 with the module's defaults; every device here is
# made through configfs with its own settings.
[ -d "$NB" ] || run modprobe null_blk nr_devices=0
[ -d /sys/kernel/config/nullb ] || mount -t configfs configfs /sys/kernel/config 2>/dev/null
[ -d "$NB" ] || fail "no $NB: null_blk without configfs?"
for i in 1 2 3; do
	slow=0
	[ "$i" = 2 ] && slow=$SLOW_NS
	dev=$(mknullb "nullb-rs$i" "$slow") || fail "cannot make rs$i's null_blk device"
	eval "dev$i=$dev"
	say "rs$i: /dev/$dev (completion ${slow} ns)"
done
run make_topology 3
for i in 1 2 3; do
	eval "dev=\$dev$i"
	: >"$W/server$i.log"
	ip netns exec "rs$i" diskserver serve -listen :80 -disk "/dev/$dev" -name "rs$i" -log "$W/server$i.log" 2>>"$W/server$i.log" &
	pid=$!
	# -disk-mounts /dev/shm: an empty tmpfs, so the disk load is the I/O.
	ip netns exec "rs$i" lvs-agent -listen :9771 -source "process:$pid" -disk-devices "$dev" -disk-mounts /dev/shm 2>"$W/agent$i.log" &
done
for i in 1 2 3; do
	wait_for "rs$i answers" sh -c "[ \"\$(ip netns exec director timeout 5 wget -q -O - http://$(topo_rs_ip "$i")/ 2>/dev/null)\" = rs$i ]"
	wait_for "rs$i's agent serves a load" sh -c "ip netns exec director timeout 5 wget -q -O - http://$(topo_rs_ip "$i"):9771/v1/load 2>/dev/null | grep -q '\"schema\":1'"
done
run in_ns director ipvsadm -A -t "$SVC" -s wrr
for i in 1 2 3; do run in_ns director ipvsadm -a -t "$SVC" -r "$(rs "$i")" -m -w 10; done

in_ns client diskserver client -url "http://$TOPO_VIP/" -workers "$WORKERS" -rate "$RATE" -stop "$W/stop" -counts "$W/counts" 2>"$W/client.log" &
CLIENT=$!
wait_for "the client gets answers from the three servers" sh -c "grep -q '^rs1 ' $W/counts && grep -q '^rs2 ' $W/counts && grep -q '^rs3 ' $W/counts"
say "setup done in $(($(now) - t_start)) s; client answers: $(tr '\n' ' ' <"$W/counts")"

# --- agent: rs2 is disk-bound, its CPU low ---------------------------------
rs2_disk_bound() {
	_j=$(load 2) || return 1
	_cpu=$(field "$_j" cpu)
	_io=$(field "$_j" disk_io_busy)
	awk -v c="$_cpu" -v d="$_io" 'BEGIN { exit !(c != "" && d != "" && c < 0.3 && d > 0.7) }'
}
# The agent's window is a second: the disk is busy within a few.
WAIT_CEILING=120 wait_for "rs2's agent reports cpu < 0.3 and disk_io_busy > 0.7" rs2_disk_bound
for i in 1 2 3; do
	j=$(load "$i") || fail "rs$i's agent does not answer"
	_io=$(field "$j" disk_io_busy)
	say "agent rs$i: cpu $(field "$j" cpu) disk_io_busy $_io device $(echo "$j" | sed -n 's/.*"disk_io_device":"\([^"]*\)".*/\1/p')"
	case $i in
	2) [ "$(echo "$j" | sed -n 's/.*"disk_io_device":"\([^"]*\)".*/\1/p')" = "$dev2" ] || fail "agent: rs2's busiest device is not its own $dev2" ;;
	*) awk -v d="$_io" 'BEGIN { exit !(d < 0.3) }' || fail "agent: rs$i's fast device is busy $_io (rs2's device counted?)" ;;
	esac
done
say "agent: PASS"

# --- a. default coefficients: rs2's weight falls ------------------------------
monitor_toml "$W/monitor-a.toml" /run/e2ed-state-a "# [coefficients]: the defaults (disk = 0.1)."
start_monitor monitor-a "$W/monitor-a.toml"
t_a=$(now)
rs2_lowered() { read_weights; [ -n "$w2" ] && [ "$w2" -lt 10 ]; }
wait_cycles "$CYCLES" "rs2's weight below 10 with the default coefficients" rs2_lowered
read_weights
say "a: weights rs1=$w1 rs2=$w2 rs3=$w3 after $(($(now) - t_a)) s; rs2 now: cpu $(field "$(load 2)" cpu) disk_io_busy $(field "$(load 2)" disk_io_busy)"
# A few more cycles for the record of what followed.
pass_cycles 4
read_weights
say "a: PASS (weights rs1=$w1 rs2=$w2 rs3=$w3; client answers $(tr '\n' ' ' <"$W/counts"))"
stop_monitor
echo "--- a: rs2's history"
history /run/e2ed-state-a 2

# --- b. disk = 0: rs2's weight stays ------------------------------------------
for i in 1 2 3; do run in_ns director ipvsadm -e -t "$SVC" -r "$(rs "$i")" -m -w 10; done
# rs2's backlog from run a drains at the new weights; wait until its disk
# is busy again (it is: the client never stops).
WAIT_CEILING=120 wait_for "rs2 disk-bound again" rs2_disk_bound
monitor_toml "$W/monitor-b.toml" /run/e2ed-state-b '[coefficients]
input = 0.1
cpu = 0.4
memory = 0.1
disk = 0.0
response = 0.3
process = 0.1'
start_monitor monitor-b "$W/monitor-b.toml"
all_ten() {
	read_weights
	[ "$w1" = 10 ] && [ "$w2" = 10 ] && [ "$w3" = 10 ] || fail "b: with disk = 0 weights moved after $held cycles: rs1=$w1 rs2=$w2 rs3=$w3"
}
hold_cycles "$CYCLES" "b: weights at 10 with disk = 0" all_ten
j=$(load 2)
say "b: PASS (weights 10 10 10 for $CYCLES cycles; rs2 now: cpu $(field "$j" cpu) disk_io_busy $(field "$j" disk_io_busy))"
stop_monitor
echo "--- b: rs2's history"
history /run/e2ed-state-b 2

echo "--- client answers: $(tr '\n' ' ' <"$W/counts")"
cleanup
echo "PASS: e2e-disk (agent, a, b) in $(($(now) - t_start)) s"
