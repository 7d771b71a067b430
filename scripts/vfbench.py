"""What the benchmark scripts share (imported by the bench-*.py scripts beside it, which run
with this directory first on sys.path): the CPU's name, the environment the runtimes are timed
in, a benchmark command's JSON result, a file's SHA-256, and an archive of synthetic vectors
written straight into vidfeat's SQLite tables."""
import hashlib
import json
import os
import sqlite3
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_name():
    """lscpu's model name (every number is reported beside it)."""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def ort_env(threads=None):
    """This environment with onnxruntime-node from build/ort unless ORT_NODE_DIR names another,
    and OMP_NUM_THREADS when threads is given."""
    env = dict(os.environ)
    env.setdefault("ORT_NODE_DIR", os.path.join(ROOT, "build", "ort", "node_modules",
                                                "onnxruntime-node"))
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def run_json(argv, env=None):
    """Run a benchmark command; the last line of its output that is a JSON object, or None
    (saying why on stderr, in the calling script's name) when it failed."""
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        who = os.path.splitext(os.path.basename(sys.argv[0]))[0]
        sys.stderr.write("%s: %s failed:\n%s\n" % (who, " ".join(argv), p.stderr[-2000:]))
        return None
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_archive(vidfeat, db, n, dim, model, seed, per_file=100, planted=None):
    """An SQLite database of n dim-d vectors, 100 frames a file around 1,000 scenes (each file a
    noisy copy of a scene, each frame a noisy copy of its file), under one model row: model is
    the row's columns (name, file_sha256, layer, preprocessing, and text_sha256 or None).
    planted: further scene centres, one file each, spread over the archive. vidfeat makes the
    schema (a run of the tiny CNN on a sample clip)."""
    import numpy as np
    sample = os.path.join(ROOT, "samples", "testsrc_64x48.mp4")
    subprocess.run([vidfeat, "--model", os.path.join(ROOT, "models", "tiny_cnn.onnx"), "-o", db,
                    "-q", sample], check=True)
    con = sqlite3.connect(db)
    model_id = con.execute(
        "INSERT INTO models (name, file_sha256, layer, dim, dtype, preprocessing, text_sha256)"
        " VALUES (?, ?, ?, ?, 'float32', ?, ?)",
        (model["name"], model["file_sha256"], model["layer"], dim, model["preprocessing"],
         model.get("text_sha256"))).lastrowid
    rng = np.random.default_rng(seed)
    scenes = rng.standard_normal((1000, dim)).astype("<f4")
    files = n // per_file
    plant_at = {}
    if planted is not None:  # spread evenly over the archive
        step = max(1, files // len(planted))
        plant_at = {i * step: p for i, p in enumerate(planted) if i * step < files}
    for f in range(files):
        centre = plant_at[f] if f in plant_at else scenes[f % 1000]
        centre = centre + 0.35 * rng.standard_normal(dim).astype("<f4")
        vecs = centre + 0.2 * rng.standard_normal((per_file, dim)).astype("<f4")
        add_file(con, model_id, "/archive/bench/f%07d.mp4" % f, vecs, 25.0)
    con.commit()
    con.close()


def add_file(con, model_id, path, vecs, fps):
    """A done extraction of path under model_id in an open SQLite connection: vecs (float32 rows)
    as its frames 0, 1, ... at fps frames a second."""
    vid = con.execute("INSERT INTO videos (path, size, mtime) VALUES (?, 1, 1)",
                      (path,)).lastrowid
    ext = con.execute("INSERT INTO extractions (id, video_id, model_id, sampling, status,"
                      " precision, frames) VALUES ((SELECT last + 1 FROM extraction_ids), ?,"
                      " ?, 'all', 'done', 'f32', ?) RETURNING id",
                      (vid, model_id, len(vecs))).fetchone()[0]
    con.executemany("INSERT INTO features (extraction_id, frame_index, pts, t, vec) VALUES"
                    " (?, ?, ?, ?, ?)",
                    [(ext, i, i, i / fps, vecs[i].tobytes()) for i in range(len(vecs))])
