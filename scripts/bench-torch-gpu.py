#!/usr/bin/env python3
"""PyTorch on the GPU, the peer of `vidfeat bench --device gpu --infer-only`: the same networks
cut at the same layers (VGG19 fc7, Inception v3 pool) on random images, per batch size and
variant, images/s as the median of several timed runs. One JSON object per line.

Variants: fp32 (TF32 off), tf32, fp16 (eager, channels_last), fp16-compile (torch.compile of the
fp16 channels_last model, when it works here).

Usage: scripts/bench-torch-gpu.py [--models vgg19,inception_v3] [--batch 1,8,32,128]
                                  [--variants fp32,tf32,fp16,fp16-compile] [--seconds 2] [--runs 5]
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torchvision


def build(name):
    torch.manual_seed(1)
    if name == "vgg19":
        m = torchvision.models.vgg19(weights=None)
        m.classifier = nn.Sequential(*list(m.classifier.children())[:5])  # fc7 after its ReLU
        return m.eval(), 224
    if name == "inception_v3":
        m = torchvision.models.inception_v3(weights=None, aux_logits=True, transform_input=True,
                                            init_weights=False)
        m.fc = nn.Identity()  # the 2048-d pool
        return m.eval(), 299
    raise SystemExit("unknown model " + name)


def timed(fn, x, seconds, runs):
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(x)
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t0, 1e-4)
    iters = max(1, int(seconds / one))
    rates = []
    for _ in range(runs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(x)
        torch.cuda.synchronize()
        rates.append(iters * x.shape[0] / (time.perf_counter() - t0))
    return statistics.median(rates), rates


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="vgg19,inception_v3")
    ap.add_argument("--batch", default="1,8,32,128")
    ap.add_argument("--variants", default="fp32,tf32,fp16,fp16-compile")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench-torch-gpu: no CUDA device", file=sys.stderr)
        return 77
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name(0)
    for name in args.models.split(","):
        for variant in args.variants.split(","):
            base, size = build(name)
            torch.backends.cuda.matmul.allow_tf32 = variant == "tf32"
            torch.backends.cudnn.allow_tf32 = variant == "tf32"
            torch.backends.cudnn.benchmark = True
            half = variant.startswith("fp16")
            model = base.to(dev)
            if half:
                model = model.half().to(memory_format=torch.channels_last)
            fn_model = model
            if variant.endswith("compile"):
                try:
                    fn_model = torch.compile(model)
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(json.dumps({"model": name, "variant": variant, "error": str(e)[:200]}))
                    continue
            for b in [int(v) for v in args.batch.split(",")]:
                x = torch.randn(b, 3, size, size, device=dev)
                if half:
                    x = x.half().to(memory_format=torch.channels_last)

                def fn(inp):
                    with torch.inference_mode():
                        return fn_model(inp)

                try:
                    med, rates = timed(fn, x, args.seconds, args.runs)
                except Exception as e:  # noqa: BLE001 - e.g. torch.compile failing at run time
                    print(json.dumps({"model": name, "variant": variant, "batch": b,
                                      "error": str(e)[:200]}))
                    break
                print(json.dumps({"framework": "pytorch " + torch.__version__, "gpu": gpu,
                                  "model": name, "variant": variant, "batch": b,
                                  "img_per_s": round(med, 2),
                                  "all": [round(r, 2) for r in rates]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
