#!/bin/sh
# lvs-feedback postinst: make systemd see the units; restart the ones
# running on an upgrade. Nothing is enabled on install: lvs-monitor runs on
# directors, lvs-agent on real servers, and only you know which this is.
set -e
if [ "$1" = "configure" ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if [ -n "$2" ]; then
		systemctl try-restart lvs-monitor.service lvs-agent.service >/dev/null 2>&1 || true
	fi
fi
exit 0
