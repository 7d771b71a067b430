#!/usr/bin/python3
"""Export the audio models to ONNX from PyTorch modules written here after their published
architectures. Each takes a patch of log-mel frames [N, 1, frames, bands], as vidfeat's front
end computes them from the model's manifest (models/NAME.json, "audio").

vggish: the AudioSet VGGish (Hershey et al. 2017, the TensorFlow release's vggish_slim): 0.96 s
  patches of 96 frames x 64 bands; four groups of 3x3 convolutions (64; 128; 256, 256; 512, 512;
  each ReLU, stride 1, "same" padding), each group followed by a 2x2 max pool of stride 2; the
  [6, 4, 512] map flattened in TensorFlow's order (time, band, channel); two fully connected
  layers of 4096 with ReLU; a fully connected layer of 128 without activation: the embedding.
  With --pca FILE (the release's vggish_pca_params.npz) its PCA post-processing follows and is
  the file's output: the means subtracted, projected on the eigenvectors, clipped to [-2, 2]
  (the release then quantises that to 8 bits for storage, (x + 2) x 63.75 truncated; vidfeat
  keeps the floats).
panns_cnn14: PANNs' CNN14 (Kong et al. 2020) on 1 s patches of 100 frames x 64 bands (32 kHz,
  hop 320): batch normalisation over the bands, six blocks of two 3x3 convolutions (no bias,
  batch normalisation, ReLU; 64, 128, 256, 512, 1024, 2048) each followed by a 2x2 average pool
  (the last by none), the mean over the bands, the max plus the mean over time (the max over
  time written as a global max pool: the same values), a fully connected
  layer of 2048 with ReLU (the embedding), and 527 AudioSet classes through a sigmoid.

With --checkpoint FILE the weights are the file's (a state dict by this script's names: the
PyTorch ports' own for VGGish - features.N, embeddings.N, as torchvggish's release of the
TensorFlow weights, vggish-10086976.pth, whose name's digits its SHA-256 must start with - and
PANNs' Cnn14_mAP=0.431.pth for CNN14, its spectrogram and log-mel extractor's buffers ignored);
without, seeded random weights
of the same shapes, which is what the tests run (no checkpoint can be downloaded on the machines
that build vidfeat).

    /usr/bin/python3 scripts/export-audio.py [--out DIR] [--checkpoint FILE] [--pca FILE]
                                             [--name NAME] [--seed N] [--force] MODEL

Writes DIR/NAME.onnx (opset 17, dynamic batch, input "input" [N, 1, frames, bands], output
"output"), marked in its metadata with whose weights it holds (vidfeat_weights).
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from vfexport import load_checkpoint, mark_weights, randomize

# frames a patch, bands: the manifests' "patch" and "mels"
PATCH = {"vggish": (96, 64), "panns_cnn14": (100, 64)}


class VGGish(nn.Module):
    def __init__(self, pca=None):
        super().__init__()
        layers, c = [], 1
        for group in ([64], [128], [256, 256], [512, 512]):
            for width in group:
                layers += [nn.Conv2d(c, width, 3, padding=1), nn.ReLU()]
                c = width
            layers.append(nn.MaxPool2d(2, 2))
        self.features = nn.Sequential(*layers)
        self.embeddings = nn.Sequential(nn.Linear(512 * 6 * 4, 4096), nn.ReLU(),
                                        nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 128))
        self.pca = pca  # (means [128], eigenvectors [128, 128]) or None

    def forward(self, x):
        x = self.features(x)  # [N, 512, 6, 4]
        x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)  # TensorFlow's flattening order
        x = self.embeddings(x)
        if self.pca is None:
            return x
        means, vectors = self.pca
        return torch.clamp((x - means) @ vectors.T, -2.0, 2.0)


class ConvBlock(nn.Module):
    def __init__(self, cin, cout, pool):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.bn2 = nn.BatchNorm2d(cout)
        self.pool = pool

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return F.avg_pool2d(x, self.pool) if self.pool else x


class Cnn14(nn.Module):
    def __init__(self, bands=64, classes=527):
        super().__init__()
        self.bn0 = nn.BatchNorm2d(bands)
        widths = [1, 64, 128, 256, 512, 1024, 2048]
        for i in range(6):
            setattr(self, "conv_block%d" % (i + 1),
                    ConvBlock(widths[i], widths[i + 1], (2, 2) if i < 5 else None))
        self.fc1 = nn.Linear(2048, 2048)
        self.fc_audioset = nn.Linear(2048, classes)

    def forward(self, x):  # [N, 1, frames, bands]
        x = self.bn0(x.transpose(1, 3)).transpose(1, 3)  # over the bands
        for i in range(6):
            x = getattr(self, "conv_block%d" % (i + 1))(x)
        x = x.mean(dim=3)  # [N, 2048, T]
        x = F.adaptive_max_pool2d(x.unsqueeze(3), 1).flatten(1) + x.mean(dim=2)
        x = F.relu(self.fc1(x))
        return torch.sigmoid(self.fc_audioset(x))


def read_pca(path):
    import numpy as np
    p = np.load(path)
    means = torch.tensor(p["pca_means"], dtype=torch.float32).reshape(-1)
    vectors = torch.tensor(p["pca_eigen_vectors"], dtype=torch.float32)
    if means.shape != (128,) or vectors.shape != (128, 128):
        sys.exit("export-audio: %s is not VGGish's PCA parameters (128 means, 128 x 128)" % path)
    return means, vectors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=sorted(PATCH))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "models"))
    ap.add_argument("--checkpoint")
    ap.add_argument("--pca", help="vggish: the release's vggish_pca_params.npz")
    ap.add_argument("--name")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    name = a.name or a.model
    path = os.path.join(a.out, name + ".onnx")
    if os.path.exists(path) and not a.force:
        print("exists %s" % path)
        return 0
    if a.pca and a.model != "vggish":
        sys.exit("export-audio: --pca is VGGish's post-processing")
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    model = VGGish(read_pca(a.pca) if a.pca else None) if a.model == "vggish" else Cnn14()
    if a.checkpoint:
        state = load_checkpoint(a.checkpoint, "export-audio")
        state = state.get("model", state)  # PANNs' checkpoints hold {"model": state dict}
        missing, unexpected = model.load_state_dict(state, strict=False)
        extractor = [k for k in unexpected if k.split(".")[0] in ("spectrogram_extractor",
                                                                 "logmel_extractor")]
        if missing or len(unexpected) != len(extractor):
            sys.exit("export-audio: %s does not fit: missing %s, unexpected %s"
                     % (a.checkpoint, missing[:5], [k for k in unexpected
                                                     if k not in extractor][:5]))
        weights = "checkpoint " + os.path.basename(a.checkpoint)
    else:
        randomize(model, a.seed)
        weights = "random (seed %d)" % a.seed
    model.eval()
    frames, bands = PATCH[a.model]
    x = torch.randn(1, 1, frames, bands)
    torch.onnx.export(model, x, path, opset_version=17, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"},
                                                             "output": {0: "batch"}},
                      do_constant_folding=True)
    mark_weights(path, weights)
    print("wrote %s (%.0f MB, %s weights)" % (path, os.path.getsize(path) / 1e6, weights))
    return 0


if __name__ == "__main__":
    sys.exit(main())
