# Exoskeleton. `make demo` runs the main job, `make test` the tests; both install what they
# need first (scripts/install-deps.sh) and are safe to run again.
SHELL := /bin/bash
BUILD ?= build
PY := .venv/bin/python
JOBS ?= $(shell nproc)

.PHONY: all deps build test test-unit test-cpp test-integration sanitize fuzz bench demo demo-web chaos attack rehearsal package wheels figures sim proxy-conformance clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
	@ninja -C $(BUILD) -j $(JOBS)

test: build
	@scripts/run-tests.sh

test-cpp: build
	@ctest --test-dir $(BUILD) --output-on-failure

test-unit: deps
	@$(PY) -m pytest -q tests/unit

test-integration: build
	@$(PY) -m pytest -q -m mininet tests/integration

# C++ unit tests under ASan+UBSan and a short libFuzzer run of each packet parser (part of test).
sanitize: deps
	@scripts/sanitize.sh

fuzz: deps
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-600} scripts/sanitize.sh

# Benchmarks print figures (and save them under results/); they are not tests.
# The data-plane bench (docs/bench.md): the cache node, db node and client beside a DPDK
# reflector, memcached and in-process RocksDB over a bare veth pair, plus Open vSwitch for
# context; results/bench_dataplane.json and .png. SMOKE=1: a few seconds per case.
bench: build
	@mkdir -p results
	@$(BUILD)/db-node/hot_keys_bench --out results/bench_hot_keys.json
	@$(PY) -m exo_bench --out results $(if $(SMOKE),--smoke)

demo: build
	@.venv/bin/exo demo

# A web app cached by the cluster (docs/web-demo.md): the catalogue (FastAPI, uvicorn workers, an
# unprivileged user) reads through exo-proxy; wrk drives it with Zipf-popular URLs and a cache node
# is killed mid-run. Prints requests/s, p50/p99, the share of GETs served by cache nodes and the
# failed requests; writes results/demo_web.json. QUICK=1: a short run.
demo-web: build
	@mkdir -p results
	@.venv/bin/exo demo-web $(if $(QUICK),--quick)

# exo-proxy against suites we did not write: pymemcache's integration tests, memccapable and a PHP
# client, on a Mininet cluster (docs/proxy.md). Writes results/proxy_conformance.json.
proxy-conformance: build
	@mkdir -p results
	@$(PY) -m exo_proxy --out results

# Fault-injection campaign on a Mininet cluster, every history checked for linearizability
# (docs/chaos.md). Writes results/chaos.json. REPEATS=1 for a short one (make test runs that).
# Two controller instances and an etcd, so each round also kills the master controller; three
# db nodes in chains of three (--replication 3), so each round also kills a db node with its disk,
# removes one and adds it back (kill_db_disk, remove_node, add_node).
# Fails on a violation, a lost acknowledged write, a key the checker left undecided, chains that
# did not converge, a membership change that never completed, or a controller takeover of 1 s
# or more (or one that flushed a flow).
# MUTANT=skip-prepare|serve-stale|ack-at-head: the same campaign against that mutant test build
# (at the replication factor the mutant needs: 1, or 3 for ack-at-head), written to
# results/chaos-mutant-$(MUTANT).json; it fails when the mutant is NOT caught (no violation).
chaos: build
	@mkdir -p results
	@$(PY) -m exo_chaos.campaign --repeats $${REPEATS:-3} --controllers 2 \
		$(if $(MUTANT),--mutant $(MUTANT) --out results/chaos-mutant-$(MUTANT).json,--replication 3 --out results/chaos.json)

# The attack suite (docs/security.md): control- and data-plane attacks on a Mininet cluster with TLS
# on, from a client host and from hosts without a certificate, while honest clients run; writes
# results/security.json. Fails when an attack gets through or goes uncounted, or the honest
# history is not linearizable. QUICK=1: fewer identities (make test runs that).
# INSECURE=1: the same against security.insecure_dev_mode (results/security-insecure.json); it
# fails when the suite does NOT notice the open cluster.
attack: build
	@mkdir -p results
	@$(PY) -m exo_attack $(if $(QUICK),--quick) $(if $(INSECURE),--insecure)

# The .deb (cmake/packaging.cmake): programs, systemd units, the controller with its Python tree.
package: build
	@cd $(BUILD) && cpack

# The Python wheels (client alone, controller, topology, experiments) into dist/.
wheels: deps
	@$(PY) packaging/python/wheels.py --out dist

# A deployment rehearsed without Mininet (docs/deploy.md): builds the .deb, unpacks it into a
# scratch root and follows the guide's steps in bare network namespaces with an OVS bridge as the
# switch, TLS on and Prometheus scraping; restarts every service under a memcached workload and
# reads every acknowledged write back. Writes results/rehearsal.json. About a minute.
rehearsal: build
	@mkdir -p results
	@$(PY) scripts/rehearsal/main.py --out results/rehearsal.json

# Thesis Chapter 4 (docs/figures.md): Figures 4.1-4.4 on a Mininet cluster of emulated wimpies
# (results/fig4_N.json + .png, table of ours vs the thesis), then the same at the thesis's scale
# and at 1,024 nodes in the simulator (results/sim/). QUICK=1: fewer points, under 10 minutes.
figures: build
	@mkdir -p results
	@$(PY) -m exo_figures $(if $(QUICK),--quick) --out results
	@$(PY) -m exo_sim $(if $(QUICK),--quick) --out results/sim
	@$(PY) -m exo_testbed.compare --mininet results --sim results/sim --out results/compare

sim: deps
	@$(PY) -m exo_sim $(if $(QUICK),--quick) --out results/sim
	@$(PY) -m exo_testbed.compare --mininet results --sim results/sim --out results/compare

clean:
	rm -rf $(BUILD) results run dist
