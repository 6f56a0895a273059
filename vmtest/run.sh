#!/usr/bin/env bash
# vmtest/run.sh — boot a real Debian kernel under qemu and run tests against
# the kernel's IPVS inside it. Used by `make test-kernel`.
#
#   vmtest/run.sh [LIST...]      LIST defaults to vmtest/tests.list
#
# Steps: (a) install what is missing (qemu-system-x86, busybox-static, ipvsadm,
# and kmod/iproute2 if the host lacks them; keepalived when a list names it;
# etcd-server and the bridge module when a list names e2e-fleet); (b) fetch the Debian cloud kernel
# package once into vmtest/cache/; (c) build an initramfs in vmtest/out/ with
# busybox, the IPVS modules, ipvsadm, ip and the listed tests; (d) boot it with
# a hard timeout, streaming the guest console; (e) exit 0 only if every guest
# test passed and the result marker was seen.
#
# Exit status: 0 all passed; 1 a guest test failed; 2 harness error, guest hang
# or missing result marker.
#
# Environment (all optional):
#   VMTEST_TIMEOUT=1000      hard limit for the whole VM run, seconds (1500 busy)
#   VMTEST_TEST_TIMEOUT=200  limit for one guest test, seconds (400 busy)
#   VMTEST_MEM=1024 VMTEST_SMP=2
#   VMTEST_ACCEL=tcg|kvm     default tcg (this machine's nested KVM fails)
#   VMTEST_KERNEL_PKG=linux-image-6.1.0-NN-cloud-amd64  pin a kernel package
#   VMTEST_MODULES="..."     modules insmod-ed at boot (dependencies added)
#   VMTEST_APPEND="..."      extra kernel command line
#   VMTEST_QUIET=0           boot without `quiet` (full kernel log on the console)
#   VMTEST_CACHE, VMTEST_OUT  default vmtest/cache and vmtest/out
#   VMTEST_BUSY=1            keep the host busy while the VM runs: one busy
#                            loop per host core (nproc), stopped when qemu
#                            exits (each bounded by VMTEST_TIMEOUT + 30 s);
#                            the two limits above default to 900 and 400
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cache=${VMTEST_CACHE:-$here/cache}
out=${VMTEST_OUT:-$here/out}
# Busy host (VMTEST_BUSY=1): the guest ran 306-515 s instead of 185-240, a
# test up to 150 s instead of 60, so higher limits unless they are given
# (docs/developer/testing-kernel.md, "A busy host").
if [ "${VMTEST_BUSY:-0}" = 1 ]; then
	vm_timeout=${VMTEST_TIMEOUT:-1500}
	test_timeout=${VMTEST_TEST_TIMEOUT:-400}
else
	vm_timeout=${VMTEST_TIMEOUT:-1000}
	test_timeout=${VMTEST_TEST_TIMEOUT:-200}
fi
mem=${VMTEST_MEM:-1024}
smp=${VMTEST_SMP:-2}
accel=${VMTEST_ACCEL:-tcg}
GO=${GO:-go}
modules_boot=${VMTEST_MODULES:-libcrc32c nf_defrag_ipv4 nf_defrag_ipv6 nf_conntrack ip_vs ip_vs_rr ip_vs_wrr ip_vs_wlc ip_vs_sed veth}

lists=("$@")
[ ${#lists[@]} -gt 0 ] || lists=("$here/tests.list")

log() { printf 'vmtest: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

t_start=$(now)
timings=()

# --- (a) host packages ------------------------------------------------------
t=$(now)
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need+=(busybox-static)
[ -x /usr/sbin/ipvsadm ] || command -v ipvsadm >/dev/null || need+=(ipvsadm)
[ -x /usr/sbin/depmod ] || [ -x /sbin/depmod ] || need+=(kmod)
[ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || [ -x /usr/bin/ip ] || need+=(iproute2)
command -v cpio >/dev/null || need+=(cpio)
# keepalived only for a list that runs it (e2e-keepalived.sh, e2e-takeout.sh): its libraries
# add megabytes to the initramfs every other run would unpack for nothing.
want_keepalived=0
for list in "${lists[@]}"; do
	[ -r "$list" ] && grep -v '^[[:space:]]*#' "$list" | grep -qE "keepalived|e2e-takeout" && want_keepalived=1
done
if [ "$want_keepalived" = 1 ] && ! [ -x /usr/sbin/keepalived ] && ! command -v keepalived >/dev/null; then
	need+=(keepalived)
fi
# etcd (Debian's etcd-server) only for a list that runs the fleet test
# (e2e-fleet.sh: three directors sharing one controller through etcd); the
# bridge module joins its namespaces (shipped below, loaded by the test).
want_etcd=0
for list in "${lists[@]}"; do
	[ -r "$list" ] && grep -v '^[[:space:]]*#' "$list" | grep -q 'e2e-fleet' && want_etcd=1
done
if [ "$want_etcd" = 1 ] && ! [ -x /usr/bin/etcd ] && ! command -v etcd >/dev/null; then
	need+=(etcd-server)
fi
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing packages: ${need[*]} (run as root, or apt-get install them)"
	log "installing: ${need[*]}"
	apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
export PATH=$PATH:/usr/sbin:/sbin
busybox=/bin/busybox
[ -x "$busybox" ] || die "$busybox missing after installing busybox-static"
timings+=("host packages $(since "$t") s")

# --- (b) kernel -------------------------------------------------------------
t=$(now)
mkdir -p "$cache"
kpkg=${VMTEST_KERNEL_PKG:-}
if [ -z "$kpkg" ] && [ -s "$cache/default-kernel" ]; then
	kpkg=$(cat "$cache/default-kernel")
fi
resolve_kernel() {
	apt-cache depends linux-image-cloud-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}'
}
if [ -z "$kpkg" ]; then
	kpkg=$(resolve_kernel)
	if [ -z "$kpkg" ]; then
		apt-get update -q >/dev/null
		kpkg=$(resolve_kernel)
	fi
	[ -n "$kpkg" ] || die "cannot resolve the package linux-image-cloud-amd64 depends on"
	echo "$kpkg" >"$cache/default-kernel"
fi
kdir=$cache/$kpkg
if [ ! -s "$kdir/.ready" ]; then
	log "fetching kernel package $kpkg"
	rm -rf "$kdir" "$kdir.tmp" "$cache/deb"
	mkdir -p "$cache/deb"
	# apt-get download writes into the current directory; _apt cannot write
	# here, so apt warns and downloads as root: harmless.
	(cd "$cache/deb" && apt-get download -q "$kpkg" 2>&1 | grep -v 'unsandboxed' >&2) ||
		{ apt-get update -q >/dev/null && (cd "$cache/deb" && apt-get download -q "$kpkg"); } ||
		die "apt-get download $kpkg failed"
	dpkg-deb -x "$cache"/deb/"$kpkg"_*.deb "$kdir.tmp"
	mdir=
	for d in "$kdir.tmp"/lib/modules/* "$kdir.tmp"/usr/lib/modules/*; do
		[ -d "$d" ] && { mdir=$d; break; }
	done
	[ -n "$mdir" ] || die "no lib/modules in $kpkg"
	kver=$(basename "$mdir")
	# Modules may be compressed (.ko.xz / .ko.zst): unpack them so both
	# busybox insmod and modprobe in the guest can load them.
	find "$mdir" -name '*.ko.xz' -exec xz -d {} +
	find "$mdir" -name '*.ko.zst' -exec zstd -q -d --rm {} +
	find "$mdir" -name '*.ko.gz' -exec gzip -d {} +
	if [ "$mdir" != "$kdir.tmp/lib/modules/$kver" ]; then
		mkdir -p "$kdir.tmp/lib/modules"
		mv "$mdir" "$kdir.tmp/lib/modules/$kver"
	fi
	depmod -b "$kdir.tmp" "$kver"
	cp "$kdir.tmp/boot/vmlinuz-$kver" "$kdir.tmp/vmlinuz"
	echo "$kver" >"$kdir.tmp/.ready"
	mv "$kdir.tmp" "$kdir"
	rm -rf "$cache/deb"
fi
kver=$(cat "$kdir/.ready")
vmlinuz=$kdir/vmlinuz
timings+=("kernel $kver $(since "$t") s")

# --- (c) initramfs ----------------------------------------------------------
t=$(now)
mkdir -p "$out"
exec 9>"$out/.lock" # one run at a time per output directory
flock -n 9 || { log "waiting for another run using $out"; flock 9; }
stage=$out/root
rm -rf "$stage"
mkdir -p "$out" "$stage"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc/vmtest,proc,sys,dev,tmp,run,root,tests,vmtest,lib/modules}

# busybox and its applets; real ip (iproute2, for `ip netns`) and ipvsadm
# replace busybox's ones where they overlap.
cp "$busybox" "$stage/bin/busybox"
"$busybox" --list-full | while read -r applet; do
	[ -e "$stage/$applet" ] || ln -s /bin/busybox "$stage/$applet"
done
copy_with_libs() { # copy_with_libs HOST_BINARY GUEST_PATH
	rm -f "$stage/$2"
	cp -L "$1" "$stage/$2"
	local lib
	for lib in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*'); do
		[ -e "$stage/$lib" ] && continue
		mkdir -p "$stage/$(dirname "$lib")"
		cp -L "$lib" "$stage/$lib"
	done
}
# /bin/sh is dash, not busybox ash: Debian's busybox-static runs its own
# applets in preference to PATH (so `ip` in an ash script would be busybox's
# ip, which has no `ip netns`); dash honours PATH.
copy_with_libs "$(command -v dash)" /bin/sh
copy_with_libs "$(command -v ipvsadm)" /sbin/ipvsadm
copy_with_libs "$(command -v ip)" /sbin/ip
if [ "$want_keepalived" = 1 ]; then
	ka=$(command -v keepalived || echo /usr/sbin/keepalived)
	[ -x "$ka" ] || die "keepalived missing after installing it"
	copy_with_libs "$ka" /usr/sbin/keepalived
fi
if [ "$want_etcd" = 1 ]; then
	etcd_bin=$(command -v etcd || echo /usr/bin/etcd)
	[ -x "$etcd_bin" ] || die "etcd missing after installing etcd-server"
	copy_with_libs "$etcd_bin" /usr/bin/etcd
fi
rm -f "$stage/bin/ip" "$stage/usr/bin/ip" "$stage/usr/sbin/ip" # busybox ip, if any
for f in services protocols; do [ -r "/etc/$f" ] && cp "/etc/$f" "$stage/etc/"; done
echo 'root:x:0:0:root:/root:/bin/sh' >"$stage/etc/passwd"
echo 'root:x:0:' >"$stage/etc/group"
echo '127.0.0.1 localhost vmtest' >"$stage/etc/hosts"
if [ "$(id -u)" = 0 ]; then
	mknod -m 600 "$stage/dev/console" c 5 1
	mknod -m 666 "$stage/dev/null" c 1 3
fi

# Kernel modules: the boot list with dependencies (in load order), plus every
# IPVS module so the kernel can autoload schedulers via /sbin/modprobe.
kmods=$kdir/lib/modules/$kver
: >"$stage/etc/vmtest/modules"
declare -A shipped=()
ship_module() { # ship_module NAME BOOT(0|1)
	local deps line path rel
	deps=$(modprobe -d "$kdir" -S "$kver" --show-depends "$1" 2>/dev/null) ||
		die "kernel $kver has no module $1"
	while read -r line; do
		case $line in
		insmod\ *) path=${line#insmod }; path=${path%% *} ;;
		*) continue ;; # "builtin NAME": nothing to load
		esac
		rel=${path#"$kdir"}
		if [ -z "${shipped[$rel]:-}" ]; then
			mkdir -p "$stage/$(dirname "$rel")"
			cp "$path" "$stage/$rel"
			shipped[$rel]=1
		fi
		if [ "$2" = 1 ] && ! grep -qxF "$rel" "$stage/etc/vmtest/modules"; then
			echo "$rel" >>"$stage/etc/vmtest/modules"
		fi
	done <<<"$deps"
}
for m in $modules_boot; do ship_module "$m" 1; done
for f in "$kmods"/kernel/net/netfilter/ipvs/*.ko; do ship_module "$(basename "$f" .ko)" 0; done
# null_blk (with configfs, its dependency) for e2e-disk.sh, which loads it
# with its own parameters and makes its devices through configfs.
ship_module null_blk 0
# The fleet test's shared L2 segment (directors and real servers, IPVS DR).
if [ "$want_etcd" = 1 ]; then ship_module bridge 0; fi
cp "$kmods"/modules.order "$kmods"/modules.builtin "$kmods"/modules.builtin.modinfo "$stage/lib/modules/$kver/" 2>/dev/null || true
depmod -b "$stage" "$kver"

# Guest scripts.
cp "$here/guest/init" "$stage/init"
chmod 755 "$stage/init"
cp "$here/topology.sh" "$here/guest/lib.sh" "$stage/vmtest/"
echo "$test_timeout" >"$stage/etc/vmtest/test-timeout"
token=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
echo "$token" >"$stage/etc/vmtest/token"

# The tests.
: >"$stage/etc/vmtest/tests"
ntests=0
for list in "${lists[@]}"; do
	[ -r "$list" ] || die "no test list $list"
	while read -r kind path cmd; do
		case $kind in '' | '#'*) continue ;; esac
		[ -n "$path" ] || die "$list: '$kind' without a path"
		case $kind in
		go)
			name=${path#./}
			name=${name%/}
			name=${name//\//_}
			log "building test binary $path -> /tests/$name/$name.test"
			mkdir -p "$stage/tests/$name"
			(cd "$repo" && CGO_ENABLED=0 "$GO" test -c -o "$stage/tests/$name/$name.test" "$path") ||
				die "go test -c $path failed"
			[ -x "$stage/tests/$name/$name.test" ] || die "go test -c $path wrote no binary"
			[ -d "$repo/$path/testdata" ] && cp -r "$repo/$path/testdata" "$stage/tests/$name/"
			cmd=${cmd:-./$name.test -test.v}
			;;
		sh)
			[ -r "$repo/$path" ] || die "$list: no script $path"
			name=$(basename "$path" .sh)
			mkdir -p "$stage/tests/$name"
			cp "$repo/$path" "$stage/tests/$name/"
			cmd=${cmd:-sh ./$(basename "$path")}
			;;
		bin)
			log "building $path -> /usr/local/bin/"
			(cd "$repo" && CGO_ENABLED=0 "$GO" build -o "$stage/usr/local/bin/" "$path") ||
				die "go build $path failed"
			continue
			;;
		*) die "$list: unknown kind '$kind' (go, sh or bin)" ;;
		esac
		grep -q "^$name	" "$stage/etc/vmtest/tests" && die "$list: two tests named $name"
		printf '%s\t%s\n' "$name" "$cmd" >>"$stage/etc/vmtest/tests"
		ntests=$((ntests + 1))
	done <"$list"
done
[ "$ntests" -gt 0 ] || die "no tests listed in ${lists[*]}"

initrd=$out/initramfs.cpio.gz
(cd "$stage" && find . -print0 | cpio --null -o -H newc -R 0:0 --quiet) | gzip -1 >"$initrd"
timings+=("initramfs $(du -h "$initrd" | cut -f1), $ntests tests $(since "$t") s")

# --- (d) boot ---------------------------------------------------------------
accel_args=()
case $accel in
# TCG by default: on these machines /dev/kvm exists but is nested KVM that
# dies with "KVM internal error ... emulation failure" early in boot, and
# qemu then hangs instead of falling back. VMTEST_ACCEL=kvm where KVM works.
tcg | auto) accel_args=(-accel tcg) ;;
kvm) accel_args=(-accel kvm) ;;
*) die "VMTEST_ACCEL must be tcg or kvm" ;;
esac
append="console=ttyS0 panic=-1 oops=panic"
[ "${VMTEST_QUIET:-1}" = 1 ] && append="$append quiet"
append="$append ${VMTEST_APPEND:-}"
qemu=(qemu-system-x86_64 "${accel_args[@]}" -cpu max -m "$mem" -smp "$smp"
	-nodefaults -no-user-config -display none -serial stdio -monitor none -no-reboot
	-kernel "$vmlinuz" -initrd "$initrd" -append "$append")
console=$out/console.log
# VMTEST_BUSY=1: the host's cores busy for the whole VM run, as on a build
# machine shared with other work. Each loop is bounded by `timeout`, so none
# outlives the run even if this script is killed.
busy_pids=()
stop_busy() {
	[ ${#busy_pids[@]} -gt 0 ] || return 0
	kill "${busy_pids[@]}" 2>/dev/null || true
	wait "${busy_pids[@]}" 2>/dev/null || true
	busy_pids=()
}
trap stop_busy EXIT
if [ "${VMTEST_BUSY:-0}" = 1 ]; then
	nbusy=$(nproc)
	for _ in $(seq "$nbusy"); do
		timeout "$((vm_timeout + 30))" sh -c 'while :; do :; done' &
		busy_pids+=($!)
	done
	log "VMTEST_BUSY=1: $nbusy busy loops on the host (one per core) until the VM stops"
fi
log "booting $kver (${accel_args[*]}, ${mem} MiB, $smp cpus), limit ${vm_timeout} s; console follows"
t=$(now)
set +e
timeout -k 5 "$vm_timeout" "${qemu[@]}" </dev/null 2>&1 | sed -u 's/\r$//' | tee "$console"
qrc=${PIPESTATUS[0]}
set -e
vm_time=$(since "$t")
stop_busy
busy_note=
[ "${VMTEST_BUSY:-0}" = 1 ] && busy_note=" (host busy: $nbusy loops)"
timings+=("guest wall time $vm_time s$busy_note")

# --- (e) verdict ------------------------------------------------------------
summary=$(grep -a '^=== VMTEST-END ' "$console" | sed 's/^=== VMTEST-END /  /' || true)
npass=$(grep -ac '^=== VMTEST-END [^ ]* PASS ' "$console" || true)
nfail=$(grep -ac '^=== VMTEST-END [^ ]* FAIL ' "$console" || true)
echo
log "guest tests:"
[ -n "$summary" ] && printf '%s\n' "$summary" >&2
rc=0
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	log "FAIL: the guest hung: killed after ${vm_timeout} s"
	rc=2
elif grep -aqx "VMTEST-RESULT: PASS $token" "$console"; then
	log "PASS"
elif grep -aqx "VMTEST-RESULT: FAIL $token" "$console"; then
	log "FAIL: a guest test failed"
	rc=1
else
	log "FAIL: no result marker from the guest (qemu exit $qrc): kernel panic or /init died?"
	rc=2
fi
if [ "$rc" = 0 ] && [ "$npass" -ne "$ntests" ]; then
	log "FAIL: $ntests tests listed but $npass reported passed"
	rc=2
fi
missing=$((ntests - npass - nfail))
timings+=("total $(since "$t_start") s")
log "timings: $(IFS=';'; echo "${timings[*]}" | sed 's/;/; /g')"
log "console log: $console"
# A closing line in the common "N passed, N failed" form.
echo "vmtest: $npass passed, $((nfail + missing)) failed"
exit "$rc"
