#!/usr/bin/python3
"""Export CLIP's image tower (ViT-B/32 by default) to ONNX, from a PyTorch module written here
after the published architecture: the image cut into patches by a strided convolution without
bias, a class token and learned position embeddings, a LayerNorm before the transformer, residual
attention blocks (LayerNorm, multi-head self-attention, LayerNorm, an MLP of 4x the width with
QuickGELU, x * sigmoid(1.702 x)), a LayerNorm on the class token and a projection without bias
into the joint embedding space.

With --checkpoint FILE (OpenAI's released TorchScript or state-dict file, where it can be
downloaded) the weights are the checkpoint's, read by their published names
(visual.conv1.weight, visual.class_embedding, visual.transformer.resblocks.N.attn.in_proj_weight,
...); without, seeded random weights of the same shapes, which is what the tests run (no
checkpoint can be downloaded on the machines that build vidfeat).

    /usr/bin/python3 scripts/export-clip.py [--out DIR] [--arch ViT-B/32|ViT-B/16|ViT-L/14]
                                            [--checkpoint FILE] [--seed N] [--force]

Writes DIR/clip_vit_b32.onnx (opset 17, dynamic batch, input "input" [N, 3, 224, 224], output
"embed" [N, 512]: the projected class token, not normalised) and marks whose weights it holds in
the file's metadata (vidfeat_weights).
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

ARCHS = {  # patch, width, layers, heads, embedding, input size
    "ViT-B/32": (32, 768, 12, 12, 512, 224),
    "ViT-B/16": (16, 768, 12, 12, 512, 224),
    "ViT-L/14": (14, 1024, 24, 16, 768, 224),
}


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(width, width * 4))
        self.mlp.add_module("gelu", QuickGELU())
        self.mlp.add_module("c_proj", nn.Linear(width * 4, width))

    def forward(self, x):  # [tokens, N, width], sequence first
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class ImageTower(nn.Module):
    def __init__(self, patch, width, layers, heads, embed, size):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, patch, stride=patch, bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(
            scale * torch.randn((size // patch) ** 2 + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, embed))

    def forward(self, x):
        x = self.conv1(x)                                  # [N, width, g, g]
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)   # [N, g*g, width]
        cls = self.class_embedding.to(x.dtype) + torch.zeros(
            x.shape[0], 1, x.shape[-1], dtype=x.dtype)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding
        x = self.ln_pre(x).permute(1, 0, 2)                # [tokens, N, width]
        x = self.transformer(x).permute(1, 0, 2)
        return self.ln_post(x[:, 0, :]) @ self.proj        # [N, embed]


def randomize(model, seed):
    """LayerNorms and biases away from their identity defaults, as a trained model has them."""
    g = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5, generator=g)
                m.bias.uniform_(-0.1, 0.1, generator=g)
            elif isinstance(m, nn.Linear) and m.bias is not None:
                m.bias.uniform_(-0.05, 0.05, generator=g)
            elif isinstance(m, nn.MultiheadAttention):
                m.in_proj_bias.uniform_(-0.05, 0.05, generator=g)
                m.out_proj.bias.uniform_(-0.05, 0.05, generator=g)


def load_checkpoint(model, path):
    """OpenAI's file (TorchScript archive or state dict): the visual.* tensors by name."""
    try:
        state = torch.jit.load(path, map_location="cpu").state_dict()
    except RuntimeError:
        state = torch.load(path, map_location="cpu")
    visual = {k[len("visual."):]: v.float() for k, v in state.items() if k.startswith("visual.")}
    missing, unexpected = model.load_state_dict(visual, strict=False)
    if missing:
        sys.exit("export-clip: %s lacks %s" % (path, ", ".join(missing[:5])))
    return sorted(unexpected)


def mark_weights(path, value):
    """metadata_props "vidfeat_weights" appended to the file (ModelProto field 14)."""
    key, val = b"vidfeat_weights", value.encode()
    entry = bytes([0x0a, len(key)]) + key + bytes([0x12, len(val)]) + val
    with open(path, "ab") as f:
        f.write(bytes([(14 << 3) | 2, len(entry)]) + entry)


def build(arch, seed, checkpoint=None):
    torch.manual_seed(seed)
    model = ImageTower(*ARCHS[arch])
    if checkpoint:
        load_checkpoint(model, checkpoint)
    else:
        randomize(model, seed)
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "models"))
    ap.add_argument("--arch", default="ViT-B/32", choices=sorted(ARCHS))
    ap.add_argument("--checkpoint")
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    name = "clip_" + a.arch.lower().replace("-", "_").replace("/", "")
    path = os.path.join(a.out, name + ".onnx")
    if os.path.exists(path) and not a.force:
        print("exists %s" % path)
        return 0
    os.makedirs(a.out, exist_ok=True)
    model = build(a.arch, a.seed, a.checkpoint)
    size = ARCHS[a.arch][5]
    x = torch.randn(1, 3, size, size)
    # traced with gradients on: under no_grad PyTorch's attention takes a fused fast path with no
    # ONNX form
    torch.onnx.export(model, x, path + ".tmp", opset_version=17, input_names=["input"],
                      output_names=["embed"],
                      dynamic_axes={"input": {0: "batch"}, "embed": {0: "batch"}})
    os.replace(path + ".tmp", path)
    mark_weights(path, "OpenAI CLIP %s" % a.arch if a.checkpoint else "random (seed %d)" % a.seed)
    print("wrote %s (%.0f MB, %s weights)" % (path, os.path.getsize(path) / 1e6,
                                               "checkpoint" if a.checkpoint else "random"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
