#!/usr/bin/python3
"""What vidfeat's search index costs and finds: the numbers behind README's "Searching an
archive" table. Prints one table; numbers are measured here, never asserted.

    scripts/bench-index.py [--build DIR] [--sizes 1000000,10000000] [--dims 1280,2048]
                           [--kind auto] [--no-db]

1. The index layer at archive scale (build/tests/vf_bench_index): for each size and width, the
   kind `vidfeat index` chooses, built as it builds one; build time and vectors/s, bytes per
   vector, recall@10 against brute force over all the vectors, search_ms p50/p99 (the index's
   search and the exact ranking of its candidates, as `similar` does), the share of the index's
   codes a query read and, where the vectors fit in memory, one exact scan. The vectors are
   frames of videos made as needed: 100 a file around 1,000 scenes, the scenes real MobileNetV2
   features when ../shared has the model and photos (extracted here first), random otherwise.
2. The commands on a real database (unless --no-db): an SQLite file with the smallest size's
   1280-d vectors written into vidfeat's tables, then `vidfeat index` (wall time, file size),
   and `vidfeat similar` through the index and `--exact` on 20 stored frames: search_ms as the
   command reports it (the database read included), recall@10 against --exact.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import vfbench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def real_centres(vidfeat, tmp):
    """MobileNetV2 features (1280-d) of ../shared's photos and clips, as an .npy file, or None."""
    shared = os.path.join(os.path.dirname(ROOT), "shared")
    model = os.path.join(shared, "models", "mobilenet_v2_1.0_224.onnx")
    if not os.path.exists(model):
        return None
    db = os.path.join(tmp, "real.db")
    inputs = [os.path.join(shared, d) for d in ("images", "videos") if
              os.path.isdir(os.path.join(shared, d))]
    subprocess.run([vidfeat, "--model", "mobilenet_v2_1.0_224", "--models-dir",
                    os.path.join(shared, "models"), "--fps", "2", "-q", "-o", db, *inputs],
                   capture_output=True)
    out = os.path.join(tmp, "real_npy")
    r = subprocess.run([vidfeat, "export", db, "-o", out, "-q"], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    import numpy as np
    vecs = [np.load(os.path.join(out, f)) for f in sorted(os.listdir(out))
            if f.endswith(".npy") and not f.endswith("_t.npy")]
    if not vecs:
        return None
    allv = np.concatenate(vecs).astype("<f4")
    path = os.path.join(tmp, "centres.npy")
    np.save(path, allv)
    return path, len(allv)


def bench_layer(build, n, dim, kind, centres):
    exe = os.path.join(build, "tests", "vf_bench_index")
    args = [exe, str(n), str(dim), kind] + ([centres] if centres and dim == 1280 else [])
    t0 = time.time()
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("vf_bench_index failed: " + r.stderr)
    out = dict(kv.split("=", 1) for kv in r.stdout.split())
    out["wall_s"] = "%.0f" % (time.time() - t0)
    return out


def bench_db(vidfeat, tmp, n, kind):
    """n 1280-d vectors in an SQLite database: vidfeat index, similar through it and --exact."""
    per_file = 100
    db = os.path.join(tmp, "bench.db")
    vfbench.write_archive(vidfeat, db, n, 1280, {"name": "bench", "file_sha256": "none",
                                                 "layer": "pool", "preprocessing": "bench"}, 7)
    t0 = time.time()
    r = subprocess.run([vidfeat, "index", db, "--model", "bench", "--kind", kind, "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("vidfeat index failed: " + r.stderr)
    rep = json.loads(r.stdout)
    index_s = time.time() - t0
    random.seed(3)
    found, ms_index, ms_exact = 0, [], []
    for _ in range(20):
        path = "/archive/bench/f%07d.mp4" % random.randrange(n // per_file)
        at = str(random.randrange(per_file) / 25.0)
        docs = []
        for extra in ([], ["--exact"]):
            r = subprocess.run([vidfeat, "similar", db, "--model", "bench", "--video", path,
                                "--at", at, "--json", *extra], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit("vidfeat similar failed: " + r.stderr)
            docs.append(json.loads(r.stdout))
        ms_index.append(docs[0]["search_ms"])
        ms_exact.append(docs[1]["search_ms"])
        a = {(h["path"], h["frame_index"]) for h in docs[0]["neighbours"]}
        b = {(h["path"], h["frame_index"]) for h in docs[1]["neighbours"]}
        found += len(a & b)
    ms_index.sort()
    ms_exact.sort()
    return {"kind": rep["kind"], "index_s": "%.1f" % index_s,
            "bytes_per_vector": "%.1f" % (rep["bytes"] / rep["vectors"]),
            "recall10": "%.3f" % (found / 200), "search_ms_p50": "%.1f" % ms_index[10],
            "search_ms_max": "%.1f" % ms_index[-1], "exact_ms_p50": "%.0f" % ms_exact[10],
            "db_gb": "%.1f" % (os.path.getsize(db) / 1e9)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--dims", default="1280,2048")
    ap.add_argument("--kind", default="auto")
    ap.add_argument("--no-db", action="store_true")
    a = ap.parse_args()
    vidfeat = os.path.join(a.build, "src", "cli", "vidfeat")
    print("# %s, %d cores; vidfeat index --kind %s" % (vfbench.cpu_name(), os.cpu_count(), a.kind))
    with tempfile.TemporaryDirectory(prefix="vidfeat_bench_index_") as tmp:
        real = real_centres(vidfeat, tmp)
        centres = real[0] if real else None
        print("# scenes: %s" % ("%d real MobileNetV2 vectors (../shared)" % real[1] if real
                                else "random (no ../shared model)"))
        print("| vectors | dim | kind | build s | add vectors/s | bytes/vector | recall@10 |"
              " search ms p50 / p99 | read a query | exact scan ms |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for n in [int(x) for x in a.sizes.split(",")]:
            for dim in [int(x) for x in a.dims.split(",")]:
                r = bench_layer(a.build, n, dim, a.kind, centres)
                read = float(r["read"])
                print("| %s | %d | `%s` | %s | %s | %s | %s | %s / %s | %s | %s |" % (
                    "{:,}".format(n), dim, r["kind"], r["build_s"], r["add_per_s"],
                    r["bytes_per_vector"], r["recall10"], r["search_ms_p50"],
                    r["search_ms_p99"], "%.2f%%" % (100 * read) if read >= 0 else "-",
                    r["exact_ms"] if float(r["exact_ms"]) else "-"),
                    flush=True)
        if not a.no_db:
            n = min(int(x) for x in a.sizes.split(","))
            r = bench_db(vidfeat, tmp, n, a.kind)
            print("\n# the commands on an SQLite database of %s 1280-d vectors (%s GB)" % (
                "{:,}".format(n), r["db_gb"]))
            print("| kind | vidfeat index s | bytes/vector | recall@10 vs --exact |"
                  " similar search_ms p50 / max | similar --exact search_ms p50 |")
            print("|---|---|---|---|---|---|")
            print("| `%s` | %s | %s | %s | %s / %s | %s |" % (
                r["kind"], r["index_s"], r["bytes_per_vector"], r["recall10"],
                r["search_ms_p50"], r["search_ms_max"], r["exact_ms_p50"]))


if __name__ == "__main__":
    main()
