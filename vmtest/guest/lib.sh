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
