#!/usr/bin/env bash
# Fuzz every libFuzzer target for a bounded time: build them with clang (ASan + UBSan) into
# build-fuzz/, then run each from its corpus (committed, and the build's seeds) for FUZZ_SECONDS (default 60),
# as many side by side as there are cores. A crash,
# leak or timeout fails the script with libFuzzer's report and leaves the input in
# build-fuzz/crashers/; once fixed, commit that input to the target's corpus directory
# (tests/fuzz/corpus* - replayed by ctest's fuzz_replay* tests from then on).
# FUZZ_SEED (default 1) makes a run repeatable; another seed explores other inputs.
# usage: scripts/fuzz.sh [TARGET...]   (targets: onnx manifest calib decode tokenizer index)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
SEED=${FUZZ_SEED:-1}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(onnx manifest calib decode tokenizer index)

CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIDFEAT_FUZZ=ON \
    -DVIDFEAT_CUDA=OFF -DVIDFEAT_WERROR=ON >/dev/null
# the generated seeds (fuzz_decode's clips, the test models) as well as the targets
cmake --build "$BUILD_DIR" -j"$(nproc)" --target vidfeat_fixtures make_index_corpus \
    "${targets[@]/#/fuzz_}"
mkdir -p "$BUILD_DIR/index_corpus"
"$BUILD_DIR/tests/make_index_corpus" "$BUILD_DIR/index_corpus" 2>/dev/null

declare -A seeds=(
    [onnx]="tests/fuzz/corpus tests/data/bad tests/data/ops"
    [manifest]="tests/fuzz/corpus_manifest models"
    [calib]="tests/fuzz/corpus_calib"
    [decode]="tests/fuzz/corpus_decode samples"
    [tokenizer]="tests/fuzz/corpus_tokenizer"
    [index]="tests/fuzz/corpus_index $BUILD_DIR/index_corpus"
)
# An index file's sizes are checked against its length before FAISS reads it (faiss_file.c); as a
# second guard, fuzz_index's operator new refuses a request above 16 MB while it reads (tests/fuzz/fuzz_alloc.cpp; its
# blocks come from malloc, so a delete that is not its own must not count as a mismatch), caught
# as "a size beyond memory". What FAISS leaks when it throws mid-read is its own
# (tests/lsan.supp, as in the sanitizer builds), and it piles up: fuzz_index runs in libFuzzer's
# fork mode, whose child processes start again when they reach the memory limit (an OOM there
# is FAISS's leaks, not the input's; crashes, sanitizer reports and timeouts still fail the run).
declare -A asan_extra=([index]=":allocator_may_return_null=1:alloc_dealloc_mismatch=0")
declare -A fuzz_extra=([index]="-fork=1 -ignore_ooms=1")
mkdir -p "$BUILD_DIR/crashers"
# One target's run; its report is printed whole when it ends (targets run side by side).
fuzz_one() {
    local t=$1 work="$BUILD_DIR/corpus_$1" # new inputs found this run; the committed corpus stays
    mkdir -p "$work"
    # shellcheck disable=SC2086 # the seed directories are words
    if ! ASAN_OPTIONS="detect_leaks=1:halt_on_error=1${asan_extra[$t]:-}" \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        LSAN_OPTIONS=suppressions=tests/lsan.supp:print_suppressions=0 \
        "$BUILD_DIR/tests/fuzz_$t" "$work" ${seeds[$t]} ${fuzz_extra[$t]:-} -seed="$SEED" \
        -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=3072 -max_len=262144 \
        -artifact_prefix="$BUILD_DIR/crashers/${t}-" -print_final_stats=1 \
        >"$BUILD_DIR/fuzz_$t.log" 2>&1; then
        printf 'fuzz_%s: %s s, seed %s: FAILED - the input is in %s/crashers/:\n%s\n' "$t" \
            "$SECONDS_EACH" "$SEED" "$BUILD_DIR" \
            "$(grep -E "ERROR|SUMMARY|Test unit written|==[0-9]+==" "$BUILD_DIR/fuzz_$t.log" | head -20)"
        return 1
    fi
    printf 'fuzz_%s: %s s, seed %s\n%s\n' "$t" "$SECONDS_EACH" "$SEED" \
        "$(grep -E "stat::number_of_executed_units|cov:" "$BUILD_DIR/fuzz_$t.log" | tail -2)"
}
# As many targets at once as there are cores (each is one process; fuzz_index's fork mode keeps
# one child at a time), so the whole run takes FUZZ_SECONDS x targets / cores.
status=0
running=0
for t in "${targets[@]}"; do
    if [ "$running" -ge "$(nproc)" ]; then
        wait -n || status=1
        running=$((running - 1))
    fi
    fuzz_one "$t" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || status=1
    running=$((running - 1))
done
exit "$status"
