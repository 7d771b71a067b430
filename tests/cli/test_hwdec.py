#!/usr/bin/python3
"""Hardware decoding (--hwdec) from the command line.

usage: test_hwdec.py errors|cuda VIDFEAT MODELS_DIR SAMPLES_DIR SHARED_DIR
errors: an unknown device type is a usage error (exit 2) naming it and the types this FFmpeg
        has; --hwdec cuda where no CUDA device can be opened fails the run at once (exit 3) with
        one line saying why, before any database is written; "none" is the CPU.
cuda:   (exits 77 where no CUDA device opens) the vectors, frame indices and timestamps of
        NVDEC-decoded clips equal the CPU-decoded ones (relative difference <= 1e-4: the
        decoders are exact and the same code converts), the JSON summary says which files
        were decoded on the device, and a codec NVDEC lacks still decodes (on the CPU).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from vfcheck import SKIP, check, features, nvidia_driver_loads, rel_err


NO_DEVICE = "cannot open a cuda device for decoding"


def errors(exe, model, clip, tmp):
    db = os.path.join(tmp, "e.db")
    r = subprocess.run([exe, "--hwdec", "bogus", "--model", model, "-o", db, clip],
                       capture_output=True, text=True, timeout=60)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and "'bogus'" in lines[0] and "cuda" in lines[0],
          "unknown type: exit %d %r" % (r.returncode, r.stderr))
    check(not os.path.exists(db), "a database was written for a usage error")
    print("ok unknown type:", lines[0])

    r = subprocess.run([exe, "--hwdec", "none", "--model", model, "-o", db, clip],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "--hwdec none: %r" % r.stderr)
    os.remove(db)

    r = subprocess.run([exe, "--hwdec", "cuda", "--json", "--model", model, "-o", db, clip],
                       capture_output=True, text=True, timeout=120)
    if r.returncode == 0:
        summary = json.loads(r.stdout)
        check(summary["files"][0]["hwdec"] in ("cuda", ""), r.stdout)
        print("ok a CUDA device opened here (the cuda test compares its vectors)")
        return 0
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 3 and len(lines) == 1 and lines[0].startswith("vidfeat: " + NO_DEVICE),
          "no device: exit %d %r" % (r.returncode, r.stderr))
    check(not os.path.exists(db), "a database was written although the run could not start")
    check(nvidia_driver_loads() or "no NVIDIA driver found (libcuda.so.1" in lines[0],
          "no driver here, and the line does not say so: %r" % lines[0])
    print("ok no CUDA device:", lines[0])
    return 0


def cuda(exe, model, clips, tmp):
    cpu_db, gpu_db = os.path.join(tmp, "cpu.db"), os.path.join(tmp, "nvdec.db")
    r = subprocess.run([exe, "--json", "--model", model, "-o", gpu_db, "--hwdec", "cuda", *clips],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 and NO_DEVICE in r.stderr:
        print("SKIP: no CUDA device:", r.stderr.strip())
        return SKIP
    check(r.returncode == 0, "--hwdec cuda: exit %d %r" % (r.returncode, r.stderr))
    on = {os.path.basename(f["path"]): f["hwdec"] for f in json.loads(r.stdout)["files"]}
    for name in on:
        if name.startswith(("h264", "hevc", "testsrc")):
            check(on[name] == "cuda", "%s was not decoded on the device: %s" % (name, on))
    r = subprocess.run([exe, "--model", model, "-o", cpu_db, *clips], capture_output=True,
                       text=True, timeout=600)
    check(r.returncode == 0, "CPU decode: %r" % r.stderr)
    a, b = features(gpu_db, done_only=True), features(cpu_db, done_only=True)
    check(a.keys() == b.keys(), "frames differ: %d vs %d" % (len(a), len(b)))
    worst = 0.0
    for k in b:
        check(a[k][0] == b[k][0] and a[k][1] == b[k][1], "%s: timestamps %s vs %s" %
              (k, a[k][:2], b[k][:2]))
        worst = max(worst, rel_err(a[k][2], b[k][2]))
    check(worst <= 1e-4, "NVDEC vs CPU decode: relative difference %.3g" % worst)
    print("ok %d frames of %d files, decoded on: %s; worst relative difference %.2g" %
          (len(a), len(clips), on, worst))
    return 0


def main():
    mode, exe, models, samples, shared = sys.argv[1:6]
    model = os.path.join(models, "tiny_cnn.onnx")
    clip = os.path.join(samples, "testsrc_64x48.mp4")
    with tempfile.TemporaryDirectory(prefix="vidfeat-hwdec-") as tmp:
        if mode == "errors":
            return errors(exe, model, clip, tmp)
        clips = [clip] + [os.path.join(shared, "videos", f) for f in (
            "h264_720p_bigbuckbunny.mp4", "hevc_640x360_aac.mp4", "vp8_720p_bigbuckbunny_30s.webm",
            "mpeg4asp_megamind.avi")]
        return cuda(exe, model, [c for c in clips if os.path.exists(c)], tmp)


if __name__ == "__main__":
    sys.exit(main())
