#!/usr/bin/python3
"""The int8 calibration from the command line: `vidfeat calibrate` and the files it writes.

usage: test_calibrate.py VIDFEAT SHARED_DIR
Checks, with MobileNetV2 (real weights) on real clips and photos: calibrate spreads --frames over
the inputs and writes the file it names (--int8-scales) or MODEL.onnx.int8 beside the model;
an extract run then reads it (no calibration) and its vectors are within cosine 0.99 of f32;
--json reports the file; a missing input fails with one line naming it while the scales still
come from the others; usage errors exit 2. Nothing is written beside ../shared's model: the
model is copied, $XDG_CACHE_HOME points into the temporary directory. Exits 77 when the model
or the clips are missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from vfcheck import SKIP, check, cosine, features, rel_err, worst


def vectors(db):
    return {k: vec.astype(np.float64) for k, (_, _, vec) in features(db).items()}


def main():
    exe, shared = sys.argv[1], sys.argv[2]
    model_src = os.path.join(shared, "models", "mobilenet_v2_1.0_224.onnx")
    h264 = os.path.join(shared, "videos", "h264_720p_bigbuckbunny.mp4")
    vp8 = os.path.join(shared, "videos", "vp8_720p_bigbuckbunny_30s.webm")
    images = os.path.join(shared, "images")
    for p in (model_src, h264, vp8, images):
        if not os.path.exists(p):
            print("SKIP: %s missing" % p)
            sys.exit(SKIP)
    tmp = tempfile.mkdtemp(prefix="vidfeat-calibrate-")
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"))

    def run(*args):
        return subprocess.run([exe, *args], capture_output=True, text=True, env=env)

    try:
        models = os.path.join(tmp, "models")
        os.mkdir(models)
        model = os.path.join(models, "mnv2.onnx")
        shutil.copy(model_src, model)
        scales = os.path.join(tmp, "mine.int8")

        # --frames spread over the inputs: 8 from each clip, the scales written where named
        r = run("calibrate", "--model", model, "--int8-scales", scales, "--frames", "16",
                h264, vp8)
        check(r.returncode == 0, "calibrate: exit %d: %s" % (r.returncode, r.stderr))
        check("calibrated on 16 frames of 2 files -> %s" % scales in r.stderr, r.stderr)
        doc = json.load(open(scales))
        check(doc["vidfeat_int8_calibration"] == 1 and doc["images"] == 16, str(doc)[:200])
        check(len(doc["ranges"]) > 50 and all(v >= 0 for v in doc["ranges"].values()),
              "ranges: %d" % len(doc["ranges"]))
        check(not os.path.exists(model + ".int8"), "wrote beside the model as well")

        # extract reads it: no calibration, int8 from the first frame, close to f32
        f32_db, i8_db = os.path.join(tmp, "f32.db"), os.path.join(tmp, "i8.db")
        r = run("--model", model, "--max-frames", "40", "-o", f32_db, vp8, images)
        check(r.returncode == 0, "f32 extract: %s" % r.stderr)
        r = run("-v", "--model", model, "--precision", "int8", "--int8-scales", scales,
                "--max-frames", "40", "-o", i8_db, vp8, images)
        check(r.returncode == 0, "int8 extract: %s" % r.stderr)
        check("int8: scales from %s (calibrated on 16 frames)" % scales in r.stderr, r.stderr)
        check("calibrated on the first" not in r.stderr, "calibrated again: " + r.stderr)
        a, b = vectors(i8_db), vectors(f32_db)
        check(len(a) == len(b) == 40 + 15, "%d / %d vectors" % (len(a), len(b)))
        cos = worst((cosine(a[k], b[k]) for k in b), -np.inf)
        worst_rel = worst((rel_err(a[k], b[k]) for k in b), np.inf)
        check(cos >= 0.99, "int8 cosine to f32 %.4f" % cos)
        check(1e-4 < worst_rel < np.inf,
              "int8 vectors equal f32 or are not finite (%.2g): int8 did not run" % worst_rel)

        # by default beside the model; a missing input is one line, the others give their share
        # (8 frames over 2 inputs: 4)
        missing = os.path.join(tmp, "no_such_clip.mp4")
        r = run("calibrate", "--json", "--model", model, "--frames", "8", missing, h264)
        check(r.returncode == 1, "missing input: exit %d" % r.returncode)
        lines = [l for l in r.stderr.splitlines() if "no_such_clip.mp4" in l]
        check(len(lines) == 1, "one line for the missing file: %r" % r.stderr)
        out = json.loads(r.stdout)
        check(out["int8_scales"] == model + ".int8" and out["calibration_frames"] == 4,
              r.stdout[:300])
        check(json.load(open(model + ".int8"))["images"] == 4, "beside the model")
        cached = [f for _, _, fs in os.walk(os.path.join(tmp, "cache")) for f in fs
                  if f.endswith(".int8")]
        check(not cached, "the cache was used: %s" % cached)

        # usage errors
        for args in (["calibrate", "--model", model, "-o", os.path.join(tmp, "x.db"), h264],
                     ["calibrate", "--model", model, "--precision", "bf16", h264],
                     ["calibrate", "--model", model],
                     ["--model", model, "--frames", "8", "-o", os.path.join(tmp, "y.db"), h264]):
            r = run(*args)
            check(r.returncode == 2 and r.stderr.count("\n") == 1,
                  "%s: exit %d, %r" % (args, r.returncode, r.stderr))
        print("calibrate: 16 frames over 2 clips; extract read the file, int8 cosine to f32 "
              ">= %.4f on %d vectors" % (cos, len(b)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
