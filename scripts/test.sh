#!/usr/bin/env bash
# Build (if needed) and run the whole test suite with ctest, then list the tests that skipped
# and why. Extra arguments go to ctest (e.g. -L unit). BUILD_DIR overrides build/.
# VIDFEAT_ONLY_GPU_SKIPS=1 (set by CI, where everything is installed and ../shared is beside the
# repository) makes any skipped test outside the GPU set a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j"$(nproc)"
junit="$(cd "$BUILD_DIR" && pwd)/ctest-junit.xml"
rm -f "$junit"
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --output-junit "$junit" "$@" ||
    status=$?
if [ -f "$junit" ]; then
    python3 scripts/ctest-skips.py "$BUILD_DIR" "$junit" \
        ${VIDFEAT_ONLY_GPU_SKIPS:+--only-gpu} || status=1
fi
exit "$status"
