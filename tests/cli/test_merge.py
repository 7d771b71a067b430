#!/usr/bin/python3
"""Clusters without a database server: --shard K/N splits the inputs (every file in exactly one
shard, the same split from any order of the list), each shard into its own SQLite file, and
vidfeat merge joins them into the rows one run over all the files gives, bit for bit. Merging
again adds nothing; a file done in two inputs with other vectors is a conflict: said, exit 1,
the first kept.

usage: test_merge.py VIDFEAT MODELS_DIR SAMPLES_DIR
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import check


def rows(db):
    con = sqlite3.connect(db)
    out = {(p, s, i): v for p, s, i, v in con.execute(
        "SELECT v.path, e.sampling, f.frame_index, f.vec FROM features f JOIN extractions e ON"
        " e.id = f.extraction_id JOIN videos v ON v.id = e.video_id WHERE e.status = 'done'")}
    done = con.execute("SELECT count(*) FROM extractions WHERE status = 'done'").fetchone()[0]
    con.close()
    return out, done


def main():
    exe, models, samples = sys.argv[1:4]
    model = os.path.join(models, "tiny_cnn.onnx")
    tmp = tempfile.mkdtemp(prefix="vidfeat_merge_")
    try:
        clips = [os.path.join(samples, f) for f in ("testsrc_64x48.mp4", "rotated90_64x48.mp4",
                                                     "one_gop_12s.mp4")]
        for i in range(5):  # more files than shards, under other names
            shutil.copy(clips[i % 3], os.path.join(tmp, "copy%d.mp4" % i))
            clips.append(os.path.join(tmp, "copy%d.mp4" % i))
        listing = os.path.join(tmp, "list")
        with open(listing, "wb") as f:
            f.write(b"\0".join(c.encode() for c in clips) + b"\0")
        base = ["--model", model, "--max-frames", "8", "-q", "--json"]
        one = os.path.join(tmp, "one.db")
        r = subprocess.run([exe, *base, "-o", one, *clips], capture_output=True, text=True)
        check(r.returncode == 0, "one run: %s" % r.stderr)
        parts, shards = [], []
        for k in range(3):
            db = os.path.join(tmp, "part%d.db" % k)
            r = subprocess.run([exe, *base, "-o", db, "--shard", "%d/3" % k, "--files-from",
                                listing, "-0"], capture_output=True, text=True)
            check(r.returncode == 0, "shard %d: %s" % (k, r.stderr))
            shards.append(sorted(f["path"] for f in json.loads(r.stdout)["files"]))
            parts.append(db)
        seen = [f for shard in shards for f in shard]
        check(sorted(seen) == sorted(clips), "shards: %r" % shards)
        # the same split from the list reversed, given as arguments: each shard's files again
        # (the temporary directory's name is random, so a shard may hold none of the 8 files)
        for k in range(3):
            r = subprocess.run([exe, *base, "-o", os.path.join(tmp, "again%d.db" % k), "--shard",
                                "%d/3" % k, *reversed(clips)], capture_output=True, text=True)
            check(r.returncode == 0, "shard %d again: %s" % (k, r.stderr))
            again = sorted(f["path"] for f in json.loads(r.stdout)["files"])
            check(again == shards[k], "shard %d differs by order: %r, %r" % (k, again, shards[k]))
        print("ok --shard: every file in exactly one of 3 shards, whatever the order")

        out = os.path.join(tmp, "merged.db")
        r = subprocess.run([exe, "merge", out, *parts], capture_output=True, text=True)
        check(r.returncode == 0 and "0 conflicts" in r.stderr, "merge: %s" % r.stderr)
        check(rows(out) == rows(one), "merged rows differ from one run's")
        r = subprocess.run([exe, "merge", out, *parts], capture_output=True, text=True)
        check(r.returncode == 0 and "0 extractions merged" in r.stderr and rows(out) == rows(one),
              "merging again: %s" % r.stderr)
        print("ok merge: the shards' files are one run's rows, bit for bit; again adds nothing")

        # a shard that holds files (the split follows the paths' hash: one may be empty)
        bad = os.path.join(tmp, "bad.db")
        shutil.copy(parts[next(k for k in range(3) if shards[k])], bad)
        con = sqlite3.connect(bad)
        con.execute("UPDATE features SET vec = zeroblob(length(vec)) WHERE"
                    " (extraction_id, frame_index) = (SELECT extraction_id, frame_index FROM"
                    " features LIMIT 1)")
        con.commit()
        con.close()
        r = subprocess.run([exe, "merge", out, bad], capture_output=True, text=True)
        check(r.returncode == 1 and "other vectors" in r.stderr and "1 conflict" in r.stderr,
              "a conflict: %d %s" % (r.returncode, r.stderr))
        check(rows(out) == rows(one), "a conflict changed the merged rows")
        r = subprocess.run([exe, "merge", out, os.path.join(tmp, "missing.db")],
                           capture_output=True, text=True)
        check(r.returncode == 1 and "missing.db: no such database" in r.stderr, r.stderr)
        print("ok merge: a conflict is said (exit 1) and the first kept; a missing input said")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
