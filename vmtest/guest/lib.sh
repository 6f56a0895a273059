# Helpers shared by the guest's end-to-end scripts; copied by run.sh to
# /vmtest/lib.sh. Source it after defining fail() (the waits and run call
# it): . "${VMTEST_LIB:-/vmtest}/lib.sh"

# now: seconds since boot (whole); say: a line stamped with the uptime.
now() { read -r _up _ </proc/uptime; echo "${_up%.*}"; }
say() { echo "[$(cut -d' ' -f1 /proc/uptime)] $*"; }

# run CMD...: CMD or fail.
run() { "$@" || fail "command failed: $*"; }

# wait_until SECONDS WHAT CMD...: run CMD every WAIT_POLL seconds (default
# 0.5) until it succeeds; fail after SECONDS. A deadline in seconds: use it
# only for what does not slow down with the host (nothing in the tests
# today); the waits below stretch with a busy host instead.
wait_until() {
	_secs=$1
	_deadline=$(($(now) + _secs))
	_what=$2
	shift 2
	while ! "$@"; do
		[ "$(now)" -lt "$_deadline" ] || fail "not within ${_secs} s: $_what"
		sleep "${WAIT_POLL:-0.5}"
	done
}

# --- Waiting for the monitor: cycles, not seconds ---------------------------
# Under TCG on a busy host everything in the guest runs several times
# slower, lvs-monitor included; a deadline in seconds then fails a test whose
# monitor is slow but right. The waits below count the monitor's cycles
# instead, and keep a wall-clock ceiling only as a hang guard.
#
# The test defines the counter: $COUNT_CYCLES (default `cycles`) is a command
# printing one or more numbers, each growing by one per monitor cycle while
# its source is live — the monitor's probes in each real server's httpd log
# (`probe_counts SOURCE LOG...`, one per cycle while the server is not
# drained) — and, with _lw_since set to an earlier output, the largest
# growth among them since then (probe_counts does both): the monitor's
# cycles since that mark, which a drained server (not probed) or a stopped
# httpd does not stop.
# A probe is made in the cycle's gather step, before it decides and writes:
# N counted cycles are at least N-1 finished ones.
#
# The hang guard: WAIT_CEILING seconds (default 300) for one wait, but never
# past 10 s before /init's limit for the whole test (VMTEST_TEST_TIMEOUT),
# so that a hang fails with its message instead of a bare SIGTERM.
COUNT_CYCLES=${COUNT_CYCLES:-cycles}
_lib_t0=$(now)
_lib_limit=$(cat /etc/vmtest/test-timeout 2>/dev/null || echo 0)

# probe_counts SOURCE LOG...: per LOG (a busybox `httpd -v` log), the
# requests from SOURCE, an extended regular expression of the client's
# address (10\.1\.[0-9]+\.1). busybox logs one line a request, starting
# "ADDRESS:PORT:" on an IPv4 socket, "[::ffff:ADDRESS]:PORT:" on a dual-stack
# one. Called by cycles_since (which sets _lw_since to a mark), it prints
# instead the largest growth since that mark. One awk, and nothing else, per
# call: the waits count at every poll, and every process costs the guest
# (whose CPU the host-source agents measure as the servers' load).
probe_counts() {
	_lw_re="^(($1):[0-9]+:|\\[(::ffff:)?($1)\\]:[0-9]+:)"
	shift
	LW_RE=$_lw_re LW_MARK=${_lw_since:-} awk '$0 ~ ENVIRON["LW_RE"] { n[FILENAME]++ }
		END {
			if (ENVIRON["LW_MARK"] == "") {
				for (i = 1; i < ARGC; i++) printf "%d%s", n[ARGV[i]], (i < ARGC - 1 ? " " : "\n")
				exit
			}
			split(ENVIRON["LW_MARK"], m, " ")
			d = 0
			for (i = 1; i < ARGC; i++) if (n[ARGV[i]] - m[i] > d) d = n[ARGV[i]] - m[i]
			print d
		}' "$@"
}

# metric_cycles NS ADDRESS: the monitor's completed cycles from its metrics
# (lvs_monitor_cycle_duration_seconds_count at http://ADDRESS/metrics, read
# in namespace NS) — for a test whose servers' logs cannot count them (no
# httpd log, or a probe that is not HTTP); with _lw_since set, the cycles
# since that mark.
metric_cycles() {
	_c=$(ip netns exec "$1" wget -q -O - "http://$2/metrics" 2>/dev/null |
		awk '$1 == "lvs_monitor_cycle_duration_seconds_count" { print $2 }')
	_c=${_c:-0}
	if [ -n "${_lw_since:-}" ]; then echo $((_c - _lw_since)); else echo "$_c"; fi
}

# cycles_since MARK: the monitor's cycles since MARK (an earlier output of
# $COUNT_CYCLES): the largest growth among the counters, which
# $COUNT_CYCLES prints when _lw_since is set (probe_counts does).
cycles_since() {
	_lw_since=$1
	$COUNT_CYCLES
	_lw_since=
}

# _lw_ceiling: sets _lw_stop, the uptime at which a wait starting now gives
# up, and _lw_t0, now. (The helpers' variables are _lw_*: the commands they
# run are the tests' functions, with their own _x variables.)
_lw_ceiling() {
	_lw_t0=$(now)
	_lw_stop=$((_lw_t0 + ${WAIT_CEILING:-300}))
	if [ "$_lib_limit" -gt 20 ] && [ "$_lw_stop" -gt $((_lib_t0 + _lib_limit - 10)) ]; then
		_lw_stop=$((_lib_t0 + _lib_limit - 10))
	fi
}

# wait_for WHAT CMD...: run CMD every WAIT_POLL seconds until it succeeds;
# fail only at the hang guard. For what is not the monitor's doing (a
# server or the monitor starting, the client's requests).
wait_for() {
	_lw_what=$1
	shift
	_lw_ceiling
	while ! "$@"; do
		[ "$(now)" -lt "$_lw_stop" ] || fail "not within $(($(now) - _lw_t0)) s (the hang guard): $_lw_what"
		sleep "${WAIT_POLL:-0.5}"
	done
}

# wait_cycles N WHAT CMD...: run CMD every WAIT_POLL seconds until it
# succeeds; fail "not within N monitor cycles: WHAT" once the monitor has run
# N more cycles and CMD, run once more after that count, still fails; or at
# the hang guard. (CMD first, the count only when it fails: a wait reacts
# within one CMD of the change it waits for.)
wait_cycles() {
	_lw_n=$1
	_lw_what=$2
	shift 2
	_lw_ceiling
	_lw_mark=$($COUNT_CYCLES)
	while ! "$@"; do
		_lw_k=$(cycles_since "$_lw_mark")
		if [ "$_lw_k" -ge "$_lw_n" ]; then
			"$@" && return 0
			fail "not within $_lw_n monitor cycles: $_lw_what"
		fi
		[ "$(now)" -lt "$_lw_stop" ] || fail "not within $_lw_n monitor cycles: $_lw_what (the hang guard: $_lw_k cycles in $(($(now) - _lw_t0)) s)"
		sleep "${WAIT_POLL:-0.5}"
	done
}

# pass_cycles N: wait until the monitor has run N more cycles.
pass_cycles() {
	_lw_ceiling
	_lw_mark=$($COUNT_CYCLES)
	while :; do
		_lw_k=$(cycles_since "$_lw_mark")
		[ "$_lw_k" -lt "$1" ] || return 0
		[ "$(now)" -lt "$_lw_stop" ] || fail "the monitor ran $_lw_k of $1 cycles in $(($(now) - _lw_t0)) s (the hang guard)"
		sleep "${WAIT_POLL:-0.5}"
	done
}

# hold_cycles N WHAT CMD...: CMD must succeed at every poll (every
# WAIT_POLL seconds) while the monitor runs N more cycles, and once after;
# $held is the cycles so far (for CMD's own failure messages). Fails
# "WHAT: not so after K monitor cycles", or at the hang guard.
hold_cycles() {
	_lw_n=$1
	_lw_what=$2
	shift 2
	_lw_ceiling
	_lw_mark=$($COUNT_CYCLES)
	while :; do
		held=$(cycles_since "$_lw_mark")
		"$@" || fail "$_lw_what: not so after $held monitor cycles"
		[ "$held" -lt "$_lw_n" ] || return 0
		[ "$(now)" -lt "$_lw_stop" ] || fail "$_lw_what: the monitor ran $held of $_lw_n cycles in $(($(now) - _lw_t0)) s (the hang guard)"
		sleep "${WAIT_POLL:-0.5}"
	done
}

# read_dests SVC RIP1 RIP2 RIP3: sets w1 w2 w3 (weights) and a1 a2 a3
# (ActiveConn) of three real servers of SVC in the director namespace's
# table, as ipvsadm -Ln shows them ("" for one not in the table).
read_dests() {
	eval "$(ip netns exec director ipvsadm -Ln -t "$1" | awk -v r1="$2" -v r2="$3" -v r3="$4" '
		$1 == "->" && $2 == r1 { w1 = $4; a1 = $5 }
		$1 == "->" && $2 == r2 { w2 = $4; a2 = $5 }
		$1 == "->" && $2 == r3 { w3 = $4; a3 = $5 }
		END { printf "w1=%s w2=%s w3=%s a1=%s a2=%s a3=%s\n", w1, w2, w3, a1, a2, a3 }')"
}

# weight_changes [LOG...]: "SERVER OLD NEW REASON" per "weight changed" line
# of lvs-monitor's log (standard input without LOG), in order.
weight_changes() {
	cat "$@" | sed -n 's/.* msg="weight changed" .* server=\([^ ]*\) old=\([0-9]*\) new=\([0-9]*\) reason="\([^"]*\)".*/\1 \2 \3 \4/p'
}

# append_servers FILE: a [[service.server]] entry of weight 10 for each of
# rs1..rs3 (the script's rs N gives the address) at the end of the monitor
# configuration FILE.
append_servers() {
	for _i in 1 2 3; do printf '[[service.server]]\naddress = "%s"\nweight = 10\n' "$(rs "$_i")" >>"$1"; done
}

# serve_rs: in rs1..rs3 an httpd serving "rsI" from $W/wwwI on port 80 (its
# log $W/httpdI.log, its pid $W/httpdI.pid) and an lvs-agent on :9771 (its
# log $W/agentI.log); returns once each page answers the director.
serve_rs() {
	for _i in 1 2 3; do
		mkdir -p "$W/www$_i"
		echo "rs$_i" >"$W/www$_i/index.html"
		: >"$W/httpd$_i.log"
		ip netns exec "rs$_i" httpd -f -v -p 80 -h "$W/www$_i" 2>>"$W/httpd$_i.log" &
		echo $! >"$W/httpd$_i.pid"
		ip netns exec "rs$_i" lvs-agent -listen :9771 2>"$W/agent$_i.log" &
	done
	for _i in 1 2 3; do
		wait_for "rs$_i answers" sh -c "[ \"\$(ip netns exec director timeout 3 wget -q -O - http://$(topo_rs_ip "$_i")/ 2>/dev/null)\" = rs$_i ]"
	done
}

# lvsctl_config FILE: the monitor configuration of the lvsctl guest tests —
# a 1 s interval, the LVS formula, the control socket $SOCK, state under $W,
# service $SVCT with an HTTP probe — and its three servers (append_servers).
lvsctl_config() {
	cat >"$1" <<CONF
interval = "1s"
agent_timeout = "900ms"
probe_timeout = "900ms"
state_dir = "$W/state"
metrics_listen = ""
control_socket = "$SOCK"

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
slow_start = "3s"
slow_start_floor = 0.1

[[service]]
address = "$SVCT"
[service.probe]
type = "http"
path = "/"
expect_status = 200
reference = "100ms"
CONF
	append_servers "$1"
}

# ns_weights NS SVC RIP1 RIP2 RIP3: "w1 w2 w3", the kernel weights of three
# real servers of SVC in namespace NS's table ("-" for one not in it).
ns_weights() {
	ip netns exec "$1" ipvsadm -Ln -t "$2" | awk -v a="$3" -v b="$4" -v c="$5" '
		$1 == "->" && $2 == a { w1 = $4 }
		$1 == "->" && $2 == b { w2 = $4 }
		$1 == "->" && $2 == c { w3 = $4 }
		END { printf "%s %s %s\n", (w1 == "" ? "-" : w1), (w2 == "" ? "-" : w2), (w3 == "" ? "-" : w3) }'
}

# nth N "w1 w2 w3": the Nth weight.
nth() { echo "$2" | awk -v n="$1" '{ print $n }'; }
