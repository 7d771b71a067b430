#!/usr/bin/python3
"""What --shots costs beside decoding: a 720p H.264 clip (made here from ../shared's 30 s Big Buck
Bunny, or the clip given) decoded whole by vidfeat with and without --shots, in alternating
rounds, each run keeping one frame (--every 1000000: every frame is still decoded, the network
sees one); the decode stage's frames/s as the extraction records it (decoding plus, with
--shots, the measurement of every frame). Prints the medians, the share --shots adds to the
decode time, and the CPU.

usage: /usr/bin/python3 scripts/bench-shots.py [--clip FILE] [--rounds 5] [--decode-threads N]
"""
import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from vfbench import ROOT, cpu_name  # noqa: E402

SOURCE = os.path.join(ROOT, "..", "shared", "videos", "vp8_720p_bigbuckbunny_30s.webm")


def decode_fps(vidfeat, model, clip, db, shots, threads):
    if os.path.exists(db):
        os.unlink(db)
    args = [vidfeat, "--model", model, "--every", "1000000", "-o", db, "-q"]
    if threads:
        args += ["--decode-threads", str(threads)]
    if shots:
        args.append("--shots")
    subprocess.run(args + [clip], check=True)
    con = sqlite3.connect(db)
    fps, = con.execute("SELECT decode_fps FROM extractions").fetchone()
    con.close()
    return fps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clip")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--decode-threads", type=int, default=0)
    ap.add_argument("--vidfeat", default=os.path.join(ROOT, "build", "src", "cli", "vidfeat"))
    a = ap.parse_args()
    model = os.path.join(ROOT, "models", "tiny_cnn.onnx")
    tmp = tempfile.mkdtemp(prefix="vidfeat_bench_shots_")
    try:
        clip = a.clip
        if not clip:
            if not os.path.exists(SOURCE):
                print("bench-shots: no clip given and no %s" % SOURCE, file=sys.stderr)
                return 1
            clip = os.path.join(tmp, "bbb_720p_h264.mp4")
            subprocess.run(["ffmpeg", "-loglevel", "error", "-i", SOURCE, "-an", "-c:v",
                            "libx264", "-preset", "fast", "-bf", "3", clip], check=True)
        plain, shots = [], []
        for _ in range(a.rounds):
            plain.append(decode_fps(a.vidfeat, model, clip, os.path.join(tmp, "a.db"), 0,
                                    a.decode_threads))
            shots.append(decode_fps(a.vidfeat, model, clip, os.path.join(tmp, "b.db"), 1,
                                    a.decode_threads))
        p, s = statistics.median(plain), statistics.median(shots)
        print("bench-shots: %s, %s, decode threads %s, %d rounds" %
              (cpu_name(), os.path.basename(clip), a.decode_threads or "automatic", a.rounds))
        print("  decode alone      %7.1f frames/s (min %.1f, max %.1f)" %
              (p, min(plain), max(plain)))
        print("  decode + --shots  %7.1f frames/s (min %.1f, max %.1f)" %
              (s, min(shots), max(shots)))
        print("  --shots adds %.1f%% to the decode time (%.2f ms a frame)" %
              (100.0 * (p / s - 1.0), 1000.0 * (1.0 / s - 1.0 / p)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
