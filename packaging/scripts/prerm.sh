#!/bin/sh
# lvs-feedback prerm: on removal, stop and disable the units. (The weights
# lvs-monitor last wrote stay in the kernel; drains stay drained.)
set -e
if [ "$1" = "remove" ]; then
	if [ -d /run/systemd/system ]; then
		systemctl stop lvs-monitor.service lvs-agent.service >/dev/null 2>&1 || true
	fi
	systemctl disable --quiet lvs-monitor.service lvs-agent.service >/dev/null 2>&1 || true
fi
exit 0
