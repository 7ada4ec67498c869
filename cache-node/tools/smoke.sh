#!/bin/bash
# Manual smoke test of exo-cache-node (root): veth pair exoct0 <-> exoct1, exoct1 in netns exoc-t,
# cache node on exoct1 (inside the netns), fake db/controller gRPC peers, frames from exoct0.
# Cleans up netns, veth, processes and DPDK runtime files on exit, also on failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${BIN:-$ROOT/build-cache/cache-node/exo-cache-node}
PY=${PY:-$ROOT/.venv/bin/python}
WORK=/tmp/exoc-smoke
NS=exoc-t
CACHE_MAC=02:00:00:00:01:01
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  sleep 1
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  ip link del exoct0 2>/dev/null
  ip netns del $NS 2>/dev/null
  rm -rf /var/run/dpdk/exo-smokecache "$WORK"
}
trap cleanup EXIT

mkdir -p $WORK
ip netns add $NS
ip link add exoct0 type veth peer name exoct1
ip link set exoct1 netns $NS
ip netns exec $NS ip link set exoct1 address $CACHE_MAC up
ip link set exoct0 up
# No IPv6 chatter (router solicitations) so the capture sees only our frames.
sysctl -qw net.ipv6.conf.exoct0.disable_ipv6=1
ip netns exec $NS sysctl -qw net.ipv6.conf.exoct1.disable_ipv6=1

# The node reads the resolved form only (every field of proto/exoproto/cluster.proto).
cat > $WORK/cluster.yaml <<YAML
cluster: {name: smoke, mtu: 1500, udp_port: 7777, service_ip: 10.0.0.254}
switch: {partition_bits: 1}
controller: {grpc: "unix:$WORK/ctl.sock"}
cache_nodes:
  - {name: smokecache, mac: "$CACHE_MAC", ip: 10.0.1.1, switch_port: 1, iface: exoct1,
     grpc: "unix:$WORK/cache.sock", capacity: 100, lcores: "1", burst: 32,
     idle_sleep_us: ${IDLE_US:-20}, eal_args: []}
db_nodes:
  - {name: db0, mac: "02:00:00:00:02:01", ip: 10.0.2.1, switch_port: 2, iface: db0-eth0,
     grpc: "unix:$WORK/db0.sock", data_dir: /tmp/x, threads: 1, sync_writes: false,
     cache_node: smokecache}
YAML
$PY -m exo_cli.main config resolve $WORK/cluster.yaml -o $WORK/cluster.json || exit 1

$PY "$HERE/fake_peers.py" unix:$WORK/db0.sock unix:$WORK/ctl.sock > $WORK/peers.log 2>&1 &
PIDS+=($!)
ip netns exec $NS "$BIN" --cluster $WORK/cluster.json --name smokecache > $WORK/cache.log 2>&1 &
CPID=$!
PIDS+=($CPID)
for _ in $(seq 50); do [ -S $WORK/cache.sock ] && break; sleep 0.2; done
sleep 1

# Idle CPU of the node over 5 s (utime+stime ticks of the whole process).
t0=$(awk '{print $14+$15}' /proc/$CPID/stat); sleep 5; t1=$(awk '{print $14+$15}' /proc/$CPID/stat)
echo "idle CPU: $(( (t1 - t0) * 100 / (5 * $(getconf CLK_TCK)) ))% of one core (idle_sleep_us=${IDLE_US:-20})"

$PY "$HERE/smoke_client.py" exoct0 unix:$WORK/cache.sock $CACHE_MAC
RC=$?
kill -TERM $CPID
for _ in $(seq 30); do kill -0 $CPID 2>/dev/null || break; sleep 0.2; done
if kill -0 $CPID 2>/dev/null; then echo "FAIL: node did not exit on SIGTERM"; RC=1;
else wait $CPID; echo "node exit code: $?"; fi
echo "--- cache node log"; cat $WORK/cache.log
echo "--- fake peers log"; cat $WORK/peers.log
exit $RC
