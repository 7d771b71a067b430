#!/usr/bin/python3
"""Where a network's time goes on this CPU: vidfeat's CPU backend run on synthetic images
(`vidfeat bench --infer-only`) with VIDFEAT_PROFILE, which times every step of the plan, and a
table of the nodes by time: operator, the implementation that ran it (oneDNN's name, or
"vidfeat" for vidfeat's own kernels), milliseconds per batch, GFLOP/s and the share of the
FP32 peak given (--peak; measure it with ../shared/bench/onednn/peak_avx2.c), then the time by
implementation and by operator, and the whole: the arithmetic of its convolutions and products
as written (a Winograd layer does fewer) over the time.

    scripts/profile-layers.py --model /tmp/peer-models/inception_v3_pool.onnx --peak 225
    VIDFEAT_ISA=avx2 scripts/profile-layers.py --model vgg19 --layer fc7 --top 20

Every number is printed beside the CPU (lscpu) and the instructions in use (VIDFEAT_ISA caps
them); reorders and other steps a node's lowering added are counted as the node's.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from vfbench import ROOT, cpu_name  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a model name or an ONNX file")
    ap.add_argument("--layer", help="the layer (default: the model's)")
    ap.add_argument("--input-size", type=int, help="for an ONNX file without a manifest")
    ap.add_argument("--batch", type=int, default=32, help="images per forward pass (32)")
    ap.add_argument("--threads", type=int, default=2, help="compute threads (2)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs (3)")
    ap.add_argument("--precision", default="f32", help="f32 (default), bf16 or int8")
    ap.add_argument("--peak", type=float, help="the FP32 peak in GFLOP/s of the ISA in use")
    ap.add_argument("--top", type=int, default=30, help="nodes listed (30)")
    ap.add_argument("--json", help="also write the profile here")
    ap.add_argument("--vidfeat", default=os.path.join(ROOT, "build", "src", "cli", "vidfeat"))
    a = ap.parse_args()

    fd, path = tempfile.mkstemp(prefix="vidfeat-profile-", suffix=".json")
    os.close(fd)
    os.unlink(path)  # vidfeat creates it
    argv = [a.vidfeat, "bench", "--infer-only", "--json", "--model", a.model, "--batch",
            str(a.batch), "--threads", str(a.threads), "--runs", str(a.runs), "--precision",
            a.precision]
    if a.layer:
        argv += ["--layer", a.layer]
    if a.input_size:
        argv += ["--input-size", str(a.input_size)]
    env = dict(os.environ, VIDFEAT_PROFILE=path)
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0 or not os.path.exists(path):
        sys.stderr.write("profile-layers: %s: exit %d\n%s" % (" ".join(argv), p.returncode,
                                                             p.stderr[-2000:]))
        return 1
    with open(path) as f:
        prof = json.load(f)
    os.unlink(path)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(prof, f, indent=1)

    # per node: its steps' time summed; the implementation of its last step (the node's own)
    nodes = collections.OrderedDict()
    for s in prof["steps"]:
        key = s["node"] or "(plan edges)"
        n = nodes.setdefault(key, {"op": s["op"] or "-", "impl": s["impl"], "ms": 0.0,
                                   "gflop": 0.0, "calls": 0})
        n["ms"] += s["ms"]
        n["gflop"] += s["gflop"]
        n["calls"] = max(n["calls"], s["calls"])
        if s["last"]:
            n["impl"] = s["impl"]
        elif s["impl"].startswith("jit:uni") or "reorder" in s["impl"] or s["impl"] == "simple:any":
            n["reorder_ms"] = n.get("reorder_ms", 0.0) + s["ms"]
    calls = max((n["calls"] for n in nodes.values()), default=1) or 1
    total_ms = sum(n["ms"] for n in nodes.values()) / calls
    total_gflop = sum(n["gflop"] for n in nodes.values())
    print("%s; %s%s; %d threads; batch %d; %s; %d runs" % (
        cpu_name(), prof["isa"], ", capped by " + prof["cap"] if prof.get("cap") else "",
        prof["threads"], prof["batch"], prof["precision"], calls))
    peak = a.peak
    print("\n| node | operator | implementation | ms / batch | share | GFLOP/s%s |" %
          (" | of peak" if peak else ""))
    print("|---|---|---|---|---|---|%s" % ("---|" if peak else ""))
    ranked = sorted(nodes.items(), key=lambda kv: -kv[1]["ms"])
    for name, n in ranked[:a.top]:
        ms = n["ms"] / calls
        rate = n["gflop"] / (ms / 1e3) if ms > 0 and n["gflop"] else 0.0
        print("| %s | %s | %s | %.2f | %.1f%% | %s |%s" % (
            name, n["op"], n["impl"], ms, 100.0 * ms / total_ms if total_ms else 0.0,
            "%.1f" % rate if rate else "-",
            (" %.0f%% |" % (100.0 * rate / peak) if rate else " - |") if peak else ""))
    for what, keyf in (("implementation", lambda n: n["impl"]), ("operator", lambda n: n["op"])):
        by = collections.Counter()
        flops = collections.Counter()
        for n in nodes.values():
            by[keyf(n)] += n["ms"] / calls
            flops[keyf(n)] += n["gflop"]
        print("\n| %s | ms / batch | share | GFLOP/s |" % what)
        print("|---|---|---|---|")
        for k, ms in by.most_common():
            print("| %s | %.2f | %.1f%% | %s |" % (k, ms, 100.0 * ms / total_ms,
                                                   "%.1f" % (flops[k] / (ms / 1e3))
                                                   if flops[k] and ms else "-"))
    reorder = sum(n.get("reorder_ms", 0.0) for n in nodes.values()) / calls
    rate = total_gflop / (total_ms / 1e3) if total_ms else 0.0
    print("\nwhole: %.1f ms a batch of %d (%.2f images/s), %.2f GFLOP an image as written, "
          "%.1f GFLOP/s%s; reorders inside nodes %.1f%%" % (
              total_ms, prof["batch"], prof["batch"] / (total_ms / 1e3),
              total_gflop / prof["batch"], rate,
              " = %.0f%% of the %.0f GFLOP/s peak" % (100.0 * rate / peak, peak) if peak else "",
              100.0 * reorder / total_ms if total_ms else 0.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
