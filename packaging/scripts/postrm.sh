#!/bin/sh
# lvs-monitor and lvs-agent postrm: forget the unit; on purging lvs-monitor,
# its ownership state too (the agent keeps none).
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = "purge" ] && [ "${DPKG_MAINTSCRIPT_PACKAGE:-}" = "lvs-monitor" ]; then
	rm -rf /var/lib/lvs-monitor
fi
exit 0
