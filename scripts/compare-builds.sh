#!/usr/bin/env bash
# Same results before and after a change: build two revisions (git worktrees under
# build-compare/, CPU only), extract the same inputs with each into a database of its own, and
# compare them: every file's status, error and frame count, and every stored row's frame, pts,
# t and vector bit for bit (scripts/compare-features.py --exact). Exits 1 on a difference.
#
# usage: scripts/compare-builds.sh [OLD [NEW]] [-- VIDFEAT_ARGS...]
#   OLD defaults to HEAD~1, NEW to the working tree as it is (uncommitted changes included);
#   the inputs default to ../shared/videos with ../shared's MobileNetV2 (f32, oneDNN).
set -euo pipefail
cd "$(dirname "$0")/.."
old=HEAD~1 new=
if [ $# -gt 0 ] && [ "$1" != -- ]; then old=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" != -- ]; then new=$1; shift; fi
[ "${1:-}" = -- ] && shift
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
    args=(--model ../shared/models/mobilenet_v2_1.0_224.onnx ../shared/videos)
fi
out=build-compare
mkdir -p "$out"

build() { # build REV DIR: the vidfeat binary of REV (or of the working tree when REV is empty)
    local rev=$1 dir=$2 src=.
    if [ -n "$rev" ]; then
        rm -rf "$dir/src"
        git worktree add --force --detach "$dir/src" "$rev" >/dev/null
        src=$dir/src
    fi
    cmake -S "$src" -B "$dir/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIDFEAT_CUDA=OFF \
        -DVIDFEAT_BUILD_TESTS=OFF >/dev/null
    cmake --build "$dir/build" -j"$(nproc)" --target vidfeat_cli >/dev/null
}

status_of() { # the files' outcomes, one line each, by path
    sqlite3 "$1" "SELECT v.path, e.status, coalesce(e.error, ''), e.frames FROM extractions e
                  JOIN videos v ON v.id = e.video_id ORDER BY v.path"
}

build "$old" "$out/old"
build "$new" "$out/new"
rc=0
for side in old new; do
    rm -f "$out/$side.db"
    "$out/$side/build/src/cli/vidfeat" -q -o "$out/$side.db" "${args[@]}" || true
done
if ! diff <(status_of "$out/old.db") <(status_of "$out/new.db"); then
    echo "compare-builds: the files' outcomes differ (above: < $old, > ${new:-working tree})"
    rc=1
fi
"${PYTHON:-/usr/bin/python3}" scripts/compare-features.py --exact --max-rel 0 "$out/new.db" "$out/old.db" >"$out/compare.txt" ||
    { cat "$out/compare.txt"; rc=1; }
[ -n "$old" ] && git worktree remove --force "$out/old/src" 2>/dev/null || true
[ -n "$new" ] && git worktree remove --force "$out/new/src" 2>/dev/null || true
if [ $rc = 0 ]; then
    echo "compare-builds: $old and ${new:-the working tree} give the same outcomes and the same" \
         "rows, vectors bit for bit ($(status_of "$out/new.db" | wc -l) files)"
fi
exit $rc
