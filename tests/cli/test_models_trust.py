#!/usr/bin/python3
"""Models users can trust (issue 19): whose weights a file has, the zoo's fixed-size files run at
the manifest's size, layers found by structure. Small networks made here with PyTorch:

  official     a manifest whose sha256 and size are those of the file: `models` says official,
               a run prints nothing about it, the models table and info say official
  other        another file under that manifest's name: `models` says other file, a run prints
               exactly one warning line naming the file, the table says other file
  random       a file from scripts/export-torchvision.py (squeezenet1_1, random weights): its
               metadata marks it; `models`, the run's first line, info (text and JSON), the
               models table and bench (once, and in its header) say random weights
  fixed size   a file exported with a fixed 1x3x224x224 input (as the zoo's Inception v3) runs
               at the manifest's 299: its vectors equal those of the same weights exported with
               a dynamic size; a network whose flatten feeds a Gemm at 224 fails at 299 with one
               line naming the node
  structure    a copy whose tensors are all renamed gives the same pool and logits vectors as
               the original, found by structure (the manifest's names are not in it)

usage: test_models_trust.py VIDFEAT SOURCE_DIR SAMPLES_DIR
"""
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, features, rel_err

try:
    import numpy as np
    import onnx
    import torch
    import torch.nn as nn
except ImportError as e:
    print("skip: %s (PyTorch, numpy and onnx make the test's networks)" % e)
    sys.exit(SKIP)


class Pooled(nn.Module):
    """Inception's tail in small: convolutions, a global average pool, dropout, flatten, fc."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(torch.flatten(self.dropout(self.avgpool(y)), 1))


class Flattened(nn.Module):
    """VGG's tail in small: the flatten of a fixed plane feeds the classifier."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=32, padding=1)  # 224 -> 7
        self.fc = nn.Linear(4 * 7 * 7, 10)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


def export(module, path, dynamic):
    x = torch.randn(1, 3, 224, 224)
    axes = {"input": {0: "N", 2: "H", 3: "W"}, "output": {0: "N"}} if dynamic else None
    with torch.no_grad():
        torch.onnx.export(module.eval(), x, path, opset_version=13, input_names=["input"],
                          output_names=["output"], dynamic_axes=axes)


def manifest(models, name, file, layers, sha_of=None):
    m = {"vidfeat_manifest": 1, "name": name, "file": file,
         "input": {"size": 299, "channel_order": "RGB", "resize": "stretch",
                   "mean": [120, 115, 100], "std": [60, 60, 60]},
         "layers": [{"name": n, "tensor": t, "dim": d} for n, t, d in layers]}
    if sha_of:
        with open(sha_of, "rb") as f:
            m["sha256"] = hashlib.sha256(f.read()).hexdigest()
        m["size"] = os.path.getsize(sha_of)
    with open(os.path.join(models, name + ".json"), "w") as f:
        json.dump(m, f)


def rename_tensors(src, dst):
    """Every tensor but the input gets another name, as another exporter version would give."""
    model = onnx.load(src)
    g = model.graph
    names = {}
    for i, node in enumerate(g.node):
        node.name = "n%d" % i
        for j, out in enumerate(node.output):
            names[out] = "t%d_%d" % (i, j)
            node.output[j] = names[out]
    for node in g.node:
        for j, inp in enumerate(node.input):
            node.input[j] = names.get(inp, inp)
    for out in g.output:
        out.name = names.get(out.name, out.name)
    check("/avgpool/GlobalAveragePool_output_0" in names, "export names: %s" % list(names))
    onnx.save(model, dst)


def run(exe, *args):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120)


def models_json(exe, models):
    r = run(exe, "models", "--models-dir", models, "--json")
    check(r.returncode == 0, "models: %r" % r.stderr)
    return {m["name"]: m for m in json.loads(r.stdout)}


def weights_column(db):
    con = sqlite3.connect(db)
    out = {name: w for name, w in con.execute("SELECT name, weights FROM models")}
    con.close()
    return out


def vectors(db):
    return {k[1]: v[2] for k, v in features(db, done_only=True).items()}


def extract(exe, models, model, db, clip, *extra):
    return run(exe, "--models-dir", models, "--model", model, "-o", db, "--batch", "4", *extra,
               clip)


def main():
    exe, src, samples = sys.argv[1:4]
    clip = os.path.join(samples, "testsrc_64x48.mp4")
    tmp = tempfile.mkdtemp(prefix="vidfeat_trust_")
    try:
        models = os.path.join(tmp, "models")
        os.mkdir(models)
        torch.manual_seed(7)
        net = Pooled()
        fixed = os.path.join(models, "trusty.onnx")
        export(net, fixed, dynamic=False)
        export(net, os.path.join(models, "trusty_dyn.onnx"), dynamic=True)
        layers = [("pool", "/avgpool/GlobalAveragePool_output_0", 16), ("logits", "output", 10)]
        manifest(models, "trusty", "trusty.onnx", layers, sha_of=fixed)
        manifest(models, "trusty_dyn", "trusty_dyn.onnx", layers)

        # official: the manifest's file, byte for byte
        listed = models_json(exe, models)
        check(listed["trusty"]["weights"] == "official", "models: %r" % listed["trusty"])
        check(listed["trusty_dyn"]["weights"] == "unknown", "models: %r" % listed["trusty_dyn"])
        db = os.path.join(tmp, "official.db")
        r = extract(exe, models, "trusty", db, clip, "--layer", "pool")
        check(r.returncode == 0 and "warning" not in r.stderr, "official run: %r" % r.stderr)
        check(weights_column(db) == {"trusty": "official"}, "table: %r" % weights_column(db))
        info = json.loads(run(exe, "info", "--json", db).stdout)
        check(info["extractions"][0]["weights"] == "official", "info: %r" % info["extractions"])
        print("ok official: models, the run (silent), the models table and info say so")

        # fixed size: the file's 224 input run at the manifest's 299 equals a dynamic export
        for layer in ("pool", "logits"):
            a, b = (os.path.join(tmp, "%s_%s.db" % (n, layer)) for n in ("fixed", "dyn"))
            for model, out in (("trusty", a), ("trusty_dyn", b)):
                r = extract(exe, models, model, out, clip, "--layer", layer, "-v")
                check(r.returncode == 0, "%s at 299: %r" % (model, r.stderr))
            check("fixed at 224x224 in the file; run at 299x299" in
                  run(exe, "-v", "--models-dir", models, "--model", "trusty", "-o",
                      os.path.join(tmp, "v.db"), clip).stderr, "no word of the re-inferred size")
            va, vb = vectors(a), vectors(b)
            check(len(va) == 20 and va.keys() == vb.keys(), "frames: %d %d" % (len(va), len(vb)))
            worst = max(rel_err(va[k], vb[k]) for k in va)
            check(worst <= 1e-6, "%s: fixed-224 file at 299 differs by %.3g" % (layer, worst))
        print("ok fixed size: the 224 file at 299 gives the dynamic export's vectors (pool, logits)")

        # ... and a network that cannot take another size says which node
        export(Flattened(), os.path.join(models, "flat.onnx"), dynamic=False)
        manifest(models, "flat", "flat.onnx", [("logits", "output", 10)])
        r = extract(exe, models, "flat", os.path.join(tmp, "flat.db"), clip)
        lines = r.stderr.splitlines()
        check(r.returncode != 0 and len(lines) == 1 and "node '" in lines[0] and "Gemm" in lines[0]
              and "exported for a fixed 224x224 input and cannot run at 299x299" in lines[0],
              "flat at 299: %d %r" % (r.returncode, r.stderr))
        print("ok fixed size: a flatten into a Gemm fails at 299 naming the node: %s" % lines[0])

        # structure: renamed tensors, the manifest's names gone, the same layers
        rename_tensors(fixed, os.path.join(models, "renamed.onnx"))
        manifest(models, "renamed", "renamed.onnx", layers)
        for layer in ("pool", "logits"):
            out = os.path.join(tmp, "renamed_%s.db" % layer)
            r = extract(exe, models, "renamed", out, clip, "--layer", layer, "-v")
            check(r.returncode == 0 and "by structure" in r.stderr, "renamed: %r" % r.stderr)
            va, vb = vectors(out), vectors(os.path.join(tmp, "fixed_%s.db" % layer))
            check(va.keys() == vb.keys() and max(rel_err(va[k], vb[k]) for k in va) <= 1e-6,
                  "renamed %s: other vectors" % layer)
        print("ok structure: a copy with every tensor renamed gives the same pool and logits")

        # other file: the same name, other bytes (a metadata entry appended: still loads)
        with open(fixed, "ab") as f:
            f.write(bytes([(14 << 3) | 2, 9, 0x0a, 2]) + b"hi" + bytes([0x12, 3]) + b"you")
        check(models_json(exe, models)["trusty"]["weights"] == "other file", "models: other")
        db = os.path.join(tmp, "other.db")
        r = extract(exe, models, "trusty", db, clip)
        warnings = [line for line in r.stderr.splitlines() if "warning" in line]
        check(r.returncode == 0 and len(warnings) == 1 and fixed in warnings[0] and
              "not the official trusty file" in warnings[0], "other run: %r" % r.stderr)
        check(weights_column(db) == {"trusty": "other file"}, "table: %r" % weights_column(db))
        print("ok other file: models, one warning line, the models table: %s" % warnings[0])
        r = run(exe, "similar", db, "--models-dir", models, "--video", clip, "--at", "0.5",
                "--json")
        check(r.returncode == 0 and json.loads(r.stdout)["weights"] == "other file" and
              "random weights" not in r.stderr, "similar, other file: %r" % r.stderr)

        # random weights, marked by the export script
        exporter = os.path.join(src, "scripts", "export-torchvision.py")
        subprocess.run([sys.executable, exporter, "squeezenet1_1", "--out", models], check=True,
                       capture_output=True, timeout=300)
        manifest(models, "squeezenet1_1", "squeezenet1_1.onnx", [("logits", "output", 1000)])
        check(models_json(exe, models)["squeezenet1_1"]["weights"] == "random weights",
              "models: random")
        r = run(exe, "models", "--models-dir", models)
        check(any(line.startswith("squeezenet1_1") and "random weights" in line
                  for line in r.stdout.splitlines()), "models text: %r" % r.stdout)
        db = os.path.join(tmp, "random.db")
        r = extract(exe, models, "squeezenet1_1", db, clip, "--max-frames", "2")
        first = r.stderr.splitlines()[0] if r.stderr else ""
        check(r.returncode == 0 and "random weights" in first, "first line: %r" % r.stderr)
        check(weights_column(db) == {"squeezenet1_1": "random weights"}, "table: random")
        check("random weights" in run(exe, "info", db).stdout, "info text: random")
        info = json.loads(run(exe, "info", "--json", db).stdout)
        check(info["extractions"][0]["weights"] == "random weights", "info json: random")
        print("ok random weights: models, the run's first line, the models table and info")
        # searches of its vectors say their similarities mean nothing: stderr and --json
        for cmd in (["similar", db, "--video", clip, "--at", "0.5", "-k", "1"],
                    ["similar", db, "--video", clip, "--at", "0.5", "-k", "1", "--json"],
                    ["matches", db], ["matches", db, "--json"]):
            r = run(exe, *cmd, "--models-dir", models)
            # (once; matches also loads the model, which says what it is as a run does)
            said = [line for line in r.stderr.splitlines() if "mean nothing" in line]
            check(r.returncode == 0 and len(said) == 1 and db in said[0] and
                  "random weights" in said[0], "%s: %r" % (" ".join(cmd[:1] + cmd[2:]), r.stderr))
            if "--json" in cmd:
                check(json.loads(r.stdout)["weights"] == "random weights", r.stdout)
        print("ok random weights: similar and matches say it on stderr and in --json")
        r = run(exe, "bench", "--models-dir", models, "--model", "squeezenet1_1", "--infer-only",
                "--batch", "1,2")
        said = [line for line in r.stderr.splitlines() if "random weights" in line]
        check(r.returncode == 0 and len(said) == 1 and "1000-d, random weights)" in r.stdout,
              "bench: %r %r" % (r.stdout, r.stderr))
        print("ok random weights: bench says it once (not per configuration) and in its header")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
