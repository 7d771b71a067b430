#!/usr/bin/env bash
# Pack what the GPU checks need on a machine that has a GPU but no package registry: the vidfeat
# binary, its CUDA backend module and the CUDA tests built here, every shared library they load except the C library and
# the CUDA libraries (the GPU machine brings its own driver, CUDA runtime, cuBLAS and cuDNN), the
# clips from ../shared/videos and the model manifests. Writes .gpu/partN.tar.xz, each under the
# device tool's 64 MiB carry limit, and .gpu/MANIFEST; scripts/gpu-check.sh unpacks and runs them.
#
# Usage: scripts/gpu-pack.sh [--build DIR] [--shared DIR]
#   then run scripts/gpu-check.sh on the GPU machine with .gpu carried (see there).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
shared=${VIDFEAT_SHARED_DIR:-../shared}
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "gpu-pack: unknown argument $1" >&2; exit 2 ;;
    esac
done

if ! cmake --build "$build" -j"$(nproc)" --target vidfeat_cli vidfeat_cuda test_backend_cuda \
        test_yuvconv_cuda test_pipeline_cuda >/dev/null; then
    echo "gpu-pack: cannot build vidfeat and the GPU tests in $build (is the CUDA backend" \
         "built? cmake -DVIDFEAT_CUDA=ON)" >&2
    exit 1
fi
bins=("$build/src/cli/vidfeat" "$build/tests/test_backend_cuda" "$build/tests/test_yuvconv_cuda"
      "$build/tests/test_pipeline_cuda")
# the CUDA backend is a run-time module (gpu-check.sh points VIDFEAT_MODULE_DIR at lib/)
module="$build/lib/vidfeat/libvidfeat-cuda.so"
for b in "${bins[@]}" "$module"; do
    [ -x "$b" ] || { echo "gpu-pack: $b missing (is the CUDA backend built? cmake -DVIDFEAT_CUDA=ON)" >&2; exit 1; }
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/big/lib" "$stage/rest/lib" "$stage/rest/bin" "$stage/rest/models" \
         "$stage/rest/videos"
# The closure of shared libraries, without glibc's own and the CUDA ones.
skip='/(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64)\.so|/lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*)\.so'
ldd "${bins[@]}" "$module" | awk '/=> \// {print $3}' | sort -u | grep -Ev "$skip" > "$stage/libs.txt"
# The largest go into their own part so that each part stays under the carry limit.
while read -r lib; do
    size=$(stat -Lc %s "$lib")
    dest=rest
    [ "$size" -gt 8000000 ] && dest=big
    cp -L "$lib" "$stage/$dest/lib/"
done < "$stage/libs.txt"
strip --strip-unneeded "$stage"/*/lib/* 2>/dev/null || true
cp "${bins[@]}" "$stage/rest/bin/"
cp "$module" "$stage/rest/lib/"
strip --strip-debug "$stage"/rest/bin/*
find "$shared/videos" -maxdepth 1 -type f -size +0 -exec cp {} "$stage/rest/videos/" \;
cp models/*.json "$stage/rest/models/"

rm -rf .gpu
mkdir -p .gpu
tar -C "$stage/big" -cf - . | xz -T0 -6 > .gpu/part1.tar.xz
tar -C "$stage/rest" -cf - . | xz -T0 -6 > .gpu/part2.tar.xz
{
    echo "built_from=$(pwd)"
    echo "commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "libraries=$(wc -l < "$stage/libs.txt")"
} > .gpu/MANIFEST
ls -l .gpu
total=$(cat .gpu/* | wc -c)
tree=$(git ls-files -z | xargs -0 cat | wc -c)
echo "gpu-pack: $((total / 1048576)) MiB packed + $((tree / 1048576)) MiB of source (limit 64 MiB)"
[ $((total + tree)) -lt $((63 * 1048576)) ] || { echo "gpu-pack: over the carry limit" >&2; exit 1; }
