#!/bin/sh
# lvs-monitor and lvs-agent prerm: on removal, stop and disable the
# package's unit. (The weights lvs-monitor last wrote stay in the kernel;
# drains stay drained.)
set -e
unit="${DPKG_MAINTSCRIPT_PACKAGE:?not run by dpkg}.service"
if [ "$1" = "remove" ]; then
	if [ -d /run/systemd/system ]; then
		deb-systemd-invoke stop "$unit" >/dev/null 2>&1 || true
	fi
	# Removes the enablement links the unit's [Install] section made,
	# with or without a running systemd.
	deb-systemd-helper disable "$unit" >/dev/null 2>&1 || true
	# lvs-monitor's hourly benefit timer, if the operator enabled it.
	if [ "$DPKG_MAINTSCRIPT_PACKAGE" = "lvs-monitor" ]; then
		if [ -d /run/systemd/system ]; then
			deb-systemd-invoke stop lvs-benefit.timer >/dev/null 2>&1 || true
		fi
		deb-systemd-helper disable lvs-benefit.timer >/dev/null 2>&1 || true
	fi
fi
exit 0
