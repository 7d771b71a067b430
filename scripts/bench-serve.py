#!/usr/bin/python3
"""vidfeat serve under load: the numbers behind docs/serve.md's "Under load" table. Prints them
with the CPU's name; nothing is asserted.

    scripts/bench-serve.py [--build DIR] [--vectors 1000000] [--dim 512] [--clients 50]
                           [--seconds 30]

1. An SQLite archive of N synthetic DIM-d vectors (100 frames a file, around 1,000 scenes:
   vfbench.write_archive), plus ten 60 s 1280x720 H.264 clips made by ffmpeg recorded under the
   same model (one vector every 0.5 s), and `vidfeat index` over them (the kind it chooses).
2. `vidfeat serve` on it, and CLIENTS threads asking at once for SECONDS: "more like this"
   (/api/similar, a random stored frame, 24 hits, through the index) and thumbnails
   (/api/thumb, a random time of a random clip: decoded on demand unless the cache holds it),
   half each, over keep-alive connections; meanwhile a worker extracts clips into the same
   database (the tiny CNN, again and again with --force), so the server reads while it writes.
3. Latency per request kind as the clients see it: p50, p99, max, requests/s; errors; and the
   worker's runs (each must succeed).
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import vfbench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIPS, CLIP_S = 10, 60


def add_clips(vidfeat, db, tmp, dim):
    """Ten real clips recorded under the bench model row (random vectors every 0.5 s)."""
    import numpy as np
    clip = os.path.join(tmp, "clip0.mp4")
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i",
                    "testsrc2=s=1280x720:r=25,trim=duration=%d" % CLIP_S, "-c:v", "libx264",
                    "-preset", "veryfast", "-g", "50", "-pix_fmt", "yuv420p", clip], check=True)
    paths = [clip]
    for i in range(1, CLIPS):
        paths.append(os.path.join(tmp, "clip%d.mp4" % i))
        shutil.copy(clip, paths[-1])
    con = sqlite3.connect(db)
    model_id = con.execute("SELECT id FROM models WHERE name = 'bench'").fetchone()[0]
    rng = np.random.default_rng(5)
    for p in paths:
        vid = con.execute("INSERT INTO videos (path, size, mtime) VALUES (?, 1, 1)",
                          (p,)).lastrowid
        n = CLIP_S * 2
        ext = con.execute("INSERT INTO extractions (id, video_id, model_id, sampling, status,"
                          " precision, frames) VALUES ((SELECT last + 1 FROM extraction_ids), ?,"
                          " ?, 'all', 'done', 'f32', ?) RETURNING id",
                          (vid, model_id, n)).fetchone()[0]
        vecs = rng.standard_normal((n, dim)).astype("<f4")
        con.executemany("INSERT INTO features (extraction_id, frame_index, pts, t, vec) VALUES"
                        " (?, ?, ?, ?, ?)",
                        [(ext, i, i, i / 2.0, vecs[i].tobytes()) for i in range(n)])
    con.commit()
    con.close()
    return paths


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--vectors", type=int, default=1000000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args()
    vidfeat = os.path.join(a.build, "src", "cli", "vidfeat")
    print("# %s, %d cores; %s vectors of %d; %d clients for %.0f s, a worker writing" % (
        vfbench.cpu_name(), os.cpu_count(), "{:,}".format(a.vectors), a.dim, a.clients,
        a.seconds), flush=True)
    with tempfile.TemporaryDirectory(prefix="vidfeat_bench_serve_") as tmp:
        db = os.path.join(tmp, "archive.db")
        t0 = time.time()
        vfbench.write_archive(vidfeat, db, a.vectors, a.dim,
                              {"name": "bench", "file_sha256": "none", "layer": "pool",
                               "preprocessing": "bench"}, 11)
        clips = add_clips(vidfeat, db, tmp, a.dim)
        r = subprocess.run([vidfeat, "index", db, "--model", "bench", "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("vidfeat index: " + r.stderr)
        kind = json.loads(r.stdout)["kind"]
        print("# archive written and indexed (%s) in %.0f s" % (kind, time.time() - t0),
              flush=True)

        srv = subprocess.Popen([vidfeat, "serve", db, "--model", "bench", "--port", "0",
                                "--root", "/"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        url = srv.stdout.readline().strip()
        host, port = url[len("http://"):].rstrip("/").rsplit(":", 1)
        files = a.vectors // 100
        stop = time.time() + a.seconds
        lat = {"similar": [], "thumb": []}
        errors = []
        lock = threading.Lock()

        def client(seed):
            rng = random.Random(seed)
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            while time.time() < stop:
                if rng.random() < 0.5:
                    kind_ = "similar"
                    q = {"path": "/archive/bench/f%07d.mp4" % rng.randrange(files),
                         "t": rng.randrange(100) / 25.0, "k": 24}
                else:
                    kind_ = "thumb"
                    q = {"path": rng.choice(clips), "t": rng.randrange(CLIP_S * 2) / 2.0}
                t1 = time.perf_counter()
                try:
                    conn.request("GET", "/api/%s?%s" % (kind_, urllib.parse.urlencode(q)))
                    resp = conn.getresponse()
                    resp.read()
                    ok = resp.status == 200
                except (OSError, http.client.HTTPException) as e:
                    ok = False
                    conn.close()
                    conn = http.client.HTTPConnection(host, int(port), timeout=60)
                    resp = e
                ms = (time.perf_counter() - t1) * 1e3
                with lock:
                    if ok:
                        lat[kind_].append(ms)
                    else:
                        errors.append("%s: %s" % (kind_, getattr(resp, "status", resp)))
            conn.close()

        runs = []

        def worker():
            sample = os.path.join(ROOT, "samples", "one_gop_12s.mp4")
            while time.time() < stop:
                w = subprocess.run([vidfeat, "--model", os.path.join(ROOT, "models",
                                                                      "tiny_cnn.onnx"),
                                    "--force", "-q", "-o", db, sample], capture_output=True,
                                   text=True)
                runs.append(w.returncode)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
        writer = threading.Thread(target=worker)
        writer.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        writer.join()
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)
        print("| request | requests | per s | p50 ms | p99 ms | max ms |")
        print("|---|---|---|---|---|---|")
        for k, v in lat.items():
            print("| %s | %d | %.1f | %.1f | %.1f | %.1f |" % (
                "more like this (/api/similar, index %s)" % kind if k == "similar" else
                "thumbnail (/api/thumb, 720p H.264)", len(v), len(v) / a.seconds, pct(v, 50),
                pct(v, 99), max(v) if v else float("nan")))
        print("# errors: %d%s; the worker's runs meanwhile: %d, exit statuses %s" % (
            len(errors), (" (" + "; ".join(sorted(set(errors))[:5]) + ")") if errors else "",
            len(runs), sorted(set(runs))))


if __name__ == "__main__":
    main()
