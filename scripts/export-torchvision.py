#!/usr/bin/python3
"""Export torchvision networks (CNNs and vision transformers) to ONNX with seeded random weights.

No pretrained VGG19 / Inception v3 / ResNet-50 weights can be downloaded on a machine without
network access, but the architectures (and so the cost and the operator mix) are identical with
random weights, which is what conformance tests and benchmarks need.  With PyTorch and network
access, --pretrained loads torchvision's ImageNet weights instead.

Every file says whose weights it has in its ONNX metadata (metadata_props "vidfeat_weights":
"random (seed N)" or "torchvision ImageNet"), so that vidfeat can say "random weights" wherever
it names the model (models, info, each run's first line) and such vectors are never mistaken for
real ones.

The export of a CNN matches the ONNX model zoo's *_Opset17_torch_hub files: opset 17, a fixed
batch of 1 (vidfeat runs it at any batch size), input "input", output "output".  --dynamic-batch
exports a dynamic batch axis instead, as the transformers always are (traced at batch 1 their
files write the batch's place down as fixed numbers).

The clip models (r3d_18, mc3_18, r2plus1d_18, s3d, mvit_v2_s) take [N, 3, T, S, S]: T frames
of one window, fixed in the file (vidfeat reads the window's length from it), the batch
dynamic. --frames and --size export them for another window or picture size (the tests' small
ones). MViT is rewritten into plainer operators first (mvit_onnx.py: the same sums), checked
against torchvision's own forward on the same input before the file is written.

Usage:
  /usr/bin/python3 scripts/export-torchvision.py [--out DIR] [--dynamic-batch] NAME...
  NAME: vgg19 inception_v3 resnet50 mobilenet_v2 squeezenet1_1 densenet121 vit_b_16 swin_t
        convnext_tiny r3d_18 mc3_18 r2plus1d_18 s3d mvit_v2_s
"""
import argparse
import inspect
import os
import sys

import torch
import torch.nn as nn
import torchvision

import mvit_onnx
from vfexport import draw_batchnorm, mark_weights

SIZES = {"inception_v3": 299}
# Exported with a dynamic batch axis always: in a transformer the batch moves between
# dimensions and is folded into others (heads, tokens), which a file traced at batch 1 writes
# down as fixed numbers that no longer say where the batch is.
DYNAMIC = {"vit_b_16", "swin_t", "convnext_tiny"}
# Clip models: frames per window and picture size (torchvision's Kinetics-400 recipes: 16-frame
# clips at 112 for the 18-layer ResNets; S3D at 224, whose last pooling needs 16 frames or more;
# MViT-V2-S at 224).
CLIPS = {"r3d_18": (16, 112), "mc3_18": (16, 112), "r2plus1d_18": (16, 112), "s3d": (16, 224),
         "mvit_v2_s": (16, 224)}
NAMES = ["vgg19", "inception_v3", "resnet50", "mobilenet_v2", "squeezenet1_1", "densenet121",
         "vit_b_16", "swin_t", "convnext_tiny", "r3d_18", "mc3_18", "r2plus1d_18", "s3d",
         "mvit_v2_s"]


def build(name, seed, pretrained, frames=None, size=None):
    torch.manual_seed(seed)
    kw = {"weights": "DEFAULT" if pretrained else None}
    if name == "inception_v3":
        # The torch-hub Inception v3 normalises with transform_input=True (the ImageNet weights
        # expect it); the prelude is Gather/Unsqueeze/Mul/Add/Concat in ONNX.
        kw.update(aux_logits=True, transform_input=True, init_weights=not pretrained)
    zoo = torchvision.models.video if name in CLIPS else torchvision.models
    if name == "mvit_v2_s" and (frames, size) != CLIPS[name]:
        model = mvit_onnx.build(frames, size, **kw)  # its relative positions fit the window
    else:
        model = getattr(zoo, name)(**kw)
    if not pretrained:
        randomize_statistics(model, seed)
    return model.eval()


def randomize_statistics(model, seed):
    """Give biases, BatchNorm statistics and LayerNorm parameters distinct random values, as a
    trained model has: with the default constants the exporter merges equal initializers,
    BatchNorm and LayerNorm would be identities that test nothing, and the zeros a transformer
    starts from (ViT's head and class token, layer scales) would hide what follows them."""
    g = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.numel() and not p.abs().sum():
                p.normal_(0.0, 0.02, generator=g)
            elif name.endswith("layer_scale"):  # ConvNeXt's 1e-6 would mute every block
                p.uniform_(0.05, 0.2, generator=g)
        for m in model.modules():
            if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                m.weight.uniform_(0.5, 1.5, generator=g)
                m.bias.uniform_(-0.1, 0.1, generator=g)
            if isinstance(m, (nn.Conv2d, nn.Conv3d, nn.Linear)) and m.bias is not None:
                m.bias.uniform_(-0.1, 0.1, generator=g)
            elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm3d)):
                draw_batchnorm(m, g)


def check_rewrite(model, x, rewrite):
    """Rewrite model in place; refuse to go on unless it gives what it gave before on x."""
    with torch.no_grad():
        before = model(x)
        after = rewrite(model)(x)
    err = float((after - before).abs().max() / before.abs().max())
    print("rewritten for export: %.2g relative to the original" % err)
    if not err < 1e-5:
        sys.exit("export-torchvision: the rewritten network differs from the original")


def export(name, out_dir, dynamic, pretrained, opset, frames=None, size=None, file=None):
    path = os.path.join(out_dir, (file or name) + ".onnx")
    if name in CLIPS:
        frames, size = frames or CLIPS[name][0], size or CLIPS[name][1]
    model = build(name, NAMES.index(name) + 1, pretrained, frames, size)
    if name in CLIPS:
        x = torch.randn(1, 3, frames, size, size)
        if name == "mvit_v2_s":
            check_rewrite(model, x, mvit_onnx.prepare)
    else:
        size = size or SIZES.get(name, 224)
        x = torch.randn(1, 3, size, size)
    dynamic = dynamic or name in DYNAMIC or name in CLIPS
    axes = {"input": {0: "batch"}, "output": {0: "batch"}} if dynamic else None
    extra = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        # PyTorch 2.x defaults to its dynamo exporter, which names tensors differently; the
        # manifests' layer names are those of the TorchScript exporter (the model zoo's).
        extra["dynamo"] = False
    # traced with gradients on: under no_grad PyTorch's attention takes a fused fast path
    # (_native_multi_head_attention) that has no ONNX form
    torch.onnx.export(model, x, path, opset_version=opset, input_names=["input"],
                      output_names=["output"], dynamic_axes=axes, do_constant_folding=True,
                      **extra)
    seed = NAMES.index(name) + 1
    mark_weights(path, "torchvision ImageNet" if pretrained else "random (seed %d)" % seed)
    print("wrote %s (%.0f MB, %s weights)" % (path, os.path.getsize(path) / 1e6,
                                               "ImageNet" if pretrained else "random"))
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="+", choices=NAMES)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "models"))
    ap.add_argument("--dynamic-batch", action="store_true")
    ap.add_argument("--pretrained", action="store_true",
                    help="torchvision's ImageNet weights (needs them downloaded)")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--force", action="store_true", help="overwrite existing files")
    ap.add_argument("--frames", type=int, help="a clip model's frames per window")
    ap.add_argument("--size", type=int, help="the picture's side")
    ap.add_argument("--name", help="the file's name without .onnx (one NAME only)")
    args = ap.parse_args()
    if args.name and len(args.names) != 1:
        ap.error("--name names one model's file")
    os.makedirs(args.out, exist_ok=True)
    for name in args.names:
        path = os.path.join(args.out, (args.name or name) + ".onnx")
        if os.path.exists(path) and not args.force:
            print("exists %s" % path)
            continue
        export(name, args.out, args.dynamic_batch, args.pretrained, args.opset, args.frames,
               args.size, args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
