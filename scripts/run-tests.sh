#!/usr/bin/env bash
# All tests: C++ (GoogleTest via ctest), Python unit tests, Mininet integration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
echo "==> C++ tests (ctest)"
ctest --test-dir "$BUILD" --output-on-failure -j 2
echo "==> Python tests (pytest: unit + Mininet integration)"
.venv/bin/python -m pytest -q tests
