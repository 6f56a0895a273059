# vmtest/topology.sh — a load-balancer test network made of network namespaces.
#
# Source it from a POSIX shell (busybox ash in the test VM, or bash as root on
# any Linux with veth and iproute2's `ip netns`), then:
#
#     make_topology N       # namespaces client, director, rs1..rsN (1 <= N <= 250)
#     ...                   # run things with: in_ns NS COMMAND...
#     destroy_topology      # kill every process in them, delete them
#
# Addresses (IPv4 only; they exist only inside these namespaces):
#
#     client    eth0   10.0.1.2/24        default via 10.0.1.1
#     director  ext0   10.0.1.1/24        (client-facing)
#               ext0   10.0.1.100/32      the VIP ($TOPO_VIP)
#               rsI    10.1.I.1/24        one link per real server
#               net.ipv4.ip_forward=1
#     rsI       eth0   10.1.I.2/24        default via 10.1.I.1 (so IPVS NAT replies
#                                          go back through the director)
#
# Every namespace has lo up. Nothing touches the namespace that sources this
# file except creating and deleting the namespaces.
#
# Helpers: topo_rs_ip I (prints 10.1.I.2), topo_rs_gw I (10.1.I.1),
# in_ns NS CMD... (= ip netns exec NS CMD...), topo_names (lists the namespaces).

TOPO_VIP=10.0.1.100
TOPO_CLIENT_IP=10.0.1.2
TOPO_DIRECTOR_IP=10.0.1.1
TOPO_N=0

topo_rs_ip() { echo "10.1.$1.2"; }
topo_rs_gw() { echo "10.1.$1.1"; }
in_ns() { _ns=$1; shift; ip netns exec "$_ns" "$@"; }

topo_names() {
	echo client
	echo director
	_i=1
	while [ "$_i" -le "$TOPO_N" ]; do echo "rs$_i"; _i=$((_i + 1)); done
}

# _topo_ns NAME: create a namespace with lo up.
_topo_ns() {
	ip netns add "$1" || return 1
	ip -n "$1" link set lo up || return 1
}

make_topology() {
	_n=${1:-2}
	if [ "$_n" -lt 1 ] || [ "$_n" -gt 250 ]; then
		echo "make_topology: N must be 1..250, got $_n" >&2
		return 1
	fi
	TOPO_N=$_n
	_topo_ns client || return 1
	_topo_ns director || return 1
	# client <-> director
	ip link add eth0 netns client type veth peer name ext0 netns director || return 1
	ip -n client addr add "$TOPO_CLIENT_IP/24" dev eth0 || return 1
	ip -n client link set eth0 up || return 1
	ip -n client route add default via "$TOPO_DIRECTOR_IP" || return 1
	ip -n director addr add "$TOPO_DIRECTOR_IP/24" dev ext0 || return 1
	ip -n director addr add "$TOPO_VIP/32" dev ext0 || return 1
	ip -n director link set ext0 up || return 1
	ip netns exec director sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward' || return 1
	# director <-> each real server
	_i=1
	while [ "$_i" -le "$_n" ]; do
		_topo_ns "rs$_i" || return 1
		ip link add eth0 netns "rs$_i" type veth peer name "rs$_i" netns director || return 1
		ip -n director addr add "$(topo_rs_gw "$_i")/24" dev "rs$_i" || return 1
		ip -n director link set "rs$_i" up || return 1
		ip -n "rs$_i" addr add "$(topo_rs_ip "$_i")/24" dev eth0 || return 1
		ip -n "rs$_i" link set eth0 up || return 1
		ip -n "rs$_i" route add default via "$(topo_rs_gw "$_i")" || return 1
		_i=$((_i + 1))
	done
	return 0
}

destroy_topology() {
	for _ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		case $_ns in client|director|rs[0-9]*) ;; *) continue ;; esac
		for _p in $(ip netns pids "$_ns" 2>/dev/null); do kill -9 "$_p" 2>/dev/null; done
		ip netns del "$_ns" 2>/dev/null
	done
	TOPO_N=0
	return 0
}
