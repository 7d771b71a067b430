#!/usr/bin/env bash
# The GPU checks, in one go, on a machine with an NVIDIA GPU and PyTorch but no package registry
# (the device tool's H100/H200). Prepare here with scripts/gpu-pack.sh, then run there from the
# repository root with .gpu carried:
#
#     scripts/gpu-check.sh [unit] [e2e] [bench] [torch]      (default: all four)
#
#   unit   test_backend_cuda: every operator case against the reference backend, MobileNetV2
#          against the CPU backend (f32 within 1e-4, tf32/f16 cosine >= 0.999); test_yuvconv_cuda:
#          the frame conversion kernel against its host reference on the clips (1e-6);
#          test_pipeline_cuda: the pipeline converting on the GPU (uploaded and NVDEC frames,
#          several files at once) against the reference pipeline (1e-4)
#   e2e    vidfeat on the clips, CPU f32 vs GPU f32 (1e-4) and GPU f16 (cosine 0.999), frames and
#          timestamps identical (scripts/compare-features.py); NVDEC (--hwdec cuda) vs CPU
#          decoding (1e-4, tests/cli/test_hwdec.py)
#   bench  vidfeat bench: VGG19 and Inception v3, inference only, batch 1/8/32/128 x f32/tf32/f16
#          (tf32/f16 again all NCHW: bench-infer-nchw-*), and end to end on the 1080p and 720p H.264 clips, CPU decoding and NVDEC; eight
#          1080p files at once with 1, 2, 4 and 8 decoders (bench-files-*)
#   torch  scripts/bench-torch-gpu.py, the PyTorch peer on the same GPU
#
# Logs and JSON go to $OUT (the device tool's return folder) or /tmp/vf-out. The networks are
# exported there with PyTorch (scripts/export-torchvision.py). Exit status: 0 when every check
# passed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-/tmp/vf-out}
vf=/tmp/vf
mkdir -p "$out" "$vf"
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(unit e2e bench torch)
log() { echo "gpu-check: $*" | tee -a "$out/gpu-check.log"; }
status=0

# ---- setup: unpack, find this machine's CUDA libraries, export the networks ----
if [ ! -f .gpu/MANIFEST ]; then
    echo "gpu-check: no .gpu here: run scripts/gpu-pack.sh and carry .gpu" >&2
    exit 2
fi
if ! cmp -s .gpu/MANIFEST "$vf/MANIFEST"; then
    for p in .gpu/part*.tar.xz; do xz -dc "$p" | tar -C "$vf" -xf - || exit 2; done
    cp .gpu/MANIFEST "$vf/MANIFEST"
fi
# The tests find their data through the source path compiled into them.
src=$(sed -n 's/^built_from=//p' .gpu/MANIFEST)
if [ -n "$src" ] && [ ! -e "$src" ]; then
    mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"
fi
cudalibs=$(find / -xdev \( -name 'libcudnn.so.9' -o -name 'libcublas.so.13' -o \
           -name 'libcublasLt.so.13' -o -name 'libcudart.so.13' \) -printf '%h\n' 2>/dev/null |
           sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="$vf/lib:${cudalibs}${LD_LIBRARY_PATH:-}"
export VIDFEAT_MODULE_DIR="$vf/lib" # the CUDA backend's module, packed beside the libraries
export VIDFEAT_MODELS="$vf/models"
bin=$vf/bin
log "commit $(sed -n 's/^commit=//p' .gpu/MANIFEST); CUDA libraries from: ${cudalibs:-none found}"
nvidia-smi -L 2>&1 | tee -a "$out/gpu-check.log"
"$bin/vidfeat" --version 2>&1 | tee -a "$out/gpu-check.log"
missing=$(ldd "$bin/vidfeat" | grep "not found")
[ -z "$missing" ] || { log "missing libraries: $missing"; exit 2; }
for m in mobilenet_v2 vgg19 inception_v3; do
    [ -f "$vf/models/$m.onnx" ] ||
        python3 scripts/export-torchvision.py --out "$vf/models" "$m" >>"$out/gpu-check.log" 2>&1 ||
        { log "export of $m failed"; status=1; }
done

run() { # name command...: run, log, remember failure
    local name=$1
    shift
    log "== $name: $*"
    "$@" >"$out/$name.log" 2>&1
    local rc=$?
    tail -n 40 "$out/$name.log" >>"$out/gpu-check.log"
    [ $rc -eq 0 ] || { log "$name: FAILED (exit $rc)"; status=1; }
    return $rc
}

for stage in "${stages[@]}"; do
    case $stage in
    unit)
        run unit "$bin/test_backend_cuda" "$vf/models/mobilenet_v2.onnx"
        run unit-yuvconv "$bin/test_yuvconv_cuda" "$vf/videos"
        run unit-pipeline "$bin/test_pipeline_cuda" "$vf/videos"
        ;;
    e2e)
        clips=()
        for f in h264_720p_bigbuckbunny.mp4 vp8_720p_bigbuckbunny_30s.webm hevc_640x360_aac.mp4 \
                 phone_rotated180_ipad2.mov mpeg4asp_megamind.avi h264_640x480_asl_again.mkv; do
            [ -f "$vf/videos/$f" ] && clips+=("$vf/videos/$f")
        done
        rm -f "$vf"/e2e-*.db
        run e2e-cpu "$bin/vidfeat" --device cpu --model inception_v3 -o "$vf/e2e-cpu.db" "${clips[@]}"
        run e2e-gpu "$bin/vidfeat" --gpu --model inception_v3 -o "$vf/e2e-gpu.db" "${clips[@]}"
        run e2e-gpu16 "$bin/vidfeat" --gpu --precision f16 --model inception_v3 \
            -o "$vf/e2e-gpu16.db" "${clips[@]}"
        run e2e-compare-f32 python3 scripts/compare-features.py --max-rel 1e-4 \
            "$vf/e2e-gpu.db" "$vf/e2e-cpu.db"
        run e2e-compare-f16 python3 scripts/compare-features.py --min-cos 0.999 \
            "$vf/e2e-gpu16.db" "$vf/e2e-cpu.db"
        # NVDEC (--hwdec cuda): the same vectors as CPU decoding
        run e2e-nvdec "$bin/vidfeat" --gpu --hwdec cuda --json --model inception_v3 \
            -o "$vf/e2e-nvdec.db" "${clips[@]}"
        run e2e-compare-nvdec python3 scripts/compare-features.py --max-rel 1e-4 \
            "$vf/e2e-nvdec.db" "$vf/e2e-cpu.db"
        run hwdec python3 tests/cli/test_hwdec.py cuda "$bin/vidfeat" models samples "$vf"
        ;;
    bench)
        for m in vgg19 inception_v3; do
            run "bench-infer-$m" "$bin/vidfeat" bench --device gpu --model "$m" --infer-only \
                --batch 1,8,32,128 --precision f32,tf32,f16 --json
            # the same with every convolution NCHW: what NHWC buys (tensor-core precisions)
            VIDFEAT_CUDA_NHWC=0 run "bench-infer-nchw-$m" "$bin/vidfeat" bench --device gpu \
                --model "$m" --infer-only --batch 8,32,128 --precision tf32,f16 --json
        done
        for clip in h264_1080p_smpte_bars_counter.mp4 h264_720p_bigbuckbunny.mp4; do
            run "bench-e2e-${clip%%.*}" "$bin/vidfeat" bench --device all --model inception_v3 \
                --batch 1,32,128 --precision f32,f16 --json "$vf/videos/$clip"
            run "bench-e2e-nvdec-${clip%%.*}" "$bin/vidfeat" bench --device gpu --hwdec cuda \
                --model inception_v3 --batch 32,128 --precision f32,f16 --json "$vf/videos/$clip"
        done
        # several files at once (--decoders): eight names for the 1080p clip (2008 frames),
        # NVDEC and CPU decoding, 1, 2, 4 and 8 decoders
        mkdir -p "$vf/many"
        for i in 1 2 3 4 5 6 7 8; do
            ln -sf "$vf/videos/h264_1080p_smpte_bars_counter.mp4" "$vf/many/clip$i.mp4"
        done
        for dec in cuda none; do
            for n in 1 2 4 8; do
                run "bench-files-$dec-$n" "$bin/vidfeat" bench --device gpu --hwdec "$dec" \
                    --decoders "$n" --model inception_v3 --precision f16 --batch 128 --json \
                    "$vf"/many/clip*.mp4
            done
        done
        ;;
    torch)
        run torch python3 scripts/bench-torch-gpu.py
        ;;
    *)
        log "unknown stage $stage"
        status=2
        ;;
    esac
done
log "done, exit $status"
exit $status
