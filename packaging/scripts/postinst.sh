#!/bin/sh
# lvs-monitor and lvs-agent postinst (dpkg names the package being
# configured in DPKG_MAINTSCRIPT_PACKAGE; its unit has the same name): make
# systemd see the unit; restart it on an upgrade if it was running. Nothing
# is enabled on install: enable lvs-monitor on directors and lvs-agent on
# real servers yourself.
set -e
unit="${DPKG_MAINTSCRIPT_PACKAGE:?not run by dpkg}.service"
if [ "$1" = "configure" ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if [ -n "$2" ]; then
		# deb-systemd-invoke (init-system-helpers, essential) honours
		# policy-rc.d, so a chroot or image build restarts nothing.
		deb-systemd-invoke try-restart "$unit" >/dev/null 2>&1 || true
	fi
fi
exit 0
