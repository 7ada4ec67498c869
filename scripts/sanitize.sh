#!/usr/bin/env bash
# C++ unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, then a fuzz run of every
# frame and message parser target (libFuzzer, same sanitizers). Each target runs FUZZ_SECONDS if
# set (`make fuzz` sets 600), else its short default below (`make test`: 20 s for the packet
# parsers, 10-15 s for the rest: about 4 minutes of target time, 2 minutes on 2 cores, where two
# targets run at once). Prints one line per target (executions, seconds, crashes) and writes
# them to results/fuzz.json as {target: {runs, seconds, crashes}}.
# Every target runs even if one crashes; the script then fails, naming the saved inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SANITIZE_BUILD:-build-sanitize}
TESTS=(common/cpp/exo_common_tests common/cpp/grpc_security_tests common/cpp/metrics_tests cache-node/cache_node_tests db-node/db_node_tests
       db-node/db_coordinator_tests db-node/db_coordinator_model_tests
       emulator/wimpy_emulator_tests emulator/loadgen_tests emulator/emulator_tests emulator/mcload_tests
       client-lib/native/client_pipeline_tests proxy/proxy_tests proxy/proxy_core_tests)
# path:short-run seconds
FUZZERS=(
  common/cpp/wire_parse_fuzz:20             # wire::parse
  cache-node/request_handler_fuzz:20       # the cache node's burst handler
  db-node/db_request_handler_fuzz:20       # the db node's frame handler
  common/cpp/cluster_parse_fuzz:10          # the resolved cluster config (JSON)
  common/cpp/metrics_request_fuzz:10        # the /metrics listener's HTTP request classification
  cache-node/eal_args_fuzz:10              # cache_nodes[].lcores -> EAL argv
  cache-node/control_fuzz:15               # the cache node's CacheNode RPC handlers + filler
  cache-node/key_table_fuzz:10             # the cache node's key table (key lifecycle + 2PC)
  db-node/db_coordinator_fuzz:10           # the db node's cached-write coordinator (2PC, resolver, recovery)
  db-node/db_control_fuzz:15               # the db node's DbNode RPC handlers
  emulator/emulator_fuzz:15                # the wimpy emulator's demux + rate limit + db handler
  emulator/mcload_reply_fuzz:10            # exo-mcload's memcached reply parser (stream invariants)
  emulator/mc_udp_reply_fuzz:10            # exo-loadgen's memcached UDP reply path (frame, reply, request id)
  client-lib/native/client_pipeline_fuzz:10  # the native client reading arbitrary replies
  proxy/text_protocol_fuzz:15              # exo-proxy's memcached text/meta request parser
)
fuzz_path() { echo "${1%%:*}"; }

echo "==> sanitizer build (clang, ASan + UBSan, libFuzzer) in $BUILD"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DEXO_SANITIZE=ON -DEXO_FUZZ=ON > /dev/null
ninja -C "$BUILD" $(for t in "${TESTS[@]}"; do basename "$t"; done) \
  $(for f in "${FUZZERS[@]}"; do basename "$(fuzz_path "$f")"; done)

export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
echo "==> C++ unit tests under ASan + UBSan"
for t in "${TESTS[@]}"; do
  "$BUILD/$t" --gtest_brief=1
done

if [[ -n "${FUZZ_SECONDS:-}" ]]; then
  echo "==> fuzzing each parser for ${FUZZ_SECONDS}s"
else
  echo "==> fuzzing each parser (short run)"
fi
corpus="$BUILD/corpus"
.venv/bin/python scripts/make_fuzz_seeds.py "$corpus"
logs="$BUILD/fuzz-logs"
mkdir -p "$logs" results

# One target: runs it, then writes "<runs> <seconds> <crashes>" to $logs/<name>.result.
fuzz_one() {
  local entry=$1 f name secs log rc=0 start runs took crashes
  f=$(fuzz_path "$entry")
  name=$(basename "$f")
  secs=${FUZZ_SECONDS:-${entry##*:}}
  log="$logs/$name.log"
  rm -f "$logs/$name"-crash-* "$logs/$name"-leak-* "$logs/$name"-timeout-* "$logs/$name"-oom-* "$logs/$name.result"
  mkdir -p "$corpus/$name"
  start=$SECONDS
  "$BUILD/$f" -max_total_time="$secs" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$logs/$name-" "$corpus/$name" > "$log" 2>&1 || rc=$?
  # Executions: the final stats, else libFuzzer's "Done N runs", else its last "#N" status line.
  runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
  [[ -n "$runs" ]] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
  [[ -n "$runs" ]] || runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$log" | tail -1)
  took=$((SECONDS - start))
  crashes=$(find "$logs" -maxdepth 1 -type f \( -name "$name-crash-*" -o -name "$name-leak-*" \
             -o -name "$name-timeout-*" -o -name "$name-oom-*" \) | wc -l)
  if ((rc != 0)) && ((crashes == 0)); then crashes=1; fi  # died without saving an input
  echo "${runs:-0} $took $crashes" > "$logs/$name.result"
  echo "$name: ${runs:-0} executions in ${took}s, $crashes crash(es)"
}

# Targets run FUZZ_JOBS at a time (default: one per core). Each libFuzzer run is one process on
# one core, so on 2 cores two at once keep every target's time and rate while the whole run
# takes half as long.
jobs_max=${FUZZ_JOBS:-$(nproc)}
for entry in "${FUZZERS[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
  fuzz_one "$entry" &
done
wait

json="{"
failed=()
for entry in "${FUZZERS[@]}"; do
  name=$(basename "$(fuzz_path "$entry")")
  read -r runs took crashes < "$logs/$name.result" || { runs=0; took=0; crashes=1; }
  json+=$([[ "$json" == "{" ]] || echo ",")$'\n  '"\"$name\": {\"runs\": $runs, \"seconds\": $took, \"crashes\": $crashes}"
  if ((crashes > 0)); then
    tail -40 "$logs/$name.log"
    failed+=("$name")
  fi
done
printf '%s\n}\n' "$json" > results/fuzz.json
echo "fuzz results: results/fuzz.json"
if ((${#failed[@]} > 0)); then
  echo "FUZZ FAILURE in ${failed[*]} (inputs saved as $logs/<target>-*)"
  exit 1
fi
