#!/usr/bin/python3
"""torchvision's MViT (mvit_v2_s) rewritten, in place, into operators an ONNX file carries
plainly; imported by export-torchvision.py.

The network computes the same sums; only the way its steps are written changes:

- torch.tensor_split (which the exporter turns into a Loop over a sequence) becomes two slices;
- the pooling of q, k and v runs over all heads at once: one depthwise Conv3d over
  [batch, heads x channels, T, H, W], each head's kernel repeated, so the batch stays alone in
  the first dimension (torchvision folds the heads into it);
- the relative positions' einsums ("b y t h w c, h k c -> b y t h w k") become products with a
  constant per index of h (of w, of t);
- their sum over every key (t, h, w), which torchvision broadcasts across eight dimensions and
  adds in place into a slice of the attention, becomes one product with a constant 0/1 matrix,
  the class token's row and column zeros;
- the pooled residual added in place into a slice becomes a sum with the slice padded by zeros.

export-torchvision.py checks the rewritten network against the original on the same input
before it writes the file. Run as a script, this checks it on a window of its own:

  /usr/bin/python3 scripts/mvit_onnx.py [--frames 4] [--size 32]
"""
import argparse
import sys
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models.video import mvit as tv


def _pool(self, x, thw):
    x, tensor_dim = tv._unsqueeze(x, 4, 1)
    class_token, x = x[:, :, :1], x[:, :, 1:]
    _, heads, _, width = x.shape
    x = x.transpose(2, 3).reshape((-1, heads * width) + tuple(thw))
    if self.norm_before_pool and self.norm_act is not None:
        x = self.norm_act(x)
    x = self.pool(x)
    t, h, w = x.shape[2:]
    x = x.reshape(-1, heads, width, t * h * w).transpose(2, 3)
    x = torch.cat((class_token, x), dim=2)
    if not self.norm_before_pool and self.norm_act is not None:
        x = self.norm_act(x)
    return tv._squeeze(x, 4, 1, tensor_dim), (t, h, w)


# The constants below are made with numpy: made with torch while the exporter traces, they
# would be written into the file as the operators that compute them.
def _distance(q, k):
    """torchvision's index of the relative position of query i to key j along one axis."""
    q_ratio, k_ratio = max(k / q, 1.0), max(q / k, 1.0)
    d = np.arange(q)[:, None] * q_ratio - (np.arange(k)[None, :] + (1.0 - k)) * k_ratio
    return torch.from_numpy(d.astype(np.int64))


def _pick(k_t, k_h, k_w):
    """[k_t + k_h + k_w, 1 + k_t k_h k_w]: column 1 + key holds a 1 in key (t, h, w)'s row of
    each term; column 0, the class token's, zeros."""
    key = np.arange(k_t * k_h * k_w)
    pick = np.zeros((k_t + k_h + k_w, 1 + key.size), np.float32)
    pick[key // (k_h * k_w), 1 + key] = 1.0
    pick[k_t + key // k_w % k_h, 1 + key] = 1.0
    pick[k_t + k_h + key % k_w, 1 + key] = 1.0
    return torch.from_numpy(pick)


def _rel_pos(q, q_thw, k_thw, rel_pos_h, rel_pos_w, rel_pos_t):
    """The relative positions' terms of the attention, [B, heads, 1 + Nq, 1 + Nk]."""
    q_t, q_h, q_w = (int(d) for d in q_thw)  # fixed by the window and picture size
    k_t, k_h, k_w = (int(d) for d in k_thw)
    r_h = tv._interpolate(rel_pos_h, 2 * max(q_h, k_h) - 1)[_distance(q_h, k_h)]
    r_w = tv._interpolate(rel_pos_w, 2 * max(q_w, k_w) - 1)[_distance(q_w, k_w)]
    r_t = tv._interpolate(rel_pos_t, 2 * max(q_t, k_t) - 1)[_distance(q_t, k_t)]
    heads, dim = q.shape[1], q.shape[3]
    n = q_t * q_h * q_w
    r_q = q[:, :, 1:].reshape(-1, q_t, q_h, q_w, dim)
    rel_h = torch.matmul(r_q, r_h.transpose(1, 2))  # one constant per h
    rel_w = torch.matmul(r_q.transpose(2, 3), r_w.transpose(1, 2)).transpose(2, 3)
    rel_t = torch.matmul(r_q.reshape(-1, q_t, q_h * q_w, dim), r_t.transpose(1, 2))
    terms = torch.cat((rel_t.reshape(-1, heads, n, k_t), rel_h.reshape(-1, heads, n, k_h),
                       rel_w.reshape(-1, heads, n, k_w)), dim=3)
    return torch.matmul(F.pad(terms, (0, 0, 1, 0)), _pick(k_t, k_h, k_w))


def _attention(self, x, thw):
    b, n, _ = x.shape
    q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).transpose(1, 3) \
        .unbind(dim=2)
    k_thw = thw
    if self.pool_k is not None:
        k, k_thw = self.pool_k(k, thw)
    if self.pool_v is not None:
        v = self.pool_v(v, thw)[0]
    if self.pool_q is not None:
        q, thw = self.pool_q(q, thw)
    attn = torch.matmul(self.scaler * q, k.transpose(2, 3))
    if self.rel_pos_h is not None:
        attn = attn + _rel_pos(q, thw, k_thw, self.rel_pos_h, self.rel_pos_w, self.rel_pos_t)
    x = torch.matmul(attn.softmax(dim=-1), v)
    if self.residual_pool:
        if self.residual_with_cls_embed:
            x = x + q
        else:
            x = x + F.pad(q[:, :, 1:, :], (0, 0, 1, 0))
    x = x.transpose(1, 2).reshape(b, -1, self.output_dim)
    return self.project(x), thw


def _fold_heads(attention):
    """attention's pooling convolutions over all heads at once."""
    for p in (attention.pool_q, attention.pool_k, attention.pool_v):
        if p is None or not isinstance(p.pool, nn.Conv3d):
            continue
        c, n = p.pool, attention.num_heads
        f = nn.Conv3d(c.in_channels * n, c.out_channels * n, c.kernel_size, c.stride, c.padding,
                      c.dilation, c.groups * n, c.bias is not None)
        with torch.no_grad():
            f.weight.copy_(c.weight.repeat(n, 1, 1, 1, 1))
            if c.bias is not None:
                f.bias.copy_(c.bias.repeat(n))
        p.pool = f


def prepare(model):
    """Rewrite torchvision MViT `model` in place for export (module docstring); returns it."""
    for m in model.modules():
        if isinstance(m, tv.MultiscaleAttention):
            _fold_heads(m)
            m.forward = types.MethodType(_attention, m)
        elif isinstance(m, tv.Pool):
            m.forward = types.MethodType(_pool, m)
    return model


def build(frames, size, **kw):
    """mvit_v2_s for windows of `frames` pictures of size x size (its relative positions are
    sized for them); torchvision's builder fixes 16 x 224."""
    original = tv._mvit

    def sized(**args):
        args.update(spatial_size=(size, size), temporal_size=frames)
        return original(**args)

    tv._mvit = sized
    try:
        return tv.mvit_v2_s(**kw)
    finally:
        tv._mvit = original


def main():
    ap = argparse.ArgumentParser(description="check the rewrite against torchvision's MViT")
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--size", type=int, default=32)
    a = ap.parse_args()
    torch.manual_seed(1)
    model = build(a.frames, a.size).eval()
    x = torch.randn(2, 3, a.frames, a.size, a.size)
    with torch.no_grad():
        before = model(x)
        after = prepare(model)(x)
    err = float((after - before).abs().max() / before.abs().max())
    print("mvit_v2_s %dx%d: the rewrite within %.2g relative of torchvision's forward"
          % (a.frames, a.size, err))
    return 0 if err < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
