# Helpers shared by the guest's end-to-end scripts; copied by run.sh to
# /vmtest/lib.sh. Source it after defining fail() (wait_until and run call
# it): . "${VMTEST_LIB:-/vmtest}/lib.sh"

# now: seconds since boot (whole); say: a line stamped with the uptime.
now() { read -r _up _ </proc/uptime; echo "${_up%.*}"; }
say() { echo "[$(cut -d' ' -f1 /proc/uptime)] $*"; }

# run CMD...: CMD or fail.
run() { "$@" || fail "command failed: $*"; }

# wait_until SECONDS WHAT CMD...: run CMD every WAIT_POLL seconds (default
# 0.5) until it succeeds; fail after SECONDS.
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
