#!/usr/bin/env bash
# C++ unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, then a fuzz run of every
# packet parser target (libFuzzer, same sanitizers). FUZZ_SECONDS per target (default 20;
# `make fuzz` runs 600). Figures: each target's final libFuzzer line (runs, coverage).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SANITIZE_BUILD:-build-sanitize}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
TESTS=(proto/cpp/exo_common_tests cache-node/cache_node_tests db-node/db_node_tests)
FUZZERS=(proto/cpp/wire_parse_fuzz cache-node/request_handler_fuzz db-node/db_request_handler_fuzz)

echo "==> sanitizer build (clang, ASan + UBSan, libFuzzer) in $BUILD"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DEXO_SANITIZE=ON -DEXO_FUZZ=ON > /dev/null
ninja -C "$BUILD" $(for t in "${TESTS[@]}" "${FUZZERS[@]}"; do basename "$t"; done)

export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
echo "==> C++ unit tests under ASan + UBSan"
for t in "${TESTS[@]}"; do
  "$BUILD/$t" --gtest_brief=1
done

echo "==> fuzzing each parser for ${FUZZ_SECONDS}s"
corpus="$BUILD/corpus"
.venv/bin/python scripts/make_fuzz_seeds.py "$corpus"
mkdir -p "$BUILD/fuzz-logs"
for f in "${FUZZERS[@]}"; do
  name=$(basename "$f")
  log="$BUILD/fuzz-logs/$name.log"
  if ! "$BUILD/$f" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
       -artifact_prefix="$BUILD/fuzz-logs/$name-" "$corpus/$name" > "$log" 2>&1; then
    tail -40 "$log"
    echo "FUZZ FAILURE in $name (crash input saved as $BUILD/fuzz-logs/$name-*)"
    exit 1
  fi
  runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  echo "$name: $runs executions in ${FUZZ_SECONDS}s, no crash"
done
