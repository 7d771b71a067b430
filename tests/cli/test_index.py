#!/usr/bin/python3
"""Search indexes (docs/search.md "Searching an archive") on real FAISS:

- a database whose vectors are made here: 300 files of 100 frames of 64 floats around each
  file's own direction (as a shot's frames are), written into vidfeat's tables under a model
  row of their own; a tiny CNN's real extraction beside it (a second model row);
- recall@10 of `similar` through an index against `similar --exact` over 40 queries, for the
  kinds ivf, hnsw and ivfpq at their default probe (>= 0.95), and the scores of what both return
  equal (the index's candidates are ranked by their exact cosine); auto below 50,000 vectors is
  exact: the same list; --json and -v say how it searched;
- brought up to date: extractions added, removed and redone in the database; `info` says what
  the index lacks and holds no longer, `index` again adds and removes exactly those, then
  `info` says current; an extraction removed from the database without indexing again is never
  returned (checked on read), also where the index (HNSW) keeps it;
- bad index files: cut short, garbage, another model's, another kind asked for: one line naming
  the file, exit 3 (--exact still searches); a build killed midway leaves the index as it was
  and the next build removes its temporary file;
- PostgreSQL: an index built from a PostgreSQL database (--index PATH, recorded there) answers
  as the same index built from SQLite.

usage: test_index.py VIDFEAT MODELS_DIR SAMPLES_DIR
"""
import json
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

from vfcheck import check

DIM, FILES, FRAMES, SCENES = 64, 300, 100, 20
NEW_ID = "(SELECT last + 1 FROM extraction_ids)"  # as vidfeat gives extraction ids


def connect(db):
    con = sqlite3.connect(db)
    con.execute("PRAGMA foreign_keys = ON")  # as vidfeat: an extraction's vectors go with it
    return con


def run(exe, *args, timeout=300):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)


def unit(v):
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


def add_files(db, model_id, first, count, rng, scenes):
    """count synthetic done extractions (files first..first+count-1), FRAMES vectors each, each
    file near one of the scenes (so its nearest frames are also in other files)."""
    con = connect(db)
    for f in range(first, first + count):
        path = "/archive/synthetic/file%04d.mp4" % f
        scene = scenes[f % SCENES]
        centre = unit([c + rng.gauss(0, 0.12) for c in scene])
        vid = con.execute("INSERT INTO videos (path, size, mtime) VALUES (?, 1, 1)",
                          (path,)).lastrowid
        ext = con.execute(
            "INSERT INTO extractions (id, video_id, model_id, sampling, status, precision, frames)"
            " VALUES (%s, ?, ?, 'all', 'done', 'f32', ?) RETURNING id" % NEW_ID,
            (vid, model_id, FRAMES)).fetchone()[0]
        rows, drift = [], [0.0] * DIM
        for i in range(FRAMES):  # a slow walk from the file's direction, as a shot moves
            drift = [d + rng.gauss(0, 0.015) for d in drift]
            v = [c + d + rng.gauss(0, 0.03) for c, d in zip(centre, drift)]
            rows.append((ext, i, i * 1000, i / 25.0, struct.pack("<%df" % DIM, *v)))
        con.executemany("INSERT INTO features (extraction_id, frame_index, pts, t, vec)"
                        " VALUES (?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()


def similar(exe, db, path, at, *extra, k=10):
    r = run(exe, "similar", db, "--model", "synthetic", "--video", path, "--at", str(at),
            "-k", str(k), "--json", *extra)
    check(r.returncode == 0, "similar %s: %s" % (" ".join(extra), r.stderr))
    return json.loads(r.stdout)


def hits(doc):
    return [(h["path"], h["frame_index"]) for h in doc["neighbours"]]


def main():
    exe, models, samples = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="vidfeat_index_")
    rng = random.Random(28)
    try:
        db = os.path.join(tmp, "archive.db")
        # the schema and a real model row, from a real run
        r = run(exe, "--model", os.path.join(models, "tiny_cnn.onnx"), "-o", db, "-q",
                os.path.join(samples, "testsrc_64x48.mp4"))
        check(r.returncode == 0, "tiny run: %s" % r.stderr)
        con = connect(db)
        model_id = con.execute(
            "INSERT INTO models (name, file_sha256, layer, dim, dtype, preprocessing) VALUES"
            " ('synthetic', 'none', 'embed', ?, 'float32', 'synthetic')", (DIM,)).lastrowid
        con.commit()
        con.close()
        scenes = [unit([rng.gauss(0, 1) for _ in range(DIM)]) for _ in range(SCENES)]
        add_files(db, model_id, 0, FILES, rng, scenes)
        queries = [("/archive/synthetic/file%04d.mp4" % rng.randrange(FILES),
                    rng.randrange(FRAMES) / 25.0) for _ in range(25)]
        exact = [similar(exe, db, p, t, "--exact") for p, t in queries]
        check(all(d["search"] == "exact" and d["index"] is None for d in exact), "exact: %r"
              % exact[0])

        # auto below 50,000 vectors: exact (Flat), the very same answers
        r = run(exe, "index", db, "--model", "synthetic", "--json")
        check(r.returncode == 0, "index auto: %s" % r.stderr)
        rep = json.loads(r.stdout)
        check(rep["kind"] == "Flat" and rep["vectors"] == FILES * FRAMES and rep["created"] and
              rep["added"] == FILES * FRAMES and rep["index"] == db + ".synthetic.embed.faiss",
              "auto: %r" % rep)
        for (p, t), want in zip(queries[:10], exact):
            got = similar(exe, db, p, t)
            check(got["search"] == "index Flat" and hits(got) == hits(want) and
                  got["index"] == rep["index"], "Flat: %r" % got)
        print("ok auto below 50,000 vectors is exact: the exact scan's answers")

        for kind in ("ivf", "hnsw", "ivfpq"):
            r = run(exe, "index", db, "--model", "synthetic", "--kind", kind, "--rebuild",
                    "--json")
            check(r.returncode == 0, "index %s: %s" % (kind, r.stderr))
            rep = json.loads(r.stdout)
            found, worst = 0, 1.0
            for (p, t), want in zip(queries, exact):
                got = similar(exe, db, p, t)
                check(got["search"] == "index " + rep["kind"] and got["candidates"] >= 10,
                      "%s: %r" % (kind, got))
                wanted = {h: s["similarity"] for h, s in zip(hits(want), want["neighbours"])}
                for h, s in zip(hits(got), got["neighbours"]):
                    if h in wanted:
                        found += 1
                        check(abs(s["similarity"] - wanted[h]) < 1e-6, "%s: a score differs" % kind)
                worst = min(worst, len(set(hits(got)) & set(wanted)) / 10)
            recall = found / (10 * len(queries))
            print("%s (%s): recall@10 %.3f (worst query %.1f), %d bytes" %
                  (kind, rep["kind"], recall, worst, rep["bytes"]))
            check(recall >= 0.95, "%s: recall@10 %.3f" % (kind, recall))
        print("ok ivf, hnsw and ivfpq: recall@10 >= 0.95 at their default probe, exact scores")

        # verbose says how; --exact still scans
        r = run(exe, "similar", db, "--model", "synthetic", "--video", queries[0][0], "--at",
                str(queries[0][1]), "-v")
        check(r.returncode == 0 and "vidfeat: search: index" in r.stderr and
              "candidates ranked by exact cosine" in r.stderr, "-v: %r" % r.stderr)

        # brought up to date (the index is ivfpq now)
        path = db + ".synthetic.embed.faiss"
        con = connect(db)
        gone = [e for (e,) in con.execute(
            "SELECT id FROM extractions WHERE model_id = ? ORDER BY id LIMIT 10", (model_id,))]
        con.execute("DELETE FROM extractions WHERE id IN (%s)" % ",".join(map(str, gone)))
        redo = con.execute("SELECT e.id, e.video_id FROM extractions e WHERE model_id = ?"
                           " ORDER BY id DESC LIMIT 1", (model_id,)).fetchone()
        vecs = con.execute("SELECT frame_index, pts, t, vec FROM features WHERE"
                           " extraction_id = ?", (redo[0],)).fetchall()
        con.execute("DELETE FROM extractions WHERE id = ?", (redo[0],))
        new = con.execute("INSERT INTO extractions (id, video_id, model_id, sampling, status,"
                          " precision, frames) VALUES (%s, ?, ?, 'all', 'done', 'f32', ?)"
                          " RETURNING id" % NEW_ID, (redo[1], model_id, FRAMES)).fetchone()[0]
        check(new != redo[0], "an extraction id given twice")
        con.executemany("INSERT INTO features (extraction_id, frame_index, pts, t, vec) VALUES"
                        " (?, ?, ?, ?, ?)", [(new, *row) for row in vecs])
        con.commit()
        con.close()
        add_files(db, model_id, FILES, 20, rng, scenes)
        r = run(exe, "info", db, "--summary", "--json")
        ix = [i for i in json.loads(r.stdout)["indexes"] if i["model"] == "synthetic"][0]
        check((ix["lacks_vectors"], ix["lacks_files"], ix["gone_vectors"], ix["gone_files"]) ==
              (21 * FRAMES, 21, 11 * FRAMES, 11) and ix["present"] and ix["problem"] is None,
              "info before: %r" % ix)
        check("extractions" not in json.loads(r.stdout), "--summary lists the extractions")
        r = run(exe, "index", db, "--model", "synthetic", "--json")
        rep = json.loads(r.stdout)
        check(r.returncode == 0 and not rep["created"] and rep["added"] == 21 * FRAMES and
              rep["removed"] == 11 * FRAMES and rep["vectors"] == (FILES + 10) * FRAMES,
              "index again: %r %s" % (rep, r.stderr))
        r = run(exe, "info", db)
        check(r.returncode == 0 and "index %s: %s" % (path, rep["kind"]) in r.stdout and
              r.stdout.rstrip().endswith(": current"), "info after: %r" % r.stdout[-300:])
        print("ok index again adds %d and removes %d vectors (the database's changes); info says "
              "what it lacked, then current" % (rep["added"], rep["removed"]))

        # checked on read: a file removed from the database, not from the index, never comes
        for kind in ("ivf", "hnsw"):
            r = run(exe, "index", db, "--model", "synthetic", "--kind", kind, "--rebuild")
            check(r.returncode == 0, r.stderr)
            con = connect(db)
            victim = con.execute("SELECT e.id, v.path FROM extractions e JOIN videos v ON"
                                 " v.id = e.video_id WHERE e.model_id = ? ORDER BY e.id DESC"
                                 " LIMIT 1", (model_id,)).fetchone()
            # a copy of the victim's vectors under another file: its query finds both
            copy = con.execute("INSERT INTO videos (path, size, mtime) VALUES (?, 1, 1)",
                               (victim[1] + ".copy.%s" % kind,)).lastrowid
            cext = con.execute("INSERT INTO extractions (id, video_id, model_id, sampling, status,"
                               " precision, frames) VALUES (%s, ?, ?, 'all', 'done', 'f32', ?)"
                               " RETURNING id" % NEW_ID, (copy, model_id, FRAMES)).fetchone()[0]
            con.execute("INSERT INTO features (extraction_id, frame_index, pts, t, vec) SELECT ?,"
                        " frame_index, pts, t, vec FROM features WHERE extraction_id = ?",
                        (cext, victim[0]))
            con.commit()
            con.close()
            r = run(exe, "index", db, "--model", "synthetic")
            check(r.returncode == 0, r.stderr)
            before = similar(exe, db, victim[1] + ".copy.%s" % kind, 1.0)
            check(any(p == victim[1] for p, _ in hits(before)), "the victim is not found")
            con = connect(db)
            con.execute("DELETE FROM extractions WHERE id = ?", (victim[0],))
            con.commit()
            con.close()
            after = similar(exe, db, victim[1] + ".copy.%s" % kind, 1.0)
            check(after["search"].startswith("index") and len(after["neighbours"]) == 10 and
                  not any(p == victim[1] for p, _ in hits(after)),
                  "%s returned a removed file: %r" % (kind, hits(after)))
        print("ok a file removed from the database is never returned (IVF and HNSW)")

        # bad index files: one line naming the file, exit 3; --exact still works
        q = ["similar", db, "--model", "synthetic", "--video", queries[0][0], "--at", "0"]
        data = open(path, "rb").read()
        for name, content in (("cut", data[:len(data) // 2]), ("garbage", b"x" * 4096),
                              ("header", data[:40])):
            with open(path, "wb") as f:
                f.write(content)
            r = run(exe, *q)
            check(r.returncode == 3 and r.stderr.count("\n") == 1 and
                  r.stderr.startswith("vidfeat: %s: " % path) and "--exact" in r.stderr,
                  "%s index: %d %r" % (name, r.returncode, r.stderr))
            check(run(exe, *q, "--exact").returncode == 0, "--exact with a %s index" % name)
            r = run(exe, "index", db, "--model", "synthetic")
            check(r.returncode == 3 and path in r.stderr and "--rebuild" in r.stderr,
                  "index over a %s index: %r" % (name, r.stderr))
        r = run(exe, "index", db, "--model", "synthetic", "--rebuild")
        check(r.returncode == 0, r.stderr)
        r = run(exe, "index", db, "--model", "synthetic", "--kind", "hnsw")  # it is Flat
        check(r.returncode == 3 and "the index is Flat, not hnsw" in r.stderr and path in r.stderr,
              "another kind: %r" % r.stderr)
        tiny = run(exe, "index", db, "--model", "tiny_cnn", "--json")
        check(tiny.returncode == 0, tiny.stderr)
        tiny_path = json.loads(tiny.stdout)["index"]
        r = run(exe, *q, "--index", tiny_path)
        check(r.returncode == 3 and "an index of another model" in r.stderr and
              tiny_path in r.stderr, "another model's index: %r" % r.stderr)
        print("ok cut, garbage and foreign indexes: one line naming the file, exit 3; --exact "
              "searches")

        # a build killed midway: the index as it was, the temporary file gone after the next
        before = open(path, "rb").read()
        p = subprocess.Popen([exe, "index", db, "--model", "synthetic", "--kind", "hnsw",
                              "--rebuild"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        p.send_signal(signal.SIGKILL)
        p.wait()
        now = open(path, "rb").read()
        check(now == before or run(exe, *q).returncode == 0, "a killed build left a broken index")
        stale = path + ".tmp%d" % p.pid
        if not os.path.exists(stale):  # it had finished, or not begun writing: make one
            open(stale, "wb").write(b"half")
        check(run(exe, "index", db, "--model", "synthetic").returncode == 0, "after the kill")
        check(not os.path.exists(stale), "the killed build's temporary file is still there")
        print("ok a killed build leaves the index whole; the next one clears its temporary file")

        try:
            from pgserver import PgServer, Unavailable
            server = PgServer()
        except Unavailable as e:
            print("postgresql part skipped: %s" % e)
            return
        with server as pg:
            uri = pg.uri("indexed")
            lite = os.path.join(tmp, "clips.db")
            clips = [os.path.join(samples, n) for n in ("testsrc_64x48.mp4",
                                                        "rotated90_64x48.mp4",
                                                        "one_gop_12s.mp4")]
            model = os.path.join(models, "tiny_cnn.onnx")
            for target in (uri, lite):
                r = run(exe, "--model", model, "-o", target, "-q", *clips)
                check(r.returncode == 0, r.stderr)
            r = run(exe, "index", uri)
            check(r.returncode == 3 and "--index PATH" in r.stderr, "pg without --index: %r"
                  % r.stderr)
            pg_index = os.path.join(tmp, "pg.faiss")
            for target, extra in ((uri, ["--index", pg_index]), (lite, [])):
                r = run(exe, "index", target, "--kind", "hnsw", *extra)
                check(r.returncode == 0, "index %s: %s" % (target, r.stderr))
            answers = []
            for target in (uri, lite):
                r = run(exe, "similar", target, "--video", clips[2], "--at", "4", "-k", "8",
                        "--json")
                check(r.returncode == 0, r.stderr)
                doc = json.loads(r.stdout)
                check(doc["search"] == "index HNSW32", "pg: %r" % doc)
                answers.append([(h["path"], h["frame_index"], h["similarity"])
                                for h in doc["neighbours"]])
            check(answers[0] == answers[1], "PostgreSQL's index answers otherwise: %r" % answers)
            r = run(exe, "info", uri)
            check("index %s: HNSW32" % pg_index in r.stdout and "current" in r.stdout,
                  "pg info: %r" % r.stdout)
            print("ok PostgreSQL: the index recorded there answers as SQLite's")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
