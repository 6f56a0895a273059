# Guest end-to-end test: IPVS NAT (masquerading) between network namespaces.
#
# Builds the topology of vmtest/topology.sh with two real servers, runs a
# busybox httpd in each that answers with its own name, puts a wrr NAT service
# on the VIP in the director, and fetches the VIP from the client:
#   weights 3:1  -> both servers answer, in that proportion (wrr is exact);
#   weight rs2=0 -> rs2 gets no new connection.
set -u
. "${VMTEST_LIB:-/vmtest}/topology.sh"

REQUESTS=${REQUESTS:-20}

fail() {
	echo "FAIL: $*"
	echo "--- director: ipvsadm -Ln --stats"
	in_ns director ipvsadm -Ln --stats
	destroy_topology
	exit 1
}
run() {
	echo "+ $*"
	"$@" || fail "command failed: $*"
}

# fetch N: N GETs of the VIP from the client, one connection each; prints
# (busybox 1.35's `wget -T` segfaults, hence `timeout 5 wget`);
# "rs1=X rs2=Y other=Z".
fetch() {
	_n=$1 _r1=0 _r2=0 _other=0 _k=0
	while [ "$_k" -lt "$_n" ]; do
		_body=$(in_ns client timeout 5 wget -q -O - "http://$TOPO_VIP/" 2>&1)
		case $_body in
		rs1) _r1=$((_r1 + 1)) ;;
		rs2) _r2=$((_r2 + 1)) ;;
		*) _other=$((_other + 1)); echo "unexpected answer: $_body" >&2 ;;
		esac
		_k=$((_k + 1))
	done
	echo "rs1=$_r1 rs2=$_r2 other=$_other"
}

destroy_topology
run make_topology 2
for i in 1 2; do
	mkdir -p "/tmp/www-rs$i"
	printf 'rs%s\n' "$i" >"/tmp/www-rs$i/index.html"
	ip netns exec "rs$i" httpd -f -p 80 -h "/tmp/www-rs$i" &
done

# Plain routing first: the client reaches each real server through the director.
for i in 1 2; do
	ok=0
	for try in 1 2 3 4 5 6 7 8 9 10; do
		if [ "$(in_ns client timeout 2 wget -q -O - "http://$(topo_rs_ip $i)/" 2>/dev/null)" = "rs$i" ]; then ok=1; break; fi
		sleep 0.3
	done
	[ "$ok" = 1 ] || fail "client cannot reach rs$i at $(topo_rs_ip $i) through the director"
done
echo "routing: client reaches rs1 and rs2 directly"

run in_ns director ipvsadm -A -t "$TOPO_VIP:80" -s wrr
run in_ns director ipvsadm -a -t "$TOPO_VIP:80" -r "$(topo_rs_ip 1):80" -m -w 3
run in_ns director ipvsadm -a -t "$TOPO_VIP:80" -r "$(topo_rs_ip 2):80" -m -w 1
in_ns director ipvsadm -Ln

got=$(fetch "$REQUESTS")
echo "weights 3:1, $REQUESTS requests: $got"
eval "$got"
[ "$other" = 0 ] || fail "$other requests failed or got a wrong answer"
[ "$rs1" -gt 0 ] && [ "$rs2" -gt 0 ] || fail "both servers must be hit: $got"
# wrr with weights 3:1 is exact per cycle of 4; allow one cycle of slack.
exp1=$((REQUESTS * 3 / 4))
[ "$rs1" -ge $((exp1 - 3)) ] && [ "$rs1" -le $((exp1 + 3)) ] || fail "rs1 should get ~$exp1 of $REQUESTS: $got"
[ "$rs1" -gt "$rs2" ] || fail "rs1 (weight 3) should get more than rs2 (weight 1): $got"

run in_ns director ipvsadm -e -t "$TOPO_VIP:80" -r "$(topo_rs_ip 2):80" -m -w 0
in_ns director ipvsadm -Ln | grep -Eq -- "-> $(topo_rs_ip 2):80 +Masq +0 " || fail "rs2 weight not 0"
got=$(fetch 10)
echo "weights 3:0, 10 requests: $got"
eval "$got"
[ "$other" = 0 ] || fail "$other requests failed or got a wrong answer"
[ "$rs2" = 0 ] || fail "rs2 has weight 0 but got $rs2 new connections"
[ "$rs1" = 10 ] || fail "rs1 should get all 10: $got"

echo "--- director: ipvsadm -Ln"
in_ns director ipvsadm -Ln
destroy_topology
echo "PASS: IPVS NAT through namespaces follows the weights; weight 0 gets no new connections"
