#!/usr/bin/python3
"""Compare the features two vidfeat runs stored (say the CPU's and the GPU's).

Frames are matched by video file name and frame index; both runs must have the same frames with
the same timestamps. Per vector: the relative error max|a - b| / max|b| (b = the reference, the
second database) and the cosine. Exits 1 when a bound is broken.

A vector holding NaN or infinity counts as infinitely far; --exact also requires the same bytes.

Usage: scripts/compare-features.py [--max-rel 1e-4] [--min-cos C] [--exact] TEST.db REFERENCE.db
"""
import argparse
import os
import sqlite3
import sys

import numpy as np

QUERY = """
SELECT v.path, f.frame_index, f.pts, f.t, f.vec, m.dtype, e.status
FROM features f JOIN extractions e ON e.id = f.extraction_id
JOIN videos v ON v.id = e.video_id JOIN models m ON m.id = e.model_id
"""


def load(path):
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    rows = {}
    for vpath, index, pts, t, blob, dtype, status in db.execute(QUERY):
        if status != "done":
            continue
        vec = np.frombuffer(blob, dtype=np.float16 if dtype == "f16" else np.float32)
        rows[(os.path.basename(vpath), index)] = (pts, t, vec.astype(np.float64), bytes(blob))
    db.close()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("test")
    ap.add_argument("reference")
    ap.add_argument("--max-rel", type=float, default=None, help="bound on the relative error")
    ap.add_argument("--min-cos", type=float, default=None, help="bound on the cosine")
    ap.add_argument("--exact", action="store_true", help="vectors must be the same bytes")
    args = ap.parse_args()
    a, b = load(args.test), load(args.reference)
    ok = True
    if set(a) != set(b):
        print("compare: frames differ: %d only in %s, %d only in %s"
              % (len(set(a) - set(b)), args.test, len(set(b) - set(a)), args.reference))
        ok = False
    per_file = {}
    for key in sorted(set(a) & set(b)):
        pa, ta, va, ra = a[key]
        pb, tb, vb, rb = b[key]
        if pa != pb or not abs(ta - tb) <= 1e-9:
            print("compare: %s frame %d: timestamps differ (%s/%s vs %s/%s)"
                  % (key[0], key[1], pa, ta, pb, tb))
            ok = False
        if args.exact and ra != rb:
            print("compare: %s frame %d: the vectors' bytes differ" % key)
            ok = False
        if va.shape != vb.shape or not (np.isfinite(va).all() and np.isfinite(vb).all()):
            rel, cos = float("inf"), float("-inf")  # a NaN or infinity is never close
        else:
            rel = float(np.max(np.abs(va - vb)) / max(np.max(np.abs(vb)), 1e-30))
            cos = float(np.dot(va, vb) / max(np.linalg.norm(va) * np.linalg.norm(vb), 1e-30))
        s = per_file.setdefault(key[0], [0, 0.0, 1.0])
        s[0] += 1
        s[1] = max(s[1], rel)
        s[2] = min(s[2], cos)
    worst_rel, worst_cos = 0.0, 1.0
    for name, (n, rel, cos) in sorted(per_file.items()):
        print("%-40s %5d frames  max rel err %.2e  min cosine %.6f" % (name, n, rel, cos))
        worst_rel, worst_cos = max(worst_rel, rel), min(worst_cos, cos)
    print("all: %d files, max rel err %.2e, min cosine %.6f" % (len(per_file), worst_rel, worst_cos))
    if not per_file:
        ok = False
    if args.max_rel is not None and worst_rel > args.max_rel:
        print("compare: relative error %.3g over %.3g" % (worst_rel, args.max_rel))
        ok = False
    if args.min_cos is not None and worst_cos < args.min_cos:
        print("compare: cosine %.6f under %.6f" % (worst_cos, args.min_cos))
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
