#!/usr/bin/env python3
"""References for test_logmel: sounds made with ffmpeg and their log-mel frames as each model's
reference computes them, written here in numpy from the published algorithms:

- VGGish (the AudioSet release's mel_features.py): frames of 25 ms every 10 ms, whole frames
  only, a periodic Hann window, |rfft| over 512 points, 64 bands 125-7500 Hz whose triangles are
  drawn over the HTK mel scale (1127 ln(1 + f/700)) with the DC bin given no weight, ln(x + 0.01).
- PANNs CNN14 (torchlibrosa, i.e. librosa's arithmetic): 1024-point frames every 320 samples at
  32 kHz, centred (the signal reflected by 512 samples at each end), periodic Hann, power
  spectrum, librosa's Slaney mel filters 50-14000 Hz (triangles over Hz, each scaled by 2 / its
  width), 10 log10(max(x, 1e-10)).

The PANNs reference is also checked here against torchaudio's MelSpectrogram + AmplitudeToDB in
float64 where torchaudio is installed (it computes the same thing independently).

usage: logmel_refs.py OUTDIR   (writes OUTDIR/cases.tsv, the manifests, sounds and references;
exit 77 without numpy or ffmpeg)
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("logmel_refs: numpy is not installed")
    sys.exit(77)

FRONT_ENDS = {
    "vggish": {
        "sample_rate": 16000, "window": 400, "hop": 160, "n_fft": 512, "center": False,
        "power": 1, "mels": 64, "fmin": 125, "fmax": 7500, "mel_scale": "htk",
        "triangles": "mel", "norm": "none", "log": "ln", "log_offset": 0.01, "patch": 96,
    },
    "panns": {
        "sample_rate": 32000, "window": 1024, "hop": 320, "n_fft": 1024, "center": True,
        "power": 2, "mels": 64, "fmin": 50, "fmax": 14000, "mel_scale": "slaney",
        "triangles": "hz", "norm": "slaney", "log": "db", "log_offset": 1e-10, "patch": 100,
    },
}

# ffmpeg's sources: (name, lavfi graph, seconds). Lengths are not whole hops, so that the last
# frames (and, centred, the reflected tail) are exercised.
SOUNDS = [
    ("sweep", "aevalsrc=exprs='0.8*sin(2*PI*(50*t+1500*t*t))'", 2.517),
    ("noise", "anoisesrc=color=white:amplitude=0.5:seed=7", 1.803),
    ("pink", "anoisesrc=color=pink:amplitude=0.3:seed=11", 1.2),
    ("silence", "anullsrc=channel_layout=mono", 1.5),
    ("clipped", "aevalsrc=exprs='clip(4*sin(2*PI*440*t)+0.5*sin(2*PI*3100*t),-1,1)'", 2.0),
    ("short", "aevalsrc=exprs='0.5*sin(2*PI*1000*t)'", 0.07),
]


def make_sound(graph, seconds, rate, path):
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", graph, "-t", str(seconds),
                    "-ac", "1", "-ar", str(rate), "-f", "f32le", "-c:a", "pcm_f32le", path],
                   check=True)
    return np.fromfile(path, dtype="<f4").astype(np.float64)


def hann(n):
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)


# ---- VGGish: mel_features.py's steps -------------------------------------------------------
def htk_mel(f):
    return 1127.0 * np.log(1.0 + f / 700.0)


def vggish_logmel(x, c):
    win, hop, nfft = c["window"], c["hop"], c["n_fft"]
    if len(x) < win:
        return np.zeros((0, c["mels"]))
    n = 1 + (len(x) - win) // hop
    frames = np.stack([x[i * hop:i * hop + win] for i in range(n)])
    spec = np.abs(np.fft.rfft(frames * hann(win), nfft))
    bins = nfft // 2 + 1
    hz = np.linspace(0.0, c["sample_rate"] / 2.0, bins)
    mel = htk_mel(hz)
    edges = np.linspace(htk_mel(c["fmin"]), htk_mel(c["fmax"]), c["mels"] + 2)
    w = np.empty((bins, c["mels"]))
    for i in range(c["mels"]):
        lo, mid, hi = edges[i:i + 3]
        w[:, i] = np.maximum(0.0, np.minimum((mel - lo) / (mid - lo), (hi - mel) / (hi - mid)))
    w[0, :] = 0.0
    return np.log(spec @ w + c["log_offset"])


# ---- PANNs: torchlibrosa / librosa's steps ----------------------------------------------------
def slaney_mel(f):
    f = np.asarray(f, dtype=np.float64)
    f_sp, step = 200.0 / 3, np.log(6.4) / 27.0
    high = 1000.0 / f_sp + np.log(np.maximum(f, 1e-30) / 1000.0) / step
    return np.where(f < 1000.0, f / f_sp, high)


def slaney_hz(m):
    f_sp, step = 200.0 / 3, np.log(6.4) / 27.0
    return np.where(m < 1000.0 / f_sp, m * f_sp, 1000.0 * np.exp(step * (m - 1000.0 / f_sp)))


def librosa_mel_filters(c):
    nfft = c["n_fft"]
    fft_hz = np.linspace(0.0, c["sample_rate"] / 2.0, 1 + nfft // 2)
    pts = slaney_hz(np.linspace(slaney_mel(c["fmin"]), slaney_mel(c["fmax"]), c["mels"] + 2))
    diff = np.diff(pts)
    ramps = pts[:, None] - fft_hz[None, :]
    w = np.zeros((c["mels"], 1 + nfft // 2))
    for i in range(c["mels"]):
        w[i] = np.maximum(0.0, np.minimum(-ramps[i] / diff[i], ramps[i + 2] / diff[i + 1]))
    w *= (2.0 / (pts[2:c["mels"] + 2] - pts[:c["mels"]]))[:, None]
    return w


def panns_logmel(x, c):
    nfft, hop, pad = c["n_fft"], c["hop"], c["n_fft"] // 2
    if len(x) <= pad:
        return np.zeros((0, c["mels"]))
    xp = np.pad(x, pad, mode="reflect")
    n = 1 + (len(xp) - nfft) // hop
    frames = np.stack([xp[i * hop:i * hop + nfft] for i in range(n)])
    power = np.abs(np.fft.rfft(frames * hann(nfft), nfft)) ** 2
    return 10.0 * np.log10(np.maximum(power @ librosa_mel_filters(c).T, c["log_offset"]))


def torchaudio_logmel(x, c):
    """torchaudio's transforms in float64, or None where torchaudio is not installed."""
    try:
        import torch
        import torchaudio
    except ImportError:
        return None
    # its window and filter bank are made in the default dtype: float64 for this comparison
    torch.set_default_dtype(torch.float64)
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=c["sample_rate"], n_fft=c["n_fft"], win_length=c["window"],
        hop_length=c["hop"], f_min=c["fmin"], f_max=c["fmax"], n_mels=c["mels"], power=2.0,
        center=True, pad_mode="reflect", norm="slaney", mel_scale="slaney")
    db = torchaudio.transforms.AmplitudeToDB(stype="power", top_db=None)
    db.amin = c["log_offset"]
    with torch.no_grad():
        out = db(mel(torch.from_numpy(x)))
    return out.numpy().T


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    if not shutil.which("ffmpeg"):
        print("logmel_refs: ffmpeg is not installed")
        return 77
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rows = []
    torch_checked = 0
    for name, c in FRONT_ENDS.items():
        manifest = os.path.join(out, name + ".json")
        with open(manifest, "w") as f:
            json.dump({"vidfeat_manifest": 1, "name": name + "_front", "file": name + ".onnx",
                       "audio": c, "layers": [{"name": "embedding", "tensor": "out"}]}, f,
                      indent=1)
        reference = vggish_logmel if name == "vggish" else panns_logmel
        for sound, graph, seconds in SOUNDS:
            wav = os.path.join(out, f"{name}_{sound}.f32")
            x = make_sound(graph, seconds, c["sample_rate"], wav)
            ref = reference(x, c)
            if name == "panns" and len(ref):
                ta = torchaudio_logmel(x, c)
                if ta is not None:
                    gap = np.max(np.abs(ta - ref)) / max(1.0, np.max(np.abs(ref)))
                    if ta.shape != ref.shape or gap > 1e-9:
                        print(f"logmel_refs: {sound}: the numpy reference differs from "
                              f"torchaudio's by {gap:.3g}")
                        return 1
                    torch_checked += 1
            refpath = os.path.join(out, f"{name}_{sound}.ref")
            ref.astype("<f8").tofile(refpath)
            rows.append((manifest, wav, refpath, len(x), ref.shape[0]))
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        for r in rows:
            f.write("\t".join(str(v) for v in r) + "\n")
    print(f"logmel_refs: {len(rows)} cases in {out}; the PANNs reference equals torchaudio's on "
          f"{torch_checked} of them" if torch_checked else
          f"logmel_refs: {len(rows)} cases in {out} (torchaudio not installed: not compared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
