#!/usr/bin/python3
"""The pipeline end to end on clips ffmpeg makes here, so that a clone without ../shared still
tests it (../shared/videos only adds real footage): H.264, HEVC, VP9 (WebM), MPEG-4 part 2 (AVI),
odd sizes (63x47, 4:4:4 H.264), a 90-degree rotation in the container, variable frame rate, and a
file cut short. One run takes them all, as one directory:

  frames      each done clip has exactly the frames ffprobe decodes, frame_index 0..n-1
  times       t and pts are ffprobe's (the documented rule), strictly increasing; the VFR clip's
              steps are not all equal
  rotation    the rotated clip is recorded with rotation 270 and its vectors equal those of the
              same frames turned upright by ffmpeg (both lossless), within 1e-4
  cut short   done with the note "partial: N of M frames the index promises", its frames up to
              the cut stored
  vectors     finite; --batch 1 and --batch 7 store the same frames, times and notes, the
              vectors within 1e-5 (oneDNN picks other kernels per batch size)

usage: test_codecs.py VIDFEAT MODELS_DIR
"""
import json
import math
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, encode, ff, ffprobe_times


def make_clips(d):
    """{name: what it is} of the clips made in d."""
    src = ["-f", "lavfi", "-i", "testsrc2=size=96x64:rate=12.5", "-t", "2"]
    clips = {}
    specs = [
        ("h264.mp4", "libx264", src + ["-c:v", "libx264", "-g", "6", "-bf", "2"]),
        ("hevc.mkv", "libx265", src + ["-c:v", "libx265", "-x265-params", "log-level=error",
                                       "-tag:v", "hvc1"]),
        ("vp9.webm", "libvpx-vp9", src + ["-c:v", "libvpx-vp9", "-deadline", "realtime"]),
        ("mpeg4.avi", "mpeg4", src + ["-c:v", "mpeg4", "-q:v", "4"]),
        ("odd_63x47.mp4", "libx264", ["-f", "lavfi", "-i", "testsrc=size=63x47:rate=10", "-t",
                                      "1.5", "-c:v", "libx264", "-pix_fmt", "yuv444p"]),
        # variable frame rate: steps of 40, 40 and 70 ms
        ("vfr.mkv", "libx264", ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=25", "-t", "2",
                                "-vf", "settb=1/1000,setpts='floor(N/3)*150+mod(N,3)*40'",
                                "-fps_mode", "vfr", "-c:v", "libx264"]),
    ]
    made = encode(d, specs)
    clips.update((name, enc) for name, enc, _ in specs if name in made)
    # a lossless clip and its copy with a display matrix (players turn it 90 degrees
    # counter-clockwise; FFmpeg 5.1 writes the matrix from the rotate tag): vidfeat turns it
    # upright, 270 degrees clockwise
    ff("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10", "-t", "1", "-c:v", "libx264", "-qp",
       "0", "-pix_fmt", "yuv444p", os.path.join(d, "plain.mkv"))
    ff("-i", os.path.join(d, "plain.mkv"), "-c", "copy", "-metadata:s:v:0", "rotate=90",
       os.path.join(d, "rotated.mp4"))
    clips["rotated.mp4"] = "rotation"
    # cut short: the first third of an MP4 whose index is at the front
    whole = os.path.join(d, "..", "whole.mp4")
    ff(*src, "-c:v", "libx264", "-g", "5", "-bf", "0", "-movflags", "+faststart", whole)
    data = open(whole, "rb").read()
    open(os.path.join(d, "cut.mp4"), "wb").write(data[:len(data) * 2 // 3])
    clips["cut.mp4"] = "cut short"
    return clips


def stored(db):
    con = sqlite3.connect(db)
    out = {}
    for path, status, error, rot, fi, pts, t, vec in con.execute(
            "SELECT v.path, e.status, coalesce(e.error, ''), v.rotation, f.frame_index, f.pts,"
            " f.t, f.vec FROM extractions e JOIN videos v ON v.id = e.video_id LEFT JOIN features"
            " f ON f.extraction_id = e.id ORDER BY v.path, f.frame_index"):
        c = out.setdefault(os.path.basename(path), {"status": status, "error": error,
                                                    "rotation": rot, "rows": []})
        if vec is not None:
            c["rows"].append((fi, pts, t, vec))
    con.close()
    return out


def floats(vec):
    return struct.unpack("<%df" % (len(vec) // 4), vec)


def main():
    exe, models = sys.argv[1:3]
    if not (shutil.which("ffmpeg") and shutil.which("ffprobe")):
        print("skip: ffmpeg and ffprobe are needed")
        return SKIP
    model = os.path.join(models, "tiny_cnn.onnx")
    tmp = tempfile.mkdtemp(prefix="vidfeat_codecs_")
    try:
        d = os.path.join(tmp, "clips")
        os.mkdir(d)
        clips = make_clips(d)
        upright = os.path.join(tmp, "upright.mkv")
        ff("-i", os.path.join(d, "plain.mkv"), "-vf", "transpose=cclock", "-c:v", "libx264",
           "-qp", "0", "-pix_fmt", "yuv444p", upright)
        runs = {}
        for batch in ("7", "1"):
            db = os.path.join(tmp, "b%s.db" % batch)
            r = subprocess.run([exe, "--model", model, "--batch", batch, "-o", db, d, upright],
                               capture_output=True, text=True, timeout=240)
            check(r.returncode == 0, "batch %s: exit %d %r" % (batch, r.returncode, r.stderr))
            runs[batch] = stored(db)
        got = runs["7"]
        def meta(run):
            return {n: (c["status"], c["error"], c["rotation"], [r[:3] for r in c["rows"]])
                    for n, c in run.items()}
        check(meta(runs["1"]) == meta(got), "--batch 1 and --batch 7 store other frames")
        diff = max(abs(x - y) / max(abs(y), 1.0) for n in got
                   for ra, rb in zip(runs["1"][n]["rows"], got[n]["rows"])
                   for x, y in zip(floats(ra[3]), floats(rb[3])))
        check(diff <= 1e-5, "--batch 1 and --batch 7: vectors differ by %.3g" % diff)
        for name in clips:
            check(name in got and got[name]["status"] == "done", "%s: %s" % (name, got.get(name)))
        for name, what in sorted(clips.items()):
            c = got[name]
            rows = c["rows"]
            check(all(math.isfinite(x) for r in rows for x in floats(r[3])),
                  "%s: a vector is not finite" % name)
            if name == "cut.mp4":
                check(c["error"].startswith("partial: %d of " % len(rows)) and
                      c["error"].endswith("frames the index promises") and 0 < len(rows) < 25,
                      "cut.mp4: %d rows, note %r" % (len(rows), c["error"]))
                r = subprocess.run([exe, "info", "--json", os.path.join(tmp, "b7.db")],
                                   capture_output=True, text=True, timeout=60)
                info = {os.path.basename(e["path"]): e for e in json.loads(r.stdout)["extractions"]}
                check(info[name]["status"] == "done" and info[name]["note"] == c["error"] and
                      info[name]["error"] is None, "info --json: cut.mp4 %r" % info.get(name))
                want, _ = ffprobe_times(os.path.join(d, name))
                check(all(p == wp and abs(t - wt) < 1e-9 for (_, p, t, _), (wp, wt) in
                          zip(rows, want)), "cut.mp4: times differ from ffprobe's")
                continue
            want, _ = ffprobe_times(os.path.join(d, name))
            check(len(rows) == len(want) and [r[0] for r in rows] == list(range(len(rows))),
                  "%s (%s): %d rows, ffprobe decodes %d" % (name, what, len(rows), len(want)))
            check(all(p == wp and abs(t - wt) < 1e-9 for (_, p, t, _), (wp, wt) in zip(rows, want)),
                  "%s: times differ from ffprobe's: %s / %s" %
                  (name, [(p, t) for _, p, t, _ in rows[:4]], want[:4]))
            ts = [t for _, _, t, _ in rows]
            check(all(b > a for a, b in zip(ts, ts[1:])), "%s: t does not increase" % name)
        if "vfr.mkv" in clips:
            ts = [t for _, _, t, _ in got["vfr.mkv"]["rows"]]
            steps = {round(b - a, 3) for a, b in zip(ts, ts[1:])}
            check(len(steps) >= 2, "vfr.mkv: steps %s" % steps)
        check(got["rotated.mp4"]["rotation"] == 270, "rotated.mp4: rotation %r"
              % got["rotated.mp4"]["rotation"])
        a, b = got["rotated.mp4"]["rows"], got["upright.mkv"]["rows"]
        check(len(a) == len(b) == 10, "rotation: %d and %d rows" % (len(a), len(b)))
        worst = max(abs(x - y) / max(abs(y), 1.0) for ra, rb in zip(a, b)
                    for x, y in zip(floats(ra[3]), floats(rb[3])))
        check(worst <= 1e-4, "rotation: vectors differ from the upright copy's by %.3g" % worst)
        print("ok %s: every frame ffprobe decodes, its times, t increasing; batch 1 = batch 7 "
              "(vectors within %.1g); rotated = upright within %.1g; cut short done with its note"
              % (", ".join("%s (%s)" % (n, w) for n, w in sorted(clips.items())), diff, worst))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
