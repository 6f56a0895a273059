#!/bin/sh
# make systemd-check: `systemd-analyze verify` must say nothing about the
# units, and `systemd-analyze security --offline=true` must rate them at or
# below their targets (lvs-monitor 2.5, lvs-agent 1.5, lvs-benefit 1.0). Prints both
# exposure figures. See docs/operator-guide.md.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}

if ! command -v systemd-analyze >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get install -y --no-install-recommends systemd >/dev/null
	else
		echo "systemd-check: systemd-analyze is missing (apt-get install systemd)" >&2
		exit 1
	fi
fi

# verify resolves every unit the services name and checks that ExecStart
# binaries exist and are executable. Run it against a scratch root holding
# this host's units, the units as shipped (their paths untouched) and the
# binaries built from this tree at the paths the units name.
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/bin" "$root/etc/systemd/system" "$root/lib/systemd"
for d in /lib/systemd/system /usr/lib/systemd/system; do
	if [ -d "$d" ]; then cp -a "$d" "$root/lib/systemd/" && break; fi
done
CGO_ENABLED=0 "$GO" build -o "$root/usr/bin/" ./cmd/lvs-monitor ./cmd/lvs-agent ./cmd/lvs-tune
cp /bin/kill "$root/bin/kill" # ExecReload names it; procps ships it
cp systemd/lvs-monitor.service systemd/lvs-agent.service systemd/lvs-benefit.service systemd/lvs-benefit.timer "$root/etc/systemd/system/"

# verify runs man(1) for the units' Documentation=man: pages: point it
# at the pages this tree ships (docs/man). man-db provides man.
if ! command -v man >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get install -y --no-install-recommends man-db >/dev/null
	else
		echo "systemd-check: man is missing (apt-get install man-db)" >&2
		exit 1
	fi
fi
mkdir -p "$root/man/man8"
cp docs/man/lvs-monitor.8 docs/man/lvs-agent.8 docs/man/lvsctl.8 "$root/man/man8/"
export MANPATH="$root/man"

status=0
out=$(systemd-analyze verify --root="$root" lvs-monitor.service lvs-agent.service lvs-benefit.service lvs-benefit.timer 2>&1) || status=1
if [ -n "$out" ] || [ $status != 0 ]; then
	echo "systemd-analyze verify:"
	echo "$out"
	exit 1
fi
echo "systemd-analyze verify: lvs-monitor.service lvs-agent.service lvs-benefit.service lvs-benefit.timer: clean"

for pair in lvs-monitor:2.5 lvs-agent:1.5 lvs-benefit:1.0; do
	unit=${pair%%:*}
	target=${pair#*:}
	line=$(systemd-analyze security --offline=true --no-pager "systemd/$unit.service" | grep 'Overall exposure level')
	exposure=$(echo "$line" | sed 's/.*: \([0-9.]*\) .*/\1/')
	if awk -v e="$exposure" -v t="$target" 'BEGIN { exit !(e <= t) }'; then
		echo "exposure $unit.service: $exposure (target ≤ $target) ok"
	else
		echo "exposure $unit.service: $exposure: above the target $target"
		systemd-analyze security --offline=true --no-pager "systemd/$unit.service" | grep '✗'
		status=1
	fi
done
exit $status
