#!/bin/sh
# lvs-feedback postrm: forget the units; on purge, the ownership state too.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = "purge" ]; then
	rm -rf /var/lib/lvs-monitor
fi
exit 0
