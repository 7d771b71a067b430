#!/usr/bin/python3
"""What finding reused footage costs at archive scale: the numbers behind README's "Finding
reused footage" table. Prints one table; numbers are measured here, never asserted.

    scripts/bench-matches.py [--build DIR] [--frames 100000] [--dim 1280] [--exact]

An SQLite database of FRAMES vectors written into vidfeat's tables: files of 100 frames at one
frame a second, each a film of shots (3-8 s, each moving slowly, as a pan does); one file in ten
also shows 20-40 s of another file (its vectors with noise, as a re-encoded copy has) at a random
place. Then `vidfeat index` (the kind auto chooses), `vidfeat matches` through it (wall time and
the search's and the alignment's own times), and, with --exact, `vidfeat matches --exact` (an
exact index in memory). Found: planted copies reported with both files' times within 1 s; false:
matches where the two files do not show the same moment (a copy of a copy does).
"""
import argparse
import json
import os
import sqlite3
import subprocess
import tempfile
import time

import numpy as np
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vfbench import cpu_name  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PER_FILE = 100  # frames, one a second


def film(rng, dim, seconds):
    """A file's own frames: shots of 3-8 s, each a direction drifting slowly."""
    out, t = [], 0
    while t < seconds:
        shot = int(rng.integers(3, 9))
        base, drift = rng.standard_normal(dim), rng.standard_normal(dim)
        for i in range(shot):
            out.append(base + 0.3 * i * drift)
        t += shot
    v = np.array(out[:seconds], dtype="<f4")
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def make_db(vidfeat, db, frames, dim, rng):
    sample = os.path.join(ROOT, "samples", "testsrc_64x48.mp4")
    subprocess.run([vidfeat, "--model", os.path.join(ROOT, "models", "tiny_cnn.onnx"), "-o", db,
                    "-q", sample], check=True)  # the schema
    con = sqlite3.connect(db)
    model_id = con.execute("INSERT INTO models (name, file_sha256, layer, dim, dtype,"
                           " preprocessing) VALUES ('bench', 'none', 'pool', ?, 'float32',"
                           " 'bench')", (dim,)).lastrowid
    n_files = frames // PER_FILE
    own = [film(rng, dim, PER_FILE) for _ in range(n_files)]
    origin = [[(f, i) for i in range(PER_FILE)] for f in range(n_files)]  # what each frame shows
    planted = []
    for f in range(0, n_files, 10):  # one file in ten shows part of another (one not changed)
        src = int(rng.integers(n_files))
        if src % 10 == 0:
            src += 1
        length = int(rng.integers(20, 41))
        s0, d0 = int(rng.integers(0, PER_FILE - length)), int(rng.integers(0, PER_FILE - length))
        noise = rng.standard_normal((length, dim)).astype("<f4")
        noise *= 0.2 / np.linalg.norm(noise, axis=1, keepdims=True)
        own[f][d0:d0 + length] = own[src][s0:s0 + length] + noise
        origin[f][d0:d0 + length] = origin[src][s0:s0 + length]
        planted.append((src, s0, f, d0, length))
    for f in range(n_files):
        vid = con.execute("INSERT INTO videos (path, size, mtime) VALUES (?, 1, 1)",
                          ("/archive/bench/f%06d.mp4" % f,)).lastrowid
        ext = con.execute("INSERT INTO extractions (id, video_id, model_id, sampling, status,"
                          " precision, frames) VALUES ((SELECT last + 1 FROM extraction_ids), ?,"
                          " ?, 'fps=1', 'done', 'f32', ?) RETURNING id",
                          (vid, model_id, PER_FILE)).fetchone()[0]
        con.executemany("INSERT INTO features (extraction_id, frame_index, pts, t, vec) VALUES"
                        " (?, ?, ?, ?, ?)",
                        [(ext, i, i, float(i), own[f][i].tobytes()) for i in range(PER_FILE)])
    con.commit()
    con.close()
    return planted, origin


def score(matches, planted, origin):
    """Planted copies found (both files' times within 1 s), and matches that are not true: the
    two files do not show the same frame of the same film at the match's middle (a copy of a
    copy is true)."""
    def name(f):
        return "/archive/bench/f%06d.mp4" % f

    found = 0
    for src, s0, dst, d0, length in planted:
        for m in matches:
            for a, a0, b, b0 in ((src, s0, dst, d0), (dst, d0, src, s0)):
                if (m["a"] == name(a) and m["b"] == name(b) and abs(m["a_start"] - a0) <= 1 and
                        abs(m["a_end"] - (a0 + length - 1)) <= 1 and
                        abs(m["b_start"] - b0) <= 1 and abs(m["b_end"] - (b0 + length - 1)) <= 1):
                    found += 1
                    break
            else:
                continue
            break
    false = []
    for m in matches:
        fa, fb = int(m["a"][-10:-4]), int(m["b"][-10:-4])
        ta, tb = (m["a_start"] + m["a_end"]) / 2, (m["b_start"] + m["b_end"]) / 2
        oa, ob = origin[fa][min(int(round(ta)), PER_FILE - 1)], origin[fb][
            min(int(round(tb)), PER_FILE - 1)]
        if oa[0] != ob[0] or abs(oa[1] - ob[1]) > 1:
            false.append(m)
    for m in false[:5]:
        print("# not true: %s %.0f-%.0f | %s %.0f-%.0f | %.3f" % (
            m["a"], m["a_start"], m["a_end"], m["b"], m["b_start"], m["b_end"], m["score"]))
    return found, len(false)


def matches(vidfeat, db, extra):
    t0 = time.time()
    r = subprocess.run([vidfeat, "matches", db, "--model", "bench", "--json", *extra],
                       capture_output=True, text=True)
    wall = time.time() - t0
    if r.returncode != 0:
        raise SystemExit("vidfeat matches failed: " + r.stderr)
    return json.loads(r.stdout), wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--frames", type=int, default=100000)
    ap.add_argument("--dim", type=int, default=1280)
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--probe", type=int, nargs="*", default=[],
                    help="also matches --probe N for each N")
    a = ap.parse_args()
    vidfeat = os.path.join(a.build, "src", "cli", "vidfeat")
    rng = np.random.default_rng(5)
    print("# %s, %d cores; %s frames of %d floats, 1 frame/s, one file in ten showing 20-40 s of"
          " another" % (cpu_name(), os.cpu_count(), "{:,}".format(a.frames), a.dim))
    with tempfile.TemporaryDirectory(prefix="vidfeat_bench_matches_") as tmp:
        db = os.path.join(tmp, "bench.db")
        t0 = time.time()
        planted, origin = make_db(vidfeat, db, a.frames, a.dim, rng)
        print("# database written in %.0f s (%.1f GB), %d copies planted" % (
            time.time() - t0, os.path.getsize(db) / 1e9, len(planted)))
        t0 = time.time()
        r = subprocess.run([vidfeat, "index", db, "--model", "bench", "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("vidfeat index failed: " + r.stderr)
        index_s = time.time() - t0
        kind = json.loads(r.stdout)["kind"]
        print("| search | index build s | matches wall s | search s | align s | pairs aligned |"
              " copies found | false matches |")
        print("|---|---|---|---|---|---|---|---|")
        runs = [("index `%s`" % kind, [], "%.0f" % index_s)]
        for p in a.probe:
            runs.append(("index `%s`, --probe %d" % (kind, p), ["--probe", str(p)], "-"))
        if a.exact:
            runs.append(("exact (in memory)", ["--exact"], "-"))
        for label, extra, built in runs:
            doc, wall = matches(vidfeat, db, extra)
            found, false = score(doc["matches"], planted, origin)
            print("| %s | %s | %.1f | %.1f | %.1f | %d | %d / %d | %d |" % (
                label, built, wall, doc["search_ms"] / 1e3, doc["align_ms"] / 1e3, doc["pairs"],
                found, len(planted), false), flush=True)


if __name__ == "__main__":
    main()
