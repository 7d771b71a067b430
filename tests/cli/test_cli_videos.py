#!/usr/bin/python3
"""End-to-end tests of the vidfeat command on the real clips in ../shared/videos.

usage: test_cli_videos.py VIDFEAT MODEL SHARED_DIR
Checks: every-frame mode stores exactly the decoded frame count of each clip (MANIFEST.tsv),
timestamps strictly increase and equal ffprobe's; the empty file fails with a one-line message
while the rest completes (exit 1); --fps 1 on the 30 s clip gives one frame per second at the
right times; --keyframes gives the key frames ffprobe lists; the upside-down phone clip gives
the same vectors as its frames turned upright by ffmpeg; a rerun skips everything; kill -9 at
random moments never leaves a done extraction with missing frames, every row a killed run
wrote is the clean run's (several kills land mid-file), and a rerun completes with the clean
run's rows (frame_index, pts and t exactly, the vector within 1e-5); Ctrl-C and SIGTERM exit
with vidfeat's own status within a second, the interrupted file not done and its rows kept.
Exits 77 when ../shared/videos or ffprobe is missing.
"""
import csv
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

from vfcheck import SKIP, check, ffprobe_times, has_schema, rel_err
from vfcheck import rows as rows_of


def vidfeat(exe, model, *args, **kw):
    return subprocess.run([exe, "--model", model, "--batch", "8", *args],
                          capture_output=True, text=True, **kw)


def rows(db, path):
    con = sqlite3.connect(db)
    r = con.execute("SELECT f.frame_index, f.pts, f.t FROM features f JOIN extractions e ON "
                    "e.id = f.extraction_id JOIN videos v ON v.id = e.video_id WHERE v.path = ? "
                    "ORDER BY f.frame_index", (path,)).fetchall()
    con.close()
    return r


def ffprobe_frames(path, extra=()):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", *extra,
                          "-show_entries", "frame=best_effort_timestamp,pts,pkt_dts,key_frame",
                          "-of", "json", path], capture_output=True, text=True).stdout
    frames = json.loads(out).get("frames", [])
    ts = []
    for f in frames:
        v = f.get("best_effort_timestamp", f.get("pts", f.get("pkt_dts")))
        ts.append((int(v) if v is not None else None, int(f.get("key_frame", 0))))
    return ts


def rows_running(db):
    """Rows written for a file not yet done (0 while the database is being made)."""
    try:
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
        n = con.execute("SELECT count(*) FROM features f JOIN extractions e ON e.id ="
                        " f.extraction_id WHERE e.status = 'running'").fetchone()[0]
        con.close()
        return n
    except sqlite3.Error:
        return 0


def consistent(db):
    """No extraction is done with frames missing; the file passes integrity_check."""
    con = sqlite3.connect(db)
    check(con.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity_check")
    if not has_schema(db):
        con.close()
        return
    bad = con.execute("SELECT count(*) FROM extractions e WHERE status = 'done' AND frames != "
                      "(SELECT count(*) FROM features WHERE extraction_id = e.id)").fetchone()[0]
    con.close()
    check(bad == 0, "a done extraction has frames missing")


def same_row(a, b):
    """Two stored rows (pts, t, vector bytes) are the same frame's: pts and t equal, the vectors
    within 1e-5 relative. Not bit for bit: a rerun batches a file's frames otherwise (the
    batches before it, a short last batch), and oneDNN's Winograd rounds a batch's images
    differently from one image's (at 1e-7)."""
    import numpy as np
    return a[:2] == b[:2] and rel_err(np.frombuffer(a[2], np.float32),
                                      np.frombuffer(b[2], np.float32)) <= 1e-5


def same_rows(got, want, what):
    """got has exactly want's rows: the same keys, each the same frame's (same_row)."""
    check(got.keys() == want.keys(), "%s: %d rows, the clean run %d (%d missing, %d extra)"
          % (what, len(got), len(want), len(want.keys() - got.keys()),
             len(got.keys() - want.keys())))
    for k in want:
        check(same_row(got[k], want[k]),
              "%s: %s frame %d differs from the clean run (pts/t %s vs %s%s)"
              % (what, os.path.basename(k[0]), k[1], got[k][:2], want[k][:2],
                 "" if got[k][:2] != want[k][:2] else ", vector"))


def interrupted_rows_kept(db, clean, what):
    """After a kill or an interruption: every stored row equals the clean run's row of that
    file and frame, and each extraction not done holds no more than its file's frames. Returns
    the number of files interrupted with rows written (not done, some rows, not all)."""
    if not has_schema(db):
        return 0
    con = sqlite3.connect(db)
    ext = con.execute("SELECT v.path, e.status, (SELECT count(*) FROM features f WHERE "
                      "f.extraction_id = e.id) FROM extractions e JOIN videos v ON "
                      "v.id = e.video_id").fetchall()
    con.close()
    got = rows_of(db)
    for k, row in got.items():
        check(k in clean and same_row(row, clean[k]),
              "%s: stored row %s frame %d is not the clean "
              "run's" % (what, os.path.basename(k[0]), k[1]))
    total = {}
    for p, _ in clean:
        total[p] = total.get(p, 0) + 1
    partial = 0
    for path, status, n in ext:
        if status != "done" and 0 < n < total[path]:
            partial += 1
    return partial


def counts(db):
    con = sqlite3.connect(db)
    r = dict(con.execute("SELECT v.path, e.frames FROM extractions e JOIN videos v ON v.id = "
                         "e.video_id WHERE e.status = 'done'").fetchall())
    con.close()
    return r


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    exe, model, shared = sys.argv[1:]
    vdir = os.path.join(shared, "videos")
    if not os.path.isdir(vdir) or not shutil.which("ffprobe") or not shutil.which("ffmpeg"):
        print("skipped: %s or ffprobe/ffmpeg missing" % vdir)
        return SKIP
    manifest = {r["file"]: r for r in csv.DictReader(open(os.path.join(vdir, "MANIFEST.tsv")),
                                                     delimiter="\t")}
    tmp = tempfile.mkdtemp(prefix="vidfeat_cli_")
    try:
        clips = sorted(os.path.join(vdir, f) for f in manifest)
        db = os.path.join(tmp, "all.db")
        r = vidfeat(exe, model, "-o", db, "--json", *clips)
        check(r.returncode == 1, "exit status %d with the empty file among the inputs (want 1)"
              % r.returncode)
        err_lines = [l for l in r.stderr.splitlines() if l.strip()]
        check(any("empty_0bytes.webm: empty file" in l for l in err_lines),
              "no one-line message for the empty file: %r" % r.stderr)
        summary = json.loads(r.stdout)
        check(summary["failed"] == 1 and summary["done"] == len(clips) - 1,
              "summary %s" % {k: summary[k] for k in ("done", "failed")})
        # every frame's pts and t against ffprobe's, in order, on every clip: timelines that
        # start late (MPEG-PS 0.54 s, MKV 0.033 s) or early (the VP9 WebM, -0.007 s), a
        # timestamp gap (HEVC: index / frame rate would be wrong), a frame without a
        # timestamp (the AVI's last)
        gaps = 0
        for path in clips:
            name = os.path.basename(path)
            want = manifest[name]["decoded_frames_ffmpeg"]
            if want in ("", "n/a"):
                check(os.path.getsize(path) == 0, "%s: no frame count in MANIFEST.tsv" % name)
                continue
            got = rows(db, path)
            check(len(got) == int(want), "%s: %d vectors, %s decoded frames" %
                  (name, len(got), want))
            probe, start = ffprobe_times(path)
            check(len(probe) == len(got), "%s: %d rows, ffprobe %d frames"
                  % (name, len(got), len(probe)))
            fps = float(manifest[name]["avg_frame_rate"].split("/")[0]) / float(
                manifest[name]["avg_frame_rate"].split("/")[1] or 1) \
                if manifest[name]["avg_frame_rate"] not in ("", "0/0") else 0.0
            off_grid = 0
            for k, ((index, pts, t), (ppts, pt)) in enumerate(zip(got, probe)):
                check(index == k, "%s: row %d has frame_index %d" % (name, k, index))
                check(pts == ppts, "%s: frame %d pts %s, ffprobe %d" % (name, k, pts, ppts))
                check(abs(t - pt) <= 1e-6, "%s: frame %d t %.6f, ffprobe's pts_time - start "
                      "= %.6f" % (name, k, t, pt))
                if fps and abs(t - (k / fps + (probe[0][1]))) > 0.5 / fps:
                    off_grid += 1
            gaps += off_grid > 0
            print("ok %-36s %4d frames: pts and t = ffprobe's frame by frame (start %.3f s%s)"
                  % (name, len(got), start,
                     ", %d frames off index / rate" % off_grid if off_grid else ""))
        check(gaps >= 1, "no clip whose times differ from index / frame rate: the check above "
              "cannot tell the two apart")

        # --fps 1 on the 30 s clip
        vp8 = os.path.join(vdir, "vp8_720p_bigbuckbunny_30s.webm")
        db1 = os.path.join(tmp, "fps.db")
        t0 = time.time()
        r = vidfeat(exe, model, "-o", db1, "--fps", "1", vp8)
        check(r.returncode == 0, "--fps 1: %s" % r.stderr)
        got = rows(db1, vp8)
        check(len(got) == 30, "--fps 1 on 30 s: %d frames" % len(got))
        check(all(abs(t - k) < 1.0 / 24 + 1e-6 for k, (_, _, t) in enumerate(got)),
              "--fps 1 times: %s" % [round(t, 3) for _, _, t in got])
        print("ok --fps 1: 30 frames at t = 0..29 s (%.1f s)" % (time.time() - t0))
        db1b = os.path.join(tmp, "fps02.db")
        r = vidfeat(exe, model, "-o", db1b, "--fps", "0.2", vp8)
        got = [t for _, _, t in rows(db1b, vp8)]
        check(r.returncode == 0 and len(got) == 6 and
              all(abs(t - 5 * k) < 1.0 / 24 + 1e-6 for k, t in enumerate(got)),
              "--fps 0.2 (seeking): %s" % got)
        print("ok --fps 0.2: 6 frames at t = 0, 5, ..., 25 s (seeking)")

        # --keyframes
        h264 = os.path.join(vdir, "h264_720p_bigbuckbunny.mp4")
        db2 = os.path.join(tmp, "key.db")
        r = vidfeat(exe, model, "-o", db2, "--keyframes", h264)
        check(r.returncode == 0, "--keyframes: %s" % r.stderr)
        keys = [p for p, k in ffprobe_frames(h264) if k]
        got = [p for _, p, _ in rows(db2, h264)]
        check(got == keys, "--keyframes pts %s, ffprobe key frames %s" % (got, keys))
        print("ok --keyframes: %d key frames = ffprobe's" % len(keys))

        # the upside-down phone clip is turned upright: same vectors as ffmpeg's autorotated frames
        phone = os.path.join(vdir, "phone_rotated180_ipad2.mov")
        upright = os.path.join(tmp, "upright.nut")
        subprocess.run(["ffmpeg", "-v", "error", "-i", phone, "-an", "-c:v", "rawvideo",
                        "-pix_fmt", "yuv420p", upright], check=True)
        vecs = []
        for clip in (phone, upright):
            d = os.path.join(tmp, os.path.basename(clip) + ".db")
            r = vidfeat(exe, model, "-o", d, clip)
            check(r.returncode == 0, "%s: %s" % (clip, r.stderr))
            con = sqlite3.connect(d)
            vecs.append([v for (v,) in con.execute("SELECT vec FROM features ORDER BY t")])
            con.close()
        check(len(vecs[0]) == len(vecs[1]) == 81, "phone clip frame counts %d/%d" %
              (len(vecs[0]), len(vecs[1])))
        import array
        worst = 0.0
        for a, b in zip(*vecs):
            x, y = array.array("f", a), array.array("f", b)
            worst = max(worst, max(abs(p - q) for p, q in zip(x, y)) / max(abs(q) for q in y))
        check(worst < 1e-3, "rotated clip differs from its upright frames: %.3g" % worst)
        print("ok rotation: phone clip = upright frames (max relative difference %.1e)" % worst)

        # a rerun skips everything that is done
        r = vidfeat(exe, model, "-o", db, "--json", *clips)
        s = json.loads(r.stdout)
        check(s["skipped"] == len(clips) - 1 and s["failed"] == 1, "rerun: %s" % s)
        print("ok rerun: %d skipped" % s["skipped"])

        # kill -9 at random moments, then finish: every row (frame_index, pts, t, and the
        # vector within 1e-5) equals the clean run's. Each kill leaves the rows written so far: they
        # must already be the clean run's rows, the file not done; some kills must land while a
        # file's rows were being written (not all before the first batch or after the last).
        clean = rows_of(db)
        big = [os.path.join(vdir, f) for f in ("vp8_720p_bigbuckbunny_30s.webm",
                                               "h264_1080p_smpte_bars_counter.mp4",
                                               "mpeg4asp_megamind.avi")]
        clean_big = {k: v for k, v in clean.items() if k[0] in big}
        dbk = os.path.join(tmp, "kill.db")
        rnd = random.Random(7)
        mid_file = 0
        # these kills come from outside, not from the files: with the default --max-attempts (3)
        # a file killed three times in a row would be given up (cli_workers_* test that)
        patient = ["--max-attempts", "1000"]
        for i in range(20):
            if i % 5 == 0 and os.path.exists(dbk):
                os.remove(dbk)  # start over now and then, so kills keep meeting unfinished files
            p = subprocess.Popen([exe, "--model", model, "--batch", "8", "-o", dbk, *patient,
                                  *big],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rnd.uniform(0.05, 1.5))
            p.send_signal(signal.SIGKILL)
            p.wait()
            consistent(dbk)
            mid_file += interrupted_rows_kept(dbk, clean_big, "kill %d" % i)
        check(mid_file >= 3, "only %d of 20 kills landed while a file's rows were being written"
              % mid_file)
        r = vidfeat(exe, model, "-o", dbk, *patient, *big)
        check(r.returncode == 0, "after kills: %s" % r.stderr)
        consistent(dbk)
        same_rows(rows_of(dbk), clean_big, "after kills")
        check(counts(dbk) == {b: counts(db)[b] for b in big}, "done extractions after kills")
        print("ok kill -9 x20 (%d mid-file, their rows kept and equal to the clean run's): "
              "database consistent, the rerun's rows equal the clean run's" % mid_file)

        # Ctrl-C (SIGINT) and SIGTERM stop quickly with vidfeat's own exit (130, "interrupted"),
        # keep what was written (the clean run's rows), and leave the interrupted file not done
        for sig in (signal.SIGINT, signal.SIGTERM):
            name = signal.Signals(sig).name
            dbi = os.path.join(tmp, "%s.db" % name)
            p = subprocess.Popen([exe, "--model", model, "--batch", "8", "-o", dbi, *big],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            # the signal lands once a file has rows written (not after a fixed time: a loaded
            # machine may not have begun by then)
            waited = time.time()
            while not rows_running(dbi) and time.time() - waited < 60 and p.poll() is None:
                time.sleep(0.02)
            t0 = time.time()
            p.send_signal(sig)
            _, err = p.communicate(timeout=30)
            stop = time.time() - t0
            check(p.returncode == 130 and "interrupted" in err,
                  "%s: exit %d (want vidfeat's own 130 and 'interrupted'): %s"
                  % (name, p.returncode, err))
            check(stop < 1.0, "%s took %.2f s to stop" % (name, stop))
            consistent(dbi)
            check(interrupted_rows_kept(dbi, clean_big, name) == 1,
                  "%s: no file was interrupted with rows written" % name)
            r = vidfeat(exe, model, "-o", dbi, *big)
            check(r.returncode == 0, "%s: the rerun: %s" % (name, r.stderr))
            same_rows(rows_of(dbi), clean_big, "%s then rerun" % name)
            print("ok %s: stopped in %.2f s, the interrupted file not done with its rows kept, "
                  "the rerun's rows equal the clean run's" % (name, stop))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
