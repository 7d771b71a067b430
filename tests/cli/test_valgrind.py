#!/usr/bin/env python3
"""The vidfeat command under valgrind's memcheck, end to end: a real run (decode, convert,
infer, store) on the committed clips, once on the oneDNN backend and once on the reference
backend with a truncated clip (done up to the cut) and an audio-only file (the failure path)
among the inputs. No invalid read or write, no
use of uninitialised memory, no definite leak; tests/valgrind.supp holds the suppressions for
code that is not ours, each with its reason.

Usage: test_valgrind.py VIDFEAT MODELS_DIR SAMPLES_DIR SUPPRESSIONS
Exits 77 when valgrind is not installed.
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

ERRORS = 9  # valgrind's exit status when it found errors


def main():
    exe, models, samples, supp = sys.argv[1:5]
    if not shutil.which("valgrind"):
        print("skip: valgrind is not installed")
        return 77
    model = os.path.join(models, "tiny_cnn.onnx")
    clip = lambda n: os.path.join(samples, n)  # noqa: E731
    cases = [
        ("cpu", ["--device", "cpu"], [clip("testsrc_64x48.mp4"), clip("rotated90_64x48.mp4")],
         0, 30),
        ("ref", ["--backend", "ref"],
         [clip("testsrc_64x48.mp4"), clip("truncated.mp4"), clip("audio_only.m4a"),
          clip("rotated90_64x48.mp4")], 1, None),
    ]
    tmp = tempfile.mkdtemp(prefix="vidfeat_vg_")
    ok = True
    try:
        for name, args, inputs, want_rc, want_rows in cases:
            db = os.path.join(tmp, name + ".db")
            cmd = ["valgrind", "--suppressions=" + supp, "--error-exitcode=%d" % ERRORS,
                   "--leak-check=full", "--errors-for-leak-kinds=definite",
                   "--show-leak-kinds=definite", "-q", exe, "--model", model, "-o", db] + args
            # the policy set: vidfeat would otherwise start itself again with it (main.c),
            # which valgrind would let run natively, unchecked
            env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
            r = subprocess.run(cmd + inputs, capture_output=True, text=True, timeout=600,
                               env=env)
            report = [l for l in r.stderr.splitlines() if l.startswith("==")]
            if r.returncode == ERRORS or report:
                print("FAIL %s: valgrind found errors:\n%s" % (name, "\n".join(report[:60])))
                ok = False
                continue
            if r.returncode != want_rc:
                print("FAIL %s: exit %d, expected %d: %s" % (name, r.returncode, want_rc,
                                                             r.stderr))
                ok = False
                continue
            rows = sqlite3.connect(db).execute("SELECT count(*) FROM features").fetchone()[0]
            if want_rows is not None and rows != want_rows:
                print("FAIL %s: %d rows stored, expected %d" % (name, rows, want_rows))
                ok = False
                continue
            print("ok %s backend under memcheck: no errors, %d vectors stored" % (name, rows))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
