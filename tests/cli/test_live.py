#!/usr/bin/python3
"""The command as people watch it and use it while it runs.

1. `vidfeat similar` on a database a run is writing: each query answers (exit 0, nothing on
   stderr), at least three of them while the run's rows of the streamed file grow, and every
   neighbour it gives is a stored row with its cosine (checked against the finished database);
   the run ends with every frame.
2. The progress line on a terminal (a pseudo-terminal): redrawn in place ("\\r\\033[K") with a
   file counter, growing frame counts out of the file's frame count, frames/s and an ETA, and
   cleared before the per-file lines and the summary; on a pipe there is none.

usage: test_live.py VIDFEAT MODELS_DIR SAMPLES_DIR      (clips are made with the ffmpeg CLI)
"""
import json
import os
import pty
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from vfcheck import check, cosine, rows


def make_clip(path, seconds, size="320x240", fmt=()):
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=%s:rate=25:duration=%d" % (size, seconds), "-c:v", "mpeg4",
                    "-q:v", "5", *fmt, path], check=True)


def stored(db):
    """{(path, frame_index): vector} of every stored row."""
    return {k: np.frombuffer(v, np.float32) for k, (_, _, v) in rows(db).items()}


def similar_while_writing(exe, model, clip, tmp):
    db = os.path.join(tmp, "live.db")
    r = subprocess.run([exe, "--model", model, "-o", db, clip], capture_output=True, text=True)
    check(r.returncode == 0, "first run: %s" % r.stderr)
    # a 12 s clip streamed through a FIFO in small pieces, so the run writes for seconds
    ts = os.path.join(tmp, "long.ts")
    make_clip(ts, 12, fmt=("-f", "mpegts"))
    data = open(ts, "rb").read()
    fifo = os.path.join(tmp, "streamed.ts")
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb", buffering=0) as f:
            for k in range(0, len(data), 16384):
                f.write(data[k:k + 16384])
                time.sleep(0.05)

    writer = threading.Thread(target=feed, daemon=True)
    run = subprocess.Popen([exe, "--model", model, "--batch", "4", "-o", db, "--json", fifo],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer.start()
    answers, during = [], 0
    deadline = time.time() + 120
    while run.poll() is None and time.time() < deadline:
        con = sqlite3.connect(db)
        before = con.execute("SELECT count(*) FROM features f JOIN extractions e ON e.id = "
                             "f.extraction_id JOIN videos v ON v.id = e.video_id WHERE "
                             "v.path LIKE '%streamed.ts'").fetchone()[0]
        con.close()
        q = subprocess.run([exe, "similar", db, "--video", clip, "--at", "0.5", "-k", "5",
                            "--json"], capture_output=True, text=True, timeout=60)
        check(q.returncode == 0 and q.stderr == "",
              "similar during the run: exit %d %r" % (q.returncode, q.stderr))
        answers.append(json.loads(q.stdout))
        if before > 0 and run.poll() is None:
            during += 1
        time.sleep(0.2)
    out, err = run.communicate(timeout=60)
    writer.join(5)
    check(run.returncode == 0, "the writing run: exit %d %s" % (run.returncode, err))
    frames = json.loads(out)["files"][0]["frames"]
    check(frames == 300, "the streamed clip: %d frames of 300" % frames)
    check(during >= 3, "only %d queries while the run's rows grew (%d in all)"
          % (during, len(answers)))
    rows = stored(db)
    query = rows[(os.path.abspath(clip), answers[0]["query"]["frame_index"])]
    for a in answers:
        sims = [n["similarity"] for n in a["neighbours"]]
        check(len(sims) == 5 and sims == sorted(sims, reverse=True), "neighbours: %s" % a)
        for n in a["neighbours"]:
            key = (n["path"], n["frame_index"])
            check(key in rows, "neighbour %s is not a stored row" % (key,))
            check(abs(cosine(rows[key], query) - n["similarity"]) <= 1e-5,
                  "neighbour %s: similarity %.6f, stored vectors give %.6f"
                  % (key, n["similarity"], cosine(rows[key], query)))
    print("ok similar during a run: %d queries, %d while the run's rows grew; every neighbour "
          "a stored row with its cosine; the run stored all 300 frames" % (len(answers), during))


def progress_on_terminal(exe, model, clip, tmp):
    long = os.path.join(tmp, "long.mp4")
    make_clip(long, 8)
    args = [exe, "--model", model, "--batch", "8", "-o", os.path.join(tmp, "tty.db"), long, clip]
    master, slave = pty.openpty()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        out += chunk
    p.wait(timeout=60)
    os.close(master)
    check(p.returncode == 0, "on a terminal: exit %d %r" % (p.returncode, out[-500:]))
    text = out.decode("utf-8", "replace")
    draws = text.split("\r\x1b[K")
    lines = re.findall(r"^\[(\d)/2\] (\S+)  (\d+)(?:/(\d+))? frames  ([0-9.]+) frames/s"
                       r"(  ETA \d+ s)?$", "\n".join(draws), re.M)
    first = [(int(n), int(m) if m else 0, eta) for k, name, n, m, fps, eta in lines
             if k == "1" and name == "long.mp4"]
    check(len(first) >= 5, "%d progress draws for the first file: %r" % (len(first), text[:400]))
    counts = [n for n, _, _ in first]
    check(counts == sorted(counts) and counts[-1] <= 200 and
          all(m == 200 for n, m, _ in first if n < 200), "progress counts %s (of 200)" % first)
    check(any(eta for n, _, eta in first if n < 200), "no ETA while frames remain")
    check(any(k == "2" for k, *_ in lines), "no progress for the second file")
    tail = draws[-1]
    check(tail.startswith("vidfeat: ") and "2 done, 0 failed" in tail and "frames/s" not in
          tail.splitlines()[-1], "the screen does not end with the summary: %r" % tail)
    r = subprocess.run(args[:-4] + ["-o", os.path.join(tmp, "pipe.db"), long, clip],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "\r" not in r.stderr and "frames/s  ETA" not in r.stderr,
          "progress on a pipe: %r" % r.stderr[:300])
    print("ok progress on a terminal: %d draws of the first file (%d..%d of 200, ETA shown), "
          "cleared before the summary; none on a pipe" % (len(first), counts[0], counts[-1]))


def main():
    exe, models, samples = sys.argv[1:4]
    if not shutil.which("ffmpeg"):
        print("skipped: no ffmpeg CLI to make the clips")
        return 77
    tmp = tempfile.mkdtemp(prefix="vidfeat_live_")
    try:
        model = os.path.join(models, "tiny_cnn.onnx")
        clip = os.path.join(samples, "testsrc_64x48.mp4")
        similar_while_writing(exe, model, clip, tmp)
        progress_on_terminal(exe, model, clip, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
