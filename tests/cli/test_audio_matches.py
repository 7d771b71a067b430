#!/usr/bin/python3
"""vidfeat matches on sound: a soundtrack reused elsewhere is found, unrelated sound is not.

Real VGGish weights cannot be had here, and seeded random weights make every sound look like
every other (their vectors share one large direction: cosines of 0.94 between a glide and
noise). The model made here is one whose vectors are known to tell sounds apart: VGGish's front
end (models/vggish.json), then each band's mean over the patch less the mean of the bands (the
patch's spectral profile; a volume change is nearly a constant added to every band). What is
tested is what vidfeat does with such vectors: the rows of sound patches, their times, the
archive's nearest neighbours, the alignment of a line of matches into a segment, and the
patches that hold nothing.

The files, made with numpy and the ffmpeg CLI: `source.m4a` (AAC, 44.1 kHz stereo, 40 s of
chords); `reuse.mp3` (MP3, 22.05 kHz mono): 6.5 s of other chords, then source's 8-28 s at half
the amplitude (-6 dB), then other chords; `other.flac`, 30 s of unrelated chords; `hiss_a.wav`
and `hiss_b.wav`, two unrelated quiet recordings (-60 dB white noise, 2 s of chords in one).

Checked: exactly one match, source with reuse, source's 8-28 s at reuse's 6.5-26.5 s (to a patch,
0.96 s, at each end, and at least 17 s long), speed 1; nothing with other.flac; the two hiss
files, whose noise alone is alike, do not match (their patches hold nothing: the model's vectors
of silence and hiss mark them). The same with `--video reuse.mp3` (that file as the query). And
`shifted.mp3` (MP3 at 32 kHz): 7.3 s of other chords (an offset no multiple of the patch), then
source's 10-32 s at -6 dB: one span, each end within a patch of the truth, where patches a
little below the threshold once cut it into four pieces with gaps.

usage: test_audio_matches.py VIDFEAT MODELS_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, ff

RATE = 44100
SHIFT_LEAD, SHIFT_FROM, SHIFT_LEN = 7.3, 10.0, 22.0


def make_model(d, models_dir):
    """sketch.onnx [N, 1, 96, 64] -> 64 and its manifest (VGGish's front end)."""
    import torch
    with open(os.path.join(models_dir, "vggish.json")) as f:
        front = json.load(f)["audio"]
    class Sketch(torch.nn.Module):
        def forward(self, x):
            x = x.mean(2).flatten(1)  # each band's mean over the patch
            return x - x.mean(1, keepdim=True)

    torch.onnx.export(Sketch().eval(), torch.randn(1, 1, front["patch"], front["mels"]),
                      os.path.join(d, "sketch.onnx"), input_names=["input"],
                      output_names=["output"], opset_version=17,
                      dynamic_axes={"input": {0: "n"}, "output": {0: "n"}})
    with open(os.path.join(d, "sketch.json"), "w") as f:
        json.dump({"vidfeat_manifest": 1, "name": "sketch", "file": "sketch.onnx",
                   "audio": front,
                   "layers": [{"name": "out", "tensor": "output", "dim": front["mels"]}]},
                  f)


def notes(seconds, seed, level=0.3):
    """Music of a sort: chords of 1.5-3 s, each three random pitches with an overtone, soft
    edges."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = np.zeros(int(seconds * RATE))
    pos = 0
    while pos < len(out):
        n = int(rng.uniform(1.5, 3) * RATE)
        t = np.arange(n) / RATE
        chord = np.zeros(n)
        for f in 110.0 * 2 ** rng.uniform(0, 5, 3):
            phase = rng.uniform(0, 6)
            chord += np.sin(2 * np.pi * f * t) + 0.4 * np.sin(4 * np.pi * f * t + phase)
        edge = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.02)
        seg = level / 3 * chord * edge
        out[pos:pos + n] += seg[:len(out) - pos]
        pos += n
    return out


def write(d, name, x, *enc):
    import numpy as np
    raw = os.path.join(d, name + ".f32")
    np.clip(x, -1, 1).astype("<f4").tofile(raw)
    ff("-f", "f32le", "-ar", str(RATE), "-ac", "1", "-i", raw, *enc, os.path.join(d, name))
    os.unlink(raw)


def make_files(d):
    import numpy as np
    source = notes(40, 1)
    lead, gap = 6.5, 20.0
    reuse = np.concatenate([notes(lead, 2), 0.5 * source[int(8 * RATE):int(28 * RATE)],
                            notes(6, 3)])

    def hiss(seed, seconds):  # white noise of RMS 1e-3 (-60 dB of full scale)
        return np.random.default_rng(seed).uniform(-1, 1, int(seconds * RATE)) * 1e-3 * 3 ** 0.5

    quiet = hiss(4, 20)
    quiet[int(12 * RATE):int(14 * RATE)] += notes(2, 5, 0.2)
    # the case: 22 s of source (from 10 s) 7.3 s into another file, an offset that is
    # no multiple of the 0.96 s patch, re-encoded, 6 dB down
    shifted = np.concatenate([notes(SHIFT_LEAD, 8), 0.5 * source[int(SHIFT_FROM * RATE):
                                                                 int((SHIFT_FROM + SHIFT_LEN) *
                                                                     RATE)], notes(5, 9)])
    write(d, "source.m4a", source, "-ac", "2", "-c:a", "aac", "-b:a", "128k")
    write(d, "reuse.mp3", reuse, "-ar", "22050", "-c:a", "libmp3lame", "-b:a", "64k")
    write(d, "shifted.mp3", shifted, "-ar", "32000", "-c:a", "libmp3lame", "-b:a", "96k")
    write(d, "other.flac", notes(30, 6), "-c:a", "flac")
    write(d, "hiss_a.wav", quiet, "-c:a", "pcm_s16le")
    write(d, "hiss_b.wav", hiss(7, 20), "-c:a", "pcm_s16le")
    return lead, gap


def matches(vidfeat, db, models, *more):
    r = subprocess.run([vidfeat, "matches", db, "--models-dir", models, "--json", *more],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "matches exit %d: %s" % (r.returncode, r.stderr.strip()))
    doc = json.loads(r.stdout)
    check(doc["flat_known"], "the model's vectors of silence and hiss were not made: %s"
          % r.stderr.strip())
    return doc


def main():
    vidfeat, models_dir = sys.argv[1], sys.argv[2]
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        return SKIP("%s (python3-numpy, python3-torch)" % e)
    with tempfile.TemporaryDirectory() as d:
        models = os.path.join(d, "models")
        os.mkdir(models)
        make_model(models, models_dir)
        lead, gap = make_files(d)
        db = os.path.join(d, "sound.db")
        names = ["source.m4a", "reuse.mp3", "other.flac", "hiss_a.wav", "hiss_b.wav"]
        r = subprocess.run([vidfeat, "--audio", "sketch", "--models-dir", models, "-o", db,
                            *[os.path.join(d, n) for n in names]],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "extraction exit %d: %s" % (r.returncode, r.stderr))

        def one(doc, what, other, a0, b0, length):
            """Exactly one match, source.m4a's [a0, a0 + length] with other's [b0, b0 + length]:
            one span, each end within a patch (0.96 s) of the truth, speed 1."""
            found = doc["matches"]
            side = lambda m, s: {"path": os.path.basename(m[s]), "start": m[s + "_start"],
                                 "end": m[s + "_end"]}
            pairs = [(side(m, "a"), side(m, "b")) for m in found]
            check(len(found) == 1, "%s: one match (source with %s), got %s" % (what, other,
                                                                              pairs))
            m = found[0]
            a, b = pairs[0]
            if a["path"] != "source.m4a":
                a, b = b, a
            check(a["path"] == "source.m4a" and b["path"] == other,
                  "%s: the pair %s" % (what, pairs))
            # the segment's ends are matched patches' starts: within a patch of the truth
            for got, want, end in ((a["start"], a0, "source start"),
                                   (b["start"], b0, other + " start"),
                                   (a["end"], a0 + length - 0.96, "source end"),
                                   (b["end"], b0 + length - 0.96, other + " end")):
                check(abs(got - want) <= 0.96 + 1e-6, "%s: %s %.3f s, not %.2f +- 0.96 s"
                      % (what, end, got, want))
            check(a["end"] - a["start"] >= length - 3.0, "%s: only %.2f s matched"
                  % (what, a["end"] - a["start"]))
            check(abs(m["speed"] - 1.0) < 0.02, "%s: speed %s" % (what, m["speed"]))
            print("%s: source %.2f-%.2f s = %s %.2f-%.2f s, score %.3f; %d patches hold "
                  "nothing" % (what, a["start"], a["end"], other, b["start"], b["end"],
                               m["score"], doc["flat"]))

        doc = matches(vidfeat, db, models)
        check(doc["flat"] >= 36, "%d patches hold nothing: hiss_b's 20 and hiss_a's 20 but "
              "the 2-3 its chords touch should" % doc["flat"])
        one(doc, "the archive", "reuse.mp3", 8.0, lead, gap)
        one(matches(vidfeat, db, models, "--video", os.path.join(d, "reuse.mp3")),
            "--video reuse.mp3", "reuse.mp3", 8.0, lead, gap)
        # 22 s reused 7.3 s in, re-encoded and 6 dB down: one span, not pieces with gaps
        db2 = os.path.join(d, "shifted.db")
        r = subprocess.run([vidfeat, "--audio", "sketch", "--models-dir", models, "-o", db2,
                            *[os.path.join(d, n) for n in ("source.m4a", "shifted.mp3",
                                                           "other.flac")]],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "extraction exit %d: %s" % (r.returncode, r.stderr))
        one(matches(vidfeat, db2, models), "offset 7.3 s", "shifted.mp3", SHIFT_FROM, SHIFT_LEAD,
            SHIFT_LEN)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
