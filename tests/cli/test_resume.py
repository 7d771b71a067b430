#!/usr/bin/python3
"""Resume in both directions. A rerun skips a file only when the database holds a finished
extraction of the same file (path, size, mtime) by the same model file and layer, with the same
sampling and precision; anything else that changed must extract again - replacing the file's
earlier extraction of that model, layer and sampling, so one stays - and --force always does.

usage: test_resume.py VIDFEAT MODELS_DIR SAMPLES_DIR
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, check_bf16_refused, runs_bf16


def run(exe, db, model, clip, *args):
    r = subprocess.run([exe, "--model", model, "-o", db, "--json", *args, clip],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "%s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
    s = json.loads(r.stdout)
    return s["done"], s["skipped"]


def extractions(db):
    con = sqlite3.connect(db)
    rows = con.execute("SELECT m.name, m.file_sha256, m.layer, e.sampling, e.precision, "
                       "e.status, e.frames FROM extractions e JOIN models m ON "
                       "m.id = e.model_id ORDER BY e.id").fetchall()
    con.close()
    return rows


def main():
    exe, models, samples = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="vidfeat_resume_")
    try:
        clip = os.path.join(tmp, "clip.mp4")
        shutil.copy(os.path.join(samples, "testsrc_64x48.mp4"), clip)
        model_dir = os.path.join(tmp, "m")
        os.mkdir(model_dir)
        model = os.path.join(model_dir, "tiny_cnn.onnx")
        shutil.copy(os.path.join(models, "tiny_cnn.onnx"), model)
        db = os.path.join(tmp, "r.db")

        def expect(what, want, *args):
            got = run(exe, db, model, clip, *args)
            check(got == want, "%s: (done, skipped) %s, want %s" % (what, got, want))
            print("ok %-44s done %d, skipped %d" % (what, got[0], got[1]))

        expect("first run", (1, 0))
        expect("the same again: skipped", (0, 1))
        st = os.stat(clip)
        os.utime(clip, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
        expect("a newer mtime: extracted again", (1, 0))
        expect("then skipped", (0, 1))
        with open(clip, "ab") as f:  # bytes after the last box: the same frames
            f.write(b"\0" * 16)
        expect("a changed size: extracted again", (1, 0))
        expect("then skipped", (0, 1))
        expect("another layer: extracted", (1, 0), "--layer", "/GlobalAveragePool_output_0")
        expect("another sampling (--every 2): extracted", (1, 0), "--every", "2")
        expect("another sampling (--fps 5): extracted", (1, 0), "--fps", "5")
        bf16 = runs_bf16(exe)
        if bf16:
            expect("bf16 instead of f32: extracted again", (1, 0), "--precision", "bf16")
            expect("bf16 again: skipped", (0, 1), "--precision", "bf16")
            expect("f32 again: extracted again", (1, 0))
        else:
            check_bf16_refused(exe, "--model", model, "-o", db, clip)
        expect("--force: extracted again", (1, 0), "--force")
        # the same name and layer, another model file (one weight changed)
        import onnx
        from onnx import numpy_helper
        m = onnx.load(model)
        for init in m.graph.initializer:
            if init.name == "fc.bias":
                b = numpy_helper.to_array(init).copy()
                b[0] += 0.25
                init.CopyFrom(numpy_helper.from_array(b, init.name))
        onnx.save(m, model)
        expect("another model file, same name: extracted", (1, 0))
        expect("then skipped", (0, 1))

        rows = extractions(db)
        # one extraction per (model file, layer, sampling): the latest, done, all frames
        keys = [(r[1], r[2], r[3]) for r in rows]
        check(len(keys) == len(set(keys)), "more than one extraction of a key: %s" % rows)
        check(all(r[5] == "done" for r in rows), "not all done: %s" % rows)
        want = {("output", "all"): 20, ("/GlobalAveragePool_output_0", "all"): 20,
                ("output", "every=2"): 10, ("output", "fps=5"): 10}
        for r in rows:
            check(want.get((r[2], r[3])) == r[6], "frames of %s: %d" % (r[2:4], r[6]))
        shas = {r[1] for r in rows}
        check(len(shas) == 2, "model files recorded: %s" % shas)
        latest = [r for r in rows if r[2] == "output" and r[3] == "all"]
        check(len(latest) == 2 and all(r[4] == "f32" for r in latest),
              "the output/all extractions: %s" % latest)
        print("ok the database: one extraction per model file, layer and sampling (%d)"
              % len(rows))
        if not bf16:
            print("skipped: the bf16 runs: this CPU, under its ISA cap, has no AVX512-BF16 or AMX "
                  "(the rest passed; the refusal was checked)")
            return SKIP
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
