#!/usr/bin/python3
"""What one small hostile input may cost, and what vidfeat says when it refuses (made here with
ffmpeg and Python; no ../shared needed):

  streams    a 2 MB-class Matroska with 300 video streams: failed before its streams are probed,
             naming --max-streams (64); with --max-streams 400 it is read
  pixels     an 8192x8192 H.264 of ~200 KB (MP4, and as a transport stream whose header does not
             say its size): failed before a frame is decoded, naming --max-pixels (40,000,000);
             with --max-pixels 70000000 it is read
  reason     a 65535x65535 PNG: FFmpeg's own reason ("Picture size 65535x65535 is invalid"),
             not "unusable frame size 0x0"; a manifest whose file is '../x.onnx': that it must
             be a bare file name, not "not found"
  duration   a 77 KB H.264 of 90 minutes of a still picture: failed past an hour and an hour a
             MB of the file (1:04:38), naming --max-duration; --max-duration 0 reads it all,
             --max-duration 10:00 fails it at ten minutes
  memory     peak memory of refusing the 8192x8192 file under 200 MB; of extracting a 4K clip
             (one decoder, tiny CNN) under 400 MB (docs/security.md states ~160 MB)

usage: test_limits.py VIDFEAT MODELS_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

from vfcheck import SKIP, check, ff


def peak_kb(cmd):
    """Run cmd in a child of a fresh Python; its peak resident memory in KB and its result."""
    probe = ("import resource, subprocess, sys, json\n"
             "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "print(json.dumps([resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
             " r.returncode, r.stdout, r.stderr]))\n")
    out = subprocess.run([sys.executable, "-c", probe, *cmd], capture_output=True, text=True,
                         timeout=300)
    return json.loads(out.stdout)


def png(path, w, h):
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def extract(exe, model, db, *args):
    r = subprocess.run([exe, "--model", model, "-o", db, "--json", *args], capture_output=True,
                       text=True, timeout=300)
    doc = json.loads(r.stdout) if r.stdout.strip() else {"files": []}
    return r, {os.path.basename(f["path"]): f for f in doc["files"]}


def main():
    exe, models = sys.argv[1:3]
    if not shutil.which("ffmpeg"):
        print("skipped: ffmpeg is needed")
        return SKIP
    model = os.path.join(models, "tiny_cnn.onnx")
    with tempfile.TemporaryDirectory(prefix="vf_limits_") as tmp:
        d = os.path.join(tmp, "in")
        os.mkdir(d)
        streams = os.path.join(d, "many_streams.mkv")
        ff("-f", "lavfi", "-i", "testsrc=size=16x16:rate=1", "-frames:v", "1",
           *[a for _ in range(300) for a in ("-map", "0:v")], "-c:v", "mpeg4", streams)
        square = os.path.join(d, "square_8192.mp4")
        ff("-f", "lavfi", "-i", "color=size=8192x8192:rate=1", "-frames:v", "2", "-c:v",
           "libx264", "-preset", "ultrafast", square)
        ts = os.path.join(d, "square_8192.ts")
        ff("-i", square, "-c", "copy", ts)
        huge = os.path.join(d, "huge.png")
        png(huge, 65535, 65535)

        r, files = extract(exe, model, os.path.join(tmp, "a.db"), d)
        check(r.returncode == 1 and len(files) == 4, "limits: %d %r" % (r.returncode, r.stderr))
        want = {
            "many_streams.mkv": "300 streams, more than the 64 allowed (--max-streams): not "
                                "probed",
            "square_8192.mp4": "frames of 8192x8192 (67108864 pixels), more than the 40000000 "
                               "allowed (--max-pixels): not decoded",
            "square_8192.ts": "frames of 8192x8192 (67108864 pixels), more than the 40000000 "
                              "allowed (--max-pixels): not decoded",
            "huge.png": "unusable frame size: Picture size 65535x65535 is invalid",
        }
        for name, msg in want.items():
            f = files[name]
            check(f["status"] == "failed" and f["error"] == msg,
                  "%s: %s %r, want %r" % (name, f["status"], f["error"], msg))
            line = "vidfeat: %s: %s" % (os.path.join(d, name), msg)
            check(r.stderr.splitlines().count(line) == 1, "%s: no line %r" % (name, line))
        print("ok refused with one line naming the limit: %s" % ", ".join(sorted(want)))

        r, files = extract(exe, model, os.path.join(tmp, "b.db"), "--max-streams", "400",
                           "--max-pixels", "70000000", streams, square)
        check(r.returncode == 0 and files["many_streams.mkv"]["frames"] == 1 and
              files["square_8192.mp4"]["frames"] == 2, "raised limits: %d %r" % (r.returncode,
                                                                                 r.stderr))
        print("ok --max-streams 400 and --max-pixels 70000000 let them through")

        still = os.path.join(tmp, "still.mp4")  # 90 minutes of one grey picture, ~77 KB
        ff("-f", "lavfi", "-i", "color=c=gray:s=32x32:r=1", "-t", "5400", "-c:v", "libx264",
           "-preset", "ultrafast", "-g", "1000", still)
        limit = 3600 * (1 + os.path.getsize(still) / 1e6)
        for k, (args, code, said) in enumerate((([], 1, "more than its size allows"),
                                                (["--max-duration", "0"], 0, None),
                                                (["--max-duration", "10:00"], 1,
                                                 "runs past 0:10:00"))):
            r, files = extract(exe, model, os.path.join(tmp, "s%d.db" % k), "--fps", "0.1",
                               *args, still)
            f = files.get("still.mp4", {})
            check(r.returncode == code and (said is None or (said in f.get("error", "") and
                                                             "--max-duration" in f["error"])),
                  "a still picture of 90 minutes %s: %d %r" % (args, r.returncode, r.stderr))
            if code == 0:
                check(f["frames"] == 540, "--max-duration 0: %s frames" % f.get("frames"))
        print("ok 90 minutes in %d KB: failed past %d:%02d (--max-duration 0 reads it, 10:00 "
              "stops it there)" % (os.path.getsize(still) // 1024, limit // 3600,
                                   limit % 3600 // 60))

        bad = os.path.join(tmp, "bad_models")
        os.mkdir(bad)
        manifest = json.load(open(os.path.join(models, "inception_v3.json")))
        manifest.update(name="escaping", file="../x.onnx")
        json.dump(manifest, open(os.path.join(bad, "escaping.json"), "w"))
        r = subprocess.run([exe, "--models-dir", bad, "--model", "escaping", "-o",
                            os.path.join(tmp, "c.db"), square], capture_output=True, text=True)
        check(r.returncode == 3 and "must be a bare file name" in r.stderr and
              "not found" not in r.stderr, "manifest ../x.onnx: exit %d, %r" % (r.returncode, r.stderr))
        print("ok a manifest naming ../x.onnx: %s" % r.stderr.strip())

        kb, rc, _, err = peak_kb([exe, "--model", model, "-q", "-o", os.path.join(tmp, "d.db"),
                                  square])
        check(rc == 1 and kb < 200 * 1024, "refusing 8192x8192: exit %d, %d KB" % (rc, kb))
        clip = os.path.join(tmp, "4k.mp4")
        ff("-f", "lavfi", "-i", "testsrc2=size=3840x2160:rate=30", "-t", "1", "-c:v", "libx264",
           "-preset", "ultrafast", clip)
        kb4, rc, _, err = peak_kb([exe, "--model", model, "-q", "--decoders", "1", "-o",
                                   os.path.join(tmp, "e.db"), clip])
        check(rc == 0 and kb4 < 400 * 1024, "a 4K clip: exit %d, %d KB %s" % (rc, kb4, err))
        print("ok peak memory: refusing 8192x8192 %d MB, extracting 4K %d MB"
              % (kb // 1024, kb4 // 1024))
    return 0


if __name__ == "__main__":
    sys.exit(main())
