"""What the model export scripts share (export-torchvision.py, export-clip.py, export-i3d.py,
export-audio.py): seeded weights for the CNNs written here, reading a released checkpoint, and
marking a file with whose weights it holds."""
import hashlib
import os
import re
import sys


def randomize(model, seed):
    """Seeded weights and distinct BatchNorm statistics (defaults would make them identities):
    convolutions (2-D and 3-D) and fully connected layers He-normal with small biases, every
    BatchNorm's scale, shift, mean and variance drawn, in the model's module order."""
    import torch
    import torch.nn as nn
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Conv3d, nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, (2.0 / fan_in) ** 0.5, generator=g)
                if m.bias is not None:
                    m.bias.uniform_(-0.1, 0.1, generator=g)
            elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm3d)):
                draw_batchnorm(m, g)


def draw_batchnorm(m, g):
    """A BatchNorm's scale, shift, running mean and variance drawn from generator g (its
    defaults would make it the identity). Under torch.no_grad()."""
    m.weight.uniform_(0.5, 1.5, generator=g)
    m.bias.uniform_(-0.1, 0.1, generator=g)
    m.running_mean.uniform_(-0.1, 0.1, generator=g)
    m.running_var.uniform_(0.5, 1.5, generator=g)


def mark_weights(path, value):
    """Append a metadata_props entry (ModelProto field 14) "vidfeat_weights" = value to the file:
    a protobuf message may be continued by appending fields, so the graph is not rewritten.
    vidfeat reads it to tell random weights from a checkpoint's (engine/manifest.h)."""
    key, val = b"vidfeat_weights", value[:100].encode()
    entry = bytes([0x0a, len(key)]) + key + bytes([0x12, len(val)]) + val
    assert len(entry) < 128  # one-byte lengths
    with open(path, "ab") as f:
        f.write(bytes([(14 << 3) | 2, len(entry)]) + entry)


def load_checkpoint(path, script):
    """torch.load of a released checkpoint, on the CPU. A name in torch.hub's form, NAME-HEX.EXT
    (torchvggish's vggish-10086976.pth, torchvision's r2plus1d_18-91a641e6.pth), says how its
    SHA-256 starts: a file whose SHA-256 does not start so is refused (damaged, or another)."""
    import torch
    m = re.search(r"-([0-9a-f]{8,64})\.[^.]+$", os.path.basename(path))
    if m:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        if not h.hexdigest().startswith(m.group(1)):
            sys.exit("%s: %s: its SHA-256 starts %s, not %s as its name says (a damaged or "
                     "another file)" % (script, path, h.hexdigest()[:len(m.group(1))], m.group(1)))
    return torch.load(path, map_location="cpu")
