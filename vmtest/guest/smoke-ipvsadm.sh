# Guest smoke test: the kernel's IPVS table answers ipvsadm (add, edit, list,
# delete) in the VM's root network namespace. Run by /init from its own
# directory; exits non-zero on the first mismatch.
set -u

fail() {
	echo "FAIL: $*"
	echo "--- ipvsadm -Ln:"
	ipvsadm -Ln
	ipvsadm -C
	exit 1
}
run() {
	echo "+ $*"
	"$@" || fail "command failed: $*"
}
expect() { # expect REGEX DESCRIPTION: the current `ipvsadm -Ln` must match.
	ipvsadm -Ln | grep -Eq -- "$1" || fail "$2 (no line matching /$1/)"
}
expect_not() {
	if ipvsadm -Ln | grep -Eq -- "$1"; then fail "$2 (unexpected line matching /$1/)"; fi
}

[ -r /proc/net/ip_vs ] || fail "/proc/net/ip_vs missing: ip_vs not loaded"
head -n 1 /proc/net/ip_vs

run ipvsadm -C
run ipvsadm -A -t 10.0.0.1:80 -s wrr
run ipvsadm -a -t 10.0.0.1:80 -r 10.0.0.2:80 -m -w 3
run ipvsadm -a -t 10.0.0.1:80 -r 10.0.0.3:80 -m -w 1
ipvsadm -Ln
expect '^TCP +10\.0\.0\.1:80 wrr' "TCP service with wrr scheduler"
expect '^ +-> 10\.0\.0\.2:80 +Masq +3 +0 +0' "real server 10.0.0.2 weight 3"
expect '^ +-> 10\.0\.0\.3:80 +Masq +1 +0 +0' "real server 10.0.0.3 weight 1"

run ipvsadm -e -t 10.0.0.1:80 -r 10.0.0.2:80 -m -w 0
expect '^ +-> 10\.0\.0\.2:80 +Masq +0 +0 +0' "weight edited to 0"
expect '^ +-> 10\.0\.0\.3:80 +Masq +1 ' "other weight untouched"

run ipvsadm -E -t 10.0.0.1:80 -s wlc
expect '^TCP +10\.0\.0\.1:80 wlc' "scheduler edited to wlc"

# A UDP service and a second scheduler module.
run ipvsadm -A -u 10.0.0.1:53 -s rr
run ipvsadm -a -u 10.0.0.1:53 -r 10.0.0.4:53 -m -w 5
expect '^UDP +10\.0\.0\.1:53 rr' "UDP service"
expect '^ +-> 10\.0\.0\.4:53 +Masq +5 ' "UDP real server"

# A scheduler that is not preloaded: the kernel must autoload it via
# /sbin/modprobe from the initramfs' modules.dep.
run ipvsadm -E -u 10.0.0.1:53 -s sh
expect '^UDP +10\.0\.0\.1:53 sh' "autoloaded sh scheduler"

run ipvsadm -d -t 10.0.0.1:80 -r 10.0.0.3:80
expect_not '10\.0\.0\.3:80' "destination deleted"
run ipvsadm -D -t 10.0.0.1:80
expect_not '^TCP +10\.0\.0\.1:80' "service deleted"
run ipvsadm -C
expect_not '^(TCP|UDP)' "table cleared"

echo "PASS: ipvsadm add/edit/list/delete on the kernel table"
