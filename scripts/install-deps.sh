#!/usr/bin/env bash
# Installs everything Exoskeleton needs on Debian 12 (as root). Safe to run again: it skips
# what is already there. Called by `make deps` (and so by `make demo` and `make test`).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  openvswitch-switch mininet iproute2 iputils-ping ethtool tcpdump procps
  dpdk-dev libnuma-dev libpcap-dev libbsd-dev libelf-dev libibverbs-dev
  librocksdb-dev libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libxxhash-dev nlohmann-json3-dev libcli11-dev
  clang libclang-rt-14-dev
  python3-venv python3-pip python3-dev pybind11-dev
  # make bench: the baselines it measures against (memcached; dpdk-testpmd is in dpdk-dev) and perf
  memcached linux-perf util-linux
  # exo-proxy's conformance runs (docs/proxy.md): memccapable, and a PHP memcached client;
  # wrk drives the web demo
  libmemcached-tools php-cli php-memcached wrk
  # the web demo's app (examples/webapp, docs/web-demo.md) runs on /usr/bin/python3 as an
  # unprivileged user, so it uses Debian's packages, not the venv
  python3-fastapi python3-uvicorn python3-xxhash
  # make rehearsal (docs/deploy.md): the management network's firewall rules
  nftables
  # `exo certs init` (docs/security.md) issues the cluster's certificates with python3-cryptography
  # (the venv sees Debian's site-packages); openssl verifies them independently in its tests
  python3-cryptography openssl
  # the C++ programs check their certificate files with OpenSSL at start-up (common/cpp/tls_files.cc;
  # also pulled in by libgrpc-dev)
  libssl-dev
  # /metrics (docs/operations.md, "Metrics"): the Prometheus server the integration test runs (its
  # own instance on a free port, whatever the package's service does) and promtool, which checks
  # every page and the Grafana dashboard's queries
  prometheus
  # controller failover (docs/etcd.md): the controllers' replicated store and election. Tests and
  # the emulation start their own `etcd` (exo_topo/etcd.py), never the package's service
  etcd-server etcd-client
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> apt-get install ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "==> Debian packages: all present"
fi

# Mininet is packaged for Debian's /usr/bin/python3, so the venv is made from it and sees
# the system site-packages (see shared ENVIRONMENT notes).
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
# Four distributions (the root pyproject.toml says which is which), all editable here; the
# controller's build hook (controller/setup.py) generates the gRPC stubs in proto/exoproto.
stamp=.venv/.exo-installed
PY_PROJECTS=(pyproject.toml controller/pyproject.toml controller/setup.py topo/pyproject.toml experiments/pyproject.toml)
stale=0
for f in "${PY_PROJECTS[@]}"; do [ "$f" -nt "$stamp" ] && stale=1; done
if [ ! -f "$stamp" ] || [ "$stale" = 1 ]; then
  echo "==> pip install -e .[test,dev] -e controller -e topo -e experiments"
  .venv/bin/pip install -q --upgrade pip
  PYTHONWARNINGS=ignore .venv/bin/pip install -q -e '.[test,dev]' -e ./controller -e ./topo -e ./experiments
  touch "$stamp"
else
  echo "==> Python packages: up to date"
fi

# pymemcache's own integration tests run against exo-proxy (docs/proxy.md, "Conformance"): they
# ship in its sdist, not in the wheel pip installed.
PYMEMCACHE=4.0.0
if [ ! -f ".cache/pymemcache-$PYMEMCACHE/pymemcache/test/test_integration.py" ]; then
  echo "==> fetching pymemcache $PYMEMCACHE's sdist (its integration tests)"
  mkdir -p .cache
  .venv/bin/pip download -q --no-binary :all: --no-deps -d .cache "pymemcache==$PYMEMCACHE"
  tar -xzf ".cache/pymemcache-$PYMEMCACHE.tar.gz" -C .cache
fi

# Python gRPC stubs (generated, not committed).
if [ ! -f proto/exoproto/control_pb2_grpc.py ] || [ proto/exoproto/control.proto -nt proto/exoproto/control_pb2_grpc.py ]; then
  echo "==> generating Python gRPC stubs"
  .venv/bin/python -m grpc_tools.protoc -I proto --python_out=proto --grpc_python_out=proto \
    proto/exoproto/control.proto
fi
# The resolved cluster config message (messages only; exo_common.config checks every resolved
# config against it).
if [ ! -f proto/exoproto/cluster_pb2.py ] || [ proto/exoproto/cluster.proto -nt proto/exoproto/cluster_pb2.py ]; then
  echo "==> generating Python stubs for cluster.proto"
  .venv/bin/python -m grpc_tools.protoc -I proto --python_out=proto proto/exoproto/cluster.proto
fi
# etcd's gRPC API subset (proto/etcd/README.md), for exo_common.etcd.
if [ ! -f proto/etcd/rpc_pb2_grpc.py ] || [ proto/etcd/rpc.proto -nt proto/etcd/rpc_pb2_grpc.py ] \
   || [ proto/etcd/kv.proto -nt proto/etcd/kv_pb2.py ]; then
  echo "==> generating Python stubs for proto/etcd"
  .venv/bin/python -m grpc_tools.protoc -I proto --python_out=proto proto/etcd/kv.proto
  .venv/bin/python -m grpc_tools.protoc -I proto --python_out=proto --grpc_python_out=proto proto/etcd/rpc.proto
fi
