#!/usr/bin/python3
"""How far one database carries many workers (issue: archive scale). Starts its own PostgreSQL
(tests/cli/pgserver.py: initdb and pg_ctl in a temporary directory, 127.0.0.1) and prints:

  claims     N workers (processes, own connections) claiming, beginning and finishing files of
             a queue until it is empty: claims/s, claim latency p50/p99/max
  vectors    N workers each writing batches of 32 vectors of 2048 floats (COPY): vectors/s
  rerun      vidfeat over FILES files that the database already has done (SQLite and
             PostgreSQL): seconds for the run that finds them all done

usage: scripts/bench-workers.py [--build DIR] [--workers 8,32,64] [--items 20000]
                                [--rerun-files 100000]
Numbers are this machine's (the CPU is printed); compare only within one run.
"""
import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cli"))
from pgserver import PgServer  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vfbench import cpu_name  # noqa: E402


def bench(tool, uri, mode, n, amount):
    r = subprocess.run([tool, uri, mode, str(n), str(amount)], capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        raise RuntimeError("%s %s %d: %s" % (tool, mode, n, r.stderr))
    return dict(kv.split("=") for kv in r.stdout.split())


def make_done_db(kind, pg, exe, model, files, clip, tmp):
    """A database holding a done extraction of every file in files, as a real run would have
    left it: one real run for the schema and the model row, then the rows copied per file."""
    if kind == "sqlite":
        db = os.path.join(tmp, "rerun.db")
    else:
        db = pg.uri("rerun")
    r = subprocess.run([exe, "--model", model, "-o", db, clip], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    rows = []
    for i, f in enumerate(files):
        st = os.stat(f)
        # the mtime as vidfeat computes it (seconds + nanoseconds * 1e-9, in doubles)
        mtime = float(st.st_mtime_ns // 10**9) + (st.st_mtime_ns % 10**9) * 1e-9
        rows.append((i + 100, f, st.st_size, "%.17g" % mtime))
    if kind == "sqlite":
        con = sqlite3.connect(db)
        model_id, sampling, prec = con.execute(
            "SELECT model_id, sampling, precision FROM extractions").fetchone()
        con.executemany("INSERT INTO videos (id, path, size, mtime) VALUES (?, ?, ?, ?)",
                        [(i, p, s, float(m)) for i, p, s, m in rows])
        con.executemany("INSERT INTO extractions (video_id, model_id, sampling, status,"
                        " precision, frames) VALUES (?, ?, ?, 'done', ?, 1)",
                        [(i, model_id, sampling, prec) for i, _, _, _ in rows])
        con.commit()
        con.close()
        return db
    name = db.rsplit("/", 1)[1]
    data = "".join("%d\t%s\t%d\t%s\n" % r for r in rows)
    path = os.path.join(tmp, "videos.tsv")
    with open(path, "w") as f:
        f.write(data)
    os.chmod(path, 0o644)
    os.chmod(tmp, 0o755)
    pg.psql(name, "CREATE TEMP TABLE v (id bigint, path text, size bigint, mtime float8);"
                  " COPY v FROM '%s';"
                  " INSERT INTO videos (id, path, size, mtime) SELECT * FROM v;"
                  " INSERT INTO extractions (video_id, model_id, sampling, status, precision,"
                  " frames) SELECT v.id, e.model_id, e.sampling, 'done', e.precision, 1 FROM v,"
                  " (SELECT * FROM extractions LIMIT 1) e" % path)
    return db


def rerun(kind, pg, exe, model, n, tmp):
    d = os.path.join(tmp, "files")
    os.makedirs(d, exist_ok=True)
    files = []
    for i in range(n):  # small regular files: the rerun only stats them
        p = os.path.join(d, "clip%07d.mp4" % i)
        with open(p, "wb") as f:
            f.write(b"x" * (i % 97 + 1))
        files.append(p)
    clip = os.path.join(tmp, "real.mp4")
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=64x48:rate=25", "-t", "1", "-c:v", "libx264", clip], check=True)
    db = make_done_db(kind, pg, exe, model, files, clip, tmp)
    listing = os.path.join(tmp, "list.txt")
    with open(listing, "w") as f:
        f.write("\n".join(files) + "\n")
    t0 = time.time()
    r = subprocess.run([exe, "--model", model, "-o", db, "--files-from", listing, "--json"],
                       capture_output=True, text=True, timeout=3600)
    dt = time.time() - t0
    if r.returncode != 0 or '"skipped":%d' % n not in r.stdout.replace(" ", ""):
        raise RuntimeError("rerun: %d %s" % (r.returncode, r.stderr[-500:]))
    shutil.rmtree(d)
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--workers", default="8,32,64")
    ap.add_argument("--items", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rerun-files", type=int, default=100000)
    a = ap.parse_args()
    tool = os.path.join(a.build, "tests", "vf_bench_store")
    exe = os.path.join(a.build, "src", "cli", "vidfeat")
    model = os.path.join(HERE, "..", "models", "tiny_cnn.onnx")
    print("CPU: %s, %d cores" % (cpu_name(), os.cpu_count()))
    tmp = tempfile.mkdtemp(prefix="vidfeat_benchw_")
    try:
        with PgServer() as pg:
            for n in [int(x) for x in a.workers.split(",")]:
                r = bench(tool, pg.uri("claims%d" % n), "claims", n, a.items)
                print("claims   workers=%3d  %6s claims/s  p50 %6s ms  p99 %6s ms  max %7s ms"
                      % (n, r["claims_per_s"], r["p50_ms"], r["p99_ms"], r["max_ms"]))
            for n in [int(x) for x in a.workers.split(",")]:
                r = bench(tool, pg.uri("vectors%d" % n), "vectors", n, a.seconds)
                print("vectors  workers=%3d  %6s 2048-d vectors/s stored" %
                      (n, r["vectors_per_s"]))
            if a.rerun_files:
                for kind in ("sqlite", "postgresql"):
                    dt = rerun(kind, pg, exe, model, a.rerun_files, tmp)
                    print("rerun    %-10s %d done files: %.2f s (%.3f ms a file)" %
                          (kind, a.rerun_files, dt, 1e3 * dt / a.rerun_files))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
