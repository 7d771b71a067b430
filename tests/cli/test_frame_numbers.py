#!/usr/bin/python3
"""Frame numbers and the frames each sampling option keeps, against ffprobe, on clips ffmpeg
makes here: H.264 with B-frames (MP4, one cut by an edit list; a long open GOP in Matroska), HEVC with B-frames, VP9
with hidden alt-ref frames, MPEG-2 in a transport stream, and a variable-frame-rate clip.

For every sampling option (every frame, --fps 2, --fps 1, --fps 0.1 which skips whole groups
of pictures unread by the decoder, --every 7, --keyframes, --start, --start with --fps and with
--duration, --max-frames) each stored row's frame_index must be the frame's number in ffprobe's
list of decoded frames (presentation order, from 0), and the rows must be exactly the frames the
documented rule picks from that list:

  --fps R      the first frame at or after each 1/R s slot from --start
  --every N    every Nth frame from the first at or after --start
  --keyframes  the frames ffprobe marks as key frames

usage: test_frame_numbers.py VIDFEAT MODELS_DIR
"""
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, encode, ff, ffprobe_times

EPS = 1e-6


def make_clips(d):
    def src(rate, seconds):
        return ["-f", "lavfi", "-i", "testsrc2=size=96x64:rate=%s" % rate, "-t", str(seconds)]

    specs = [
        # B-frames (pyramid), a key frame every 3 s: --fps 0.1 skips ahead
        ("h264_bframes.mp4", "libx264",
         src(30, 24) + ["-c:v", "libx264", "-bf", "3", "-g", "90"]),
        # a long open GOP: leading B-frames after each key frame are shown before it
        ("h264_opengop.mkv", "libx264",
         src(25, 24) + ["-c:v", "libx264", "-bf", "3", "-x264-params",
                        "keyint=250:min-keyint=250:open-gop=1:scenecut=0"]),
        ("hevc_bframes.mp4", "libx265",
         src(25, 20) + ["-c:v", "libx265", "-x265-params", "log-level=error:bframes=4:keyint=50",
                        "-tag:v", "hvc1"]),
        # hidden alt-ref frames inside superframes
        ("vp9_altref.webm", "libvpx-vp9",
         src(24, 20) + ["-c:v", "libvpx-vp9", "-deadline", "good", "-cpu-used", "8",
                        "-auto-alt-ref", "1", "-lag-in-frames", "16", "-g", "48"]),
        ("mpeg2.ts", "mpeg2video",
         src(25, 20) + ["-c:v", "mpeg2video", "-bf", "2", "-g", "15", "-q:v", "5"]),
        # variable frame rate: steps of 40, 40 and 110 ms, B-frames
        ("vfr.mkv", "libx264",
         ["-f", "lavfi", "-i", "testsrc2=size=96x64:rate=25", "-t", "24", "-vf",
          "settb=1/1000,setpts='floor(N/3)*190+mod(N,3)*40'", "-fps_mode", "vfr",
          "-c:v", "libx264", "-bf", "2", "-g", "60"]),
    ]
    made = encode(d, specs)
    # an edit list: copied from 2.3 s, the packets before the key frame there are decoded for
    # their references but never shown
    if "h264_bframes.mp4" in made:
        ff("-ss", "2.3", "-i", os.path.join(d, "h264_bframes.mp4"), "-c", "copy",
           os.path.join(d, "h264_editlist.mp4"))
        made.append("h264_editlist.mp4")
    return made


def probe(path):
    """[(number, pts, t, key)] of the decoded frames, in ffprobe's order."""
    times, _ = ffprobe_times(path)
    r = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                        "frame=key_frame", "-of", "json", path], capture_output=True, text=True)
    check(r.returncode == 0, "ffprobe %s: %s" % (path, r.stderr))
    keys = [int(f.get("key_frame", 0)) for f in json.loads(r.stdout)["frames"]]
    check(len(keys) == len(times), "%s: ffprobe's two listings differ" % path)
    return [(n, pts, t, k) for n, ((pts, t), k) in enumerate(zip(times, keys))]


def expected(frames, opts):
    """The (number, pts) the documented sampling rule keeps."""
    start = opts.get("start", 0.0)
    end = start + opts["duration"] if "duration" in opts else math.inf
    out, next_t, first = [], start, None
    for n, pts, t, key in frames:
        if t < start - EPS:
            continue
        if t >= end - EPS:
            break
        if first is None:
            first = n
        if "keyframes" in opts:
            keep = key == 1
        elif "every" in opts:
            keep = (n - first) % opts["every"] == 0
        elif "fps" in opts:
            keep = t >= next_t - EPS
            if keep:
                slot = math.floor((t - start) * opts["fps"] + EPS)
                next_t = start + (slot + 1) / opts["fps"]
        else:
            keep = True
        if keep:
            out.append((n, pts))
            if len(out) == opts.get("max_frames", -1):
                break
    return out


CASES = [
    ("every frame", {}, []),
    ("--fps 2", {"fps": 2.0}, ["--fps", "2"]),
    ("--fps 1", {"fps": 1.0}, ["--fps", "1"]),
    ("--fps 0.1", {"fps": 0.1}, ["--fps", "0.1"]),
    ("--every 7", {"every": 7}, ["--every", "7"]),
    ("--keyframes", {"keyframes": 1}, ["--keyframes"]),
    ("--start 7.3", {"start": 7.3}, ["--start", "7.3"]),
    ("--start 7.3 --fps 0.5", {"start": 7.3, "fps": 0.5}, ["--start", "7.3", "--fps", "0.5"]),
    ("--start 5 --duration 3 --every 2", {"start": 5.0, "duration": 3.0, "every": 2},
     ["--start", "5", "--duration", "3", "--every", "2"]),
    ("--fps 1 --max-frames 4", {"fps": 1.0, "max_frames": 4}, ["--fps", "1",
                                                              "--max-frames", "4"]),
]


def stored(db):
    con = sqlite3.connect(db)
    out = {}
    for path, status, error, fi, pts in con.execute(
            "SELECT v.path, e.status, coalesce(e.error, ''), f.frame_index, f.pts FROM "
            "extractions e JOIN videos v ON v.id = e.video_id LEFT JOIN features f ON "
            "f.extraction_id = e.id ORDER BY v.path, f.t"):
        c = out.setdefault(os.path.basename(path), {"status": status, "error": error,
                                                    "rows": []})
        if fi is not None:
            c["rows"].append((fi, pts))
    con.close()
    return out


def main():
    exe, models = sys.argv[1:3]
    if not (shutil.which("ffmpeg") and shutil.which("ffprobe")):
        print("skipped: ffmpeg and ffprobe are needed")
        return SKIP
    model = os.path.join(models, "tiny_cnn.onnx")
    with tempfile.TemporaryDirectory(prefix="vf_framenum_") as tmp:
        clips = os.path.join(tmp, "clips")
        os.mkdir(clips)
        names = make_clips(clips)
        check(names, "no clip could be made")
        frames = {name: probe(os.path.join(clips, name)) for name in names}
        for label, opts, args in CASES:
            db = os.path.join(tmp, "%d.db" % CASES.index((label, opts, args)))
            r = subprocess.run([exe, "--model", model, "-q", "-o", db, *args, clips],
                               capture_output=True, text=True, timeout=300)
            check(r.returncode == 0, "%s: exit %d: %s" % (label, r.returncode, r.stderr))
            got = stored(db)
            for name in names:
                c = got.get(name)
                check(c and c["status"] == "done", "%s %s: %s" % (name, label, c))
                want = expected(frames[name], opts)
                have = c["rows"]
                if have != want:
                    bad = next(i for i, (a, b) in enumerate(zip(have + [None] * len(want),
                                                               want + [None] * len(have)))
                               if a != b)
                    check(False, "%s %s: %d rows, %d expected; row %d is (frame_index, pts) "
                          "%s, ffprobe's %s" % (name, label, len(have), len(want), bad,
                                                have[bad] if bad < len(have) else None,
                                                want[bad] if bad < len(want) else None))
            print("ok %-34s %s" % (label, ", ".join("%s %d" % (n, len(got[n]["rows"]))
                                                    for n in names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
