#!/usr/bin/python3
"""vidfeat --audio end to end, against references written here.

An audio model made here (VGGish's front end from models/vggish.json, a small network: a
convolution, a pool and a projection to 16 values) runs on files ffmpeg makes: AAC beside a video,
the same sound starting 0.7 s after its video, a sound stopping before its video, 5.1 at 48 kHz
in WAV; a video without sound; a sound shorter than a patch.

For each file the stored rows must be, in order, the whole patches of its sound: their number,
each patch's start and end times (t, t_end) from ffprobe's first audio frame time and the
documented layout (patch j: frames 96 j on; frame i: samples 160 i to 160 i + 400 at 16 kHz),
and each vector the network (PyTorch) on the log-mel frames the published VGGish algorithm
(tests/python/logmel_refs.py, numpy) computes from the ffmpeg CLI's mono 16 kHz samples (pan,
every channel weighted 1/channels, + aresample): within 1e-4. The video without sound fails with
one line naming it, the others are done; the short sound is done with no vector and a note. A run
again skips them all; `similar --video COPY --at 1` finds the patch at 1.92 s; --start and
--duration keep the patches starting within them; --fps, --window and a picture model are
refused. Beside a picture
model (--model): two extractions in one database, two --json documents, the sound's rows the
same as alone, the file without sound one line from the sound's run; `similar --audio-at 1`
there finds the patch at 1.92 s without --model (--at needs it), and on a database of pictures
only says, in one line, that it holds no sound.

usage: test_audio.py VIDFEAT MODELS_DIR [--no-library]
  --no-library: Python's similar(audio_at=) is not run (a sanitized libvidfeat.so cannot be
  loaded into Python)
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, ff, rel_err

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def make_model(d, models_dir):
    """tiny_audio.onnx [N, 1, 96, 64] -> 16 and its manifest (VGGish's front end); the module."""
    import torch
    with open(os.path.join(models_dir, "vggish.json")) as f:
        front = json.load(f)["audio"]
    torch.manual_seed(3)

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv2d(1, 4, 3, padding=1)
            self.fc = torch.nn.Linear(4 * 24 * 16, 16)

        def forward(self, x):
            x = torch.nn.functional.avg_pool2d(torch.relu(self.c(x)), 4)
            return self.fc(x.flatten(1))

    m = Tiny().eval()
    torch.onnx.export(m, torch.randn(1, 1, front["patch"], front["mels"]),
                      os.path.join(d, "tiny_audio.onnx"), input_names=["input"],
                      output_names=["output"], opset_version=17,
                      dynamic_axes={"input": {0: "n"}, "output": {0: "n"}})
    with open(os.path.join(d, "tiny_audio.json"), "w") as f:
        json.dump({"vidfeat_manifest": 1, "name": "tiny_audio", "file": "tiny_audio.onnx",
                   "audio": front, "layers": [{"name": "out", "tensor": "output", "dim": 16}]}, f)
    return m, front


def make_files(d):
    video = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=25"]
    stereo = ["-f", "lavfi", "-i", "aevalsrc=exprs='0.5*sin(2*PI*(200*t+300*t*t))|0.3*sin(2*PI*"
              "880*t)':sample_rate=44100:channel_layout=stereo"]
    enc = ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac"]
    p = lambda n: os.path.join(d, n)
    ff(*video, *stereo, "-t", "3.5", *enc, p("av.mp4"))
    ff(*video, "-itsoffset", "0.7", *stereo, "-t", "4", "-map", "0:v", "-map", "1:a", *enc,
       p("late.mp4"))
    ff(*video, *stereo, "-map", "0:v", "-map", "1:a", "-t:v", "4", "-t:a", "2.3", *enc,
       p("short_sound.mkv"))
    six = "|".join("0.%d*sin(2*PI*%d*t)" % (k + 2, 150 * (k + 1)) for k in range(6))
    ff("-f", "lavfi", "-i", "aevalsrc=exprs='%s':sample_rate=48000:channel_layout=5.1" % six,
       "-t", "2.2", "-c:a", "pcm_s16le", p("six.wav"))
    ff(*video, "-t", "1", "-c:v", "libx264", "-pix_fmt", "yuv420p", p("silent.mp4"))
    ff("-f", "lavfi", "-i", "aevalsrc=exprs='0.4*sin(2*PI*500*t)':sample_rate=22050", "-t",
       "0.5", "-c:a", "pcm_s16le", p("blip.wav"))
    return ["av.mp4", "late.mp4", "short_sound.mkv", "six.wav"]


def reference_samples(path, rate, tmp):
    """The ffmpeg CLI's mono samples at rate (every channel 1/channels) and the sound's start."""
    import numpy as np
    r = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries",
                        "stream=channels:format=start_time:frame=pts_time", "-of", "json", path],
                       check=True, capture_output=True, text=True)
    j = json.loads(r.stdout)
    channels = j["streams"][0]["channels"]
    start = float(j["frames"][0]["pts_time"]) - float(j["format"].get("start_time", 0) or 0)
    mix = "+".join("%.17g*c%d" % (1.0 / channels, k) for k in range(channels))
    raw = os.path.join(tmp, "ref.f32")
    # float first: pan on s16 input would round its sums to 16 bits
    graph = "aformat=sample_fmts=flt,pan=mono|c0=%s,aresample=%d" % (mix, rate)
    ff("-i", path, "-map", "0:a:0", "-af", graph, "-f", "f32le", "-c:a", "pcm_f32le", raw)
    return np.fromfile(raw, "<f4").astype(np.float64), start


def stored(db, model="tiny_audio"):
    """{file name: (status, [(frame_index, t, t_end, vector)])} of model's extractions."""
    import numpy as np
    con = sqlite3.connect(db)
    out = {}
    joins = ("FROM extractions e JOIN videos v ON v.id = e.video_id JOIN models m ON m.id ="
             " e.model_id")
    for path, status in con.execute("SELECT v.path, e.status %s WHERE m.name = ?" % joins,
                                    (model,)):
        out[os.path.basename(path)] = (status, [])
    for path, fi, t, t_end, vec in con.execute(
            "SELECT v.path, f.frame_index, f.t, f.t_end, f.vec %s JOIN features f ON"
            " f.extraction_id = e.id WHERE m.name = ? ORDER BY v.path, f.frame_index" % joins,
            (model,)):
        out[os.path.basename(path)][1].append((fi, t, t_end, np.frombuffer(vec, np.float32)))
    con.close()
    return out


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--no-library"]):
        print(__doc__)
        return 2
    exe, models_dir = sys.argv[1], sys.argv[2]
    try:
        import numpy as np
        import torch
        import logmel_refs
    except ImportError as e:
        print("SKIP: %s" % e)
        return SKIP
    if not shutil.which("ffmpeg") or not shutil.which("ffprobe"):
        print("SKIP: the ffmpeg CLI makes the files")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="vidfeat_audio_")
    try:
        model, front = make_model(tmp, models_dir)
        names = make_files(tmp)
        db = os.path.join(tmp, "a.db")
        args = [exe, "--audio", "tiny_audio", "--models-dir", tmp, "--backend", "ref", "--batch",
                "3", "-o", db]
        paths = [os.path.join(tmp, n) for n in names + ["silent.mp4", "blip.wav"]]
        r = subprocess.run(args + paths, capture_output=True, text=True)
        print(r.stderr.strip())
        check(r.returncode == 1, "a file without sound fails the run (exit 1), got %d"
              % r.returncode)
        check("silent.mp4: no audio stream" in r.stderr, "the video without sound, one line")
        rows = stored(db)
        check(rows["silent.mp4"][0] == "failed", "silent.mp4 failed")
        check(rows["blip.wav"][0] == "done" and not rows["blip.wav"][1] and
              "shorter than a patch" in r.stderr, "a sound shorter than a patch: done, none")
        rate, hop, win, patch = front["sample_rate"], front["hop"], front["window"], front["patch"]
        worst = 0.0
        for name in names:
            status, got = rows[name]
            check(status == "done", "%s: %s" % (name, status))
            x, start = reference_samples(os.path.join(tmp, name), rate, tmp)
            frames = logmel_refs.vggish_logmel(x, front)
            n = len(frames) // patch
            check(len(got) == n, "%s: %d patches stored, %d expected" % (name, len(got), n))
            want = model(torch.from_numpy(frames[:n * patch].reshape(n, 1, patch, -1)
                                          .astype(np.float32))).detach().numpy()
            for j, (fi, t, t_end, vec) in enumerate(got):
                t0 = start + j * patch * hop / rate
                t1 = start + ((j * patch + patch - 1) * hop + win) / rate
                check(fi == j and abs(t - t0) < 1e-6 and abs(t_end - t1) < 1e-6,
                      "%s patch %d: #%d %.6f..%.6f, expected %.6f..%.6f"
                      % (name, j, fi, t, t_end, t0, t1))
                e = rel_err(vec, want[j])
                check(e <= 1e-4, "%s patch %d: relative error %.3g" % (name, j, e))
                worst = max(worst, e)
            print("%s: %d patches from %.3f s, times as documented, worst %.2e"
                  % (name, n, start, worst))
        print("ok the patches' numbers, times and vectors (worst %.2e); no sound fails, a "
              "short one gives none" % worst)

        r = subprocess.run(args + paths, capture_output=True, text=True)
        check("0 done" in r.stderr and "5 skipped" in r.stderr, "a run again: " + r.stderr)
        # a clip's sound at a time as the query: the first patch starting at or after it
        copy = os.path.join(tmp, "copy.mp4")
        shutil.copy(paths[0], copy)
        r = subprocess.run([exe, "similar", db, "--video", copy, "--at", "1", "-k", "2",
                            "--models-dir", tmp, "--backend", "ref", "--json"],
                           capture_output=True, text=True)
        check(r.returncode == 0, "similar: " + r.stderr)
        top = json.loads(r.stdout)["neighbours"][0]
        check(os.path.basename(top["path"]) == "av.mp4" and top["frame_index"] == 2 and
              top["similarity"] > 0.9999, "similar by the sound at 1 s: %s" % top)
        # --start and --duration: the patches starting within them
        part = os.path.join(tmp, "part.db")
        r = subprocess.run(args[:-1] + [part, "--start", "1", "--duration", "1.5", paths[0]],
                           capture_output=True, text=True)
        got = stored(part)["av.mp4"][1]
        check(r.returncode == 0 and [g[0] for g in got] == [2],
              "--start 1 --duration 1.5: patch 2 only (%s)" % [g[0] for g in got])
        print("ok a query by a clip's sound at 1 s finds its patch; --start/--duration keep the "
              "patches starting within them")

        for extra, said in ((["--fps", "1"], "--fps is for pictures"),
                            (["--window", "4"], "--window is for pictures")):
            r = subprocess.run(args + extra + paths[:1], capture_output=True, text=True)
            check(r.returncode == 2 and said in r.stderr, "%s: %s" % (extra, r.stderr))
        r = subprocess.run(args[:2] + [os.path.join(models_dir, "tiny_cnn.onnx")] + args[3:] +
                           paths[:1], capture_output=True, text=True)
        check(r.returncode == 2 and "takes pictures, not sound" in r.stderr, r.stderr)
        print("ok a second run skips every file; sampling options and a picture model refused")

        # beside a picture model: the pictures' extraction, then the sound's, in one database
        both = os.path.join(tmp, "both.db")
        two = [paths[0], paths[len(names)]]  # av.mp4 and silent.mp4
        r = subprocess.run([exe, "--model", os.path.join(models_dir, "tiny_cnn.onnx"), "--audio",
                            "tiny_audio", "--models-dir", tmp, "--backend", "ref", "--batch", "3",
                            "--fps", "2", "--json", "-o", both] + two,
                           capture_output=True, text=True)
        docs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
        check(len(docs) == 2 and docs[0]["model"] == "tiny_cnn" and
              docs[1]["model"] == "tiny_audio", "two --json documents: " + r.stdout[:300])
        check(docs[0]["done"] == 2 and docs[0]["failed"] == 0 and docs[0]["frames"] > 0,
              "the pictures of both files: %s" % docs[0])
        check(docs[1]["done"] == 1 and docs[1]["failed"] == 1, "the sound: %s" % docs[1])
        check(r.returncode == 1 and "silent.mp4: no audio stream" in r.stderr,
              "the file without sound: one line, exit 1 (%d)" % r.returncode)
        alone, beside = rows["av.mp4"][1], stored(both)["av.mp4"][1]
        check(len(alone) == len(beside) and all(
            a[:3] == b[:3] and (a[3] == b[3]).all() for a, b in zip(alone, beside)),
            "the sound's rows beside a picture model are the audio-only run's")
        pictures = stored(both, "tiny_cnn")
        check(all(s == "done" and len(v) > 0 for s, v in pictures.values()),
              "the pictures' rows of both files")
        # --audio-at: the sound's rows chosen without naming the model, the patch from T
        query = [exe, "similar", both, "--video", copy, "--models-dir", tmp, "--backend", "ref",
                 "--json", "-k", "1"]
        r = subprocess.run(query + ["--audio-at", "1"], capture_output=True, text=True)
        check(r.returncode == 0, "similar --audio-at: " + r.stderr)
        top = json.loads(r.stdout)["neighbours"][0]
        check(os.path.basename(top["path"]) == "av.mp4" and top["frame_index"] == 2 and
              top["similarity"] > 0.9999, "similar --audio-at 1 beside pictures: %s" % top)
        r = subprocess.run(query + ["--at", "1"], capture_output=True, text=True)
        check(r.returncode == 3 and "several models" in r.stderr,
              "--at without --model beside pictures: choose (%d) %s" % (r.returncode, r.stderr))
        pictures_only = os.path.join(tmp, "pictures.db")
        r = subprocess.run([exe, "--model", os.path.join(models_dir, "tiny_cnn.onnx"),
                            "--backend", "ref", "--fps", "1", "-o", pictures_only, paths[0]],
                           capture_output=True, text=True)
        check(r.returncode == 0, "pictures only: " + r.stderr)
        r = subprocess.run([exe, "similar", pictures_only, "--video", copy, "--audio-at", "1",
                            "--models-dir", tmp], capture_output=True, text=True)
        check(r.returncode == 3 and "holds no vectors of sound" in r.stderr and
              len(r.stderr.strip().splitlines()) == 1,
              "--audio-at on pictures only: one line (%d) %s" % (r.returncode, r.stderr))
        print("ok beside --model: two extractions in one database, the sound's rows as alone, "
              "a file without sound one line from the sound's run; --audio-at picks the sound")
        if "--no-library" in sys.argv[3:]:
            print("note: the Python part is left to the default build (a sanitized library)")
            return 0
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(exe))),
                                        "python"))
        import vidfeat
        doc = vidfeat.Database(both).similar(video=copy, audio_at=1, k=1, models_dir=tmp,
                                             device="ref")
        top = doc["neighbours"][0]
        check(os.path.basename(top["path"]) == "av.mp4" and top["frame_index"] == 2,
              "python similar(audio_at=1): %s" % top)
        print("ok python: Database.similar(video=, audio_at=) as --audio-at")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
