# Guest test: lvs-sim's connection accounting against real IPVS — the same
# dying server on the kernel and in the simulator, window by window
# (docs/developer/simulator.md, "Fidelity on the kernel").
#
# make_topology 4: six IPVS NAT services on the VIP, weight 1 on rs1..rs4,
# no health check: ports 81-83 (wrr, wlc, sed) see rs3 crash, ports 84-86
# (wrr, wlc, sed) see it hang. rs3 answers the first group on 10.1.3.2 and
# the second on a second address, 10.1.3.3, so that one moment kills it
# both ways: its httpd is killed (the host answers SYNs with RST) and
# 10.1.3.3 is deleted (nothing answers). A client in its namespace opens
# connections to a page that takes FID_DELAY seconds, to each service in
# an open loop (one every FID_GAP seconds,
# each in the background, given up after 2 s: `timeout 2 wget`). The
# director's table is read every 5 s (ipvsadm -Ln: ActiveConn, InActConn;
# --stats: each server's connections so far).
#
# Then lvs-sim runs the same six services — the measured arrival rate, the
# measured connection lifetime (Little's law on the live servers' active
# counts), rs3 dying at the measured moment — with the
# kernel accounting and, as a control, the older linger model, 5 seeds
# each, and writes its timeline. For each 5 s window after the death the
# dead server's share of the new connections is set beside the kernel's;
# its active and inactive counts are printed beside them.
# Passes when, for every service, the kernel accounting's share is within
# FID_BOUND of the kernel's in every window and within FID_MEAN_BOUND on
# average over the windows, and the linger model is not (on at least one
# service): the comparison must be able to tell the old model from the new.
set -u
. "${VMTEST_LIB:-/vmtest}/topology.sh"

W=/tmp/fidelity
WARM=${FID_WARM:-20}   # seconds of traffic before the death (a multiple of 5)
AFTER=${FID_AFTER:-45} # seconds measured after it (a multiple of 5)
GAP=${FID_GAP:-0.5}    # the client's pause between connections, per service
# Seconds each request takes on its server (a CGI page that sleeps): long
# enough that the live servers are often busy, so that wlc and sed have a
# choice to make, and short of the client's 2 s.
DELAY=${FID_DELAY:-1}
SEEDS=5
# The bounds on |simulated − measured| dead-server share: per window, and
# averaged over the 9 windows after the death. At 6-10 connections a
# window the noise is large: one run of the model against its own 5-seed
# mean (30 tries) differed by up to 0.54 in a window and 0.23 on average
# (wlc, crash); a guest starved by a busy host (half the connections per
# window) measured 0.65 and 0.25 there. The old linger model is 0.39-0.60
# off on average for a hang under wlc and sed, beyond the mean bound
# (docs/developer/simulator.md, "Fidelity on the kernel").
FID_BOUND=${FID_BOUND:-0.75}
FID_MEAN_BOUND=${FID_MEAN_BOUND:-0.3}
SERVICES="81:crash:wrr 82:crash:wlc 83:crash:sed 84:hang:wrr 85:hang:wlc 86:hang:sed"

cleanup() {
	touch "$W/stop" 2>/dev/null
	for i in 1 2 3 4; do [ -s "$W/httpd$i.pid" ] && kill "$(cat "$W/httpd$i.pid")" 2>/dev/null; done
	destroy_topology
}

fail() {
	echo "FAIL: $*"
	[ -s "$W/report" ] && cat "$W/report"
	echo "--- director: ipvsadm -Ln"
	in_ns director ipvsadm -Ln 2>/dev/null
	cleanup
	exit 1
}

. "${VMTEST_LIB:-/vmtest}/lib.sh" # now, say, run, wait_for

uptime_f() { cut -d' ' -f1 /proc/uptime; }
# rip PORT I: real server I's address:port in PORT's service.
rip() {
	if [ "$2" = 3 ] && [ "$1" -ge 84 ]; then echo "10.1.3.3:80"; else echo "$(topo_rs_ip "$2"):80"; fi
}

# sample J: one line per service and server into $W/meas:
# "J T PORT RIP CONNS ACTIVE INACTIVE" (T: seconds since the clients started).
sample() {
	_t=$(awk -v a="$(uptime_f)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
	in_ns director ipvsadm -Ln --exact >"$W/ln" || fail "ipvsadm -Ln"
	in_ns director ipvsadm -Ln --stats --exact >"$W/st" || fail "ipvsadm -Ln --stats"
	awk -v j="$1" -v t="$_t" '
		FNR == 1 { f++ }
		FNR == 1 { port = "" } # the column headings come before the first service
		$1 == "TCP" { split($2, a, ":"); port = a[2]; next }
		$1 == "->" && port != "" && f == 1 { act[port " " $2] = $5; ina[port " " $2] = $6 }
		$1 == "->" && port != "" && f == 2 { conns[port " " $2] = $3 }
		END { for (k in act) print j, t, k, conns[k] + 0, act[k], ina[k] }' "$W/ln" "$W/st" >>"$W/meas"
}

# --- setup -----------------------------------------------------------------
t_start=$(now)
destroy_topology
rm -rf "$W"
mkdir -p "$W"
run make_topology 4
run ip -n rs3 addr add 10.1.3.3/24 dev eth0
for i in 1 2 3 4; do
	run mkdir -p "$W/www$i/cgi-bin"
	echo "rs$i" >"$W/www$i/index.html"
	printf '#!/bin/sh\necho "Content-Type: text/plain"\necho\nsleep %s\necho rs%s\n' "$DELAY" "$i" >"$W/www$i/cgi-bin/page"
	chmod +x "$W/www$i/cgi-bin/page"
	ip netns exec "rs$i" httpd -f -p 80 -h "$W/www$i" &
	echo $! >"$W/httpd$i.pid"
done
for i in 1 2 3 4; do
	wait_for "rs$i answers" sh -c "[ \"\$(ip netns exec director timeout 5 wget -q -O - http://$(topo_rs_ip "$i")/ 2>/dev/null)\" = rs$i ]"
done
wait_for "rs3 answers on 10.1.3.3" sh -c "[ \"\$(ip netns exec director timeout 5 wget -q -O - http://10.1.3.3/ 2>/dev/null)\" = rs3 ]"
for s in $SERVICES; do
	port=${s%%:*}
	sched=${s##*:}
	run in_ns director ipvsadm -A -t "$TOPO_VIP:$port" -s "$sched"
	for i in 1 2 3 4; do run in_ns director ipvsadm -a -t "$TOPO_VIP:$port" -r "$(rip "$port" "$i")" -m -w 1; done
	# The kernel's list order, which wlc and sed break ties by (the first
	# listed wins): ipvsadm -Ln --nosort lists a service's destinations in it (plain -Ln sorts them by address). The
	# kernel adds a destination at the head of the list, so this is the
	# reverse of the order they were added; the model's servers are
	# written in it.
	order=$(in_ns director ipvsadm -Ln --nosort -t "$TOPO_VIP:$port" | awk '$1 == "->" && $2 ~ /^10\.1\./ { split($2, a, "."); printf "%s ", a[3] }')
	[ "$(echo $order | wc -w)" = 4 ] || fail "port $port: ipvsadm -Ln --nosort lists '$order', want four servers"
	echo "$port $order" >>"$W/order"
	say "port $port: ipvsadm -Ln --nosort lists rs$(echo $order | sed 's/ / rs/g') (added rs1 rs2 rs3 rs4)"
done
say "setup done in $(($(now) - t_start)) s"

# --- the kernel ----------------------------------------------------------------
: >"$W/meas"
CLIENTS=
t0=$(uptime_f)
for s in $SERVICES; do
	port=${s%%:*}
	# Each connection's start noted with shell builtins only (the
	# guest's busybox awk has no log(): the pauses are not drawn at
	# random, so arrivals are Poisson only in the model).
	in_ns client sh -c '
		while [ ! -e "$0/stop" ]; do
			timeout 2 wget -q -O /dev/null "http://$1/cgi-bin/page" 2>/dev/null &
			read -r u _ </proc/uptime
			echo "$u" >>"$0/arr-$3"
			sleep "$2"
		done
		wait' "$W" "$TOPO_VIP:$port" "$GAP" "$port" &
	CLIENTS="$CLIENTS $!"
done
sample 0
nw=$(((WARM + AFTER) / 5))
j=1
while [ "$j" -le "$nw" ]; do
	sleep "$(awk -v t0="$t0" -v j="$j" -v u="$(uptime_f)" 'BEGIN { d = t0 + 5 * j - u; printf "%.2f", (d > 0 ? d : 0) }')"
	sample "$j"
	if [ "$j" -eq $((WARM / 5)) ]; then
		tdeath=$(awk -v a="$(uptime_f)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
		run ip -n rs3 addr del 10.1.3.3/24 dev eth0 # hang: nothing answers
		kill "$(cat "$W/httpd3.pid")"               # crash: the host refuses
		say "rs3 dies at ${tdeath} s"
	fi
	j=$((j + 1))
done
touch "$W/stop"
for p in $CLIENTS; do wait "$p"; done
say "measured $nw windows; last sample at $(awk '{ t = $2 } END { print t }' "$W/meas") s"

# --- the simulator -----------------------------------------------------------------
# Per service: arrival rate = its connections over the run. Connection
# lifetime D by Little's law on the three live servers of every service:
# their mean number active over the samples / their arrival rate.
awk -v nw="$nw" '
	{ port = $3; live = ($4 !~ /^10\.1\.3\./) }
	$1 == nw { n[port] += $5; tend = $2; if (live) nl += $5 }
	$1 >= 1 && live { L += $6 }
	END {
		for (p in n) rate[p] = n[p] / tend
		D = (nl > 0) ? (L / nw) / (nl / tend) : 0
		if (D < 0.001) D = 0.001
		for (p in rate) printf "%s %.4f\n", p, (rate[p] > 0.05 ? rate[p] : 0.05)
		printf "D %.4f\n", D
	}' "$W/meas" >"$W/params"
D=$(awk '$1 == "D" { print $2 }' "$W/params")
# How the client's arrivals came: per service, the inter-arrival times'
# mean and squared coefficient of variation (1 for Poisson arrivals, 0 for
# a clock), and the share of gaps under 0.1 s.
for s in $SERVICES; do
	port=${s%%:*}
	awk -v p="$port" 'NR > 1 { g = $1 - last; n++; s += g; ss += g * g; if (g < 0.1) short++ } { last = $1 }
		END { m = s / n; printf "port %s: %d arrivals, gap mean %.3f s, CV² %.2f, %.0f %% under 0.1 s\n", p, n + 1, m, (ss / n - m * m) / (m * m), 100 * short / n }' "$W/arr-$port"
done | tee "$W/arrivals"
say "connection lifetime ${D} s; rates: $(grep -v '^D' "$W/params" | tr '\n' ' ')"
for s in $SERVICES; do
	port=${s%%:*}
	kind=${s#*:}
	kind=${kind%%:*}
	sched=${s##*:}
	rate=$(awk -v p="$port" '$1 == p { print $2 }' "$W/params")
	for model in kernel linger; do
		{
			printf 'name = "fid-%s-%s"\nduration = "%ss"\nseeds = [1, 2, 3, 4, 5]\nschedulers = ["%s"]\n' "$port" "$model" "$((WARM + AFTER))" "$sched"
			printf '[director]\naccounting = "%s"\n[client]\ntimeout = "2s"\n' "$model"
			printf '[workload]\nrate = %s\ndemand = "fixed"\nmean_demand = "%sms"\n[agent]\nnoise = 0\n' "$rate" "$(awk -v d="$D" 'BEGIN { printf "%.1f", d * 1000 }')"
			for i in $(awk -v p="$port" '$1 == p { $1 = ""; print }' "$W/order"); do printf '[[server]]\nname = "rs%s"\nspeed = 1\ncores = 16\nweight = 1\n' "$i"; done
			printf '[[event]]\nat = "%ss"\nserver = "rs3"\nkind = "%s"\n' "$tdeath" "$kind"
		} >"$W/fid-$port-$model.toml"
	done
done
run lvs-sim -q -policies nominal-unchecked -workers 2 -timeline "$W/model.csv" "$W"/fid-*.toml >"$W/sim.out"

# --- the comparison ------------------------------------------------------------------
# Windows after the death: j = WARM/5+1 .. nw (the model's window ending at
# 5j; the kernel's between samples j-1 and j).
awk -F'[ ,]' -v first=$((WARM / 5 + 1)) -v nw="$nw" -v seeds=$SEEDS -v bw="$FID_BOUND" -v bm="$FID_MEAN_BOUND" -v svcs="$SERVICES" '
	FILENAME ~ /meas$/ {
		split($4, a, ":")
		dead = ($4 == "10.1.3.2:80" || $4 == "10.1.3.3:80")
		conns[$1, $3] += $5
		if (dead) { dc[$1, $3] = $5; da[$1, $3] = $6; di[$1, $3] = $7 }
		next
	}
	FNR == 1 { next } # the CSV header
	{
		split($1, a, "-"); port = a[2]; model = a[3]
		j = $6 / 5
		if (j != int(j)) next
		mn[model, j, port] += $8
		if ($7 == "rs3") { md[model, j, port] += $8; ma[model, j, port] += $10; mi[model, j, port] += $11 }
	}
	END {
		ns = split(svcs, sv, " ")
		bad["kernel"] = 0; bad["linger"] = 0
		for (x = 1; x <= ns; x++) {
			split(sv[x], f, ":"); port = f[1]
			printf "\nport %s: rs3 %s, %s\n", port, f[2], f[3]
			printf "%4s  %7s %7s %7s   %11s %11s %11s\n", "t", "kernel", "model", "linger", "act/inact", "model", "linger"
			n = 0; skipped = 0; sum["kernel"] = 0; sum["linger"] = 0; mx["kernel"] = 0; mx["linger"] = 0
			for (j = first; j <= nw; j++) {
				all = conns[j, port] - conns[j - 1, port]
				dd = dc[j, port] - dc[j - 1, port]
				if (all <= 0 || mn["kernel", j, port] <= 0) { skipped++; continue }
				km = dd / all
				n++
				line = sprintf("%4d  %7.3f", 5 * j, km)
				for (m = 1; m <= 2; m++) {
					model = (m == 1 ? "kernel" : "linger")
					s = md[model, j, port] / mn[model, j, port]
					d = s - km; if (d < 0) d = -d
					sum[model] += d; if (d > mx[model]) mx[model] = d
					line = line sprintf(" %7.3f", s)
				}
				line = line sprintf("   %5d/%-5d %5.0f/%-5.0f %5.0f/%-5.0f", da[j, port], di[j, port],
					ma["kernel", j, port] / seeds, mi["kernel", j, port] / seeds,
					ma["linger", j, port] / seeds, mi["linger", j, port] / seeds)
				print line
			}
			if (n == 0 || skipped * 2 > nw - first + 1) { printf "RESULT port %s: too few windows with connections (%d skipped)\n", port, skipped; bad["kernel"]++; continue }
			w = bw; mb = bm
			for (m = 1; m <= 2; m++) {
				model = (m == 1 ? "kernel" : "linger")
				ok = (mx[model] <= w && sum[model] / n <= mb)
				if (!ok) bad[model]++
				printf "RESULT port %s %s: max |diff| %.3f (bound %s), mean %.3f (bound %s): %s\n", port, model, mx[model], w, sum[model] / n, mb, ok ? "within" : "OUTSIDE"
			}
		}
		printf "\nkernel accounting outside on %d services, linger model on %d\n", bad["kernel"], bad["linger"]
		exit (bad["kernel"] > 0 ? 1 : (bad["linger"] == 0 ? 2 : 0))
	}' "$W/meas" "$W/model.csv" >"$W/report"
rc=$?
cat "$W/report"
case $rc in
0) ;;
1) fail "the kernel accounting's dead-server share is outside the bounds" ;;
2) fail "the linger model passes too: the comparison cannot tell the models apart" ;;
*) fail "the comparison failed (awk exit $rc)" ;;
esac
cleanup
echo "PASS: fidelity-sim in $(($(now) - t_start)) s"
