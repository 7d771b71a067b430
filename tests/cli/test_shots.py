#!/usr/bin/python3
"""--shots against a reference written here from PySceneDetect's published ContentDetector, on
clips ffmpeg makes here: hard cuts at known frames (H.264 with B-frames), a one-second dissolve,
a one-frame white flash, eight minutes of one still picture, and a VP9 clip of variable frame
rate.

The reference reads each clip as PySceneDetect does: every frame decoded to full-size BGR (here
by ffmpeg's command line, no frame dropped or repeated), made 256 columns wide by bilinear
interpolation (OpenCV's INTER_LINEAR: pixel centres, no smoothing), converted to 8-bit HSV by
OpenCV's definition (hue in degrees / 2, saturation and value x 255), scored by the mean absolute
difference of each plane from the previous frame's, averaged (weights 1, 1, 1), and cut where
the score reaches 27 through the "merge" flash filter with a minimum of 15 frames. vidfeat
scales in one step from the decoded picture, so scores differ in their decimals; the cuts must
be the same, frame for frame, and each shot's times the frames' own (ffprobe's).

Also: the known hard cuts are all found and the still picture is one shot; shots are the same
whatever the sampling (--fps 1 keeps few frames, every frame is still measured) and with
--decoders 2; --shots refuses --keyframes and an audio model.

usage: test_shots.py VIDFEAT MODELS_DIR [--no-library]
  --no-library: a sanitizer build, whose libvidfeat.so Python cannot load: the Python package's
  part is left to the default build
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, encode, ffprobe_times

try:
    import numpy as np
except ImportError:
    np = None

THRESHOLD, MIN_FRAMES, WIDTH = 27.0, 15, 256


def make_clips(d):
    def lavfi(spec):
        return ["-f", "lavfi", "-i", spec]

    size = "320x240"
    four = (lavfi("testsrc2=size=%s:rate=25:duration=2" % size) +
            lavfi("smptebars=size=%s:rate=25:duration=2" % size) +
            lavfi("mandelbrot=size=%s:rate=25,trim=duration=2" % size) +
            lavfi("testsrc=size=%s:rate=25:duration=2" % size))
    specs = [
        # hard cuts at frames 50, 100 and 150, B-frames
        ("cuts.mp4", "libx264", four + [
            "-filter_complex", "[0][1][2][3]concat=n=4:v=1,format=yuv420p",
            "-c:v", "libx264", "-bf", "3", "-g", "60"]),
        # a one-second dissolve from a moving picture to still bars
        ("dissolve.mkv", "libx264",
         lavfi("testsrc2=size=%s:rate=25:duration=3" % size) +
         lavfi("smptebars=size=%s:rate=25:duration=3" % size) + [
             "-filter_complex", "[0][1]xfade=transition=fade:duration=1:offset=2,format=yuv420p",
             "-c:v", "libx264", "-bf", "2"]),
        # one white frame (50) in a still shot of 4 s
        ("flash.mp4", "libx264",
         lavfi("smptebars=size=%s:rate=25:duration=4" % size) + [
             "-vf", "drawbox=c=white:t=fill:enable='eq(n,50)',format=yuv420p",
             "-c:v", "libx264", "-bf", "2"]),
        # eight minutes of one still picture
        ("still.mkv", "libx264",
         lavfi("smptebars=size=160x120:rate=25:duration=480") + [
             "-vf", "format=yuv420p", "-c:v", "libx264", "-preset", "ultrafast"]),
        # the four pictures again, VP9, frames 40, 40 and 110 ms apart in turn
        ("vfr.webm", "libvpx-vp9", four + [
            "-filter_complex", "[0][1][2][3]concat=n=4:v=1,settb=1/1000,"
            "setpts='floor(N/3)*190+mod(N,3)*40',format=yuv420p",
            "-fps_mode", "vfr", "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8",
            "-b:v", "400k"]),
    ]
    return encode(d, specs)


def frame_size(path):
    r = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                        "stream=width,height", "-of", "csv=p=0", path],
                       capture_output=True, text=True, check=True)
    w, h = (int(x) for x in r.stdout.strip().split(",")[:2])
    return w, h


def bilinear(img, ow, oh):
    """OpenCV's INTER_LINEAR resize of an H x W x 3 uint8 picture to oh x ow."""
    h, w = img.shape[:2]

    def taps(n_out, n_in):
        x = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        x0 = np.floor(x).astype(np.int64)
        f = x - x0
        f[x0 < 0] = 0.0
        x0 = np.clip(x0, 0, n_in - 1)
        x1 = np.clip(x0 + 1, 0, n_in - 1)
        return x0, x1, f

    y0, y1, fy = taps(oh, h)
    x0, x1, fx = taps(ow, w)
    a = img.astype(np.float64)
    rows = a[y0] * (1 - fy)[:, None, None] + a[y1] * fy[:, None, None]
    out = rows[:, x0] * (1 - fx)[None, :, None] + rows[:, x1] * fx[None, :, None]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def hsv(img):
    """OpenCV's BGR to 8-bit HSV: three uint8 planes."""
    b, g, r = (img[..., i].astype(np.float64) for i in range(3))
    v = np.maximum(np.maximum(b, g), r)
    d = v - np.minimum(np.minimum(b, g), r)
    s = np.where(v > 0, d / np.where(v > 0, v, 1), 0.0) * 255.0
    safe = np.where(d > 0, d, 1)
    h = np.where(v == r, 60.0 * (g - b) / safe,
                 np.where(v == g, 120.0 + 60.0 * (b - r) / safe, 240.0 + 60.0 * (r - g) / safe))
    h = np.where(d > 0, h, 0.0)
    h = np.where(h < 0, h + 360.0, h)
    return (np.rint(h / 2.0).astype(np.int64) % 180, np.rint(s).astype(np.int64),
            v.astype(np.int64))


def reference_cuts(path):
    """ContentDetector's cuts (first frames of the shots after the first) and the frame count."""
    w, h = frame_size(path)
    factor = w / WIDTH if w >= WIDTH else 1.0
    ow, oh = round(w / factor), round(h / factor)
    p = subprocess.Popen(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-fps_mode",
                          "passthrough", "-f", "rawvideo", "-pix_fmt", "bgr24", "-"],
                         stdout=subprocess.PIPE)
    frame_bytes = w * h * 3
    cuts, last, n = [], None, 0
    last_above, merge_enabled, merging, merge_start = None, False, False, 0
    while True:
        buf = p.stdout.read(frame_bytes)
        if len(buf) < frame_bytes:
            break
        img = np.frombuffer(buf, np.uint8).reshape(h, w, 3)
        if factor != 1.0:
            img = bilinear(img, ow, oh)
        planes = hsv(img)
        score = 0.0
        if last is not None:
            score = sum(float(np.abs(a - b).sum()) / a.size for a, b in zip(planes, last)) / 3.0
        last = planes
        above = score >= THRESHOLD
        # the merge flash filter, in frame numbers
        if last_above is None:
            last_above = n
        long_enough = n - last_above >= MIN_FRAMES
        if above:
            last_above = n
        if merging:
            if long_enough and not above and last_above - merge_start >= MIN_FRAMES:
                merging = False
                cuts.append(last_above)
        elif above and long_enough:
            merge_enabled = True
            cuts.append(n)
        elif above and merge_enabled:
            merging, merge_start = True, n
        n += 1
    p.wait()
    check(p.returncode == 0, "ffmpeg could not decode %s" % path)
    return cuts, n


def stored_shots(db, path):
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT s.first_frame, s.last_frame, s.start_t, s.end_t FROM shots s JOIN extractions e"
        " ON e.id = s.extraction_id JOIN videos v ON v.id = e.video_id WHERE v.path = ?"
        " AND e.status = 'done' ORDER BY s.shot", (os.path.abspath(path),)).fetchall()
    con.close()
    return rows


def run(exe, model, db, *args):
    r = subprocess.run([exe, "--model", model, "-o", db, *args], capture_output=True, text=True,
                       timeout=600)
    check(r.returncode == 0, "vidfeat %s: %s" % (" ".join(args), r.stderr))
    return r


def check_clip(exe, model, tmp, path, want_cuts=None):
    name = os.path.basename(path)
    db = os.path.join(tmp, name + ".db")
    run(exe, model, db, "--shots", "--fps", "1", path)
    shots = stored_shots(db, path)
    cuts, n = reference_cuts(path)
    got = [s[0] for s in shots[1:]]
    check(got == cuts, "%s: cuts at %s, the reference's at %s" % (name, got, cuts))
    if want_cuts is not None:
        check(cuts == want_cuts, "%s: the reference cuts at %s, the clip at %s" %
              (name, cuts, want_cuts))
    times = [t for _, t in ffprobe_times(path)[0]]
    check(len(times) == n, "%s: ffprobe has %d frames, the reference %d" % (name, len(times), n))
    check(shots and shots[0][0] == 0 and shots[-1][1] == n - 1,
          "%s: the shots do not cover frames 0..%d: %s" % (name, n - 1, shots))
    for i, (first, last, start, end) in enumerate(shots):
        nxt = shots[i + 1][0] if i + 1 < len(shots) else None
        check(nxt is None or last == nxt - 1, "%s: shot %d ends at %d, the next starts at %s" %
              (name, i, last, nxt))
        check(abs(start - times[first]) < 1e-6, "%s: shot %d starts at %.6f s, its first frame"
              " is at %.6f s" % (name, i, start, times[first]))
        if nxt is not None:
            check(abs(end - times[nxt]) < 1e-6, "%s: shot %d ends at %.6f s, the next frame is"
                  " at %.6f s" % (name, i, end, times[nxt]))
        else:
            check(end > times[last], "%s: the last shot ends at %.6f s, before its last frame"
                  " (%.6f s)" % (name, end, times[last]))
    print("ok %s: %d shots, cuts at %s as the reference's, times ffprobe's" %
          (name, len(shots), got))
    return db, shots


def main():
    no_library = "--no-library" in sys.argv
    if no_library:
        sys.argv.remove("--no-library")
    exe, models = sys.argv[1:3]
    if not shutil.which("ffmpeg") or not shutil.which("ffprobe"):
        print("SKIP: ffmpeg/ffprobe not installed")
        return SKIP
    if np is None:
        print("SKIP: numpy (python3-numpy) not installed: the reference needs it")
        return SKIP
    model = os.path.join(models, "tiny_cnn.onnx")
    tmp = tempfile.mkdtemp(prefix="vidfeat_shots_")
    try:
        made = make_clips(tmp)
        check("cuts.mp4" in made and "still.mkv" in made, "the H.264 clips could not be made")
        want = {"cuts.mp4": [50, 100, 150], "still.mkv": [], "vfr.webm": [50, 100, 150]}
        shots, dbs = {}, {}
        for name in made:
            path = os.path.join(tmp, name)
            dbs[name], shots[name] = check_clip(exe, model, tmp, path, want.get(name))

        # exported with the vectors: index.json's "shots", HDF5's "shots" dataset
        out = os.path.join(tmp, "cuts_npy")
        r = subprocess.run([exe, "export", dbs["cuts.mp4"], "-o", out], capture_output=True,
                           text=True)
        check(r.returncode == 0, "export: %s" % r.stderr)
        with open(os.path.join(out, "index.json")) as f:
            entry = json.load(f)[0]
        check([tuple(x) for x in entry["shots"]] == shots["cuts.mp4"],
              "index.json's shots %s, the database's %s" % (entry["shots"], shots["cuts.mp4"]))
        try:
            import h5py
        except ImportError:
            h5py = None
            print("note: no h5py (python3-h5py): the HDF5 export's shots not read back")
        if h5py:
            h5 = os.path.join(tmp, "cuts.h5")
            r = subprocess.run([exe, "export", dbs["cuts.mp4"], "-o", h5], capture_output=True,
                               text=True)
            check(r.returncode == 0, "export hdf5: %s" % r.stderr)
            with h5py.File(h5, "r") as f:
                got = [tuple(row) for row in f["cuts"]["shots"][()].tolist()]
            check(got == [tuple(float(x) for x in s) for s in shots["cuts.mp4"]],
                  "HDF5's shots %s, the database's %s" % (got, shots["cuts.mp4"]))
        # and the Python package's Database.frames() has them (not a sanitizer build's library)
        if not no_library:
            pkg = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
                os.path.abspath(exe)))), "python")
            code = ("import json, sys, vidfeat; f = vidfeat.open(sys.argv[1]).frames();"
                    " print(json.dumps({k: v.tolist() for k, v in f.shots.items()}))")
            r = subprocess.run([sys.executable, "-c", code, dbs["cuts.mp4"]],
                               capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=pkg))
            check(r.returncode == 0, "Database.frames(): %s" % r.stderr)
            got = json.loads(r.stdout)[os.path.abspath(os.path.join(tmp, "cuts.mp4"))]
            check([tuple(x) for x in got] ==
                  [tuple(float(v) for v in s) for s in shots["cuts.mp4"]],
                  "Database.frames().shots %s, the database's %s" % (got, shots["cuts.mp4"]))
        print("ok the shots exported with the vectors (npy's index.json%s)%s" %
              (", HDF5" if h5py else "",
               "" if no_library else " and in Python's Database.frames()"))

        # the same shots with every frame kept, and with two files decoded at once
        paths = [os.path.join(tmp, n) for n in made if n != "still.mkv"]
        db = os.path.join(tmp, "both.db")
        run(exe, model, db, "--shots", "--decoders", "2", *paths)
        db_all = os.path.join(tmp, "all.db")
        run(exe, model, db_all, "--shots", paths[0])
        for path in paths:
            name = os.path.basename(path)
            check(stored_shots(db, path) == shots[name],
                  "%s: --decoders 2 found other shots" % name)
        check(stored_shots(db_all, paths[0]) == shots[os.path.basename(paths[0])],
              "every frame kept: other shots than with --fps 1")
        print("ok the same shots with every frame kept and with --decoders 2")

        # what --shots cannot do is said
        r = subprocess.run([exe, "--model", model, "-o", db, "--shots", "--keyframes", paths[0]],
                           capture_output=True, text=True)
        check(r.returncode == 2 and "--keyframes" in r.stderr and "--shots" in r.stderr,
              "--shots --keyframes: %d %r" % (r.returncode, r.stderr))
        r = subprocess.run([exe, "--model", model, "-o", db, "--shot-threshold", "30", paths[0]],
                           capture_output=True, text=True)
        check(r.returncode == 2 and "--shots" in r.stderr,
              "--shot-threshold alone: %d %r" % (r.returncode, r.stderr))
        print("ok --shots refuses --keyframes; its tuning needs it")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
