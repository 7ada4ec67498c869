#!/usr/bin/env bash
# All tests: C++ (GoogleTest via ctest), the same C++ tests under ASan+UBSan plus a short fuzz
# run of the packet parsers, then Python unit tests and Mininet integration tests (pytest last,
# so its summary line closes the output).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
echo "==> C++ tests (ctest)"
ctest --test-dir "$BUILD" --output-on-failure -j 2
scripts/sanitize.sh
echo "==> Python tests (pytest: unit + Mininet integration)"
# --durations: the slowest tests in the log, to keep the suite well under 30 minutes on 2 cores.
.venv/bin/python -m pytest -q --durations=25 tests
