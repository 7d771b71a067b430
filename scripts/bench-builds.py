#!/usr/bin/python3
"""The network's speed in two builds of vidfeat, side by side: a refactor must leave it where it
was. Builds OLD (a git revision, in a worktree under build-compare/) and uses NEW (the build of
the working tree, build/, unless --new-vidfeat names another binary), then times each model at
each precision with `vidfeat bench --infer-only` (the network alone, batch 32), alternating the
two builds round after round so that the host's drift falls on both. Prints one table of the
medians and their ratio; nothing is asserted (the host moves by +-25%: read the ratio).

    scripts/bench-builds.py OLD [--models vit_b_16,inception_v3] [--precisions f32,bf16]
                                [--rounds 3] [--runs 3] [--batch 32] [--new-vidfeat PATH]

The models are scripts/export-torchvision.py's (seeded random weights, dynamic batch; the same
files for both builds), made in build/bench-models when missing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vfbench import cpu_name  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def build_revision(rev, out):
    """The vidfeat binary of git revision rev, built (CPU only) in a worktree under out."""
    src, bld = os.path.join(out, "src"), os.path.join(out, "build")
    subprocess.run(["git", "worktree", "remove", "--force", src], cwd=ROOT,
                   capture_output=True)
    subprocess.run(["git", "worktree", "add", "--force", "--detach", src, rev], cwd=ROOT,
                   check=True, capture_output=True)
    subprocess.run(["cmake", "-S", src, "-B", bld, "-DCMAKE_BUILD_TYPE=Release",
                    "-DVIDFEAT_CUDA=OFF", "-DVIDFEAT_BUILD_TESTS=OFF"], check=True,
                   capture_output=True)
    subprocess.run(["cmake", "--build", bld, "-j%d" % os.cpu_count(), "--target", "vidfeat_cli"],
                   check=True, capture_output=True)
    return os.path.join(bld, "src", "cli", "vidfeat")


def infer_fps(vidfeat, model, precision, batch, runs):
    argv = [vidfeat, "bench", "--infer-only", "--json", "--model", model, "--batch", str(batch),
            "--runs", str(runs), "--precision", precision]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench-builds: %s failed:\n%s" % (" ".join(argv), p.stderr[-2000:]))
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)["infer_fps"]
    sys.exit("bench-builds: no result from %s" % " ".join(argv))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", help="the git revision to compare with")
    ap.add_argument("--models", default="vit_b_16,inception_v3")
    ap.add_argument("--precisions", default="f32,bf16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--new-vidfeat", default=os.path.join(ROOT, "build", "src", "cli", "vidfeat"))
    ap.add_argument("--model-dir", default=os.path.join(ROOT, "build", "bench-models"))
    a = ap.parse_args()
    if not os.access(a.new_vidfeat, os.X_OK):
        sys.exit("bench-builds: %s missing (build the working tree first)" % a.new_vidfeat)
    old = build_revision(a.old, os.path.join(ROOT, "build-compare", "old"))
    models = a.models.split(",")
    os.makedirs(a.model_dir, exist_ok=True)
    for m in models:
        if not os.path.exists(os.path.join(a.model_dir, m + ".onnx")):
            subprocess.run(["/usr/bin/python3", os.path.join(HERE, "export-torchvision.py"),
                            "--out", a.model_dir, "--dynamic-batch", m], check=True)
    builds = [("old", old), ("new", a.new_vidfeat)]
    rev = subprocess.run(["git", "rev-parse", "--short", a.old], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    print("# %s; old = %s, new = %s; batch %d, median of %d rounds x %d runs" % (
        cpu_name(), rev, a.new_vidfeat, a.batch, a.rounds, a.runs), flush=True)
    res = {}
    for rnd in range(a.rounds):
        for m in models:
            path = os.path.join(a.model_dir, m + ".onnx")
            for prec in a.precisions.split(","):
                order = builds if rnd % 2 == 0 else builds[::-1]
                for name, exe in order:
                    fps = infer_fps(exe, path, prec, a.batch, a.runs)
                    res.setdefault((m, prec, name), []).append(fps)
                    print("round %d  %-14s %-4s %-3s %7.2f img/s" % (rnd + 1, m, prec, name, fps),
                          flush=True)
    print("\n| model | precision | old images/s | new images/s | new / old |")
    print("|---|---|---|---|---|")
    for m in models:
        for prec in a.precisions.split(","):
            o = statistics.median(res[(m, prec, "old")])
            n = statistics.median(res[(m, prec, "new")])
            print("| %s | %s | %.2f | %.2f | %.3f |" % (m, prec, o, n, n / o if o else 0.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
