#!/usr/bin/python3
"""The PostgreSQL store against a real server (started here, see pgserver.py): the same inputs
extracted into SQLite and into PostgreSQL give the same outcomes and the same rows - frame,
pts, t and every vector bit for bit, float32 and float16 - a rerun skips what is done, info and
similar read it, and the password in the URI is never printed. An unreachable server is one
line and exit 3. Exits 77 (saying why) when PostgreSQL is not installed.

usage: test_store_pg.py VIDFEAT MODELS_DIR SAMPLES_DIR
"""
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile

from pgserver import PgServer, Unavailable
from vfcheck import check

PASSWORD = "s3cret-pw"


def run(exe, *args):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=180)


def sqlite_rows(db, f16):
    con = sqlite3.connect(db)
    fmt = "e" if f16 else "f"
    out = {}
    for p, i, pts, t, v in con.execute(
            "SELECT v.path, f.frame_index, f.pts, f.t, f.vec FROM features f JOIN extractions e"
            " ON e.id = f.extraction_id JOIN videos v ON v.id = e.video_id"):
        vec = struct.unpack("<%d%s" % (len(v) // struct.calcsize(fmt), fmt), v)
        out[(p, i)] = (pts, t, struct.pack("<%df" % len(vec), *vec))
    con.close()
    return out


def pg_rows(pg, db):
    out = {}
    text = pg.psql(db, "COPY (SELECT v.path, f.frame_index, f.pts, f.t, f.vec FROM features f"
                       " JOIN extractions e ON e.id = f.extraction_id JOIN videos v ON"
                       " v.id = e.video_id) TO STDOUT")
    for line in text.splitlines():
        p, i, pts, t, vec = line.split("\t")
        vals = [float(x) for x in vec.strip("{}").split(",")]
        out[(p, int(i))] = (int(pts), float(t), struct.pack("<%df" % len(vals), *vals))
    return out


SHOTS_SQL = ("SELECT v.path, s.shot, s.first_frame, s.last_frame, s.start_t, s.end_t FROM shots s"
             " JOIN extractions e ON e.id = s.extraction_id JOIN videos v ON v.id = e.video_id"
             " ORDER BY v.path, s.shot")


def shots_sqlite(db):
    con = sqlite3.connect(db)
    rows = con.execute(SHOTS_SQL).fetchall()
    con.close()
    return [(p, int(s), int(a), int(b), float(t0), float(t1)) for p, s, a, b, t0, t1 in rows]


def shots_pg(pg, db):
    text = pg.psql(db, SHOTS_SQL)
    rows = [l.split("|") for l in text.splitlines()]
    return [(p, int(s), int(a), int(b), float(t0), float(t1)) for p, s, a, b, t0, t1 in rows]


def outcomes_sqlite(db):
    con = sqlite3.connect(db)
    rows = con.execute("SELECT v.path, e.status, coalesce(e.error, ''), e.frames FROM"
                       " extractions e JOIN videos v ON v.id = e.video_id ORDER BY v.path").fetchall()
    con.close()
    return [tuple(str(x) for x in r) for r in rows]


def outcomes_pg(pg, db):
    text = pg.psql(db, "SELECT v.path, e.status, coalesce(e.error, ''), e.frames FROM"
                       " extractions e JOIN videos v ON v.id = e.video_id ORDER BY v.path")
    return [tuple(l.split("|")) for l in text.splitlines()]


def main():
    exe, models, samples = sys.argv[1:4]
    try:
        server = PgServer()
    except Unavailable as e:
        print("SKIP: %s" % e)
        return 77
    tmp = tempfile.mkdtemp(prefix="vidfeat_pgtest_")
    try:
        with server as pg:
            clips = os.path.join(tmp, "clips")
            os.mkdir(clips)
            for name in ("testsrc_64x48.mp4", "one_gop_12s.mp4"):
                shutil.copy(os.path.join(samples, name), clips)
            open(os.path.join(clips, "broken.mp4"), "wb").close()  # kept by the walk, fails
            model = os.path.join(models, "tiny_cnn.onnx")
            for f16, name in ((0, "f32"), (1, "f16")):
                dtype = ["--dtype", "f16"] if f16 else []
                db = os.path.join(tmp, "%s.db" % name)
                uri = pg.uri("vf_%s" % name, PASSWORD)
                a = run(exe, "--model", model, "-o", db, "--json", "--shots", *dtype, clips)
                b = run(exe, "--model", model, "-o", uri, "--json", "--shots", *dtype, clips)
                warning = ("vidfeat: warning: postgresql://postgres@127.0.0.1:%d/vf_%s: a password "
                           "on the command line can be read by other users of this machine (ps): "
                           "put it in ~/.pgpass (or the file PGPASSFILE names) or a service file "
                           "(PGSERVICEFILE, ?service=NAME) instead\n" % (pg.port, name))
                check(b.stderr.startswith(warning), "no password warning: %r" % b.stderr)
                b.stderr = b.stderr[len(warning):]
                for r in (a, b):
                    check(r.returncode == 1 and r.stderr.count("\n") == 1 and
                          "broken.mp4" in r.stderr, "exit %d: %s" % (r.returncode, r.stderr))
                check(PASSWORD not in b.stdout + b.stderr, "the password was printed")
                sa, sb = json.loads(a.stdout), json.loads(b.stdout)
                check((sa["done"], sa["failed"], sa["frames"]) == (sb["done"], sb["failed"],
                                                                   sb["frames"]), (sa, sb))
                check(outcomes_sqlite(db) == outcomes_pg(pg, "vf_%s" % name),
                      "%s: outcomes differ:\n%s\n%s" % (name, outcomes_sqlite(db),
                                                        outcomes_pg(pg, "vf_%s" % name)))
                ra, rb = sqlite_rows(db, f16), pg_rows(pg, "vf_%s" % name)
                check(len(ra) > 20 and ra == rb,
                      "%s: rows differ (%d in SQLite, %d in PostgreSQL, %d differ)" %
                      (name, len(ra), len(rb),
                       sum(1 for k in ra if ra[k] != rb.get(k))))
                # the shots found, as SQLite's (and each done file has at least one)
                sh = shots_sqlite(db)
                check(len({r[0] for r in sh}) == 2 and shots_pg(pg, "vf_%s" % name) == sh,
                      "%s: shots differ:\n%s\n%s" % (name, sh, shots_pg(pg, "vf_%s" % name)))
                # a rerun skips the done files, redoes the failed one
                r = run(exe, "--model", model, "-o", uri, "--json", *dtype, clips)
                s = json.loads(r.stdout)
                check(s["skipped"] == 2 and s["failed"] == 1 and s["done"] == 0, s)
                check(pg_rows(pg, "vf_%s" % name) == rb, "a rerun changed the rows")
                # --force: extracted again, one extraction per file still
                r = run(exe, "--model", model, "-o", uri, "--json", "--force", *dtype, clips)
                check(json.loads(r.stdout)["done"] == 2, r.stdout)
                check(pg_rows(pg, "vf_%s" % name) == rb, "--force changed the rows")
                check(shots_pg(pg, "vf_%s" % name) == [], "--force without --shots kept shots")
                check(outcomes_pg(pg, "vf_%s" % name) == outcomes_sqlite(db), "after --force")

            # info and similar read it, without the password
            uri = "postgresql://postgres:%s@127.0.0.1:%d/vf_f32" % (PASSWORD, pg.port)
            db = os.path.join(tmp, "f32.db")
            ia, ib = run(exe, "info", db), run(exe, "info", uri)
            check(ib.returncode == 0 and PASSWORD not in ib.stdout + ib.stderr, ib.stderr)
            def summary(text):  # the counts, and each extraction without its infer/s
                lines = text.splitlines()
                return [lines[1]] + [l.split()[:2] + l.split()[3:] for l in lines[3:]]
            check(ib.stdout.startswith("database postgresql://postgres@127.0.0.1:") and
                  summary(ia.stdout) == summary(ib.stdout),
                  "info differs:\n%s\n%s" % (ia.stdout, ib.stdout))
            ja, jb = run(exe, "info", "--json", db), run(exe, "info", "--json", uri)
            def records(text):  # all but where the database is, and the measured rates
                doc = json.loads(text)
                for key in ("database", "engine"):
                    doc["summary"].pop(key)
                for e in doc["extractions"]:
                    e.pop("infer_fps")
                return doc
            check(jb.returncode == 0 and PASSWORD not in jb.stdout and
                  json.loads(jb.stdout)["summary"]["engine"].startswith("PostgreSQL ") and
                  records(ja.stdout) == records(jb.stdout),
                  "info --json differs:\n%s\n%s" % (ja.stdout, jb.stdout))
            clip = os.path.join(clips, "one_gop_12s.mp4")
            qa = run(exe, "similar", db, "--video", clip, "--at", "2", "-k", "5", "--json")
            qb = run(exe, "similar", uri, "--video", clip, "--at", "2", "-k", "5", "--json")
            check(qa.returncode == 0 and qb.returncode == 0, qa.stderr + qb.stderr)
            def answer(text):  # all but the time the search took
                doc = json.loads(text)
                doc.pop("search_ms")
                return doc
            check(answer(qa.stdout) == answer(qb.stdout),
                  "similar differs:\n%s\n%s" % (qa.stdout, qb.stdout))

            # a benchmark's result recorded in PostgreSQL as in SQLite (20 columns: once more
            # parameters than the store's statements took, written past an array)
            for target in (db, uri):
                r = run(exe, "bench", "--infer-only", "--runs", "1", "--images", "4", "--batch",
                        "2", "--model", model, "-o", target)
                check(r.returncode == 0, "bench -o %s: %s" % (target.split(":")[0], r.stderr))
            con = sqlite3.connect(db)
            want = con.execute("SELECT count(*), min(model), min(batch_size), min(mode),"
                               " min(infer_fps) > 0, min(decode_fps) IS NULL FROM runs").fetchone()
            con.close()
            got = pg.psql("vf_f32", "SELECT count(*), min(model), min(batch_size), min(mode),"
                                    " min(infer_fps) > 0, min(decode_fps) IS NULL FROM runs")
            check(got.strip().split("|") == [str(want[0]), want[1], str(want[2]), want[3],
                                             "t" if want[4] else "f", "t" if want[5] else "f"],
                  "bench rows differ: %r %r" % (got, want))

            # the frames view and export read it as they read SQLite (csv: every float printed
            # exactly, so equal text is equal vectors)
            for name in ("f32", "f16"):
                uri_n = "postgresql://postgres:%s@127.0.0.1:%d/vf_%s" % (PASSWORD, pg.port, name)
                db_n = os.path.join(tmp, "%s.db" % name)
                con = sqlite3.connect(db_n)
                n = con.execute("SELECT count(*) FROM frames").fetchone()[0]
                con.close()
                check(pg.psql("vf_%s" % name, "SELECT count(*) FROM frames").strip() == str(n),
                      "%s: PostgreSQL's frames view does not have the %d vectors" % (name, n))
                ea, eb = (run(exe, "export", d, "--format", "csv") for d in (db_n, uri_n))
                check(ea.returncode == 0 and eb.returncode == 0 and ea.stdout.count("\n") == n + 1
                      and ea.stdout == eb.stdout, "%s: export differs: %r %r" %
                      (name, ea.stderr, eb.stderr))

            # a server that is not there: one line naming it, exit 3, no password
            gone = "postgresql://postgres:%s@127.0.0.1:%d/vf_f32" % (PASSWORD, pg.port)
            pg.stop()
            r = run(exe, "--model", model, "-o", gone, clip)
            check(r.returncode == 3 and r.stderr.count("\n") == 2 and "~/.pgpass" in r.stderr and
                  "127.0.0.1:%d" % pg.port in r.stderr and "cannot connect" in r.stderr and
                  PASSWORD not in r.stderr, "unreachable: exit %d: %r" % (r.returncode, r.stderr))
            # the password from ~/.pgpass (libpq's own rule): no warning, the same run
            home = os.path.join(tmp, "home")
            os.makedirs(home)
            with open(os.path.join(home, ".pgpass"), "w") as f:
                f.write("127.0.0.1:%d:*:postgres:%s\n" % (pg.port, PASSWORD))
            os.chmod(os.path.join(home, ".pgpass"), 0o600)
            pg.start()
            r = subprocess.run([exe, "info", "postgresql://postgres@127.0.0.1:%d/vf_f32" % pg.port],
                               capture_output=True, text=True, env=dict(os.environ, HOME=home))
            check(r.returncode == 0 and r.stderr == "", "~/.pgpass: %r" % r.stderr)
        print("postgresql: rows equal SQLite's bit for bit (f32, f16), rerun, --force, info, "
              "similar, bench records, the frames view, export, unreachable server, password never shown and "
              "warned about once (~/.pgpass: no warning)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
