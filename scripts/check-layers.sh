#!/usr/bin/env bash
# The layering of src/: each folder includes only its own headers and those of the folders
# before it in this order (cli/, the command, is the top), and no two modules include each
# other, however indirectly. Prints every include that breaks it and exits 1, or says the
# layers hold.
set -euo pipefail
cd "$(dirname "$0")/.."
order=(core kernels media text engine store search pipeline serve cli)
status=0
for i in "${!order[@]}"; do
    layer=${order[$i]}
    allowed=("${order[@]:0:$((i + 1))}")
    while IFS=: read -r file line inc; do
        dir=${inc%%/*}
        ok=0
        for a in "${allowed[@]}"; do [ "$dir" = "$a" ] && ok=1; done
        if [ $ok = 0 ]; then
            echo "$file:$line: $layer includes $inc (allowed: ${allowed[*]})"
            status=1
        fi
    done < <(grep -d skip -n -o '#include "[a-z]*/[^"]*"' src/"$layer"/* | sed 's/#include "//; s/"$//')
done
# The command is a client of the library: vidfeat.h, its own headers and core's utilities (json,
# paths, memory, time), nothing of the layers between (what it needs of them is a vf_* call, so
# the Python package can have it too).
while IFS=: read -r file line inc; do
    case $inc in
    cli/* | core/*) ;;
    *)
        echo "$file:$line: cli includes $inc (the command uses vidfeat.h, cli/ and core/ only)"
        status=1
        ;;
    esac
done < <(grep -n -o '#include "[a-z]*/[^"]*"' src/cli/* | sed 's/#include "//; s/"$//')
scripts/check-include-circles.py || status=1
# and none by what files call (from the build's objects; skipped, saying so, without a build)
circles=0
scripts/check-file-circles.py "${BUILD_DIR:-build}" || circles=$?
[ "$circles" = 0 ] || [ "$circles" = 77 ] || status=1
# Each external library behind its file(s): "header pattern|the files that may include it"
# (its headers in <> or, for code generated from it, in "").
for rule in 'sqlite3\.h|src/store/store_sqlite.c src/store/store_sqlite_db.h' 'jansson\.h|src/core/json.c' \
    'openssl/|src/core/digest.c' 'dnnl|src/engine/backend_dnnl.c src/engine/backend_dnnl_int.h src/engine/backend_dnnl_cnn.c src/engine/backend_dnnl_own.c src/engine/backend_dnnl_ops.c src/engine/backend_dnnl_plan.c src/engine/backend_dnnl_precision.c' \
    'libav|src/media/audio.c src/media/confine.c src/media/confine.h src/media/decode.c src/media/ffmpeg.c src/media/hwdev.c src/media/picture.c src/media/preprocess.c src/media/probe.c src/media/shot_reader.c' 'libsw|src/media/audio.c src/media/decode.c src/media/ffmpeg.c src/media/picture.c src/media/preprocess.c src/media/shot_reader.c' \
    'cudnn|cublas|src/engine/backend_cuda.c src/engine/backend_cuda_int.h src/engine/backend_cuda_cnn.c src/engine/backend_cuda_ops.c src/engine/backend_cuda_plan.c' \
    'protobuf-c|onnx\.pb-c\.h|src/engine/onnx_loader.h' 'libpq|src/store/store_pg_db.h' \
    'hdf5|src/cli/export_hdf5.c' 'faiss/|src/search/ann_faiss.cpp' \
    'unicode/|src/text/unicode.c' 'zlib\.h|src/text/tokenizer.c' 'fftw3\.h|src/media/logmel.c' 'microhttpd\.h|src/serve/http.c' 'turbojpeg\.h|src/serve/jpeg.c'; do
    pattern=${rule%|*}
    allowed=" ${rule##*|} "
    while IFS=: read -r file line _; do
        if [[ $allowed != *" $file "* ]]; then
            echo "$file:$line: includes $pattern (only${allowed% } may)"
            status=1
        fi
    done < <(grep -rnE "#include [<\"]($pattern)" src || true)
done
[ $status = 0 ] && echo "layers: ${order[*]} (each uses only those before it; cli only vidfeat.h and core); no include circle"
exit $status
