#!/usr/bin/python3
"""Make the small test models (a few KB each) and their goldens.

  tests/data/ops/NAME.onnx      one operator family per model, seeded weights; not committed: the
                                build makes them (--fixtures), the same bytes each time
  tests/golden/ops/NAME.txt     a seeded input batch and PyTorch's output for it: the independent
                                oracle that the reference backend is checked against (committed)
  tests/data/bad/NAME.onnx      malformed or unsupported models, each with the status and message
                                fragment the loader must report (tests/data/bad/EXPECTED.tsv,
                                committed); they also seed the fuzz corpus; made by the build too
  models/tiny_cnn.onnx          a few-KB CNN for the CLI tests and the quick start; not
                                committed: the build makes it (--tiny), the same bytes each time
                                (seeded, and PyTorch's CPU generator is stable), so that
                                tests/golden/tiny_cnn.txt stays its golden

usage: /usr/bin/python3 scripts/make_test_models.py            everything above
       /usr/bin/python3 scripts/make_test_models.py --tiny OUT  the tiny CNN alone, into OUT
       /usr/bin/python3 scripts/make_test_models.py --fixtures  the ops and bad models alone
"""
import os
import struct
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = os.path.join(ROOT, "tests", "data", "ops")
GOLD = os.path.join(ROOT, "tests", "golden", "ops")
BAD = os.path.join(ROOT, "tests", "data", "bad")
BATCH = 3


def seeded(seed):
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


WRITE_GOLDENS = True  # --fixtures: the models only (the goldens are committed)


def write_golden(name, x, y, golden_dir=GOLD):
    """Text: 'shape d0 d1 ...' then the values (%.9g), for the input and the expected output."""
    if not WRITE_GOLDENS:
        return
    with open(os.path.join(golden_dir, name + ".txt"), "w") as f:
        for arr in (x, y):
            arr = np.asarray(arr, np.float32)
            f.write("shape %s\n" % " ".join(str(d) for d in arr.shape))
            flat = arr.reshape(-1)
            for i in range(0, flat.size, 8):
                f.write(" ".join("%.9g" % v for v in flat[i:i + 8]) + "\n")


def randomize(m, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.Conv2d, nn.Linear)) and mod.bias is not None:
                mod.bias.uniform_(-0.5, 0.5, generator=g)
            if isinstance(mod, (nn.BatchNorm2d, nn.BatchNorm3d)):
                mod.weight.uniform_(0.5, 1.5, generator=g)
                mod.bias.uniform_(-0.5, 0.5, generator=g)
                mod.running_mean.uniform_(-0.5, 0.5, generator=g)
                mod.running_var.uniform_(0.5, 1.5, generator=g)
            if isinstance(mod, nn.LayerNorm) and mod.elementwise_affine:
                mod.weight.uniform_(0.5, 1.5, generator=g)
                mod.bias.uniform_(-0.5, 0.5, generator=g)
        # transformers start some tensors at zero (ViT's head and class token) or near it
        # (ConvNeXt's layer scales): values that show what follows them
        for name, p in m.named_parameters():
            if p.numel() and not p.abs().sum():
                p.normal_(0.0, 0.2, generator=g)
            elif name.endswith("layer_scale"):
                p.uniform_(0.3, 1.0, generator=g)


def export(name, make, shape, seed, dynamic=True, opset=13, nhwc=False, path=None,
           golden_dir=GOLD):
    """The model make() builds into path (default tests/data/ops/NAME.onnx, replaced whole), its
    golden into golden_dir (None: none). Built after seeding, so its weights depend on its seed
    alone, not on what was made before it."""
    seeded(seed)
    module = make()
    randomize(module, seed)
    module.eval()
    x = torch.randn(BATCH, *shape)
    final = path or os.path.join(OPS, name + ".onnx")
    path = final + ".tmp"
    axes = {"input": {0: "N"}, "output": {0: "N"}} if dynamic else None
    with torch.no_grad():
        # A fixed-batch export is evaluated image by image, as it was written for batch 1.
        y = module(x) if dynamic else torch.cat([module(x[i:i + 1]) for i in range(BATCH)])
    # traced with gradients on: under no_grad PyTorch's attention takes a fused fast path that
    # has no ONNX form
    torch.onnx.export(module, x if dynamic else x[:1], path, opset_version=opset,
                      input_names=["input"], output_names=["output"], dynamic_axes=axes)
    os.replace(path, final)
    # vidfeat's engine input is always planar NCHW; an NHWC model gets its transpose inside.
    if golden_dir:
        write_golden(name, (x.permute(0, 3, 1, 2) if nhwc else x).numpy(), y.numpy(), golden_dir)


def tiny_cnn(path, golden_dir=None):
    torch.manual_seed(1)  # the default initialisation draws the weights: seeded, same bytes
    export("tiny_cnn", TinyCnn, (3, 32, 32), 1, path=path, golden_dir=golden_dir)


# ---- operator cases ---------------------------------------------------------------------------

class ConvRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv(x))


class ConvWino(nn.Module):
    """3x3 convolutions on a 16x16 map, the second (32 -> 32 channels) one oneDNN runs by
    Winograd: at a large plan batch its images' tiles outweigh the layer's fixed scratchpad,
    so the plan runs it in chunks of images (test_backend_dnnl checks that path)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 32, 3, padding=1)

    def forward(self, x):
        return F.avg_pool2d(F.relu(self.c2(F.relu(self.c1(x)))), 4)


class ConvGrouped(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, stride=2, padding=2, dilation=2, groups=2)

    def forward(self, x):
        return self.conv(x)


class Depthwise(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.pw(F.relu6(self.dw(x)))


class BnStandalone(nn.Module):
    """BatchNorm that cannot be folded (it reads the input), then ReLU, then a conv."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(4)
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(F.relu(self.bn(x)))


class Pools(nn.Module):
    def forward(self, x):
        a = F.max_pool2d(x, 3, 2, ceil_mode=True)                      # 13 -> 6 (ceil)
        b = F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False)  # exclude padding
        c = F.avg_pool2d(x, 3, 2, padding=1)                           # include (Pad + pool)
        d = F.max_pool2d(x, 2, 2, padding=1, dilation=2)
        return torch.cat([a.flatten(1), b.flatten(1), c.flatten(1), d.flatten(1)], 1)


class Pools3d(nn.Module):
    """Pooling over a clip [N, 3, 8, 9, 9] (the input [N, 24, 9, 9]: 8 frames of 3 colours,
    reshaped, as vidfeat's engine takes images): the windows of S3D, I3D and R(2+1)D's kin."""

    def forward(self, x):
        x = x.reshape(x.shape[0], 3, 8, 9, 9)
        a = F.max_pool3d(x, (1, 3, 3), (1, 2, 2), padding=(0, 1, 1))  # S3D's spatial max pool
        b = F.max_pool3d(x, (2, 3, 3), 2, ceil_mode=True)               # ceil in time and space
        c = F.avg_pool3d(x, 3, 2, padding=1, count_include_pad=False)  # padding excluded
        d = F.avg_pool3d(x, (2, 3, 3), (2, 2, 2), padding=(0, 1, 1))   # padding counted
        e = F.adaptive_avg_pool3d(x, 1)                                 # global
        f = F.max_pool3d(x, 2, 1, dilation=2)                           # dilated
        g = F.adaptive_max_pool3d(x, 1)                                 # global max
        return torch.cat([t.flatten(1) for t in (a, b, c, d, e, f, g)], 1)


class Conv3dOps(nn.Module):
    """Convolutions over a clip [N, 3, 8, 9, 9] (the input [N, 24, 9, 9], reshaped): full 3x3x3,
    R(2+1)D's factorised pair (space, then time), grouped, depthwise with stride and dilation,
    with and without bias, and a residual sum."""

    def __init__(self):
        super().__init__()
        self.full = nn.Conv3d(3, 6, 3, padding=1)
        self.spatial = nn.Conv3d(6, 8, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), bias=False)
        self.temporal = nn.Conv3d(8, 8, (3, 1, 1), padding=(1, 0, 0))
        self.grouped = nn.Conv3d(8, 8, 3, padding=1, groups=2)
        self.depthwise = nn.Conv3d(8, 8, 3, stride=2, padding=2, dilation=2, groups=8)

    def forward(self, x):
        x = x.reshape(x.shape[0], 3, 8, 9, 9)
        x = F.relu(self.full(x))
        x = F.relu(self.temporal(F.relu(self.spatial(x))))
        x = self.grouped(x) + x
        x = self.depthwise(x)
        return torch.cat([x.flatten(1), F.adaptive_avg_pool3d(x, 1).flatten(1)], 1)


class Conv3dBn(nn.Module):
    """BatchNorm3d as R(2+1)D and S3D use it: after a Conv3d without bias (folded into it), after
    one with bias, and on its own (a channel affine of its own), with ReLU between."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv3d(3, 6, (1, 3, 3), padding=(0, 1, 1), bias=False)
        self.bn1 = nn.BatchNorm3d(6)
        self.conv2 = nn.Conv3d(6, 6, (3, 1, 1), padding=(1, 0, 0))
        self.bn2 = nn.BatchNorm3d(6)
        self.bn3 = nn.BatchNorm3d(6)

    def forward(self, x):
        x = x.reshape(x.shape[0], 3, 8, 9, 9)
        x = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(x))
        return torch.cat([F.relu(y).flatten(1), self.bn3(x + y).flatten(1)], 1)


class GlobalPools(nn.Module):
    def forward(self, x):
        return torch.cat([F.adaptive_avg_pool2d(x, 1), F.adaptive_max_pool2d(x, 1)], 1).flatten(1)


class GemmMatmul(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4 * 5 * 5, 16)
        self.w = nn.Parameter(torch.randn(16, 7) * 0.2)

    def forward(self, x):
        return torch.matmul(F.relu(self.fc(torch.flatten(x, 1))), self.w)


class Binary(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(4, 1, 1) + 0.5)
        self.shift = nn.Parameter(torch.randn(4, 1, 1))
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = x * self.scale + self.shift
        z = self.conv(x)
        w = (y - z) / 1.7 - 0.25
        pooled = F.adaptive_avg_pool2d(z, 1)   # [N, C, 1, 1] broadcast over the plane
        return w * pooled + y


class PRelus(nn.Module):
    """PRelu as PyTorch exports it: a slope per channel over an image ([C, 1, 1], negative and
    above 1 among them), one slope for all (LeakyRelu's form) and a slope per feature over rows
    ([C])."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1)
        self.per_channel = nn.PReLU(6)
        self.one = nn.PReLU()
        self.fc = nn.Linear(6 * 5 * 5, 7)
        self.rows = nn.PReLU(7)
        with torch.no_grad():
            self.per_channel.weight.copy_(torch.linspace(-0.5, 1.5, 6))
            self.one.weight.fill_(0.3)
            self.rows.weight.copy_(torch.linspace(0.1, 2.0, 7))

    def forward(self, x):
        y = self.one(self.per_channel(self.conv(x)) - 0.2)
        return torch.cat([y.flatten(1), self.rows(self.fc(y.flatten(1)))], 1)


class ConcatSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 1)
        self.b = nn.Conv2d(3, 2, 3, padding=1)

    def forward(self, x):
        y = torch.cat([self.a(x), self.b(x), x], 1)
        return F.softmax(y.flatten(1), dim=1)


class Activations(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return torch.cat([torch.sigmoid(y), F.leaky_relu(y, 0.1), F.hardsigmoid(y),
                          F.hardswish(y), torch.tanh(y), F.relu6(y * 3)], 1)


class ShapeReshape(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2)

    def forward(self, x):
        y = self.conv(x)
        return y.view(y.size(0), -1)


class Nhwc(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x.permute(0, 3, 1, 2)).mean((2, 3))


class Pads(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2)

    def forward(self, x):
        a = self.conv(F.pad(x, (0, 1, 0, 1)))                 # zero pad: folded into the conv
        b = F.pad(x, (1, 2, 0, 1), value=0.5)                 # standalone constant pad
        return torch.cat([a.flatten(1), b.flatten(1)], 1)


class SqueezeUnsqueeze(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)

    def forward(self, x):
        y = self.conv(x).mean((2, 3), keepdim=True)   # ReduceMean keepdims
        y = y.squeeze(3).squeeze(2)                    # Squeeze
        return y.unsqueeze(2) * 2.0                    # Unsqueeze


class TransformInput(nn.Module):
    """torchvision Inception v3's transform_input prelude."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        x0 = torch.unsqueeze(x[:, 0], 1) * (0.229 / 0.5) + (0.485 - 0.5) / 0.5
        x1 = torch.unsqueeze(x[:, 1], 1) * (0.224 / 0.5) + (0.456 - 0.5) / 0.5
        x2 = torch.unsqueeze(x[:, 2], 1) * (0.225 / 0.5) + (0.406 - 0.5) / 0.5
        return self.conv(torch.cat((x0, x1, x2), 1))


class FixedBatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2)
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x):
        return self.fc(self.conv(x).reshape(1, -1))


def vit_tiny():
    """torchvision's ViT as exported (sequence-first attention: the batch moves and is folded
    into the heads), at 32x32 with 8x8 patches, 2 layers of width 32."""
    return torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                                num_heads=2, hidden_dim=32, mlp_dim=64,
                                                num_classes=10)


def vit_patch14():
    """A DINOv2-style patching: 14x14 patches (at 56: 16 patches and the class token)."""
    return torchvision.models.VisionTransformer(image_size=56, patch_size=14, num_layers=2,
                                                num_heads=2, hidden_dim=32, mlp_dim=64,
                                                num_classes=10)


def swin_tiny():
    """torchvision's Swin (shifted windows: roll as slice + concat, the attention mask built by
    shape arithmetic), at 32x32 with two stages."""
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2],
                           window_size=[4, 4], num_classes=10)


def convnext_tiny():
    """torchvision's ConvNeXt blocks: depthwise 7x7, LayerNorm over channels-last, GELU."""
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    return ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], num_classes=10)


class TransformerOps(nn.Module):
    """The other operators exporters write for transformers: split, strided slices, LayerNorm
    over two dimensions, pow / sqrt / reciprocal / exp / neg, softmax over a middle axis, an
    expanded constant, a batched matmul of two activations."""
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 12)
        self.norm = nn.LayerNorm([4, 6])
        self.token = nn.Parameter(torch.randn(1, 1, 6))

    def forward(self, x):                          # [N, 3, 4, 6]
        t = x.flatten(1, 2)                        # [N, 12, 6]
        t = torch.cat([self.token.expand(x.shape[0], -1, -1), t], dim=1)   # [N, 13, 6]
        q, k, v = self.proj(t).split(4, dim=-1)    # 3 x [N, 13, 4]
        a = torch.softmax(q @ k.transpose(1, 2) / 2.0, dim=1) @ v           # [N, 13, 4]
        s = t[:, 1::2, ::2]                        # [N, 6, 3]
        r = torch.rsqrt(s.pow(2) + 1.0) + torch.exp(-s * s * 0.5) - (2.0 + s * s).sqrt().reciprocal()
        n = self.norm(x[:, 0].reshape(-1, 4, 6))   # [N, 4, 6]
        return torch.cat([a.flatten(1), r.flatten(1), -n.flatten(1)], dim=1)


class MatmulPerIndex(nn.Module):
    """Products with a constant per index of the input's last leading dimensions (MViT's
    relative positions, its einsum "b t h w c, h k c -> b t h w k"): one leading dimension, two,
    and then a bias and a residual sum fused into the product."""
    def __init__(self):
        super().__init__()
        self.r1 = nn.Parameter(torch.randn(3, 6, 5))
        self.r2 = nn.Parameter(torch.randn(3, 2, 6, 2))
        self.bias = nn.Parameter(torch.randn(6))

    def forward(self, x):                          # [N, 3, 4, 6]
        a = x @ self.r1                            # [N, 3, 4, 5]
        b = x.reshape(-1, 3, 2, 2, 6) @ self.r2    # [N, 3, 2, 2, 2]
        c = (a @ self.r1.transpose(1, 2)) + self.bias + x    # [N, 3, 4, 6]
        return torch.cat([a.flatten(1), b.flatten(1), c.flatten(1)], dim=1)


class TextTiny(nn.Module):
    """A CLIP-style text tower, small: token ids [N, 8] from a vocabulary of 50, token and
    position embeddings, two causal attention blocks (sequence first, QuickGELU), a final
    LayerNorm, the features at the end token (the highest id, taken as PyTorch exports
    x[arange(N), ids.argmax(-1)]) and a projection."""
    VOCAB, CONTEXT, WIDTH = 50, 8, 16

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(self.VOCAB, self.WIDTH)
        self.pos = nn.Parameter(torch.randn(self.CONTEXT, self.WIDTH) * 0.1)
        self.blocks = nn.ModuleList()
        for _ in range(2):
            self.blocks.append(nn.ModuleDict({
                "ln_1": nn.LayerNorm(self.WIDTH), "attn": nn.MultiheadAttention(self.WIDTH, 2),
                "ln_2": nn.LayerNorm(self.WIDTH), "fc": nn.Linear(self.WIDTH, 32),
                "proj": nn.Linear(32, self.WIDTH)}))
        self.ln_final = nn.LayerNorm(self.WIDTH)
        self.projection = nn.Parameter(torch.randn(self.WIDTH, 12) * 0.25)
        self.register_buffer("mask", torch.full((self.CONTEXT, self.CONTEXT),
                                                float("-inf")).triu_(1))

    def forward(self, ids):                           # [N, 8] int64
        x = (self.tok(ids) + self.pos).permute(1, 0, 2)
        for b in self.blocks:
            h = b["ln_1"](x)
            x = x + b["attn"](h, h, h, need_weights=False, attn_mask=self.mask)[0]
            h = b["fc"](b["ln_2"](x))
            x = x + b["proj"](h * torch.sigmoid(1.702 * h))
        x = self.ln_final(x.permute(1, 0, 2))
        return x[torch.arange(x.shape[0]), ids.argmax(dim=-1)] @ self.projection


def text_tiny(seed=24):
    """TextTiny with ids like a tokenizer's: the start token (VOCAB - 2), ids of text, the end
    token (VOCAB - 1, the highest) at a different place in each text, zeros after; the golden's
    input holds the ids as floats (exact)."""
    seeded(seed)
    module = TextTiny()
    randomize(module, seed)
    module.eval()
    v, ctx = TextTiny.VOCAB, TextTiny.CONTEXT
    ids = torch.zeros(BATCH, ctx, dtype=torch.int64)
    for i in range(BATCH):
        n = 3 + i  # the end token's place
        ids[i, 0] = v - 2
        ids[i, 1:n] = torch.randint(0, v - 2, (n - 1,))
        ids[i, n] = v - 1
    final = os.path.join(OPS, "text_tiny.onnx")
    with torch.no_grad():
        y = module(ids)
    torch.onnx.export(module, ids, final + ".tmp", opset_version=17, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "N"}, "output": {0: "N"}})
    os.replace(final + ".tmp", final)
    write_golden("text_tiny", ids.numpy().astype(np.float32), y.numpy())


class TinyCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.c1(x)), 2)
        y = F.relu(self.c2(y))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def helper_model(name, nodes, inits, in_shape, out_name="output", opset=13, in_name="input",
                 elem=TensorProto.FLOAT, extra_inputs=()):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(in_name, elem, in_shape)] + list(extra_inputs),
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             producer_name="vidfeat make_test_models")


def conv_bn_relu():
    """Conv -> BatchNormalization -> Relu built by hand (torch folds BN itself)."""
    rng = seeded(30)
    w = rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(6).astype(np.float32) * 0.1
    scale = rng.uniform(0.5, 1.5, 6).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, 6).astype(np.float32)
    mean = rng.uniform(-0.5, 0.5, 6).astype(np.float32)
    var = rng.uniform(0.5, 1.5, 6).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w, "w"), (b, "b"), (scale, "s"), (bias, "bb"), (mean, "m"), (var, "v")]]
    nodes = [helper.make_node("Conv", ["input", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"],
                              epsilon=1e-3, name="bn"),
             helper.make_node("Relu", ["n"], ["output"], name="relu")]
    model = helper_model("conv_bn_relu", nodes, inits, ["N", 3, 9, 9])
    onnx.save(model, os.path.join(OPS, "conv_bn_relu.onnx"))
    x = torch.from_numpy(rng.standard_normal((BATCH, 3, 9, 9)).astype(np.float32))
    y = F.conv2d(x, torch.from_numpy(w), torch.from_numpy(b), padding=1)
    y = F.batch_norm(y, torch.from_numpy(mean), torch.from_numpy(var), torch.from_numpy(scale),
                     torch.from_numpy(bias), eps=1e-3)
    write_golden("conv_bn_relu", x.numpy(), F.relu(y).numpy())


def conv3d_bn_relu():
    """Conv3D -> BatchNormalization -> Relu over a clip, built by hand (torch folds BN itself):
    the input [N, 24, 9, 9] reshaped to [N, 3, 8, 9, 9] (8 frames); vidfeat folds the BN into the
    convolution."""
    rng = seeded(31)
    w = rng.standard_normal((6, 3, 3, 3, 3)).astype(np.float32) * 0.2
    b = rng.standard_normal(6).astype(np.float32) * 0.1
    scale = rng.uniform(0.5, 1.5, 6).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, 6).astype(np.float32)
    mean = rng.uniform(-0.5, 0.5, 6).astype(np.float32)
    var = rng.uniform(0.5, 1.5, 6).astype(np.float32)
    shape = np.array([-1, 3, 8, 9, 9], np.int64)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w, "w"), (b, "b"), (scale, "s"), (bias, "bb"), (mean, "m"), (var, "v"),
              (shape, "clip")]]
    nodes = [helper.make_node("Reshape", ["input", "clip"], ["x"], name="frames"),
             helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1, 1, 1],
                              name="conv"),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"],
                              epsilon=1e-3, name="bn"),
             helper.make_node("Relu", ["n"], ["output"], name="relu")]
    model = helper_model("conv3d_bn_relu", nodes, inits, ["N", 24, 9, 9])
    onnx.save(model, os.path.join(OPS, "conv3d_bn_relu.onnx"))
    x = torch.from_numpy(rng.standard_normal((BATCH, 24, 9, 9)).astype(np.float32))
    y = F.conv3d(x.reshape(BATCH, 3, 8, 9, 9), torch.from_numpy(w), torch.from_numpy(b),
                 padding=1)
    y = F.batch_norm(y, torch.from_numpy(mean), torch.from_numpy(var), torch.from_numpy(scale),
                     torch.from_numpy(bias), eps=1e-3)
    write_golden("conv3d_bn_relu", x.numpy(), F.relu(y).numpy())


def lrn():
    """ONNX LRN built by hand (PyTorch exports LocalResponseNorm as a decomposition)."""
    rng = seeded(33)
    nodes = [helper.make_node("LRN", ["input"], ["output"], size=5, alpha=1e-2, beta=0.75,
                              bias=2.0, name="lrn")]
    onnx.save(helper_model("lrn", nodes, [], ["N", 8, 4, 4]), os.path.join(OPS, "lrn.onnx"))
    x = torch.from_numpy(rng.standard_normal((BATCH, 8, 4, 4)).astype(np.float32) * 2)
    y = F.local_response_norm(x, 5, alpha=1e-2, beta=0.75, k=2.0)
    write_golden("lrn", x.numpy(), y.numpy())


def same_upper():
    """Conv with auto_pad SAME_UPPER, stride 2 on an even size: padding only at the end."""
    rng = seeded(31)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    nodes = [helper.make_node("Conv", ["input", "w"], ["output"], auto_pad="SAME_UPPER",
                              strides=[2, 2], name="conv_same")]
    model = helper_model("same_upper", nodes, [numpy_helper.from_array(w, "w")], ["N", 3, 8, 8])
    onnx.save(model, os.path.join(OPS, "same_upper.onnx"))
    x = torch.from_numpy(rng.standard_normal((BATCH, 3, 8, 8)).astype(np.float32))
    y = F.conv2d(F.pad(x, (0, 1, 0, 1)), torch.from_numpy(w), stride=2)
    write_golden("same_upper", x.numpy(), y.numpy())


def bf16_cancel():
    """Two 1x1 convolutions that add 1000 and take it away again: exact in f32, but between
    them bf16 (8 significant bits: a step of 4 at 1000) loses the picture itself. What
    --precision auto must measure and refuse (f32 kept); no golden, the test compares f32."""
    eye = np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1)
    inits = [numpy_helper.from_array(eye, "w1"),
             numpy_helper.from_array(np.full(3, 1000, np.float32), "b1"),
             numpy_helper.from_array(eye.copy(), "w2"),
             numpy_helper.from_array(np.full(3, -1000, np.float32), "b2")]
    nodes = [helper.make_node("Conv", ["input", "w1", "b1"], ["up"], name="up"),
             helper.make_node("Conv", ["up", "w2", "b2"], ["down"], name="down"),
             helper.make_node("Flatten", ["down"], ["output"], name="flat")]
    model = helper_model("bf16_cancel", nodes, inits, ["N", 3, 8, 8])
    onnx.save(model, os.path.join(OPS, "bf16_cancel.onnx"))


def external_data():
    """A Gemm whose weights live in an external-data file beside the model."""
    rng = seeded(32)
    w = rng.standard_normal((5, 12)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    wt = numpy_helper.from_array(w, "w")
    nodes = [helper.make_node("Flatten", ["input"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w", "b"], ["output"], transB=1, name="fc")]
    model = helper_model("external_data", nodes, [wt, numpy_helper.from_array(b, "b")],
                         ["N", 3, 2, 2])
    weights = os.path.join(OPS, "external_data.weights")
    if os.path.exists(weights):  # onnx.save appends to it: start empty, for the same bytes
        os.remove(weights)
    onnx.save(model, os.path.join(OPS, "external_data.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="external_data.weights", size_threshold=64)
    x = rng.standard_normal((BATCH, 3, 2, 2)).astype(np.float32)
    write_golden("external_data", x, x.reshape(BATCH, -1) @ w.T + b)


# ---- malformed models -------------------------------------------------------------------------

def bad_models():
    expected = []

    def save(name, data, code, fragment):
        path = os.path.join(BAD, name + ".onnx")
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.SerializeToString())
        expected.append((name, code, fragment))

    tiny = open(os.path.join(ROOT, "models", "tiny_cnn.onnx"), "rb").read()
    w = numpy_helper.from_array(np.ones((2, 3, 1, 1), np.float32), "w")

    save("empty", b"", "VF_ERR_MODEL", "empty file")
    save("garbage", bytes(np.random.default_rng(5).integers(0, 256, 300, dtype=np.uint8)),
         "VF_ERR_MODEL", "protobuf")
    save("truncated", tiny[: len(tiny) * 3 // 5], "VF_ERR_MODEL", "truncated")
    save("not_a_model", b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "VF_ERR_MODEL", "protobuf")

    m = helper_model("u", [helper.make_node("LSTM", ["input"], ["output"], name="my_lstm")], [],
                     ["N", 3, 4, 4])
    save("unsupported_op", m, "VF_ERR_UNSUPPORTED", "unsupported operators: LSTM (node 'my_lstm')")

    # every operator vidfeat lacks named at once, each with its first node and how many others
    m = helper_model("u", [helper.make_node("LSTM", ["input"], ["a"], name="l1"),
                           helper.make_node("Relu", ["a"], ["b"], name="r1"),
                           helper.make_node("GRU", ["b"], ["c"], name="g1"),
                           helper.make_node("LSTM", ["c"], ["d"], name="l2"),
                           helper.make_node("FusedConv", ["d"], ["e"], name="f1",
                                            domain="com.microsoft"),
                           helper.make_node("LSTM", ["e"], ["output"], name="l3")],
                     [], ["N", 3, 4, 4])
    save("unsupported_ops", m, "VF_ERR_UNSUPPORTED",
         "unsupported operators: LSTM (node 'l1' and 2 others), GRU (node 'g1'), "
         "com.microsoft.FusedConv (node 'f1')")

    # torch.onnx.export's loops and sequences (torchvision's MViT): refused, pointing at the
    # export script that writes the model without them
    m = helper_model("s", [helper.make_node("SequenceEmpty", [], ["seq"], name="/SequenceEmpty"),
                           helper.make_node("SequenceInsert", ["seq", "input"], ["seq2"],
                                            name="/SequenceInsert"),
                           helper.make_node("ConcatFromSequence", ["seq2"], ["output"], axis=0,
                                            name="/ConcatFromSequence")],
                     [], ["N", 3, 4, 4])
    save("sequence_ops", m, "VF_ERR_UNSUPPORTED",
         "scripts/export-torchvision.py mvit_v2_s")

    m = helper_model("c", [helper.make_node("Relu", ["b"], ["a"], name="r1"),
                           helper.make_node("Relu", ["a"], ["b"], name="r2"),
                           helper.make_node("Relu", ["input"], ["output"], name="r3")],
                     [], ["N", 3, 4, 4])
    save("cycle", m, "VF_ERR_MODEL", "cycle")

    m = helper_model("d", [helper.make_node("Add", ["input", "nowhere"], ["output"], name="add")],
                     [], ["N", 3, 4, 4])
    save("dangling", m, "VF_ERR_MODEL", "input 'nowhere' is not defined")

    huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 40, 3, 1, 1])
    m = helper_model("h", [helper.make_node("Conv", ["input", "w"], ["output"], name="conv")],
                     [huge], ["N", 3, 4, 4])
    save("huge_dims", m, "VF_ERR_MODEL", "invalid dimensions")

    neg = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, -3, 1, 1])
    m = helper_model("n", [helper.make_node("Conv", ["input", "w"], ["output"], name="conv")],
                     [neg], ["N", 3, 4, 4])
    save("negative_dim", m, "VF_ERR_MODEL", "invalid dimensions")

    short = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3, 1, 1],
                        raw_data=b"\0" * 20)
    m = helper_model("s", [helper.make_node("Conv", ["input", "w"], ["output"], name="conv")],
                     [short], ["N", 3, 4, 4])
    save("raw_size_mismatch", m, "VF_ERR_MODEL", "bytes of data")

    m = helper_model("k", [helper.make_node("Conv", ["input", "w"], ["output"], name="conv")],
                     [w], ["N", 4, 4, 4])
    save("channel_mismatch", m, "VF_ERR_MODEL", "do not fit 4 input channels")

    m = helper_model("t", [helper.make_node("Add", ["input", "other"], ["output"], name="add")],
                     [], ["N", 3, 4, 4],
                     extra_inputs=[helper.make_tensor_value_info("other", TensorProto.FLOAT,
                                                                 ["N", 3, 4, 4])])
    save("two_inputs", m, "VF_ERR_UNSUPPORTED", "more than one input")

    m = helper_model("i", [helper.make_node("Relu", ["input"], ["output"], name="r")], [],
                     ["N", 3, 4, 4], elem=TensorProto.INT64)
    save("int_input", m, "VF_ERR_UNSUPPORTED", "token ids has rank 4")
    m = helper_model("i", [helper.make_node("Relu", ["input"], ["output"], name="r")], [],
                     ["N", 3, 4, 4], elem=TensorProto.INT32)
    save("int32_input", m, "VF_ERR_UNSUPPORTED", "neither float32 (images) nor int64")

    ext = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3, 1, 1],
                      data_location=TensorProto.EXTERNAL)
    ext.external_data.add(key="location", value="../../etc/passwd")
    m = helper_model("e", [helper.make_node("Conv", ["input", "w"], ["output"], name="conv")],
                     [ext], ["N", 3, 4, 4])
    save("external_escape", m, "VF_ERR_MODEL", "leaves the model's directory")

    ext = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3, 1, 1],
                      data_location=TensorProto.EXTERNAL)
    ext.external_data.add(key="location", value="no_such_file.bin")
    m = helper_model("e2", [helper.make_node("Conv", ["input", "w"], ["output"], name="conv")],
                     [ext], ["N", 3, 4, 4])
    save("external_missing", m, "VF_ERR_IO", "no_such_file.bin")

    m = helper_model("p", [helper.make_node("Relu", ["input"], ["x"], name="r1"),
                           helper.make_node("Relu", ["input"], ["x"], name="r2"),
                           helper.make_node("Relu", ["x"], ["output"], name="r3")],
                     [], ["N", 3, 4, 4])
    save("duplicate_output", m, "VF_ERR_MODEL", "produced twice")

    # [N, 3, 4, 4] -> [3, N, 4, 4] -> [N, 48]: valid ONNX, but no row is one image's
    shape = numpy_helper.from_array(np.array([-1, 48], np.int64), "shape")
    m = helper_model("b", [helper.make_node("Transpose", ["input"], ["t"], perm=[1, 0, 2, 3],
                                            name="tr"),
                           helper.make_node("Reshape", ["t", "shape"], ["output"], name="fl")],
                     [shape], ["N", 3, 4, 4])
    save("batch_mixing", m, "VF_ERR_UNSUPPORTED", "mixes the batch")

    # shape arithmetic on constants beyond int64 (2^62 x 4): refused, never wrapped around
    big = numpy_helper.from_array(np.array([1 << 62, 1], np.int64), "big")
    four = numpy_helper.from_array(np.array([4, 1], np.int64), "four")
    m = helper_model("o", [helper.make_node("Mul", ["big", "four"], ["shape"], name="mul"),
                           helper.make_node("Reshape", ["input", "shape"], ["output"], name="r")],
                     [big, four], ["N", 3, 4, 4])
    save("int_overflow", m, "VF_ERR_UNSUPPORTED", "integer arithmetic beyond 64 bits")

    # Nesting: a node attribute holding a graph whose node holds a graph, 100 levels deep,
    # written by hand (protobuf libraries refuse to build it): AttributeProto.g = 6,
    # GraphProto.node = 1, NodeProto.attribute = 5, ModelProto.graph = 7.
    def ld(field, payload):
        key = bytes([field << 3 | 2])
        n, out = len(payload), b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                break
        return key + out + payload
    inner = b""
    for _ in range(100):
        inner = ld(1, ld(5, ld(6, inner)))  # graph.node.attribute.g
    save("deep_nesting", ld(7, inner), "VF_ERR_MODEL", "nested deeper")

    with open(os.path.join(BAD, "EXPECTED.tsv"), "w") as f:
        f.write("# file\tstatus\tmessage fragment\n")
        for name, code, frag in expected:
            f.write("%s.onnx\t%s\t%s\n" % (name, code, frag))


def main(fixtures_only=False):
    for d in (OPS, GOLD, BAD):
        os.makedirs(d, exist_ok=True)
    if not fixtures_only:
        tiny_cnn(os.path.join(ROOT, "models", "tiny_cnn.onnx"), os.path.join(GOLD, ".."))
    export("conv_relu", ConvRelu, (3, 7, 7), 2)
    export("conv_grouped", ConvGrouped, (4, 11, 11), 3)
    export("depthwise_relu6", Depthwise, (8, 6, 6), 4)
    export("bn_standalone", BnStandalone, (4, 5, 5), 5)
    export("pools", Pools, (3, 13, 13), 6)
    export("global_pools", GlobalPools, (5, 6, 7), 7)
    export("pools3d", Pools3d, (24, 9, 9), 25)
    export("conv3d", Conv3dOps, (24, 9, 9), 26)
    export("conv3d_bn", Conv3dBn, (24, 9, 9), 27)
    export("gemm_matmul", GemmMatmul, (4, 5, 5), 9)
    export("binary", Binary, (4, 5, 5), 10)
    export("concat_softmax", ConcatSoftmax, (3, 4, 4), 11)
    export("activations", Activations, (3, 5, 5), 12)
    export("shape_reshape", ShapeReshape, (3, 9, 9), 13, opset=11)
    export("nhwc_transpose", Nhwc, (8, 8, 3), 14, nhwc=True)
    export("pads", Pads, (3, 7, 7), 15)
    export("squeeze_unsqueeze", SqueezeUnsqueeze, (3, 6, 6), 16)
    export("transform_input", TransformInput, (3, 8, 8), 17)
    export("fixed_batch", FixedBatch, (3, 8, 8), 18, dynamic=False)
    export("vit_tiny", vit_tiny, (3, 32, 32), 19, opset=17)
    export("swin_tiny", swin_tiny, (3, 32, 32), 20, opset=17)
    export("convnext_tiny", convnext_tiny, (3, 32, 32), 21, opset=17)
    export("transformer_ops", TransformerOps, (3, 4, 6), 22, opset=17)
    export("vit_patch14", vit_patch14, (3, 56, 56), 23, opset=17)
    export("matmul_per_index", MatmulPerIndex, (3, 4, 6), 28, opset=17)
    export("conv_wino", ConvWino, (3, 16, 16), 29)
    export("prelu", PRelus, (4, 5, 5), 30)
    text_tiny()
    conv_bn_relu()
    conv3d_bn_relu()
    lrn()
    same_upper()
    bf16_cancel()
    external_data()
    bad_models()
    print("wrote", OPS, GOLD, BAD)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--tiny":
        tiny_cnn(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "--fixtures":
        WRITE_GOLDENS = False
        main(fixtures_only=True)
    elif len(sys.argv) == 1:
        main()
    else:
        sys.exit(__doc__)
