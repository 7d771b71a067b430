#!/usr/bin/env bash
# Install what vidfeat needs on Debian 12 / Ubuntu, then configure and build into build/.
# Packages are installed as root: directly when run as root, else through sudo (so the build
# stays the user's). Idempotent. VIDFEAT_NO_APT=1 skips the package step; BUILD_DIR overrides
# build/.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

PACKAGES=(
    build-essential cmake pkg-config git
    libavformat-dev libavcodec-dev libswscale-dev libavutil-dev   # decoding (FFmpeg)
    libswresample-dev                                             # audio models' resampling
    libdnnl-dev                                                   # CPU backend (oneDNN 2.x)
    opencl-headers ocl-icd-opencl-dev                             # oneDNN's CMake package asks
    libprotobuf-c-dev protobuf-c-compiler libonnx-dev             # ONNX loading
    libsqlite3-dev sqlite3                                        # storage
    libpq-dev postgresql-15                                       # storage on PostgreSQL (and its tests)
    slurm-wlm munge                                               # the Slurm samples' test cluster
    libssl-dev                                                    # SHA-256 (libcrypto)
    libjansson-dev                                                # JSON
    libhdf5-dev                                                   # vidfeat export --format hdf5
    libicu-dev zlib1g-dev                                         # CLIP's tokenizer (Unicode, .gz)
    libfftw3-dev                                                  # audio models' front end (FFT)
    libmicrohttpd-dev libturbojpeg0-dev                           # vidfeat serve: HTTP, thumbnails
    chromium chromium-driver python3-selenium                     # its tests, in a real browser
    python3-regex                                                 # its reference in the tests
    libfaiss-dev libopenblas-dev g++                              # the search index (FAISS, C++)
    python3 python3-numpy python3-onnx python3-torch python3-torchvision  # model export, refs
    python3-h5py                                                  # reading exports back (tests)
    python3-pytest                                                # the Python package's tests
    python3-torchaudio                                            # the audio front end's cross-check
    ffmpeg                                                        # sample clips, test images
    curl                                                          # scripts/fetch-models.sh
    clang clang-format libclang-rt-dev                            # fuzzing, format check
    valgrind util-linux                                           # memcheck run; unshare, setpriv
)

if [ "${VIDFEAT_NO_APT:-0}" != 1 ]; then
    as_root=()
    [ "$(id -u)" = 0 ] || as_root=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${as_root[@]}" apt-get update
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y \
        --no-install-recommends "${PACKAGES[@]}"
    command -v npm >/dev/null ||
        "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y \
            --no-install-recommends nodejs npm ||
        echo "setup: npm could not be installed (only the ONNX Runtime comparisons need it)" >&2
fi

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j"$(nproc)"

# ONNX Runtime (CPU library inside the npm package) for the conformance tests only: vidfeat is
# built without it, and where the npm registry cannot be reached those tests skip, saying why.
if [ ! -d "$BUILD_DIR/ort/node_modules/onnxruntime-node" ]; then
    mkdir -p "$BUILD_DIR/ort"
    if ! command -v npm >/dev/null ||
        ! timeout 600 npm install --silent --no-audit --no-fund --ignore-scripts \
            --prefix "$BUILD_DIR/ort" onnxruntime-node@1.30.0; then
        rm -rf "$BUILD_DIR/ort/node_modules/onnxruntime-node"
        echo "setup: ONNX Runtime (npm onnxruntime-node) could not be installed: vidfeat is" \
            "built; the tests comparing it with ONNX Runtime will skip" >&2
    fi
fi
