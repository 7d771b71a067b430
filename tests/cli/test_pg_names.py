#!/usr/bin/python3
"""File names that are not UTF-8 on PostgreSQL (docs/archives.md "PostgreSQL"), on a real server with a
UTF-8 database: a Latin-1 name (and a UTF-8 name holding U+10FF85, the character a byte is
written as, which must not be mistaken for one) is stored and found again as on SQLite: the same
outcomes, a rerun skips both (the resume rule), info --json gives the real names back through
os.fsencode, export (csv, npy's index.json) equals SQLite's byte for byte, similar finds the file
by its name and lists it as SQLite does, and a queue worker under --root claims and extracts it;
README's Python line turns the stored text back into the name.

usage: test_pg_names.py VIDFEAT MODELS_DIR SAMPLES_DIR docs/output.md
"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import check, SKIP

LATIN1 = b"caf\xe9 cr\xe8me.mp4"
PLANE16 = "x\U0010ff85.mp4".encode()


def run(exe, *args):
    return subprocess.run([exe, *args], capture_output=True, timeout=180)


def main():
    exe, models, samples, readme = sys.argv[1:5]
    try:
        from pgserver import PgServer, Unavailable
        server = PgServer()
    except Unavailable as e:
        print("SKIP:", e)
        sys.exit(SKIP)
    model = os.path.join(models, "tiny_cnn.onnx")
    tmp = tempfile.mkdtemp(prefix="vidfeat_pgnames_")
    btmp = os.fsencode(tmp)
    try:
        clips = os.path.join(btmp, b"clips")
        os.makedirs(clips)
        shutil.copy(os.path.join(samples, "testsrc_64x48.mp4"), os.path.join(clips, LATIN1))
        shutil.copy(os.path.join(samples, "rotated90_64x48.mp4"), os.path.join(clips, PLANE16))
        shutil.copy(os.path.join(samples, "one_gop_12s.mp4"), os.path.join(clips, b"plain.mp4"))
        names = sorted(os.path.join(clips, n) for n in (LATIN1, PLANE16, b"plain.mp4"))
        with server as pg:
            pg.psql("postgres", "CREATE DATABASE names TEMPLATE template0 ENCODING 'UTF8'"
                    " LC_COLLATE 'C' LC_CTYPE 'C'")
            check(pg.psql("names", "SHOW server_encoding").strip() == "UTF8", "not UTF-8")
            uri = "postgresql://postgres@127.0.0.1:%d/names" % pg.port
            db = os.path.join(tmp, "names.db")
            base = ["--model", model, "--max-frames", "8", "--json"]
            a, b = run(exe, *base, "-o", db, clips), run(exe, *base, "-o", uri, clips)
            for r in (a, b):
                check(r.returncode == 0 and r.stderr == b"", "run: %d %r" % (r.returncode,
                                                                          r.stderr))
            sa, sb = json.loads(a.stdout), json.loads(b.stdout)
            check(sorted(os.fsencode(f["path"]) for f in sb["files"]) == names and
                  sa["frames"] == sb["frames"] == 24, "files: %r" % sb)
            again = run(exe, *base, "-o", uri, clips)
            check(again.returncode == 0 and json.loads(again.stdout)["skipped"] == 3,
                  "rerun: %r" % again.stdout)
            print("ok a Latin-1 name and a U+10FF85 name stored on a UTF-8 PostgreSQL; a rerun "
                  "skips them")

            ia, ib = run(exe, "info", "--json", db), run(exe, "info", "--json", uri)
            pa = sorted(os.fsencode(e["path"]) for e in json.loads(ia.stdout)["extractions"])
            pb = sorted(os.fsencode(e["path"]) for e in json.loads(ib.stdout)["extractions"])
            check(ib.returncode == 0 and pa == pb == names, "info --json: %r %r" % (pa, pb))
            ea = run(exe, "export", db, "--format", "csv")
            eb = run(exe, "export", uri, "--format", "csv")
            rows = lambda out: sorted(out.splitlines()[1:])  # noqa: E731 (order: see README)
            check(eb.returncode == 0 and rows(ea.stdout) == rows(eb.stdout) and
                  LATIN1 in eb.stdout and PLANE16 in eb.stdout, "export csv differs")
            for d, src in (("npy_a", db), ("npy_b", uri)):
                r = run(exe, "export", src, "-o", os.path.join(tmp, d))
                check(r.returncode == 0, "export npy: %r" % r.stderr)
            ja, jb = (json.load(open(os.path.join(tmp, d, "index.json"))) for d in
                      ("npy_a", "npy_b"))
            key = lambda e: os.fsencode(e["path"])  # noqa: E731
            check(sorted(ja, key=key) == sorted(jb, key=key) and
                  sorted(map(key, jb)) == names, "index.json: %r %r" % (ja, jb))
            clip = os.path.join(clips, LATIN1)
            qa = run(exe, "similar", db, "--video", clip, "--at", "0.2", "-k", "4", "--json")
            qb = run(exe, "similar", uri, "--video", clip, "--at", "0.2", "-k", "4", "--json")
            def answer(text):  # all but the time the search took
                doc = json.loads(text)
                doc.pop("search_ms")
                return doc
            check(qb.returncode == 0 and answer(qa.stdout) == answer(qb.stdout),
                  "similar: %r %r" % (qa.stdout, qb.stderr))
            print("ok info --json, export (csv, npy) and similar give the names back as SQLite "
                  "does")

            # the stored text, turned back by README's line
            m = re.search(r"^    (name = .*0x10FF.*)$", open(readme).read(), re.M)
            check(m, "%s has no line turning a stored path back into the name" % readme)
            stored = pg.psql("names", "SELECT path FROM videos ORDER BY id").splitlines()
            back = []
            for path in stored:
                env = {"path": path}
                exec(m.group(1), env)  # the README's line, as written
                back.append(env["name"])
            check(sorted(back) == names, "README's line: %r" % back)
            print("ok README's line turns the stored text back into the names")

            # a queue worker under --root claims the names from the database
            root_uri = "postgresql://postgres@127.0.0.1:%d/queue" % pg.port
            pg.psql("postgres", "CREATE DATABASE queue TEMPLATE template0 ENCODING 'UTF8'")
            r = run(exe, "enqueue", "-o", root_uri, "--root", clips, clips)
            check(r.returncode == 0, "enqueue: %r" % r.stderr)
            r = run(exe, *base, "-o", root_uri, "--root", clips)
            check(r.returncode == 0 and json.loads(r.stdout)["done"] == 3,
                  "queue worker: %r %r" % (r.stdout, r.stderr))
            done = pg.psql("queue", "SELECT count(*) FROM leases WHERE state = 'done'").strip()
            check(done == "3", "leases done: %s" % done)
            print("ok a queue worker under --root claims and extracts them")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
