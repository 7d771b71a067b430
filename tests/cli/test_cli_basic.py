#!/usr/bin/python3
"""The vidfeat command on the committed samples: exit statuses (0 done, 1 some failed, 2 usage),
one-line errors naming the file, nothing extra on a pipe, --json, info, models, --version.

usage: test_cli_basic.py VIDFEAT MODELS_DIR SAMPLES_DIR
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def check(cond, msg):
    if not cond:
        print("FAIL:", msg)
        sys.exit(1)


def main():
    exe, models, samples = sys.argv[1:4]
    tiny = os.path.join(models, "tiny_cnn.onnx")
    clip = os.path.join(samples, "testsrc_64x48.mp4")
    tmp = tempfile.mkdtemp(prefix="vidfeat_cli_basic_")
    try:
        db = os.path.join(tmp, "a.db")
        r = run(exe, "--model", tiny, "-o", db, clip)
        check(r.returncode == 0, "plain run: %d %s" % (r.returncode, r.stderr))
        check(r.stdout == "" and r.stderr == "", "output on a pipe: %r %r" % (r.stdout, r.stderr))
        con = sqlite3.connect(db)
        check(con.execute("SELECT count(*) FROM features").fetchone()[0] == 20, "20 rows")
        con.close()

        r = run(exe, "extract", "--model", tiny, "-o", db, "--json", "--force", clip,
                os.path.join(tmp, "missing.mp4"), os.path.join(samples, "audio_only.m4a"))
        check(r.returncode == 1, "some failed: exit %d" % r.returncode)
        lines = r.stderr.strip().splitlines()
        check(len(lines) == 2, "one line per failure: %r" % r.stderr)
        check(any("missing.mp4: No such file" in l for l in lines), r.stderr)
        check(any("audio_only.m4a: no video stream" in l for l in lines), r.stderr)
        s = json.loads(r.stdout)
        check(s["done"] == 1 and s["failed"] == 2 and s["frames"] == 20, s)
        f = s["files"][0]
        for key in ("status", "frames", "seconds", "decode_fps", "convert_fps", "infer_fps",
                    "store_fps"):
            check(key in f, "json lacks %s" % key)

        for bad in (["--batch", "0", clip], ["--precision", "int3", clip], ["--nope", clip],
                    ["--fps", "-1", clip], []):
            r = run(exe, "--model", tiny, *bad)
            check(r.returncode == 2, "usage error %s: exit %d" % (bad, r.returncode))

        r = run(exe, "--model", "no_such_model", "-o", db, clip)
        check(r.returncode == 1 and "no_such_model" in r.stderr, r.stderr)

        r = run(exe, "info", db)
        check(r.returncode == 0 and "20 vectors" in r.stdout and "done" in r.stdout, r.stdout)
        r = run(exe, "info", clip)
        check(r.returncode == 1 and "not a vidfeat database" in r.stderr, r.stderr)

        r = run(exe, "models", "--models-dir", models)
        check(r.returncode == 0 and "vgg19" in r.stdout and "inception_v3" in r.stdout, r.stdout)
        r = run(exe, "bench", "--model", tiny, "--batch", "1,4", "--json", clip)
        rows = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
        check(r.returncode == 0 and len(rows) == 2, "bench: %d %r" % (r.returncode, r.stderr))
        for row in rows:
            for key in ("device", "precision", "batch", "infer_fps", "end_to_end_fps",
                        "decode_fps", "convert_fps", "store_fps", "peak_rss_mb"):
                check(key in row, "bench json lacks %s" % key)
            check(row["frames"] == 20 and row["peak_rss_mb"] > 1, row)
        check([row["batch"] for row in rows] == [1, 4], rows)
        r = run(exe, "bench", "--infer-only", "--model", tiny, "--batch", "2", "--runs", "1",
                "--json")
        check(r.returncode == 0 and json.loads(r.stdout)["infer_fps"] > 0, r.stdout)
        r = run(exe, "--model", tiny, "--batch", "1,4", clip)
        check(r.returncode == 2, "a batch list outside bench: exit %d" % r.returncode)

        r = run(exe, "--version")
        check(r.returncode == 0 and "oneDNN" in r.stdout, r.stdout)

        # a directory: media found by probing, sorted, recursively
        os.makedirs(os.path.join(tmp, "tree", "sub"))
        shutil.copy(clip, os.path.join(tmp, "tree", "sub", "clip.bin"))
        with open(os.path.join(tmp, "tree", "notes.txt"), "w") as fh:
            fh.write("not media")
        r = run(exe, "--model", tiny, "-o", os.path.join(tmp, "d.db"), "--json",
                os.path.join(tmp, "tree"))
        check(r.returncode == 0, r.stderr)
        s = json.loads(r.stdout)
        check(s["done"] == 1 and s["files"][0]["path"].endswith("clip.bin"), s)
        print("cli: exit codes, messages, json, info, models, version, directories ok")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
