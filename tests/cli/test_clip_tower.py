#!/usr/bin/python3
"""CLIP's image tower through the whole pipeline (issue 30): scripts/export-clip.py writes the
ViT-B/32 tower (the published architecture, seeded random weights) beside a copy of the
models/clip_vit_b32.json manifest, and `vidfeat --model clip_vit_b32` extracts a clip made
here with ffmpeg:

  - every frame stored, 512-d (layer embed), with its true timestamp (a 10 frames/s clip);
  - the same vectors at batch 1 and batch 8 (within 1e-5 relative), and at batch 8 with two
    decoders;
  - the tower's output for one image equals PyTorch's module for the same input tensor
    (within 1e-4 relative), through the library's raw-tensor call (the Python package's
    Extractor of the same model runs the pipeline's preprocessing; the math is checked here
    on the tensor itself);
  - the models table names clip_vit_b32, layer embed, 512 dimensions, random weights.

usage: test_clip_tower.py VIDFEAT SOURCE_DIR [--no-library]
       (--no-library: a sanitizer build, whose library cannot be loaded into Python: the check
       against PyTorch is left to the default build)
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, export_clip, features, library_infer, rel_err

try:
    import numpy as np
    import torch
except ImportError as e:
    print("skip: %s (PyTorch makes the tower)" % e)
    sys.exit(SKIP)


def run(exe, *args):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=600)


def vectors(db):
    rows = features(db, done_only=True)
    return [rows[k] for k in sorted(rows)]


def main():
    exe, src = sys.argv[1:3]
    with_library = "--no-library" not in sys.argv[3:]
    if not shutil.which("ffmpeg"):
        print("skip: the ffmpeg CLI makes the clip")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="vidfeat_clip_")
    try:
        models = os.path.join(tmp, "models")
        os.makedirs(models)
        export_clip(src, models)
        clip = os.path.join(tmp, "clip.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i",
                        "testsrc2=size=320x240:rate=10:duration=2", "-pix_fmt", "yuv420p",
                        clip], check=True)

        dbs = {}
        for name, extra in (("b1", ["--batch", "1"]), ("b8", ["--batch", "8"]),
                            ("b8d2", ["--batch", "8", "--decoders", "2"])):
            dbs[name] = os.path.join(tmp, name + ".db")
            r = run(exe, "--models-dir", models, "--model", "clip_vit_b32", "-q", "-o",
                    dbs[name], *extra, clip)
            check(r.returncode == 0, "%s: %s" % (name, r.stderr))

        rows = features(dbs["b8"], done_only=True)
        check(len(rows) == 20, "20 frames stored, got %d" % len(rows))
        ts = sorted(v[1] for v in rows.values())
        check(all(abs(t - i / 10.0) < 1e-6 for i, t in enumerate(ts)), "timestamps %s" % ts)
        check(all(len(v[2]) == 512 for v in rows.values()), "512-d vectors")
        base = vectors(dbs["b8"])
        for name in ("b1", "b8d2"):
            other = vectors(dbs[name])
            worst = max(rel_err(a[2], b[2]) for a, b in zip(base, other))
            check(worst <= 1e-5, "%s against batch 8: relative error %.2e" % (name, worst))
            print("%s: the same vectors as batch 8 (worst relative error %.1e)" % (name, worst))

        con = sqlite3.connect(dbs["b8"])
        name, layer, dim, weights = con.execute(
            "SELECT name, layer, dim, weights FROM models").fetchone()
        con.close()
        check((name, layer, dim) == ("clip_vit_b32", "embed", 512),
              "models row %r" % ((name, layer, dim),))
        check(weights == "random weights", "weights %r" % weights)

        if not with_library:
            print("clip_vit_b32: 20 frames, 512-d, batch 1 = 8 = 8 with two decoders (the check "
                  "against PyTorch is the default build's)")
            return 0
        # the tower's math on one tensor against PyTorch's module
        sys.path.insert(0, os.path.join(src, "scripts"))
        import importlib
        ec = importlib.import_module("export-clip")
        model = ec.build("ViT-B/32", 32)
        x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(5))
        with torch.no_grad():
            want = model(x).numpy()
        got = library_infer(exe, os.path.join(models, "clip_vit_b32.onnx"), "embed",
                            x.numpy(), 512)
        for a, b in zip(got, want):
            e = rel_err(a, b)
            check(e <= 1e-4, "tower against PyTorch: relative error %.2e" % e)
        print("the tower equals PyTorch's module on 2 images (worst %.1e)" %
              max(rel_err(a, b) for a, b in zip(got, want)))
        print("clip_vit_b32: 20 frames, 512-d, batch 1 = 8 = 8 with two decoders")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
