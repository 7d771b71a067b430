#!/usr/bin/python3
"""A database that someone else changed (made here with sqlite3; no ../shared needed): vidfeat
checks that the schema is its own before it reads or writes, opens it defensively, and opens
only regular files that a database names.

  view       `videos` replaced by a view over an endless recursive query: info, similar,
             export and extract each answer at once with one line (exit 3), no hang
  trigger    a trigger added on features: refused before anything is written
  own tables a table and an index a user added beside vidfeat's: still read
  index      an index file changed after it was built (a byte, its time set back): similar
             refuses it (exit 3) until it is rebuilt
  fifo       an index whose recorded path is a FIFO (or a link to one): similar does not block
             on it, info says the index cannot be used
  frames     `frames` replaced by a view of someone else's: info, similar, matches and export
             refuse it (exit 3)
  id map     an HNSW index (its recorded SHA-256 updated too) whose ids name extractions it does
             not cover, or frames the database does not hold: refused (exit 3), never an empty
             answer

usage: test_hostile_db.py VIDFEAT MODELS_DIR
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, ff

REFUSED = "not vidfeat's schema"


def run(exe, *args):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)


def main():
    exe, models = sys.argv[1:3]
    if not shutil.which("ffmpeg"):
        print("skipped: ffmpeg is needed")
        return SKIP
    model = os.path.join(models, "tiny_cnn.onnx")
    with tempfile.TemporaryDirectory(prefix="vf_hostile_db_") as tmp:
        clip = os.path.join(tmp, "clip.mp4")
        ff("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "2", "-c:v", "libx264", clip)
        good = os.path.join(tmp, "good.db")
        r = run(exe, "--model", model, "-o", good, clip)
        check(r.returncode == 0, "extract: %s" % r.stderr)

        def copy(name, *sql):
            path = os.path.join(tmp, name)
            shutil.copy(good, path)
            con = sqlite3.connect(path)
            for s in sql:
                con.execute(s)
            con.commit()
            con.close()
            return path

        view = copy("view.db", "ALTER TABLE videos RENAME TO videos_old",
                    "CREATE VIEW videos AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1"
                    " FROM n) SELECT i AS id, 'x' AS path, 0 AS size, 0 AS mtime, '' AS "
                    "content_hash, 0 AS duration, 0 AS width, 0 AS height, 0 AS rotation, '' AS"
                    " codec, 0 AS frame_rate FROM n")
        for args in (["info", view], ["similar", view, "--video", clip, "--at", "1"],
                     ["export", view, "--format", "csv", "-o", os.path.join(tmp, "x.csv")],
                     ["--model", model, "-o", view, clip]):
            r = run(exe, *args)
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 3 and len(lines) == 1 and REFUSED in lines[0] and
                  "view 'videos'" in lines[0], "%s: %d %r" % (args[0], r.returncode, r.stderr))
        print("ok videos as an endless view: info, similar, export, extract refuse at once: %s"
              % lines[0])

        trig = copy("trigger.db", "CREATE TABLE log (x)",
                    "CREATE TRIGGER spy AFTER INSERT ON features BEGIN INSERT INTO log VALUES"
                    " (NEW.frame_index); END")
        r = run(exe, "--model", model, "--force", "-o", trig, clip)
        check(r.returncode == 3 and "trigger 'spy'" in r.stderr, "trigger: %d %r"
              % (r.returncode, r.stderr))
        con = sqlite3.connect(trig)
        check(con.execute("SELECT count(*) FROM log").fetchone()[0] == 0, "the trigger ran")
        con.close()
        print("ok a trigger someone added: refused before any write")

        own = copy("own.db", "CREATE TABLE notes (path TEXT, note TEXT)",
                   "CREATE INDEX features_t ON features (t)")
        r = run(exe, "info", own)
        check(r.returncode == 0, "a user's own table and index: %d %r" % (r.returncode,
                                                                          r.stderr))
        print("ok a table and an index a user added: still read")

        # an index file changed after it was built (its bytes, then its time set back, as one
        # poisoning its id map would): refused, not searched; rebuilt, searched again
        poisoned = copy("poisoned.db")
        r = run(exe, "index", poisoned)
        check(r.returncode == 0, "index: %d %r" % (r.returncode, r.stderr))
        con = sqlite3.connect(poisoned)
        (ipath,) = con.execute("SELECT path FROM indexes").fetchone()
        con.close()
        r = run(exe, "similar", poisoned, "--video", clip, "--at", "1", "-k", "3")
        check(r.returncode == 0, "similar before: %d %r" % (r.returncode, r.stderr))
        st = os.stat(ipath)
        with open(ipath, "r+b") as f:
            f.seek(st.st_size - 9)
            b = f.read(1)
            f.seek(st.st_size - 9)
            f.write(bytes([b[0] ^ 0x01]))
        os.utime(ipath, ns=(st.st_atime_ns, st.st_mtime_ns))
        r = run(exe, "similar", poisoned, "--video", clip, "--at", "1", "-k", "3")
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 3 and len(lines) == 1 and
              "not the index the database recorded" in lines[0], "a changed index: %d %r"
              % (r.returncode, r.stderr))
        r = run(exe, "index", "--rebuild", poisoned)
        check(r.returncode == 0, "rebuild: %d %r" % (r.returncode, r.stderr))
        r = run(exe, "similar", poisoned, "--video", clip, "--at", "1", "-k", "3")
        check(r.returncode == 0, "similar after the rebuild: %d %r" % (r.returncode, r.stderr))
        print("ok an index changed since it was built (time set back): refused; rebuilt: used")

        fifo_db = copy("fifo.db")
        r = run(exe, "index", fifo_db)
        check(r.returncode == 0, "index: %d %r" % (r.returncode, r.stderr))
        fifo = os.path.join(tmp, "pipe.faiss")
        os.mkfifo(fifo)
        con = sqlite3.connect(fifo_db)
        n = con.execute("UPDATE indexes SET path = ?", (fifo,)).rowcount
        con.commit()
        con.close()
        check(n >= 1, "no index row to point at the FIFO")
        r = run(exe, "similar", fifo_db, "--video", clip, "--at", "1", "-k", "3")
        check("not a regular file" in r.stderr, "an index path that is a FIFO: %d %r"
              % (r.returncode, r.stderr))
        print("ok an index path that is a FIFO: not opened (%s)" % r.stderr.strip().splitlines()[0])
        link = os.path.join(tmp, "link-to-pipe.faiss")
        os.symlink(fifo, link)
        con = sqlite3.connect(fifo_db)
        con.execute("UPDATE indexes SET path = ?", (link,))
        con.commit()
        con.close()
        r = run(exe, "info", fifo_db)
        check("not a regular file" in r.stdout + r.stderr,
              "info, an index path linking to a FIFO: %d %r %r" % (r.returncode, r.stdout,
                                                                   r.stderr))
        print("ok info on an index path linking to a FIFO: says it cannot be used")

        frames = copy("frames.db", "DROP VIEW frames",
                      "CREATE VIEW frames AS SELECT 'x' AS path, 'm' AS model, '' AS layer, 1 AS"
                      " dim, 'float32' AS dtype, '' AS sampling, 0.0 AS t, 0 AS frame_index, 0 AS"
                      " pts, x'00000000' AS vec, 1 AS extraction_id")
        for args in (["info", frames], ["similar", frames, "--video", clip, "--at", "1"],
                     ["matches", frames],
                     ["export", frames, "--format", "csv", "-o", os.path.join(tmp, "f.csv")]):
            r = run(exe, *args)
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 3 and len(lines) == 1 and REFUSED in lines[0] and
                  "view 'frames'" in lines[0], "%s: %d %r" % (args[0], r.returncode, r.stderr))
        print("ok a frames view of someone else's: info, similar, matches, export refuse it")

        import hashlib
        import struct
        for n_try, (how, change) in enumerate((
                ("another extraction", lambda i: (77 << 32) | (i & 0xffffffff)),
                ("no frame held", lambda i: i + 1000000))):
            crafted = copy("idmap%d.db" % n_try)
            r = run(exe, "index", "--kind", "hnsw", crafted)
            check(r.returncode == 0, "index --kind hnsw: %d %r" % (r.returncode, r.stderr))
            con = sqlite3.connect(crafted)
            (ipath,) = con.execute("SELECT path FROM indexes").fetchone()
            (n,) = con.execute("SELECT count(*) FROM features").fetchone()
            with open(ipath, "r+b") as f:  # the id map's ids end the file
                f.seek(-8 * n, os.SEEK_END)
                ids = struct.unpack("<%dq" % n, f.read(8 * n))
                f.seek(-8 * n, os.SEEK_END)
                f.write(struct.pack("<%dq" % n, *[change(i) for i in ids]))
            with open(ipath, "rb") as f:
                con.execute("UPDATE indexes SET sha256 = ?", (hashlib.sha256(f.read()).hexdigest(),))
            con.commit()
            con.close()
            r = run(exe, "similar", crafted, "--video", clip, "--at", "1", "-k", "3")
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 3 and len(lines) == 1 and "a damaged index" in lines[0],
                  "an id map naming %s: %d %r %r" % (how, r.returncode, r.stdout, r.stderr))
        print("ok an HNSW id map naming rows outside the database: refused (%s)" % lines[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
