# Guest test: `lvs-demo -table kernel` drives the kernel's IPVS table.
# Runs as root in the test VM:
#   make test-kernel VMTEST_LIST=cmd/lvs-demo/testdata/kernel.list
# Checks the kernel path, not the dynamics: the demo's virtual service and
# its three real servers appear in the kernel's table, the monitor writes
# weights into it (ipvsadm shows weights other than the initial 10), the
# demo runs to its verdict, and it leaves neither the service nor a child
# process behind. The verdict itself is printed but not required: under
# qemu's TCG emulation every probe takes hundreds of milliseconds against
# the demo's 10 ms reference, so every server looks overloaded
# (docs/demo.md, "On a real IPVS table").
set -u
out=/tmp/lvs-demo.out
lvs-demo -table kernel -agent /usr/local/bin/lvs-agent ${DEMO_FLAGS:-} >"$out" 2>&1 &
pid=$!
i=0
until ipvsadm -Ln | grep -q '192.0.2.1:80 wrr'; do
	i=$((i + 1))
	if [ "$i" -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "FAIL: the demo's service never appeared in the kernel's table"
		kill "$pid" 2>/dev/null
		wait "$pid"
		cat "$out"
		exit 1
	fi
	sleep 0.1
done
echo "--- ipvsadm -Ln as the demo starts"
ipvsadm -Ln
sleep 14
echo "--- ipvsadm -Ln 14 s later (server 2 hogged since 6 s)"
ipvsadm -Ln | tee /tmp/ipvs-mid
wait "$pid"
rc=$?
echo "--- lvs-demo output (exit $rc)"
cat "$out"
if ! grep -q '^verdict:' "$out"; then
	echo "FAIL: the demo did not run to its verdict (exit $rc)"
	exit 1
fi
if ! awk '$1 == "->" && $2 ~ /^127\.0\.0\.1:/ && $4 != 10 { found = 1 } END { exit !found }' /tmp/ipvs-mid; then
	echo "FAIL: no weight in the kernel's table changed from the initial 10"
	exit 1
fi
echo "--- ipvsadm -Ln after the demo"
ipvsadm -Ln
if ipvsadm -Ln | grep -q '192.0.2.1:80'; then
	echo "FAIL: the demo left its service in the kernel's table"
	exit 1
fi
if ps -o pid,args | grep -v grep | grep -q -e 'lvs-agent' -e 'lvs-demo backend'; then
	echo "FAIL: child processes left behind:"
	ps -o pid,args | grep -e lvs-agent -e 'lvs-demo'
	exit 1
fi
echo "kernel path OK (the demo's own verdict: exit $rc)"
