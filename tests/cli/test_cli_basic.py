#!/usr/bin/python3
"""The vidfeat command on the committed samples: exit statuses (0 done, 1 some failed, 2 usage,
3 could not start), one-line errors naming the file, a line per file and a summary on a pipe
(nothing with -q), --json, info, similar, models, --version.

usage: test_cli_basic.py VIDFEAT MODELS_DIR SAMPLES_DIR
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from vfcheck import check


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def main():
    exe, models, samples = sys.argv[1:4]
    tiny = os.path.join(models, "tiny_cnn.onnx")
    clip = os.path.join(samples, "testsrc_64x48.mp4")
    tmp = tempfile.mkdtemp(prefix="vidfeat_cli_basic_")
    try:
        db = os.path.join(tmp, "a.db")
        r = run(exe, "--model", tiny, "-o", db, clip)
        check(r.returncode == 0, "plain run: %d %s" % (r.returncode, r.stderr))
        lines = r.stderr.splitlines()
        check(r.stdout == "" and len(lines) == 2 and
              lines[0].startswith("vidfeat: %s: done: 20 frames in " % clip) and
              " frames/s (decode " in lines[0] and
              lines[1].startswith("vidfeat: 1 done, 0 failed, 0 skipped; 20 frames in ") and
              lines[1].endswith(" -> " + db), "output on a pipe: %r %r" % (r.stdout, r.stderr))
        r = run(exe, "--model", tiny, "-o", db, "-q", "--force", clip)
        check(r.returncode == 0 and r.stdout == "" and r.stderr == "",
              "-q on a pipe: %r %r" % (r.stdout, r.stderr))
        con = sqlite3.connect(db)
        check(con.execute("SELECT count(*) FROM features").fetchone()[0] == 20, "20 rows")
        con.close()

        # the same file named another way (relative, "./", "//") is the same video: skipped
        for name, cwd in (("./testsrc_64x48.mp4", samples), ("testsrc_64x48.mp4", samples),
                          (samples + "//./testsrc_64x48.mp4", tmp)):
            r = subprocess.run([exe, "--model", tiny, "-o", db, "--json", name], cwd=cwd,
                               capture_output=True, text=True)
            check(r.returncode == 0 and json.loads(r.stdout)["skipped"] == 1,
                  "%s from %s: %s" % (name, cwd, r.stdout + r.stderr))
        con = sqlite3.connect(db)
        paths = [row[0] for row in con.execute("SELECT path FROM videos")]
        con.close()
        check(paths == [os.path.join(os.path.abspath(samples), "testsrc_64x48.mp4")], paths)

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
        check(r.returncode == 3 and "no_such_model" in r.stderr, r.stderr)

        r = run(exe, "info", db)
        check(r.returncode == 0 and "20 vectors" in r.stdout and "done" in r.stdout, r.stdout)
        r = run(exe, "info", "--json", db)
        doc = json.loads(r.stdout)
        by_name = {os.path.basename(e["path"]): e for e in doc["extractions"]}
        done, audio = by_name[os.path.basename(clip)], by_name["audio_only.m4a"]
        check(r.returncode == 0 and doc["summary"]["vectors"] == 20 and
              doc["summary"]["done"] == 1 and doc["summary"]["failed"] == 2 and
              done["status"] == "done" and done["error"] is None and done["frames"] == 20 and
              audio["status"] == "failed" and "no video stream" in audio["error"] and
              audio["note"] is None and "No such file" in by_name["missing.mp4"]["error"],
              "info --json: %s" % r.stdout)
        r = run(exe, "info", clip)
        check(r.returncode == 3 and "not a vidfeat database" in r.stderr, r.stderr)

        # similar: the stored frames nearest a frame of the database (left out) or a new file
        r = run(exe, "similar", db, "--video", clip, "--at", "1", "-k", "3", "--json")
        check(r.returncode == 0 and r.stderr == "", r.stderr)
        s = json.loads(r.stdout)
        check(s["query"]["stored"] and s["query"]["frame_index"] == 10, s)
        sims = [n["similarity"] for n in s["neighbours"]]
        check(len(sims) == 3 and sims == sorted(sims, reverse=True), s)
        check(all(n["frame_index"] != 10 and n["path"] == clip for n in s["neighbours"]), s)
        r = run(exe, "similar", db, "--model", tiny, "--image",
                os.path.join(samples, "one_gop_12s.mp4"), "-k", "2")
        lines = r.stdout.splitlines()
        check(r.returncode == 0 and len(lines) == 3 and lines[0].split()[:2] == ["rank",
              "similarity"], "a header and 2 hits: " + r.stdout + r.stderr)
        check("extracted now" in r.stderr, r.stderr)
        r = run(exe, "similar", db, "--image", clip, "--video", clip)
        check(r.returncode == 2, "similar: both queries: exit %d" % r.returncode)
        r = run(exe, "--image", clip, "-o", db, clip)
        check(r.returncode == 2 and "for similar" in r.stderr, r.stderr)
        r = run(exe, "similar", os.path.join(tmp, "none.db"), "--image", clip)
        check(r.returncode == 3 and "none.db" in r.stderr, r.stderr)

        r = run(exe, "models", "--models-dir", models)
        check(r.returncode == 0 and "vgg19" in r.stdout and "inception_v3" in r.stdout, r.stdout)
        # bench: the per-frame baseline first, then each batch; a runs table; an SVG chart
        bench_db, svg = os.path.join(tmp, "bench.db"), os.path.join(tmp, "bench.svg")
        r = run(exe, "bench", "--model", tiny, "--batch", "1,4", "--json", "-o", bench_db,
                "--plot", svg, clip)
        rows = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
        check(r.returncode == 0 and len(rows) == 3, "bench: %d %r" % (r.returncode, r.stderr))
        for row in rows:
            for key in ("device", "device_name", "precision", "batch", "threads", "infer_fps",
                        "end_to_end_fps", "decode_fps", "convert_fps", "store_fps",
                        "peak_rss_mb", "speedup_vs_per_frame"):
                check(key in row, "bench json lacks %s" % key)
            check(row["frames"] == 20 and row["peak_rss_mb"] > 1 and row["device"] == "cpu", row)
            check(row["model"] == "tiny_cnn" and row["layer"] == "output" and
                  row["device_name"] != row["layer"], row)
            check(row["end_to_end_fps"] > 0 and row["speedup_vs_per_frame"] > 0, row)
        check([(row["mode"], row["batch"]) for row in rows] ==
              [("per_frame", 1), ("pipeline", 1), ("pipeline", 4)], rows)
        check(rows[0]["speedup_vs_per_frame"] == 1.0, rows[0])
        con = sqlite3.connect(bench_db)
        runs = con.execute("SELECT mode, batch_size, frames, device, model, input,"
                           " end_to_end_fps FROM runs ORDER BY id").fetchall()
        con.close()
        check([(m, b, f, d) for m, b, f, d, _, _, _ in runs] ==
              [("per_frame", 1, 20, "cpu"), ("pipeline", 1, 20, "cpu"), ("pipeline", 4, 20, "cpu")],
              runs)
        check(all(m == "tiny_cnn" and i == clip and fps > 0 for _, _, _, _, m, i, fps in runs),
              runs)
        r = run(exe, "info", bench_db)
        check(r.returncode == 0 and "benchmark runs" in r.stdout and "per_frame" in r.stdout,
              r.stdout)
        root = ET.parse(svg).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        bars = [e for e in root.iter(ns + "rect") if e.find(ns + "title") is not None]
        check(len(bars) == 3 and all(float(b.get("height")) > 0 for b in bars),
              "3 bars in the chart: %d" % len(bars))
        labels = [t.text for t in root.iter(ns + "text")]
        check("per-frame" in labels and "batch 4" in labels and "cpu f32" in labels, labels)

        # bench on several files, two at once: every frame counted, the input named
        rotated = os.path.join(samples, "rotated90_64x48.mp4")
        r = run(exe, "bench", "--model", tiny, "--batch", "4", "--decoders", "2", "--json",
                clip, rotated)
        rows = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
        check(r.returncode == 0 and len(rows) == 2, "bench of 2 files: %d %r" % (r.returncode,
                                                                               r.stderr))
        check(all(row["frames"] == 30 and row["end_to_end_fps"] > 0 and row["infer_fps"] > 0
                  for row in rows), rows)
        r = run(exe, "bench", "--model", tiny, "--batch", "4", clip, rotated)
        check(r.returncode == 0 and "testsrc_64x48.mp4 and 1 more file (30 frames)" in r.stdout,
              r.stdout)

        r = run(exe, "bench", "--infer-only", "--model", tiny, "--batch", "1,2", "--runs", "3",
                "--json")
        rows = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
        check(r.returncode == 0 and len(rows) == 2, r.stdout + r.stderr)
        check(all(row["infer_fps"] > 0 and len(row["all_fps"]) == 3 and
                  row["mode"] == "infer_only" for row in rows), rows)
        check(rows[0]["speedup_vs_per_frame"] == 1.0, rows)
        r = run(exe, "bench", "--infer-only", "--model", tiny, "--runs", "1")
        check(r.returncode == 0 and "infer_only" in r.stdout and "vs per-frame" in r.stdout,
              r.stdout)
        r = run(exe, "bench", "--device", "gpu", "--infer-only", "--model", tiny, "--runs", "1")
        if r.returncode == 3:  # no CUDA in this build, or no GPU: one line, named
            check(len(r.stderr.strip().splitlines()) == 1 and "gpu" in r.stderr, r.stderr)
        r = run(exe, "bench", "--device", "all", "--infer-only", "--model", tiny, "--runs", "1",
                "--json")
        check(r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["device"] == "cpu",
              r.stdout + r.stderr)
        for bad in (["--plot", svg, clip], ["--device", "all", clip], ["--infer-only", clip]):
            r = run(exe, "--model", tiny, *bad)
            check(r.returncode == 2 and "is for bench" in r.stderr, "%s: %s" % (bad, r.stderr))
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
        # a zero-byte file in a directory is a failed input with its one line, not passed over
        # (the walk probes files, and an empty one probes as nothing)
        open(os.path.join(tmp, "tree", "sub", "empty.mp4"), "wb").close()
        r = run(exe, "--model", tiny, "-o", os.path.join(tmp, "d.db"), "--json",
                os.path.join(tmp, "tree"))
        s = json.loads(r.stdout)
        empty = [f for f in s["files"] if f["path"].endswith("empty.mp4")]
        check(r.returncode == 1 and s["failed"] == 1 and s["skipped"] == 1 and
              len(empty) == 1 and empty[0]["error"] == "empty file" and
              r.stderr.strip().splitlines() == ["vidfeat: %s: empty file" % empty[0]["path"]],
              "a zero-byte file in a directory: exit %d %s %r" % (r.returncode, s, r.stderr))
        print("cli: exit codes, messages, json, info, similar, models, version, directories ok")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
