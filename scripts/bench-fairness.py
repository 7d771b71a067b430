#!/usr/bin/python3
"""Does vidfeat keep its throughput when other work shares the cores? In one run, for each
model at batch 32 (network alone, `vidfeat bench --infer-only`), images/s:

  alone              one vidfeat, default threads
  two at once        two vidfeat processes started together: each one's rate and their sum
  beside 1 busy      one vidfeat beside one busy-looping process (and beside two)
  --threads 2xCPUs   one vidfeat asked for twice the CPUs it may use
  ONNX Runtime       the same cases for onnxruntime-node (its threads = the CPUs)

and the ratios to "alone" measured in the same run (the host moves by 25%: compare ratios, not
runs). With --e2e CLIP, also end to end (decode, network, store into SQLite) with MobileNetV2:
one extraction alone, two at once, and two at once with --threads 1 each (how many workers and
threads a machine wants). Nothing is asserted; the CPU is named.

Models: MobileNetV2 (../shared/models) and Inception v3 to its pool (the peer benchmark's export,
made under /tmp/peer-models when missing; needs python3-torch).

usage: /usr/bin/python3 scripts/bench-fairness.py [--models mobilenet_v2,inception_v3]
         [--runs 8] [--no-ort] [--e2e CLIP] [--vidfeat PATH]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from vfbench import cpu_name, ort_env  # noqa: E402

BUSY = ["/usr/bin/python3", "-c", "while True: pass"]


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def together(argvs, env):
    """Start every command at once; each one's images/s (None where it failed)."""
    procs = [subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for a in argvs]
    out = []
    for p in procs:
        so, se = p.communicate()
        doc = last_json(so) if p.returncode == 0 else None
        if doc is None:
            sys.stderr.write("bench-fairness: %s failed: %s\n" % (" ".join(p.args), se[-500:]))
        out.append(None if doc is None else doc.get("infer_fps", doc.get("median")))
    return out


def beside(argv, n_busy, env):
    busy = [subprocess.Popen(BUSY) for _ in range(n_busy)]
    try:
        time.sleep(0.5)
        return together([argv], env)[0]
    finally:
        for b in busy:
            b.kill()
            b.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mobilenet_v2,inception_v3")
    ap.add_argument("--runs", type=int, default=8, help="timed runs of 32 images (8; median)")
    ap.add_argument("--no-ort", action="store_true", help="leave ONNX Runtime out")
    ap.add_argument("--e2e", help="a clip for the end-to-end cases (a 720p one)")
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--vidfeat", default=os.path.join(ROOT, "build", "src", "cli", "vidfeat"))
    a = ap.parse_args()
    cpus = len(os.sched_getaffinity(0))
    env = ort_env()
    files = {"mobilenet_v2": os.path.join(a.shared, "models", "mobilenet_v2_1.0_224.onnx"),
             "inception_v3": "/tmp/peer-models/inception_v3_pool.onnx"}
    if "inception_v3" in a.models and not os.path.exists(files["inception_v3"]):
        subprocess.run(["/usr/bin/python3", os.path.join(a.shared, "bench", "peers",
                                                         "export_models.py"), "/tmp/peer-models"],
                       check=True, capture_output=True)
    print("bench-fairness: %s, %d CPUs this process may use; batch 32, %d runs of 32 images"
          % (cpu_name(), cpus, a.runs))
    print("%-13s %-14s %-24s %9s %9s" % ("model", "runtime", "case", "img/s", "vs alone"))
    for name in filter(None, a.models.split(",")):  # --models "": the end-to-end cases only
        model = files[name]
        if not os.path.exists(model):
            print("%-13s skipped: %s is missing" % (name, model))
            continue
        vf = [a.vidfeat, "bench", "--infer-only", "--json", "--model", model, "--batch", "32",
              "--runs", str(a.runs), "--images", "32"]
        ort = ["node", os.path.join(a.shared, "bench", "peers", "ort_bench.js"), model, "32",
               str(a.runs), str(cpus)]
        runtimes = [("vidfeat", vf, vf + ["--threads", str(2 * cpus)])]
        if not a.no_ort:
            runtimes.append(("onnxruntime", ort, ort[:-1] + [str(2 * cpus)]))
        for runtime, argv, over in runtimes:
            alone = together([argv], env)[0]
            pair = together([argv, argv], env)
            cases = [("alone", alone), ("two at once: first", pair[0]),
                     ("two at once: second", pair[1]),
                     ("two at once: sum", sum(p for p in pair if p) if all(pair) else None),
                     ("beside 1 busy", beside(argv, 1, env)),
                     ("beside 2 busy", beside(argv, 2, env)),
                     ("threads %d (2x CPUs)" % (2 * cpus), together([over], env)[0])]
            for case, v in cases:
                print("%-13s %-14s %-24s %9s %9s" % (
                    name, runtime, case, "%.1f" % v if v else "failed",
                    "%.2fx" % (v / alone) if v and alone else "-"), flush=True)
    if a.e2e:
        e2e(a, env)
    return 0


def e2e(a, env):
    """One extraction of the clip alone, then two at once (each into its own database)."""
    model = os.path.join(a.shared, "models", "mobilenet_v2_1.0_224.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        def argv(i):
            return [a.vidfeat, "--model", model, "--json", "-q", "--force", "-o",
                    os.path.join(tmp, "e2e%d.db" % i), a.e2e]

        def rate(argvs):
            t0 = time.time()
            procs = [subprocess.Popen(x, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env) for x in argvs]
            frames = 0
            for p in procs:
                so, _ = p.communicate()
                doc = json.loads(so) if p.returncode == 0 else {}
                frames += sum(f.get("frames", 0) for f in doc.get("files", []))
            return frames / (time.time() - t0)

        alone = rate([argv(0)])
        cases = [("two at once: sum", rate([argv(1), argv(2)])),
                 ("two, --threads 1 each", rate([argv(3) + ["--threads", "1"],
                                                 argv(4) + ["--threads", "1"]]))]
        print("%-13s %-14s %-24s %9.1f %9s" % ("mobilenet_v2", "vidfeat e2e", "alone (frames/s)",
                                                alone, "1.00x"))
        for case, v in cases:
            print("%-13s %-14s %-24s %9.1f %8.2fx" % ("mobilenet_v2", "vidfeat e2e", case, v,
                                                       v / alone))


if __name__ == "__main__":
    sys.exit(main())
