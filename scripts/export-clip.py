#!/usr/bin/python3
"""Export a CLIP model (ViT-B/32 by default) to ONNX as its pair of towers, from PyTorch modules
written here after the published architecture.

The image tower: the image cut into patches by a strided convolution without bias, a class token
and learned position embeddings, a LayerNorm before the transformer, residual attention blocks
(LayerNorm, multi-head self-attention, LayerNorm, an MLP of 4x the width with QuickGELU,
x * sigmoid(1.702 x)), a LayerNorm on the class token and a projection without bias into the
joint embedding space.

The text tower: token embeddings (a vocabulary of 49,408 byte-level BPE ids) and learned position
embeddings over a context of 77, the same residual blocks with a causal mask (each token sees
those before it), a final LayerNorm, the features at the end token (the position of the highest
id: CLIP's end token is its last id) and a projection without bias into the same space.

With --checkpoint FILE (OpenAI's released TorchScript or state-dict file, where it can be
downloaded: ViT-B-32.pt, ViT-B-16.pt, ViT-L-14.pt) the weights are the checkpoint's, read by their
published names (visual.conv1.weight, visual.transformer.resblocks.N.attn.in_proj_weight, ...,
token_embedding.weight, transformer.resblocks.N.*, ln_final.*, text_projection; the released
files hold float16, made float32 here); without, seeded random weights of the same shapes, which
is what the tests run (no checkpoint can be downloaded on the machines that build vidfeat).

    /usr/bin/python3 scripts/export-clip.py [--out DIR] [--arch ViT-B/32|ViT-B/16|ViT-L/14]
                                            [--tower image|text|both] [--checkpoint FILE]
                                            [--seed N] [--force]

Writes DIR/clip_vit_b32.onnx (opset 17, dynamic batch, input "input" [N, 3, 224, 224], output
"embed" [N, 512]: the projected class token, not normalised) and DIR/clip_vit_b32_text.onnx
(input "text", token ids int64 [N, 77]; output "embed" [N, 512]: the projected end token, not
normalised), each marked in its metadata with whose weights it holds (vidfeat_weights).
models/clip_vit_b32.json names both and the tokenizer's vocabulary.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
from vfexport import mark_weights

ARCHS = {  # image: patch, width, layers, heads, input size; text: width, layers, heads; embed
    "ViT-B/32": {"image": (32, 768, 12, 12, 224), "text": (512, 12, 8), "embed": 512},
    "ViT-B/16": {"image": (16, 768, 12, 12, 224), "text": (512, 12, 8), "embed": 512},
    "ViT-L/14": {"image": (14, 1024, 24, 16, 224), "text": (768, 12, 12), "embed": 768},
}
VOCAB = 49408   # CLIP's byte-level BPE ids (the last one, 49407, ends a text)
CONTEXT = 77    # ids a text tower reads


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class Block(nn.Module):
    def __init__(self, width, heads, causal=0):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(width, width * 4))
        self.mlp.add_module("gelu", QuickGELU())
        self.mlp.add_module("c_proj", nn.Linear(width * 4, width))
        # the text tower's causal mask: -inf above the diagonal (not a weight of the checkpoint)
        mask = torch.full((causal, causal), float("-inf")).triu_(1) if causal else None
        self.register_buffer("attn_mask", mask, persistent=False)

    def forward(self, x):  # [tokens, N, width], sequence first
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False, attn_mask=self.attn_mask)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width, layers, heads, causal=0):
        super().__init__()
        self.resblocks = nn.Sequential(*[Block(width, heads, causal) for _ in range(layers)])

    def forward(self, x):
        return self.resblocks(x)


class ImageTower(nn.Module):
    def __init__(self, patch, width, layers, heads, size, embed):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, patch, stride=patch, bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(
            scale * torch.randn((size // patch) ** 2 + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Transformer(width, layers, heads)
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


class TextTower(nn.Module):
    def __init__(self, width, layers, heads, embed):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB, width)
        self.positional_embedding = nn.Parameter(0.01 * torch.randn(CONTEXT, width))
        self.transformer = Transformer(width, layers, heads, causal=CONTEXT)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(width ** -0.5 * torch.randn(width, embed))
        nn.init.normal_(self.token_embedding.weight, std=0.02)

    def forward(self, text):                               # [N, 77] token ids
        x = self.token_embedding(text) + self.positional_embedding
        x = self.transformer(x.permute(1, 0, 2)).permute(1, 0, 2)
        x = self.ln_final(x)
        # the end token's features: its id is the highest
        return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection


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


NOT_TEXT = ("logit_scale", "input_resolution", "context_length", "vocab_size")


def load_checkpoint(model, path, tower):
    """OpenAI's file (TorchScript archive or state dict): one tower's tensors by name, the
    image tower's under visual., the text tower's at the top."""
    try:
        state = torch.jit.load(path, map_location="cpu").state_dict()
    except RuntimeError:
        state = torch.load(path, map_location="cpu")
    if tower == "image":
        mine = {k[len("visual."):]: v for k, v in state.items() if k.startswith("visual.")}
    else:
        mine = {k: v for k, v in state.items() if not k.startswith("visual.") and k not in NOT_TEXT}
    mine = {k: v.float() for k, v in mine.items()}
    missing, unexpected = model.load_state_dict(mine, strict=False)
    if missing:
        sys.exit("export-clip: %s lacks %s" % (path, ", ".join(missing[:5])))
    return sorted(unexpected)


def build(arch, seed, checkpoint=None, tower="image"):
    a = ARCHS[arch]
    torch.manual_seed(seed)
    if tower == "image":
        model = ImageTower(*a["image"], a["embed"])
    else:
        model = TextTower(*a["text"], a["embed"])
    if checkpoint:
        load_checkpoint(model, checkpoint, tower)
    else:
        randomize(model, seed)
    return model.eval()


def export(model, tower, path, size):
    if tower == "image":
        x, names = torch.randn(1, 3, size, size), ["input"]
    else:
        x, names = torch.randint(0, VOCAB - 2, (2, CONTEXT)), ["text"]
        x[:, -1] = VOCAB - 1
    # traced with gradients on: under no_grad PyTorch's attention takes a fused fast path with no
    # ONNX form
    torch.onnx.export(model, x, path + ".tmp", opset_version=17, input_names=names,
                      output_names=["embed"],
                      dynamic_axes={names[0]: {0: "batch"}, "embed": {0: "batch"}})
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "models"))
    ap.add_argument("--arch", default="ViT-B/32", choices=sorted(ARCHS))
    ap.add_argument("--tower", default="both", choices=["image", "text", "both"])
    ap.add_argument("--checkpoint")
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    name = "clip_" + a.arch.lower().replace("-", "_").replace("/", "")
    os.makedirs(a.out, exist_ok=True)
    for tower in (["image", "text"] if a.tower == "both" else [a.tower]):
        path = os.path.join(a.out, name + ("_text" if tower == "text" else "") + ".onnx")
        if os.path.exists(path) and not a.force:
            print("exists %s" % path)
            continue
        model = build(a.arch, a.seed, a.checkpoint, tower)
        export(model, tower, path, ARCHS[a.arch]["image"][4])
        mark_weights(path, "OpenAI CLIP %s" % a.arch if a.checkpoint
                     else "random (seed %d)" % a.seed)
        print("wrote %s (%.0f MB, %s weights)" % (path, os.path.getsize(path) / 1e6,
                                                   "checkpoint" if a.checkpoint else "random"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
