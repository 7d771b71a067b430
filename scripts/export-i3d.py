#!/usr/bin/python3
"""Export I3D (RGB) to ONNX from a PyTorch module written here after the published architecture,
in the layout of the widely used PyTorch port of the Kinetics checkpoints.

I3D is Inception-v1 (GoogLeNet with batch normalisation) inflated to 3-D: a 7x7x7 stride-2
convolution, a 1x3x3 max pool, 1x1x1 and 3x3x3 convolutions, a 1x3x3 max pool, two Inception
blocks, a 3x3x3 stride-2 max pool, five blocks, a 2x2x2 stride-2 max pool, two blocks, then a
2x7x7 average pool (the 1024-d features) and a 1x1x1 convolution into the classes. Every
convolution and max pool pads "same" as TensorFlow does (the padding computed from the input's
size, the odd pixel at the end), with zeros, before an unpadded operation; batch normalisation
has eps 0.001. Each block has four branches: 1x1x1; 1x1x1 then 3x3x3; 1x1x1 then 3x3x3; a
3x3x3 stride-1 max pool then 1x1x1, joined along the channels.

With --checkpoint FILE (the port's state dict, such as its rgb_imagenet.pt: Kinetics-400 weights
from the ImageNet-inflated start) the weights are the file's, read by the port's names
(Conv3d_1a_7x7.conv3d.weight, Conv3d_1a_7x7.bn.running_mean, Mixed_3b.b1b.conv3d.weight, ...,
logits.conv3d.weight and .bias); without, seeded random weights of the same shapes, which is
what the tests run (no checkpoint can be downloaded on the machines that build vidfeat). Inputs
are RGB in [-1, 1] (models/i3d.json: mean 127.5, std 127.5).

    /usr/bin/python3 scripts/export-i3d.py [--out DIR] [--frames 16] [--size 224]
                                           [--classes 400] [--checkpoint FILE] [--name i3d]
                                           [--seed N] [--force]

Writes DIR/i3d.onnx (opset 17, dynamic batch, input "input" [N, 3, frames, size, size], output
"output": the logits averaged over the remaining time steps, [N, classes]); the 1024-d features
are the tensor of the average pool ("pool" in models/i3d.json). Marked in its metadata with whose
weights it holds (vidfeat_weights).
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from vfexport import load_checkpoint, mark_weights, randomize

# the Inception blocks: in channels; 1x1; 3x3 reduce, 3x3; 3x3 reduce, 3x3; pool projection
BLOCKS = {
    "Mixed_3b": (192, [64, 96, 128, 16, 32, 32]),
    "Mixed_3c": (256, [128, 128, 192, 32, 96, 64]),
    "Mixed_4b": (480, [192, 96, 208, 16, 48, 64]),
    "Mixed_4c": (512, [160, 112, 224, 24, 64, 64]),
    "Mixed_4d": (512, [128, 128, 256, 24, 64, 64]),
    "Mixed_4e": (512, [112, 144, 288, 32, 64, 64]),
    "Mixed_4f": (528, [256, 160, 320, 32, 128, 128]),
    "Mixed_5b": (832, [256, 160, 320, 32, 128, 128]),
    "Mixed_5c": (832, [384, 192, 384, 48, 128, 128]),
}


def same_pads(size, kernel, stride):
    """TensorFlow's "same" padding of one axis: before, after (the odd one after)."""
    total = max(kernel - (stride if size % stride == 0 else size % stride), 0)
    return total // 2, total - total // 2


def pad_same(x, kernel, stride):
    pads = []
    for axis in (4, 3, 2):  # F.pad lists the last axis first
        pads += same_pads(x.shape[axis], kernel[axis - 2], stride[axis - 2])
    return F.pad(x, pads)


class MaxPoolSame(nn.Module):
    def __init__(self, kernel, stride):
        super().__init__()
        self.kernel, self.stride = kernel, stride

    def forward(self, x):
        return F.max_pool3d(pad_same(x, self.kernel, self.stride), self.kernel, self.stride)


class Unit3D(nn.Module):
    def __init__(self, cin, cout, kernel=(1, 1, 1), stride=(1, 1, 1), bn=True, relu=True,
                 bias=False):
        super().__init__()
        self.kernel, self.stride, self.relu = kernel, stride, relu
        self.conv3d = nn.Conv3d(cin, cout, kernel, stride, padding=0, bias=bias)
        self.bn = nn.BatchNorm3d(cout, eps=0.001, momentum=0.01) if bn else None

    def forward(self, x):
        x = self.conv3d(pad_same(x, self.kernel, self.stride))
        if self.bn is not None:
            x = self.bn(x)
        return F.relu(x) if self.relu else x


class Inception(nn.Module):
    def __init__(self, cin, c):
        super().__init__()
        self.b0 = Unit3D(cin, c[0])
        self.b1a = Unit3D(cin, c[1])
        self.b1b = Unit3D(c[1], c[2], (3, 3, 3))
        self.b2a = Unit3D(cin, c[3])
        self.b2b = Unit3D(c[3], c[4], (3, 3, 3))
        self.b3a = MaxPoolSame((3, 3, 3), (1, 1, 1))
        self.b3b = Unit3D(cin, c[5])

    def forward(self, x):
        return torch.cat([self.b0(x), self.b1b(self.b1a(x)), self.b2b(self.b2a(x)),
                          self.b3b(self.b3a(x))], dim=1)


class I3D(nn.Module):
    def __init__(self, classes=400):
        super().__init__()
        self.Conv3d_1a_7x7 = Unit3D(3, 64, (7, 7, 7), (2, 2, 2))
        self.MaxPool3d_2a_3x3 = MaxPoolSame((1, 3, 3), (1, 2, 2))
        self.Conv3d_2b_1x1 = Unit3D(64, 64)
        self.Conv3d_2c_3x3 = Unit3D(64, 192, (3, 3, 3))
        self.MaxPool3d_3a_3x3 = MaxPoolSame((1, 3, 3), (1, 2, 2))
        self.Mixed_3b = Inception(*BLOCKS["Mixed_3b"])
        self.Mixed_3c = Inception(*BLOCKS["Mixed_3c"])
        self.MaxPool3d_4a_3x3 = MaxPoolSame((3, 3, 3), (2, 2, 2))
        for name in ("Mixed_4b", "Mixed_4c", "Mixed_4d", "Mixed_4e", "Mixed_4f"):
            setattr(self, name, Inception(*BLOCKS[name]))
        self.MaxPool3d_5a_2x2 = MaxPoolSame((2, 2, 2), (2, 2, 2))
        self.Mixed_5b = Inception(*BLOCKS["Mixed_5b"])
        self.Mixed_5c = Inception(*BLOCKS["Mixed_5c"])
        self.avg_pool = nn.AvgPool3d((2, 7, 7), stride=(1, 1, 1))
        self.logits = Unit3D(1024, classes, bn=False, relu=False, bias=True)

    def forward(self, x):
        for name in ("Conv3d_1a_7x7", "MaxPool3d_2a_3x3", "Conv3d_2b_1x1", "Conv3d_2c_3x3",
                     "MaxPool3d_3a_3x3", "Mixed_3b", "Mixed_3c", "MaxPool3d_4a_3x3", "Mixed_4b",
                     "Mixed_4c", "Mixed_4d", "Mixed_4e", "Mixed_4f", "MaxPool3d_5a_2x2",
                     "Mixed_5b", "Mixed_5c"):
            x = getattr(self, name)(x)
        x = self.logits(self.avg_pool(x))  # [N, classes, T', 1, 1]
        return x.mean(dim=(2, 3, 4))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "models"))
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=400)
    ap.add_argument("--checkpoint")
    ap.add_argument("--name", default="i3d")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    path = os.path.join(a.out, a.name + ".onnx")
    if os.path.exists(path) and not a.force:
        print("exists %s" % path)
        return 0
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    model = I3D(a.classes)
    if a.checkpoint:
        state = load_checkpoint(a.checkpoint, "export-i3d")
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            sys.exit("export-i3d: %s does not fit: missing %s, unexpected %s"
                     % (a.checkpoint, missing[:5], unexpected[:5]))
        weights = "checkpoint " + os.path.basename(a.checkpoint)
    else:
        randomize(model, a.seed)
        weights = "random (seed %d)" % a.seed
    model.eval()
    x = torch.randn(1, 3, a.frames, a.size, a.size)
    torch.onnx.export(model, x, path, opset_version=17, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"},
                                                             "output": {0: "batch"}},
                      do_constant_folding=True)
    mark_weights(path, weights[:100])
    print("wrote %s (%.0f MB, %s weights)" % (path, os.path.getsize(path) / 1e6, weights))
    return 0


if __name__ == "__main__":
    sys.exit(main())
