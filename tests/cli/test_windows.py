#!/usr/bin/python3
"""A clip model's windows against a reference sampler written here from ffprobe's frames.

Clips ffmpeg makes here: H.264 with B-frames (MP4), VP9 with hidden alt-ref frames (WebM) and a
variable-frame-rate H.264 clip (Matroska). For several windows, strides and samplings, the rows
vidfeat stores must be exactly the windows the documented rule (docs/models.md, window.h) makes
from the frames the sampling keeps (test_frame_numbers.py's reference, ffprobe's numbers and
times): each row's frame_index, pts and t its first frame's, t_end its last real frame's, the
last partial window padded with the last frame, a stride longer than the window leaving frames
out, a file shorter than a window giving one window.

Downstream: `vidfeat export` writes each window's end time (CSV column, NAME_t_end.npy, HDF5
dataset t_end) and the Python package gives it (Features.t_end, from an extraction and from a
database), equal to the stored rows.

Which frames a window holds is checked through the vectors: the clip model made here gives,
for each frame of its window, four fixed weighted sums of the frame's pixels; an image model with
the same sums gives them for each frame sampled alone. On the reference backend both are the same
sums in the same order, so window k's vector must equal the frames' vectors it is made of.

usage: test_windows.py VIDFEAT [--no-library]
  --no-library: the Python part is not run (a sanitized libvidfeat.so cannot be loaded into
  Python; the default build runs it)
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, encode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_frame_numbers import expected, probe  # noqa: E402  the sampling's reference

SIZE = 16


def make_models(d, frames_list):
    """img.onnx: [N, 3, S, S] -> 4 sums; clipT.onnx: [N, 3, T, S, S] -> 4 x T sums."""
    import torch
    g = torch.Generator().manual_seed(5)
    w = torch.rand(4, 3, SIZE, SIZE, generator=g) / (3 * SIZE * SIZE)

    class Img(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv2d(3, 4, SIZE, bias=False)
            self.c.weight.data = w.clone()

        def forward(self, x):
            return self.c(x).flatten(1)

    class Clip(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv3d(3, 4, (1, SIZE, SIZE), bias=False)
            self.c.weight.data = w.clone().unsqueeze(2)

        def forward(self, x):
            return self.c(x).flatten(1)  # [N, 4, T, 1, 1] -> channel-major: 4 x T

    def export(m, shape, path):
        torch.onnx.export(m.eval(), torch.randn(*shape), path, input_names=["input"],
                          output_names=["output"], opset_version=17,
                          dynamic_axes={"input": {0: "n"}, "output": {0: "n"}})

    export(Img(), (1, 3, SIZE, SIZE), os.path.join(d, "img.onnx"))
    for t in frames_list:
        export(Clip(), (1, 3, t, SIZE, SIZE), os.path.join(d, "clip%d.onnx" % t))


def make_clips(d):
    src = ["-f", "lavfi", "-i", "testsrc2=size=96x64:rate=30", "-t", "5"]
    specs = [
        ("h264_bframes.mp4", "libx264", src + ["-c:v", "libx264", "-bf", "3", "-g", "48"]),
        ("vp9_altref.webm", "libvpx-vp9",
         ["-f", "lavfi", "-i", "testsrc2=size=96x64:rate=24", "-t", "4", "-c:v", "libvpx-vp9",
          "-deadline", "good", "-cpu-used", "8", "-auto-alt-ref", "1", "-lag-in-frames", "16"]),
        ("vfr.mkv", "libx264",
         ["-f", "lavfi", "-i", "testsrc2=size=96x64:rate=25", "-t", "5", "-vf",
          "settb=1/1000,setpts='floor(N/3)*190+mod(N,3)*40'", "-fps_mode", "vfr",
          "-c:v", "libx264", "-bf", "2", "-g", "60"]),
    ]
    return encode(d, specs)


def windows(kept, frames, stride):
    """The documented rule over the sampled frames kept [(number, pts, t)]: [(frame numbers of
    the window, padded), first's (number, pts, t), last real frame's t]."""
    out, n = [], len(kept)
    start, covered = 0, 0
    while start < n:
        if start + frames <= n:
            real = kept[start:start + frames]
        elif n > covered:
            real = kept[start:]
        else:
            break
        nums = [f[0] for f in real] + [real[-1][0]] * (frames - len(real))
        out.append((nums, real[0], real[-1][2]))
        if len(real) < frames:
            break
        covered = start + frames
        start += stride
    return out


CASES = [  # label, frames, stride, sampling options (reference), sampling arguments, window's
    ("window 4", 4, 4, {}, [], []),
    ("window 4 stride 2 --fps 5", 4, 2, {"fps": 5.0}, ["--fps", "5"], ["--window-stride", "2"]),
    ("window 3 stride 5 --every 2", 3, 5, {"every": 2}, ["--every", "2"],
     ["--window-stride", "5"]),
    ("window 16 --fps 2", 16, 16, {"fps": 2.0}, ["--fps", "2"], ["--window", "16"]),
    ("window 3 stride 1 --start 1 --duration 1", 3, 1, {"start": 1.0, "duration": 1.0},
     ["--start", "1", "--duration", "1"], ["--window-stride", "1"]),
]


def read(db, clip):
    """{file name: [(frame_index, pts, t, t_end, vector)]} in frame order."""
    import numpy as np
    con = sqlite3.connect(db)
    out = {}
    cols = "f.frame_index, f.pts, f.t, f.t_end" if clip else "f.frame_index, f.pts, f.t, NULL"
    for path, status, fi, pts, t, t_end, vec in con.execute(
            "SELECT v.path, e.status, %s, f.vec FROM extractions e JOIN videos v ON v.id ="
            " e.video_id JOIN features f ON f.extraction_id = e.id ORDER BY v.path,"
            " f.frame_index" % cols):
        check(status == "done", "%s: %s" % (path, status))
        out.setdefault(os.path.basename(path), []).append(
            (fi, pts, t, t_end, np.frombuffer(vec, np.float32)))
    con.close()
    return out


def downstream(exe, db, model, clip, tmp, library):
    """Export and Python give the stored windows' times (db: CASES[0]'s, windows of 4)."""
    import csv
    import numpy as np
    stored = read(db, True)
    rows = {name: [(r[0], r[2], r[3]) for r in v] for name, v in stored.items()}
    out = os.path.join(tmp, "export.csv")
    r = subprocess.run([exe, "export", db, "-o", out, "--format", "csv"], capture_output=True,
                       text=True)
    check(r.returncode == 0, "export csv: %s" % r.stderr)
    with open(out, newline="") as f:
        table = list(csv.reader(f))
    check(table[0][:5] == ["path", "sampling", "frame_index", "t", "t_end"],
          "export csv header %s" % table[0][:6])
    got = {}
    for line in table[1:]:
        got.setdefault(os.path.basename(line[0]), []).append(
            (int(line[2]), float(line[3]), float(line[4])))
    check(got == rows, "export csv: the windows' times differ from the database's")
    npy = os.path.join(tmp, "export_npy")
    r = subprocess.run([exe, "export", db, "-o", npy, "--format", "npy"], capture_output=True,
                       text=True)
    check(r.returncode == 0, "export npy: %s" % r.stderr)
    for name, want in rows.items():
        base = os.path.join(npy, os.path.splitext(name)[0])
        t_end = np.load(base + "_t_end.npy")
        check(list(t_end) == [w[2] for w in want], "export npy %s: t_end differs" % name)
    print("ok export: t_end in CSV and npy")
    if not library:
        print("note: the Python part is left to the default build (a sanitized library)")
        return
    build = os.path.dirname(os.path.dirname(os.path.dirname(exe)))
    sys.path.insert(0, os.path.join(build, "python"))
    import vidfeat
    f = vidfeat.extract(clip, model=model, input_size=SIZE, backend="ref")
    want = stored[os.path.basename(clip)]
    check(f.t_end is not None and len(f) == len(want), "python extract: %r" % f)
    check(list(f.frame_index) == [w[0] for w in want] and list(f.t) == [w[2] for w in want] and
          list(f.t_end) == [w[3] for w in want], "python extract: the windows' times differ")
    check(np.array_equal(f.vectors, np.stack([w[4] for w in want])),
          "python extract: the windows' vectors differ")
    g = vidfeat.Database(db).frames(path=clip)
    check(g.t_end is not None and list(g.t_end) == [w[3] for w in want],
          "python Database.frames: t_end %r" % g.t_end)
    print("ok python: Features.t_end from an extraction and from the database")
    # pictures in memory: each 4 of them one window, whose vector is theirs
    pics = np.random.default_rng(7).integers(0, 256, (8, 24, 30, 3), dtype=np.uint8)
    img = os.path.join(os.path.dirname(model), "img.onnx")
    with vidfeat.Extractor(model, input_size=SIZE, backend="ref") as ex, \
            vidfeat.Extractor(img, input_size=SIZE, backend="ref") as one:
        w, v = ex(pics), one(pics)
        check(w.shape == (2, 16), "python: 8 pictures in windows of 4 gave %s" % (w.shape,))
        for k in range(2):
            ref = v[4 * k:4 * k + 4].T.reshape(-1)  # channel by channel, frame by frame
            check(np.array_equal(w[k], ref), "python: window %d of pictures is not theirs" % k)
        try:
            ex(pics[:6])
            check(False, "python: 6 pictures in windows of 4 were taken")
        except vidfeat.UsageError:
            pass
    print("ok python: pictures in windows")


def main():
    exe = sys.argv[1]
    if not (shutil.which("ffmpeg") and shutil.which("ffprobe")):
        print("skipped: ffmpeg and ffprobe are needed")
        return SKIP
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        print("skipped: python3-torch and numpy make the test's models")
        return SKIP
    import numpy as np
    with tempfile.TemporaryDirectory(prefix="vf_windows_") as tmp:
        clips = os.path.join(tmp, "clips")
        os.mkdir(clips)
        names = make_clips(clips)
        check(names, "no clip could be made")
        make_models(tmp, sorted({c[1] for c in CASES}))
        probed = {name: probe(os.path.join(clips, name)) for name in names}
        run = [exe, "-q", "--backend", "ref", "--input-size", str(SIZE)]
        for k, (label, frames, stride, opts, sampling, window) in enumerate(CASES):
            img_db, clip_db = (os.path.join(tmp, "%s%d.db" % (w, k)) for w in ("img", "clip"))
            for model, db, extra in ((os.path.join(tmp, "img.onnx"), img_db, sampling),
                                     (os.path.join(tmp, "clip%d.onnx" % frames), clip_db,
                                      sampling + window)):
                r = subprocess.run(run + ["-m", model, "-o", db] + extra + [clips],
                                   capture_output=True, text=True, timeout=300)
                check(r.returncode == 0, "%s: exit %d: %s" % (label, r.returncode, r.stderr))
            img, got = read(img_db, False), read(clip_db, True)
            con = sqlite3.connect(clip_db)
            samplings = {s for (s,) in con.execute("SELECT sampling FROM extractions")}
            con.close()
            check(all(s.endswith(";window=%d;stride=%d" % (frames, stride)) for s in samplings),
                  "%s: recorded samplings %s" % (label, samplings))
            counts = []
            for name in names:
                kept = [(n, pts, t) for n, pts in expected(probed[name], opts)
                        for (m, _, t, _) in [probed[name][n]]]
                want = windows(kept, frames, stride)
                have = got.get(name, [])
                check(len(have) == len(want), "%s %s: %d windows stored, %d expected" %
                      (name, label, len(have), len(want)))
                by_frame = {row[0]: row[4] for row in img.get(name, [])}
                for i, ((nums, first, t_end), row) in enumerate(zip(want, have)):
                    fi, pts, t, te, vec = row
                    check((fi, pts) == first[:2] and abs(t - first[2]) < 1e-6 and
                          abs(te - t_end) < 1e-6,
                          "%s %s window %d: (frame_index, pts, t, t_end) (%s, %s, %.6f, %.6f),"
                          " the reference's (%s, %s, %.6f, %.6f)" %
                          (name, label, i, fi, pts, t, te, first[0], first[1], first[2], t_end))
                    # the frames it holds: its vector is theirs, channel by channel
                    check(all(n in by_frame for n in nums), "%s %s: frames %s not all stored "
                          "by the image model" % (name, label, nums))
                    ref = np.stack([by_frame[n] for n in nums], axis=1).reshape(-1)
                    check(np.array_equal(vec, ref), "%s %s window %d (frames %s): its vector is"
                          " not its frames' (largest difference %.3g)" %
                          (name, label, i, nums, float(np.abs(vec - ref).max())))
                counts.append("%s %d" % (name, len(have)))
            print("ok %-42s %s" % (label, ", ".join(counts)))
        downstream(exe, os.path.join(tmp, "clip0.db"), os.path.join(tmp, "clip4.onnx"),
                   os.path.join(clips, names[0]), tmp, "--no-library" not in sys.argv[2:])
        # an image model refuses windows; a window other than the model's is refused
        r = subprocess.run(run + ["-m", os.path.join(tmp, "img.onnx"), "--window", "4",
                                  os.path.join(clips, names[0])], capture_output=True, text=True)
        check(r.returncode != 0 and "clip models" in r.stderr, "image model with --window: %s"
              % r.stderr)
        r = subprocess.run(run + ["-m", os.path.join(tmp, "clip4.onnx"), "--window", "8",
                                  os.path.join(clips, names[0])], capture_output=True, text=True)
        check(r.returncode != 0 and "windows of 4 frames" in r.stderr, "--window 8 on a "
              "4-frame model: %s" % r.stderr)
        print("ok refusals")
        check_batch_memory(exe, tmp, os.path.join(clips, names[0]))
    return 0


def check_batch_memory(exe, tmp, clip):
    """--batch 4096 windows of 16 frames of 224x224 (39 GB of input a batch): refused as the run
    starts (exit 3, one line saying what to do), before any of it is allocated."""
    import torch
    with open("/proc/meminfo") as f:
        total = int(f.readline().split()[1]) * 1024
    per_batch = 4096 * 3 * 16 * 224 * 224 * 4
    if 2 * per_batch <= 0.5 * total:
        print("ok --batch 4096 of big windows: not checked (this machine holds %d GB)"
              % (total >> 30))
        return
    big = os.path.join(tmp, "big16.onnx")
    torch.onnx.export(torch.nn.Conv3d(3, 2, (16, 224, 224), bias=False).eval(),
                      torch.randn(1, 3, 16, 224, 224), big, input_names=["input"],
                      output_names=["output"], opset_version=17,
                      dynamic_axes={"input": {0: "n"}, "output": {0: "n"}})
    p = subprocess.Popen([exe, "-q", "-m", big, "--batch", "4096", "-o",
                          os.path.join(tmp, "big.db"), clip],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=120)
    import resource  # the largest child of this test so far: every other one is small
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    lines = err.strip().splitlines()
    check(p.returncode == 3 and len(lines) == 1 and "a batch of 4096" in lines[0] and
          "--batch" in lines[0], "--batch 4096 of big windows: exit %s %r" % (p.returncode, err))
    check(peak < 1 << 30, "--batch 4096 of big windows: %.1f GB committed first" % (peak / 1e9))
    print("ok --batch 4096 of big windows: refused at once (exit 3, peak %.0f MB): %s"
          % (peak / 1e6, lines[0]))


if __name__ == "__main__":
    sys.exit(main())
