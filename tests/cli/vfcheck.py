"""What the command-line tests share: the skip status, failing with one line, making clips with
ffmpeg, and reading the vectors of a vidfeat database back. Imported by the test scripts beside it (their own directory
is first on sys.path)."""
import json
import os
import sqlite3
import subprocess
import sys

SKIP = 77  # ctest's SKIP_RETURN_CODE


def ff(*args):
    """Run ffmpeg quietly (errors only), overwriting its output; a failure raises."""
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *args], check=True)


def encoders():
    """The names of the encoders this ffmpeg has (libx264, libx265, libvpx-vp9, ...)."""
    r = subprocess.run(["ffmpeg", "-hide_banner", "-encoders"], capture_output=True, text=True)
    return {line.split()[1] for line in r.stdout.splitlines()[10:] if len(line.split()) > 1}


def encode(d, specs):
    """Each (name, encoder, ffmpeg arguments) of specs made into d where this ffmpeg has the
    encoder (a note for each it lacks): the names made, in order."""
    have = encoders()
    made = []
    for name, enc, args in specs:
        if enc in have:
            ff(*args, os.path.join(d, name))
            made.append(name)
        else:
            print("note: this ffmpeg has no %s encoder: %s not made" % (enc, name))
    return made


def nvidia_driver_loads():
    """Whether the NVIDIA driver's library (libcuda.so.1) loads here."""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def export_clip(src, models):
    """CLIP ViT-B/32's towers (seeded random weights) by scripts/export-clip.py into models, with
    the manifest beside them; a failure fails the test."""
    r = subprocess.run([sys.executable, os.path.join(src, "scripts", "export-clip.py"), "--out",
                        models], capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, "export-clip: %s" % r.stderr[-2000:])
    import shutil
    shutil.copy(os.path.join(src, "models", "clip_vit_b32.json"), models)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def runs_bf16(exe):
    """Whether the CPU backend runs bf16 here (AVX512-BF16 or AMX, under VIDFEAT_ISA or
    ONEDNN_MAX_CPU_ISA): `vidfeat --version`'s bf16 line."""
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "vidfeat --version: exit %d" % r.returncode)
    return "\nbf16: yes" in r.stdout


def check_bf16_refused(exe, *args):
    """Where runs_bf16 is false: `vidfeat ARGS --precision bf16` exits 3 with one line that names
    the CPU's lack and --precision f32, in the user's words."""
    r = subprocess.run([exe, *args, "--precision", "bf16"], capture_output=True, text=True,
                       timeout=120)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 3 and len(lines) == 1 and "AVX512-BF16 or AMX" in lines[0]
          and "--precision f32" in lines[0] and "oneDNN" not in lines[0],
          "--precision bf16 where the CPU cannot: exit %d, %r" % (r.returncode, r.stderr))
    print("ok --precision bf16 refused here:", lines[0])


def rel_err(a, b):
    """max|a - b| / max|b| of two vectors (any sequences of numbers); inf when either holds a
    value that is not finite, so no bound passes a NaN (Python's max() and a `>` loop both skip
    NaN depending on where it sits)."""
    import numpy as np
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("inf")
    scale = float(np.abs(b).max()) if b.size else 0.0
    diff = float(np.abs(a - b).max()) if b.size else 0.0
    return diff / scale if scale > 0 else diff


def cosine(a, b):
    """Cosine similarity; -inf when either holds a value that is not finite."""
    import numpy as np
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("-inf")
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b) / (na * nb)


def worst(values, bad):
    """The worst of values where `bad` is the worst possible one (inf for errors, -inf for
    cosines): an empty list is a failure, not a pass."""
    values = list(values)
    if not values:
        return bad
    return max(values) if bad > 0 else min(values)


def has_schema(db):
    """Does db hold vidfeat's tables? (A run killed before its schema was committed leaves an
    empty database, which the next run sets up.)"""
    con = sqlite3.connect(db)
    n = con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'extractions'").fetchone()[0]
    con.close()
    return n == 1


def rows(db, done_only=False):
    """{(path, frame_index): (pts, t, vector bytes)} of the stored rows (of finished
    extractions only with done_only); none in a database without the schema."""
    if not has_schema(db):
        return {}
    con = sqlite3.connect(db)
    con.text_factory = lambda b: b.decode("utf-8", "surrogateescape")
    out = {(p, i): (pts, t, bytes(v)) for p, i, pts, t, v in con.execute(
        "SELECT v.path, f.frame_index, f.pts, f.t, f.vec FROM features f JOIN extractions e "
        "ON e.id = f.extraction_id JOIN videos v ON v.id = e.video_id" +
        (" WHERE e.status = 'done'" if done_only else ""))}
    con.close()
    return out


def features(db, done_only=False):
    """{(file name, frame_index): (pts, t, float32 vector)} of the stored rows (of finished
    extractions only with done_only)."""
    import numpy as np  # only the tests that compare vectors need numpy
    return {(os.path.basename(p), i): (pts, t, np.frombuffer(v, np.float32))
            for (p, i), (pts, t, v) in rows(db, done_only).items()}


def ffprobe_times(path):
    """Each decoded frame's (pts, t) as ffprobe sees them: pts = the best-effort timestamp in
    the stream's time base, except that a frame without one, or whose one is not after the
    previous frame's (a guess from a decode timestamp that went back), gets the previous
    frame's plus a frame's duration (its packet's, else the frame rate's), and the first
    frame without one the timeline's start: the rule vidfeat documents, so that t only
    increases. t = pts x time base - the file's start time."""
    r = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                        "frame=best_effort_timestamp,pkt_duration:stream=time_base,"
                        "avg_frame_rate,r_frame_rate:format=start_time", "-of", "json", path],
                       capture_output=True, text=True)
    check(r.returncode == 0, "ffprobe %s: %s" % (path, r.stderr))
    doc = json.loads(r.stdout)
    st = doc["streams"][0]
    num, den = (int(x) for x in st["time_base"].split("/"))
    rate = 0.0
    for key in ("avg_frame_rate", "r_frame_rate"):
        a, b = (int(x) for x in st.get(key, "0/0").split("/"))
        if a > 0 and b > 0:
            rate = a / b
            break
    start = float(doc["format"].get("start_time", 0.0))
    out, last = [], None
    for f in doc["frames"]:
        pts = f.get("best_effort_timestamp")
        if last is not None and (pts is None or int(pts) <= last):
            step = int(f.get("pkt_duration", 0))
            if step <= 0:
                step = max(round(den / (rate * num)), 1) if rate > 0 else 1
            pts = last + step
        elif pts is None:
            pts = round(start * den / num)
        pts = int(pts)
        out.append((pts, pts * num / den - start))
        last = pts
    return out, start


def extractions(db):
    """{path: (status, error, frames counted, [(frame_index, pts, t) of its stored rows in
    frame order])} of every extraction (paths as str, undecodable bytes as surrogates)."""
    con = sqlite3.connect(db)
    con.text_factory = lambda b: b.decode("utf-8", "surrogateescape")
    out = {}
    for eid, path, status, error, frames in con.execute(
            "SELECT e.id, v.path, e.status, e.error, e.frames FROM extractions e "
            "JOIN videos v ON v.id = e.video_id"):
        rows = con.execute("SELECT frame_index, pts, t FROM features WHERE extraction_id = ? "
                           "ORDER BY frame_index", (eid,)).fetchall()
        out[path] = (status, error, frames, rows)
    con.close()
    return out


def library_infer(exe, model_path, layer, x, dim):
    """The library's raw-tensor call (vf_extractor_infer) on images x ([n, 3, S, S] float32)
    through ctypes, on the build's libvidfeat.so found beside the command exe: [n, dim]."""
    import ctypes
    import numpy as np
    build = os.path.dirname(os.path.dirname(os.path.dirname(exe)))
    sys.path.insert(0, os.path.join(build, "python"))
    from vidfeat import _capi as C
    cfg = C.vf_config_default()
    cfg.model = model_path.encode()
    cfg.layer = layer.encode()
    cfg.batch_size = len(x)
    ex = ctypes.c_void_p()
    rc = C.vf_extractor_create(ctypes.byref(cfg), ctypes.byref(ex))
    check(rc >= 0, "extractor: %s" % C.vf_extractor_errmsg(ex))
    a = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros((len(x), dim), np.float32)
    rc = C.vf_extractor_infer(ex, a.ctypes.data, len(x), out.ctypes.data)
    check(rc >= 0, "infer: %s" % C.vf_extractor_errmsg(ex))
    C.vf_extractor_free(ctypes.byref(ex))
    return out
