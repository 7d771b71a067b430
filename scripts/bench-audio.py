#!/usr/bin/python3
"""Audio models: vidfeat (f32, bf16) against ONNX Runtime 1.30 (f32) on the network alone, and
vidfeat's whole audio extraction against the sound's duration, in the same run. Prints tables;
nothing is asserted.

    scripts/bench-audio.py [--batch 32] [--runs 3] [--rounds 2] [--threads 2] [--seconds 600]
                           [--models vggish,panns_cnn14] [--no-end-to-end]
                           [--video-model inception_v3] [--video-fps 1]

Network alone: VGGish on 0.96 s patches [1, 96, 64] and CNN14 on 1 s patches [1, 100, 64],
batch --batch, patches/s, the median of --rounds x --runs; vidfeat through `vidfeat bench
--infer-only` (synthetic patches), ONNX Runtime through scripts/ort_clip_bench.js
(onnxruntime-node from build/ort, or ORT_NODE_DIR). The files are scripts/export-audio.py's
(seeded random weights), made in --model-dir.

End to end: a --seconds long file (a 1280x720 H.264 video beside stereo 44.1 kHz AAC pink noise,
made here by the ffmpeg CLI), `vidfeat --audio MODEL` into a new SQLite database: decoding the
sound, resampling, the log-mel front end, the network, the store; the model's load included.
Reported as patches/s and as times real time (the sound's seconds over the run's). Then beside a
picture model: `vidfeat --model VIDEO_MODEL --fps VIDEO_FPS` on the same file alone, and with
`--audio vggish` beside it in the same command: what the sound's extraction adds to the run.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vfbench import cpu_name, ort_env, run_json  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHAPES = {"vggish": "1x96x64", "panns_cnn14": "1x100x64"}


def export(model_dir, name):
    path = os.path.join(model_dir, name + ".onnx")
    if not os.path.exists(path):
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "export-audio.py"), "--out",
                        model_dir, name], check=True, capture_output=True)
    return path


def network_alone(a, env):
    res = {}
    for rnd in range(a.rounds):
        for name in a.models:
            path = export(a.model_dir, name)
            for who, prec in [("vidfeat", "f32"), ("vidfeat", "bf16"), ("onnxruntime 1.30", "f32")]:
                if who == "vidfeat":
                    argv = [a.vidfeat, "bench", "--infer-only", "--json", "--model", path,
                            "--models-dir", a.model_dir, "--batch", str(a.batch), "--images",
                            str(2 * a.batch), "--threads", str(a.threads), "--runs", str(a.runs),
                            "--precision", prec]
                else:
                    argv = ["node", os.path.join(HERE, "ort_clip_bench.js"), path, SHAPES[name],
                            str(a.batch), str(2 * a.batch), str(a.runs), str(a.threads)]
                r = run_json(argv, env)
                if not r:
                    continue
                pps = r.get("infer_fps", r.get("windows_per_s"))
                res.setdefault((name, who, prec), []).append(pps)
                print("round %d  %-12s %-17s %-4s %8.1f patches/s" % (rnd + 1, name, who, prec,
                                                                       pps), flush=True)
    print("\n| model | patch | vidfeat f32 | vidfeat bf16 | ONNX Runtime f32 | f32 ratio |"
          " bf16 ratio |")
    print("|---|---|---|---|---|---|---|")
    for name in a.models:
        med = {k[1:]: statistics.median(v) for k, v in res.items() if k[0] == name}
        f32, bf16 = med.get(("vidfeat", "f32"), 0), med.get(("vidfeat", "bf16"), 0)
        ort = med.get(("onnxruntime 1.30", "f32"), 0)
        print("| %s | %s | %.1f | %.1f | %.1f | %s | %s |" % (
            name, SHAPES[name], f32, bf16, ort, "%.2fx" % (f32 / ort) if ort else "-",
            "%.2fx" % (bf16 / ort) if ort else "-"))


def end_to_end(a):
    with tempfile.TemporaryDirectory(prefix="vidfeat_bench_audio_") as tmp:
        clip = os.path.join(tmp, "long.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc=size=1280x720:rate=25", "-f", "lavfi", "-i",
                        "anoisesrc=color=pink:amplitude=0.3:seed=5:sample_rate=44100", "-t",
                        str(a.seconds), "-ac", "2", "-c:v", "libx264", "-preset", "ultrafast",
                        "-pix_fmt", "yuv420p", "-c:a", "aac", clip], check=True)
        print("\n| model | sound | precision | wall s | patches/s | times real time |")
        print("|---|---|---|---|---|---|")
        for name in a.models:
            export(a.model_dir, name)
            for prec in ("f32", "bf16"):
                db = os.path.join(tmp, "%s_%s.db" % (name, prec))
                t0 = time.time()
                r = subprocess.run([a.vidfeat, "--audio", name, "--models-dir", a.model_dir,
                                    "--precision", prec, "--threads", str(a.threads), "--batch",
                                    str(a.batch), "-q", "--json", "-o", db, clip],
                                   capture_output=True, text=True)
                wall = time.time() - t0
                if r.returncode != 0:
                    print("%s %s: %s" % (name, prec, r.stderr.strip()))
                    continue
                import json
                n = json.loads(r.stdout)["files"][0]["frames"]
                print("| %s | %d s | %s | %.2f | %.1f | %.0fx |" % (
                    name, a.seconds, prec, wall, n / wall, a.seconds / wall), flush=True)
        beside(a, clip, tmp)


def beside(a, clip, tmp):
    """The picture model alone, then with --audio vggish after it, on the same file."""
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "export-torchvision.py"), "--out",
                    a.model_dir, a.video_model], check=True, capture_output=True)
    export(a.model_dir, "vggish")
    walls = {}
    for label, extra in (("pictures alone", []), ("pictures + vggish", ["--audio", "vggish"])):
        db = os.path.join(tmp, "beside_%d.db" % len(walls))
        t0 = time.time()
        r = subprocess.run([a.vidfeat, "--model", a.video_model, "--fps", str(a.video_fps),
                            "--models-dir", a.model_dir, "--threads", str(a.threads), "-q",
                            "-o", db, clip] + extra, capture_output=True, text=True)
        walls[label] = time.time() - t0
        if r.returncode != 0:
            print("%s: %s" % (label, r.stderr.strip()))
            return
    alone, both = walls["pictures alone"], walls["pictures + vggish"]
    print("\n| run (%s --fps %g, %d s file) | seconds |" % (a.video_model, a.video_fps, a.seconds))
    print("|---|---|")
    print("| pictures alone | %.1f |" % alone)
    print("| pictures and the sound (vggish), side by side | %.1f (+%.1f%%) |" % (both,
                                                                     100 * (both / alone - 1)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--models", default="vggish,panns_cnn14")
    ap.add_argument("--model-dir", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--vidfeat", default=os.path.join(ROOT, "build", "src", "cli", "vidfeat"))
    ap.add_argument("--no-end-to-end", action="store_true")
    ap.add_argument("--video-model", default="inception_v3")
    ap.add_argument("--video-fps", type=float, default=1.0)
    a = ap.parse_args()
    a.models = [m for m in a.models.split(",") if m in SHAPES]
    os.makedirs(a.model_dir, exist_ok=True)
    print("CPU: %s, --threads %d, batch %d" % (cpu_name(), a.threads, a.batch), flush=True)
    network_alone(a, ort_env(a.threads))
    if not a.no_end_to_end:
        end_to_end(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
