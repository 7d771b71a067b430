#!/usr/bin/env python3
"""A full disk: the database lives on a 512 KiB tmpfs (in a private mount namespace, so nothing
outside sees it) and the features of two real clips need more. vidfeat must stop with one line
naming the database, leave it consistent (integrity check, no extraction marked done with
missing frames, a finished or failed one holding exactly the frames it counts; one the full
disk interrupted may stay 'running', as after a crash), and a rerun with room must
finish the job with the same rows as a clean run.

Usage: test_disk_full.py VIDFEAT SHARED_DIR
Exits 77 when mount namespaces are not allowed here, or the shared model and clips are missing.
"""
import array
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import rel_err

FAILED = []


def check(cond, msg):
    if not cond:
        FAILED.append(msg)
        print("FAIL: " + msg)


def rows(db):
    con = sqlite3.connect(db)
    out = {}
    for path, index, pts, vec in con.execute(
            "SELECT v.path, f.frame_index, f.pts, f.vec FROM features f "
            "JOIN extractions e ON e.id = f.extraction_id JOIN videos v ON v.id = e.video_id"):
        out[(path, index)] = (pts, vec)
    con.close()
    return out


def main():
    exe, shared = sys.argv[1:3]
    model = os.path.join(shared, "models", "mobilenet_v2_1.0_224.onnx")
    clips = [os.path.join(shared, "videos", n)
             for n in ("h264_720p_bigbuckbunny.mp4", "hevc_640x360_aac.mp4")]
    if not all(os.path.exists(p) for p in [model] + clips):
        print("skip: the shared model or clips are missing")
        return 77
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        print("skip: no mount namespaces here (unshare -m refused)")
        return 77
    tmp = tempfile.mkdtemp(prefix="vidfeat_full_")
    try:
        args = ["--device", "cpu", "--model", model, "--batch", "8"]
        clean = os.path.join(tmp, "clean.db")
        r = subprocess.run([exe] + args + ["-o", clean] + clips, capture_output=True, text=True,
                           timeout=600)
        check(r.returncode == 0, "clean run: %d %s" % (r.returncode, r.stderr))
        want = rows(clean)

        # The run on a small tmpfs; the database is copied out before the namespace goes.
        mnt, kept = os.path.join(tmp, "mnt"), os.path.join(tmp, "kept")
        os.mkdir(mnt)
        os.mkdir(kept)
        script = ('mount -t tmpfs -o size=512k tmpfs "$1" || exit 77\n'
                  'shift; out=$1; shift\n'
                  '"$@"; rc=$?\n'
                  'cp "$MNT"/full.db* "$out"/ 2>/dev/null\n'
                  'exit $rc\n')
        env = dict(os.environ, MNT=mnt)
        r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", mnt, kept, exe] + args +
                           ["-o", os.path.join(mnt, "full.db")] + clips,
                           capture_output=True, text=True, timeout=600, env=env)
        if r.returncode == 77:
            print("skip: cannot mount a tmpfs here")
            return 77
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1, "full disk: exit %d, stderr %r" % (r.returncode, r.stderr))
        check(any("full.db" in l and "full" in l.split("full.db", 1)[1] for l in lines),
              "full disk: no line naming the database and the cause: %r" % r.stderr)
        check(all(l.startswith("vidfeat: ") for l in lines), "stray output: %r" % r.stderr)
        print("ok full disk: %s" % " | ".join(lines))

        db = os.path.join(kept, "full.db")
        con = sqlite3.connect(db)
        check(con.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity check")
        stored = 0
        for eid, path, status, frames in con.execute(
                "SELECT e.id, v.path, e.status, e.frames FROM extractions e "
                "JOIN videos v ON v.id = e.video_id"):
            n = con.execute("SELECT count(*) FROM features WHERE extraction_id = ?",
                            (eid,)).fetchone()[0]
            stored += n
            # 'running' is what a write that could not finish leaves (like a crash): the count
            # is only written with the final status, and a rerun redoes the file
            check(status == "running" or n == frames,
                  "%s: %d vectors stored, %d counted" % (path, n, frames))
            if status == "done":
                clean_n = sum(1 for k in want if k[0] == path)
                check(n == clean_n, "%s marked done with %d of %d frames" % (path, n, clean_n))
            print("  %s: %s, %d frames kept" % (os.path.basename(path), status, n))
        con.close()

        # A rerun with room finishes the job: the same rows as the clean run.
        r = subprocess.run([exe] + args + ["-o", db] + clips, capture_output=True, text=True,
                           timeout=600)
        check(r.returncode == 0, "rerun: %d %s" % (r.returncode, r.stderr))
        got = rows(db)
        check(set(got) == set(want), "rerun: %d rows, the clean run %d" % (len(got), len(want)))
        worst = 0.0
        for k in want:
            if k in got:
                check(got[k][0] == want[k][0], "rerun: %s frame %d: pts differ" % k)
                a, b = array.array("f", got[k][1]), array.array("f", want[k][1])
                worst = max(worst, rel_err(a, b))
        check(worst <= 1e-5, "rerun: vectors differ from the clean run by %.3g" % worst)
        print("ok rerun after the full disk: %d rows, as the clean run (%d kept from before)"
              % (len(got), stored))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILED:
        return 1
    print("all disk-full checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
