#!/usr/bin/python3
"""Reading results back, on clips ffmpeg makes here (no ../shared needed). One database holds two
layers of the tiny CNN (vectors of 10 and 16 floats), a file whose name is not UTF-8, two files
with the same base name and one file at two samplings:

  frames view    `frames` has each vector of a done extraction with path, model, layer, dim,
                 dtype, t, frame_index: the same rows as the tables joined; a running
                 extraction's rows are not in it
  README         the README's Python snippet, run as it is written (its MODEL, LAYER line set to
                 this database's), gives an array of one width, and the non-UTF-8 name back as
                 its real bytes through os.fsencode; the old snippet's query, which does not
                 choose a layer, mixes widths
  export npy     per file NAME.npy [frames, dim] float32 and NAME_t.npy, names made unique,
                 index.json mapping names to paths (lossless for non-UTF-8 names): equal to the
                 database's vectors bit for bit
  export hdf5    one file, a group per file with features, t, frame_index and the attributes;
                 read back with h5py, equal bit for bit
  export csv     a row per frame, read back with the csv module: float32 exact
  info --json    one JSON document: the counts, and each extraction as the tables have it
                 (the non-UTF-8 name escaped losslessly, the running one included)
  planted links  a link at every temporary name export writes (NAME.part) is replaced, its
                 target untouched
  choosing       a database with two layers and no --layer: exit 3 naming both, nothing
                 written; --layer picks one; an unwritable output: exit 1, one line, no partial
                 file left

usage: test_output.py VIDFEAT MODELS_DIR [docs/output.md]
"""
import csv
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, ff


def run(exe, *args, cwd=None):
    return subprocess.run([exe, *args], capture_output=True, timeout=120, cwd=cwd)


def stored(db, layer):
    """{(path bytes, sampling): [(frame_index, t, vec bytes)]} of the done extractions."""
    con = sqlite3.connect(db)
    con.text_factory = bytes
    out = {}
    for path, sampling, fi, t, vec in con.execute(
            "SELECT v.path, e.sampling, f.frame_index, f.t, f.vec FROM features f JOIN extractions"
            " e ON e.id = f.extraction_id JOIN videos v ON v.id = e.video_id JOIN models m ON"
            " m.id = e.model_id WHERE e.status = 'done' AND m.layer = ?"
            " ORDER BY v.path, e.sampling, f.frame_index", (layer,)):
        out.setdefault((path, sampling.decode()), []).append((fi, t, vec))
    con.close()
    return out


def readme_snippet(readme):
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"Reading the vectors back.*?```python\n(.*?)```", text, re.S)
    check(m, "%s has no Python snippet after 'Reading the vectors back'" % readme)
    return m.group(1)


def main():
    exe, models = sys.argv[1:3]
    readme = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "output.md")
    if not shutil.which("ffmpeg"):
        print("skip: ffmpeg is not installed")
        return SKIP
    try:
        import numpy as np
        import h5py
    except ImportError as e:
        print("skip: %s (Debian: python3-numpy python3-h5py)" % e)
        return SKIP
    model = os.path.join(models, "tiny_cnn.onnx")
    tmp = tempfile.mkdtemp(prefix="vidfeat_output_")
    try:
        a = os.path.join(tmp, "a.mp4")
        ff("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "2", "-c:v", "libx264", a)
        os.mkdir(os.path.join(tmp, "sub"))
        a2 = os.path.join(tmp, "sub", "a.mp4")
        ff("-f", "lavfi", "-i", "testsrc2=size=48x64:rate=5", "-t", "2", "-c:v", "mpeg4", a2)
        latin = os.path.join(os.fsencode(tmp), b"caf\xe9.mkv")  # Latin-1, not UTF-8
        ff("-f", "lavfi", "-i", "mandelbrot=size=64x48:rate=8", "-t", "1", "-c:v", "libx264",
           os.fsdecode(latin))
        db = os.path.join(tmp, "vidfeat.db")
        for extra in ([], ["--layer", "/Flatten_output_0"], ["--fps", "5"]):
            r = run(exe, "-q", "--model", model, "-o", db, *extra, a, a2, os.fsdecode(latin))
            check(r.returncode == 0, "extract %s: %r" % (extra, r.stderr))
        # an unfinished extraction: its rows must not show in the view
        con = sqlite3.connect(db)
        con.execute("UPDATE extractions SET status = 'running' WHERE id = (SELECT e.id FROM"
                    " extractions e JOIN videos v ON v.id = e.video_id WHERE v.path LIKE"
                    " '%sub/a.mp4' AND e.sampling = 'fps=5')")
        con.commit()
        layers = {"output": 10, "/Flatten_output_0": 16}
        want = {layer: stored(db, layer) for layer in layers}
        check(len(want["output"]) == 5 and len(want["/Flatten_output_0"]) == 3,
              "extractions: %s" % {k: list(v) for k, v in want.items()})

        # the frames view
        con.text_factory = bytes
        view = {}
        for path, model_name, layer, dim, dtype, sampling, t, fi, vec in con.execute(
                "SELECT path, model, layer, dim, dtype, sampling, t, frame_index, vec FROM frames"
                " ORDER BY path, sampling, frame_index"):
            check(model_name == b"tiny_cnn" and dtype == b"float32" and
                  dim == layers[layer.decode()] and len(vec) == 4 * dim,
                  "frames row %r %r %r %r" % (model_name, layer, dim, dtype))
            view.setdefault(layer.decode(), {}).setdefault((path, sampling.decode()), []).append(
                (fi, t, vec))
        con.close()
        check(view == want, "the frames view differs from the tables joined")
        print("ok frames view: %d vectors of 2 layers, the running extraction left out"
              % sum(len(v) for w in view.values() for v in w.values()))

        # info --json: one document, every extraction as the tables have it (the Latin-1 name
        # escaped losslessly: back through os.fsencode), the running one included as running
        r = run(exe, "info", "--json", db)
        check(r.returncode == 0 and r.stderr == b"", "info --json: %r" % r.stderr)
        doc = json.loads(r.stdout.decode("ascii"))
        con = sqlite3.connect(db)
        con.text_factory = bytes
        tables = sorted((p, st.decode(), n, m.decode(), l.decode(), d, sm.decode())
                        for p, st, n, m, l, d, sm in con.execute(
                            "SELECT v.path, e.status, e.frames, m.name, m.layer, m.dim,"
                            " e.sampling FROM extractions e JOIN videos v ON v.id = e.video_id"
                            " JOIN models m ON m.id = e.model_id"))
        n_vectors = con.execute("SELECT count(*) FROM features").fetchone()[0]
        con.close()
        got = sorted((os.fsencode(e["path"]), e["status"], e["frames"], e["model"], e["layer"],
                      e["dim"], e["sampling"]) for e in doc["extractions"])
        summary = doc["summary"]
        check(got == tables and latin in {g[0] for g in got},
              "info --json extractions differ from the tables:\n%r\n%r" % (got, tables))
        check(summary["database"] == db and summary["engine"].startswith("SQLite ") and
              summary["schema"] == 10 and summary["videos"] == 3 and summary["models"] == 2 and
              summary["running"] == 1 and summary["done"] == len(tables) - 1 and
              summary["failed"] == 0 and summary["vectors"] == n_vectors and
              doc["benchmark_runs"] == [] and
              all(e["error"] is None and e["note"] is None for e in doc["extractions"]),
              "info --json summary: %r" % summary)
        print("ok info --json: %d extractions as the tables have them, the Latin-1 name back"
              % len(got))

        # the README's snippet, as written
        code = readme_snippet(readme)
        check(re.search(r'^MODEL, LAYER = .*$', code, re.M), "the snippet has no MODEL, LAYER line")
        widths = set()
        con = sqlite3.connect(db)
        con.text_factory = bytes
        for (vec,) in con.execute("SELECT f.vec FROM features f JOIN extractions e ON e.id ="
                                  " f.extraction_id WHERE e.status = 'done'"):
            widths.add(len(vec) // 4)
        con.close()
        check(widths == {10, 16}, "without a layer the vectors have widths %s" % widths)
        for layer, dim in layers.items():
            ns = {}
            here = os.getcwd()
            os.chdir(tmp)
            try:
                exec(re.sub(r'^MODEL, LAYER = .*$', "MODEL, LAYER = %r, %r" % ("tiny_cnn", layer),
                            code, flags=re.M), ns)
            finally:
                os.chdir(here)
            X, paths = ns["X"], ns["paths"]
            n = sum(len(v) for v in want[layer].values())
            check(X.shape == (n, dim) and X.dtype == np.float32, "snippet: X %s" % (X.shape,))
            check(latin in {os.fsencode(p) for p in paths},
                  "snippet: the Latin-1 name does not come back: %r" % sorted(set(paths))[:4])
            rows = [r for _, v in sorted(want[layer].items()) for r in v]
            check(np.array_equal(X, np.stack([np.frombuffer(v, "<f4") for _, _, v in rows])),
                  "snippet: X differs from the stored vectors")
        print("ok README snippet: one layer at a time (widths 10 and 16 otherwise mixed), "
              "the Latin-1 name back through os.fsencode")

        # two layers and no --layer: refused, naming both; nothing written
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        r = run(exe, "export", db, "-o", os.path.join(out, "x.h5"))
        err = r.stderr.decode()
        check(r.returncode == 3 and "output" in err and "/Flatten_output_0" in err and
              len(err.strip().splitlines()) == 1, "two layers: %d %r" % (r.returncode, err))
        check(os.listdir(out) == [], "two layers: wrote %s" % os.listdir(out))

        for layer, dim in layers.items():
            by_key = want[layer]
            # npy
            npy = os.path.join(out, "npy_%d" % dim)
            r = run(exe, "export", db, "--layer", layer, "-o", npy)
            check(r.returncode == 0, "export npy: %r" % r.stderr)
            index = json.loads(open(os.path.join(npy, "index.json"), "rb").read())
            names = [e["name"] for e in index]
            check(len(set(names)) == len(names) == len(by_key), "npy names %s" % names)
            check(sorted(os.listdir(npy)) == sorted(["index.json"] + [n + ".npy" for n in names]
                                                     + [n + "_t.npy" for n in names]),
                  "npy files: %s" % os.listdir(npy))
            for e in index:
                key = (os.fsencode(e["path"]), e["sampling"])
                check(key in by_key, "index.json names %r" % (key,))
                rows = by_key[key]
                X = np.load(os.path.join(npy, e["name"] + ".npy"))
                t = np.load(os.path.join(npy, e["name"] + "_t.npy"))
                check(X.dtype == np.float32 and X.shape == (len(rows), dim) and
                      e["frames"] == len(rows), "%s: %s %s" % (e["name"], X.dtype, X.shape))
                check(X.tobytes() == b"".join(v for _, _, v in rows), "%s: vectors" % e["name"])
                check(t.dtype == np.float64 and list(t) == [tt for _, tt, _ in rows],
                      "%s: t" % e["name"])
            # hdf5
            h5 = os.path.join(out, "x_%d.h5" % dim)
            r = run(exe, "export", db, "--layer", layer, "-o", h5)
            check(r.returncode == 0, "export hdf5: %r" % r.stderr)
            with h5py.File(h5, "r") as f:
                check(f.attrs["model"] == "tiny_cnn" and f.attrs["layer"] == layer and
                      f.attrs["dim"] == dim and len(f.attrs["model_sha256"]) == 64,
                      "hdf5 attrs %s" % dict(f.attrs))
                check(len(f) == len(by_key), "hdf5 groups %s" % list(f))
                for name in f:
                    g = f[name]
                    key = (os.fsencode(g.attrs["path"]), g.attrs["sampling"])
                    check(key in by_key and g.attrs["layer"] == layer and
                          "conversion=" in g.attrs["preprocessing"], "group %s: %r" % (name, key))
                    rows = by_key[key]
                    check(g["features"].dtype == np.float32 and
                          g["features"][()].tobytes() == b"".join(v for _, _, v in rows) and
                          list(g["t"][()]) == [tt for _, tt, _ in rows] and
                          list(g["frame_index"][()]) == [fi for fi, _, _ in rows],
                          "group %s differs from the database" % name)
            # csv
            r = run(exe, "export", db, "--layer", layer, "--format", "csv")
            check(r.returncode == 0, "export csv: %r" % r.stderr)
            text = r.stdout.decode("utf-8", "surrogateescape")
            table = list(csv.reader(io.StringIO(text, newline="")))
            check(table[0] == ["path", "sampling", "frame_index", "t"] +
                  ["f%d" % i for i in range(dim)], "csv header %s" % table[0][:6])
            got = {}
            for row in table[1:]:
                vec = np.array([float(x) for x in row[4:]], dtype=np.float32)
                got.setdefault((os.fsencode(row[0]), row[1]), []).append(
                    (int(row[2]), float(row[3]), vec.astype("<f4").tobytes()))
            check(got == by_key, "csv differs from the database")
        print("ok export npy, hdf5, csv: each layer's vectors read back bit for bit (numpy, "
              "h5py, csv), unique names %s" % names)

        # links planted at every temporary name an export writes (NAME.part): the targets
        # are left as they were, the outputs are whole files of their own
        planted = os.path.join(tmp, "planted")
        os.mkdir(planted)
        victim = os.path.join(tmp, "victim")
        open(victim, "w").write("precious\n")
        npy_dir = os.path.join(planted, "npy")
        os.mkdir(npy_dir)
        stems = [n for n in names]
        traps = [os.path.join(planted, "x.h5.part"), os.path.join(planted, "x.csv.part"),
                 os.path.join(npy_dir, "index.json.part")]
        traps += [os.path.join(npy_dir, s + suffix + ".part") for s in stems
                  for suffix in (".npy", "_t.npy")]
        for trap in traps:
            os.symlink(victim, trap)
        layer = next(iter(layers))
        for out_path in (os.path.join(planted, "x.h5"), os.path.join(planted, "x.csv"), npy_dir):
            r = run(exe, "export", db, "--layer", layer, "-o", out_path)
            check(r.returncode == 0, "export over planted links: %r" % r.stderr)
        check(open(victim).read() == "precious\n", "an export wrote through a planted link")
        check(not any(os.path.islink(t) for t in traps) and
              os.path.isfile(os.path.join(planted, "x.h5")) and
              not os.path.islink(os.path.join(npy_dir, "index.json")), "planted links left")
        print("ok links planted at export's temporary names: never written through")

        # an output that cannot be written: one line, exit 1, nothing partial left
        blocker = os.path.join(tmp, "blocker")
        open(blocker, "w").close()
        r = run(exe, "export", db, "--layer", "output", "-o", os.path.join(blocker, "x.h5"))
        check(r.returncode == 1 and len(r.stderr.decode().strip().splitlines()) == 1 and
              "blocker" in r.stderr.decode(), "unwritable: %d %r" % (r.returncode, r.stderr))
        full = os.path.join(tmp, "ro")
        os.mkdir(full)
        os.chmod(full, 0o500)
        if os.geteuid() != 0:  # root writes anyway
            r = run(exe, "export", db, "--layer", "output", "-o", os.path.join(full, "x.csv"))
            check(r.returncode == 1 and os.listdir(full) == [], "read-only dir: %r" % r.stderr)
        leftovers = [f for _, _, fs in os.walk(tmp) for f in fs if f.endswith(".part")]
        check(not leftovers, "partial files left: %s" % leftovers)
        print("ok unwritable output: one line, exit 1, no partial file")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
