#!/bin/sh
# make deb: two packages from one tree, packaged by nfpm
# (github.com/goreleaser/nfpm, run through the Go module proxy at a pinned
# version):
#   $DEB_OUT/lvs-monitor_$VERSION_amd64.deb  the director: lvs-monitor,
#                                            lvsctl, unit, configuration,
#                                            modules-load file
#   $DEB_OUT/lvs-agent_$VERSION_amd64.deb    the real server: lvs-agent
#                                            and its unit
# DEB_OUT defaults to bin. Both follow Debian policy for /usr/share/doc/PKG
# (copyright in the machine-readable format, changelog.gz, docs gzip -9n)
# and ship manual pages. VERSION defaults to the top entry of
# packaging/changelog and must match it. DEB_QUIET=1 skips the listing.
# See docs/operator-guide.md; packaging/deb_test.go checks the result.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
changelog_version=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' packaging/changelog)
VERSION=${VERSION:-$changelog_version}
if [ "$VERSION" != "$changelog_version" ]; then
	echo "deb.sh: VERSION=$VERSION but packaging/changelog's top entry is $changelog_version: add an entry first" >&2
	exit 1
fi
DEB_MAINTAINER=${DEB_MAINTAINER:-lvs-feedback packagers <packagers@lvs-feedback.invalid>}
NFPM=${NFPM:-github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0}
DEB_OUT=${DEB_OUT:-bin}
mkdir -p "$DEB_OUT"
DEB_OUT=$(cd "$DEB_OUT" && pwd)

# nfpm runs in a staging directory of its own (a concurrent build or test
# does not share it), with the yaml files' src paths relative to it.
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/man" "$STAGE/doc/lvs-monitor/examples" "$STAGE/doc/lvs-agent"
# The binaries name the package's version in -version, lvsctl version and
# lvs_monitor_build_info (the commit, when recorded, stays beside it).
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" build -trimpath \
	-ldflags="-s -w -X lvs-feedback/internal/buildinfo.packageVersion=$VERSION" \
	-o "$STAGE/bin/" ./cmd/lvs-monitor ./cmd/lvs-agent ./cmd/lvsctl ./cmd/lvs-tune
tar -cf - systemd/lvs-monitor.service systemd/lvs-agent.service systemd/lvs-benefit.service systemd/lvs-benefit.timer packaging/default packaging/modules-load.d packaging/lintian \
	packaging/scripts docs/examples/lvs-monitor.toml | tar -xf - -C "$STAGE"

# gzip -9n: best compression, no name or time stamp (reproducible).
for m in docs/man/*.[58]; do
	gzip -9n <"$m" >"$STAGE/man/$(basename "$m").gz"
done
for pkg in lvs-monitor lvs-agent; do
	d="$STAGE/doc/$pkg"
	cp packaging/copyright "$d/copyright"
	# A native package (the packaging lives with the code, the version has
	# no Debian revision): policy 12.7 names its changelog changelog.gz.
	gzip -9n <packaging/changelog >"$d/changelog.gz"
	gzip -9n <README.md >"$d/README.md.gz"
done
# docs/README.md, the pages' index, would take the project README's name.
for f in docs/*.md docs/grafana-dashboard.json; do
	n=$(basename "$f")
	[ "$f" = docs/README.md ] && n=index.md
	gzip -9n <"$f" >"$STAGE/doc/lvs-monitor/$n.gz"
done
# The examples stay plain (cp them to start a configuration or the
# alerting rules). The operator's pages ship; the developer's pages and the
# lab notebook (docs/developer, docs/results) stay with the source.
cp docs/examples/lvs-monitor.toml docs/examples/lvs-monitor.rules.yml "$STAGE/doc/lvs-monitor/examples/"
for f in agent.md haproxy.md operator-guide.md; do
	gzip -9n <"docs/$f" >"$STAGE/doc/lvs-agent/$f.gz"
done
find "$STAGE/doc" -type d -exec chmod 0755 {} +
find "$STAGE/doc" "$STAGE/man" -type f -exec chmod 0644 {} +

export VERSION DEB_MAINTAINER
for pkg in lvs-monitor lvs-agent; do
	out="$DEB_OUT/${pkg}_${VERSION}_amd64.deb"
	rm -f "$out"
	# Outside this module: no -mod flag from the caller applies to nfpm's.
	(cd "$STAGE" && GOFLAGS= "$GO" run "$NFPM" package -f "$OLDPWD/packaging/$pkg.yaml" -p deb -t "$out")
	if [ -z "${DEB_QUIET:-}" ]; then
		ls -l "$out"
		if command -v dpkg-deb >/dev/null; then
			dpkg-deb --info "$out" | sed -n '/Package:/,$p'
			dpkg-deb --contents "$out"
		fi
	fi
done
