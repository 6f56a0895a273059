#!/bin/sh
# make deb: static binaries, packaged by nfpm (github.com/goreleaser/nfpm,
# run through the Go module proxy at a pinned version) into
# bin/lvs-feedback_$VERSION_amd64.deb. See docs/operator-guide.md.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
VERSION=${VERSION:-0.1.0}
DEB_MAINTAINER=${DEB_MAINTAINER:-lvs-feedback packagers <packagers@lvs-feedback.invalid>}
NFPM=${NFPM:-github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0}

STAGE=bin/deb-stage
rm -rf "$STAGE"
mkdir -p "$STAGE"
# The binaries name the package's version in -version, lvsctl version and
# lvs_monitor_build_info (the commit, when recorded, stays beside it).
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" build -trimpath \
	-ldflags="-s -w -X lvs-feedback/internal/buildinfo.packageVersion=$VERSION" \
	-o "$STAGE/" ./cmd/lvs-monitor ./cmd/lvs-agent ./cmd/lvsctl

mkdir -p bin
out="bin/lvs-feedback_${VERSION}_amd64.deb"
rm -f "$out"
export VERSION DEB_MAINTAINER
# The nfpm module is its own: no -mod flag from the caller applies to it.
GOFLAGS= "$GO" run "$NFPM" package -f packaging/nfpm.yaml -p deb -t "$out"
rm -rf "$STAGE"
ls -l "$out"
if command -v dpkg-deb >/dev/null; then
	dpkg-deb --info "$out" | sed -n '/Package:/,$p'
	dpkg-deb --contents "$out"
fi
