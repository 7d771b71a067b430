#!/usr/bin/python3
"""CLIP's text side end to end (issue 31): a checkpoint in the format OpenAI released (a
TorchScript archive of float16 weights by their published names) is made here with seeded random
weights, scripts/export-clip.py turns it into the pair of towers, and then:

  - the towers equal the checkpoint's own PyTorch module within 1e-4 relative: the text tower
    through `vidfeat embed --text --json` (from the words, with the C tokenizer) and the image
    tower on one tensor through the library;
  - the ids `embed --json` reports equal tests/python/clip_tokens.py's rendering of the
    reference tokenizer; a text longer than the context is cut to 77 ids, said in one line;
  - three clips extracted with the image tower; `similar --text` ranks the stored frames as a
    brute-force cosine computed here (the PyTorch text embedding against the vectors read from
    the database): the scan, a Flat index and an HNSW index, one text and several at once;
  - the models row records the text tower's SHA-256;
  - bad input, each one line: an empty, blank or non-UTF-8 text (exit 2), a text tower that
    does not pair with the stored vectors, a database of another model, a tower whose token
    table does not fit the vocabulary, a missing vocabulary (exit 3); a text of emoji is a
    query like any other.

usage: test_clip_text.py VIDFEAT SOURCE_DIR BUILD_MODELS_DIR [--no-library]
       (BUILD_MODELS_DIR: where the build put CLIP's vocabulary; without it the test skips)
"""
import copy
import hashlib
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check, library_infer, rel_err

try:
    import numpy as np
    import torch
    import torch.nn as nn
except ImportError as e:
    print("skip: %s (PyTorch makes the towers)" % e)
    sys.exit(SKIP)

VOCAB_NAME = "bpe_simple_vocab_16e6.txt.gz"


def run(exe, *args, **kw):
    return subprocess.run([exe, *args], capture_output=True, timeout=600, **kw)


def text_of(r):
    return r.stderr.decode("utf-8", "replace")


def main():
    exe, src, build_models = sys.argv[1:4]
    with_library = "--no-library" not in sys.argv[4:]
    vocab = os.path.join(build_models, VOCAB_NAME)
    if not os.path.exists(vocab):
        print("skip: %s missing (the build ships CLIP's vocabulary from ../shared or "
              "scripts/fetch-models.sh --vocab clip_vit_b32)" % vocab)
        return SKIP
    if not shutil.which("ffmpeg"):
        print("skip: the ffmpeg CLI makes the clips")
        return SKIP
    sys.path.insert(0, os.path.join(src, "tests", "python"))
    sys.path.insert(0, os.path.join(src, "scripts"))  # what the export scripts share
    # under a name that is an identifier: TorchScript names the checkpoint's classes after it
    spec = importlib.util.spec_from_file_location(
        "export_clip", os.path.join(src, "scripts", "export-clip.py"))
    ec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ec)
    import clip_tokens
    tokenizer = clip_tokens.Reference(vocab)
    tmp = tempfile.mkdtemp(prefix="vidfeat_text_")
    try:
        return test(exe, src, ec, tokenizer, tmp, with_library)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class OpenAIClip(nn.Module):
    """The layout of OpenAI's released model: the image tower under visual., the text tower's
    tensors at the top (token_embedding, positional_embedding, transformer.resblocks.N,
    ln_final, text_projection), logit_scale."""

    def __init__(self, ec, arch):
        super().__init__()
        a = ec.ARCHS[arch]
        self.visual = ec.ImageTower(*a["image"], a["embed"])
        text = ec.TextTower(*a["text"], a["embed"])
        for name in ("token_embedding", "transformer", "ln_final"):
            setattr(self, name, getattr(text, name))
        self.positional_embedding = text.positional_embedding
        self.text_projection = text.text_projection
        self.logit_scale = nn.Parameter(torch.tensor(4.6052))
        self._text = [text]  # not a submodule: its tensors are ours

    def forward(self, image, text):
        return self.visual(image), self._text[0](text)


def make_checkpoint(ec, path):
    """Seeded random weights, rounded to float16 and saved as a TorchScript archive; the module
    of the float16 weights in float32 (what an export of the file computes)."""
    torch.manual_seed(77)
    model = OpenAIClip(ec, "ViT-B/32").eval()
    ec.randomize(model, 77)
    image = torch.randn(1, 3, 224, 224)
    ids = torch.zeros(1, 77, dtype=torch.int64)
    ids[0, :3] = torch.tensor([49406, 320, 49407])
    # a copy: tracing shares the tensors, and the archive's are made float16
    traced = torch.jit.trace(copy.deepcopy(model), (image, ids), check_trace=False)
    traced.half()
    traced.save(path)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    return model


def ids_of(tokenizer, texts):
    ids = np.zeros((len(texts), 77), np.int64)
    for i, t in enumerate(texts):
        got = tokenizer.encode(t)
        ids[i, :len(got)] = got
    return ids


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def stored(db):
    """[(path, frame_index, unit vector)] of the done extractions."""
    con = sqlite3.connect(db)
    rows = [(p, i, np.frombuffer(v, np.float32)) for p, i, v in con.execute(
        "SELECT path, frame_index, vec FROM frames ORDER BY path, frame_index")]
    con.close()
    return [(p, i, v / np.linalg.norm(v)) for p, i, v in rows]


def brute_force(rows, q, k):
    q = q / np.linalg.norm(q)
    scored = sorted(((float(v @ q), p, i) for p, i, v in rows), key=lambda s: -s[0])
    return scored[:k]


def check_ranking(hits, want, what):
    """hits (the command's neighbours) are the brute force's top k: each score equal to that
    frame's brute-force score, in the same order of scores (ties within 1e-5 may swap)."""
    check(len(hits) == len(want), "%s: %d hits, %d expected" % (what, len(hits), len(want)))
    exact = {(p, i): s for s, p, i in want}
    for h, (s, _, _) in zip(hits, want):
        key = (h["path"], h["frame_index"])
        check(abs(h["similarity"] - s) <= 1e-5,
              "%s: rank %d has cosine %.6f, brute force %.6f" % (what, h["rank"], h["similarity"], s))
        check(key not in exact or abs(exact[key] - h["similarity"]) <= 1e-5,
              "%s: %s scored %.6f, brute force %.6f" % (what, key, h["similarity"], exact[key]))


def test(exe, src, ec, tokenizer, tmp, with_library):
    models = os.path.join(tmp, "models")
    os.makedirs(models)
    ckpt = os.path.join(tmp, "ViT-B-32.pt")
    model = make_checkpoint(ec, ckpt)
    r = subprocess.run([sys.executable, os.path.join(src, "scripts", "export-clip.py"), "--out",
                        models, "--checkpoint", ckpt], capture_output=True, text=True, timeout=900)
    check(r.returncode == 0, "export-clip --checkpoint: %s" % r.stderr[-2000:])
    shutil.copy(os.path.join(src, "models", "clip_vit_b32.json"), models)
    tower = os.path.join(models, "clip_vit_b32_text.onnx")
    common = ["--models-dir", models]

    # the text tower, from words, against the checkpoint's module
    texts = ["a photo of a dog", "A RED CAR AT NIGHT", "the harbour in snow",
             "caf&eacute; &amp; cr\u00e8me br\u00fbl\u00e9e", "\u6771\u4eac\u306e\u591c\u666f"]
    args = [a for t in texts for a in ("--text", t)]
    r = run(exe, "embed", *common, *args, "--json")
    check(r.returncode == 0, "embed: %s" % text_of(r))
    doc = json.loads(r.stdout)
    check(doc["model"] == "clip_vit_b32" and doc["dim"] == 512, "embed: %r" % doc["model"])
    want_ids = ids_of(tokenizer, texts)
    with torch.no_grad():
        want = model._text[0](torch.from_numpy(want_ids)).numpy()
    for i, e in enumerate(doc["embeddings"]):
        n = len(e["ids"])
        check(e["ids"] == list(want_ids[i, :n]) and not want_ids[i, n:].any(),
              "ids of %r: %s" % (texts[i], e["ids"]))
        err = rel_err(e["embedding"], want[i])
        check(err <= 1e-4, "text tower against PyTorch (%r): relative error %.2e" % (texts[i], err))
    print("text tower from words = the checkpoint's module (worst %.1e), ids = the reference's"
          % max(rel_err(e["embedding"], w) for e, w in zip(doc["embeddings"], want)))

    # a text longer than the context: cut, said once
    long_text = "a diagram of " * 40
    r = run(exe, "embed", *common, "--text", long_text, "--json")
    e = json.loads(r.stdout)["embeddings"][0]
    check(r.returncode == 0 and len(e["ids"]) == 77 and e["ids"][-1] == 49407 and e["truncated"],
          "long text: %d ids" % len(e["ids"]))
    check(text_of(r).count("cut to them") == 1, "one line says the text was cut: %s" % text_of(r))
    # -o OUT.npy and the plain lines agree with --json
    npy = os.path.join(tmp, "e.npy")
    r = run(exe, "embed", *common, "--text", texts[0], "--text", texts[1], "-o", npy)
    check(r.returncode == 0 and np.load(npy).shape == (2, 512), "embed -o: %s" % text_of(r))
    # (the same up to the float rounding of another batch size)
    check(rel_err(np.load(npy)[1], doc["embeddings"][1]["embedding"]) <= 1e-5, "npy = json")
    r = run(exe, "embed", *common, "--text", texts[0])
    line = np.array([float(x) for x in r.stdout.split()], np.float32)
    check(rel_err(line, doc["embeddings"][0]["embedding"]) <= 1e-5, "the line of floats = json")

    if with_library:  # the image tower from the same checkpoint, on one tensor
        x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(3))
        with torch.no_grad():
            want_img = model.visual(x).numpy()
        got = library_infer(exe, os.path.join(models, "clip_vit_b32.onnx"), "embed",
                            x.numpy(), 512)
        err = max(rel_err(a, b) for a, b in zip(got, want_img))
        check(err <= 1e-4, "image tower against PyTorch: relative error %.2e" % err)
        print("image tower = the checkpoint's module (worst %.1e)" % err)

    # three clips, extracted with the image tower
    clips = []
    for name, source in (("testsrc", "testsrc2=size=320x240:rate=10"),
                         ("mandel", "mandelbrot=size=320x240:rate=10"),
                         ("bars", "smptehdbars=size=320x240:rate=10")):
        clips.append(os.path.join(tmp, name + ".mp4"))
        subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", source, "-t", "2",
                        "-pix_fmt", "yuv420p", clips[-1]], check=True)
    db = os.path.join(tmp, "a.db")
    r = run(exe, *common, "--model", "clip_vit_b32", "--fps", "5", "-q", "-o", db, *clips)
    check(r.returncode == 0, "extract: %s" % text_of(r))
    con = sqlite3.connect(db)
    text_sha = con.execute("SELECT text_sha256 FROM models").fetchone()[0]
    con.close()
    check(text_sha == sha256(tower), "models.text_sha256 %r" % text_sha)
    rows = stored(db)
    check(len(rows) == 30, "30 frames stored, %d" % len(rows))

    # similar --text: the brute force's ranking, by scan and through indexes
    query_ids = ids_of(tokenizer, texts[:3])
    with torch.no_grad():
        q = model._text[0](torch.from_numpy(query_ids)).numpy()
    for how, extra in (("scan", ["--exact"]), ("flat", []), ("hnsw", [])):
        if how != "scan":
            r = run(exe, "index", db, "--kind", how, "--rebuild")
            check(r.returncode == 0, "index --kind %s: %s" % (how, text_of(r)))
        r = run(exe, "similar", db, *common, "-k", "7", "--json", *extra,
                *[a for t in texts[:3] for a in ("--text", t)])
        check(r.returncode == 0, "similar --text (%s): %s" % (how, text_of(r)))
        docs = [json.loads(line) for line in r.stdout.splitlines()]
        check(len(docs) == 3, "a JSON line per text: %d" % len(docs))
        for i, d in enumerate(docs):
            check(d["query"] == {"text": texts[i]}, "query %r" % d["query"])
            check(d["search"] == "exact" if how == "scan" else d["search"].startswith("index"),
                  "%s: search %r" % (how, d["search"]))
            check(d["search_ms"] >= 0 and d["embed_ms"] > 0, "times %r" % d)
            hits = [dict(h, path=os.path.realpath(h["path"])) for h in d["neighbours"]]
            want_hits = [(s, os.path.realpath(p), fi) for s, p, fi in brute_force(rows, q[i], 7)]
            check_ranking(hits, want_hits, "%s %r" % (how, texts[i]))
        print("similar --text (%s): 3 texts ranked as the brute force" % how)

    # a text of emoji is a query like any other; one text gives one document
    r = run(exe, "similar", db, *common, "--text", "\U0001f436\U0001f431", "--json")
    check(r.returncode == 0 and len(json.loads(r.stdout)["neighbours"]) == 10,
          "emoji: %s" % text_of(r))

    # bad input: usage errors (exit 2), each one line
    for bad, why in ((b"", b"empty"), (b"   \t", b"white space"), (b"caf\xe9", b"not UTF-8")):
        for cmd in (["similar", db.encode()], ["embed"]):
            r = subprocess.run([exe.encode(), *[c if isinstance(c, bytes) else c.encode()
                                                for c in cmd], b"--text", bad],
                               capture_output=True, timeout=120)
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 2 and len(lines) == 1 and why in lines[0],
                  "%s --text %r: %d %r" % (cmd[0], bad, r.returncode, r.stderr))
    print("empty, blank and non-UTF-8 texts: one line, exit 2")

    # a text tower that does not pair with the stored vectors: exit 3, naming it
    saved = tower + ".saved"
    os.rename(tower, saved)
    r = subprocess.run([sys.executable, os.path.join(src, "scripts", "export-clip.py"), "--out",
                        models, "--tower", "text", "--seed", "5"], capture_output=True, text=True,
                       timeout=900)
    check(r.returncode == 0, "another text tower: %s" % r.stderr[-2000:])
    r = run(exe, "similar", db, *common, "--text", "a dog")
    check(r.returncode == 3 and "is not the text tower" in text_of(r),
          "another pair: %d %s" % (r.returncode, text_of(r)))
    # without the recorded tower, the image tower beside it decides: still the vectors' one
    con = sqlite3.connect(db)
    con.execute("UPDATE models SET text_sha256 = NULL")
    con.commit()
    con.close()
    r = run(exe, "similar", db, *common, "--text", "a dog")
    check(r.returncode == 0, "unrecorded pair, the image tower the vectors': %s" % text_of(r))
    os.replace(saved, tower)
    print("a text tower of another pair: exit 3")

    # a database of another model: exit 3, naming both
    other = os.path.join(tmp, "cnn.db")
    r = run(exe, "--model", os.path.join(src, "models", "tiny_cnn.onnx"), "-q", "-o", other,
            clips[0])
    check(r.returncode == 0, "tiny_cnn: %s" % text_of(r))
    r = run(exe, "similar", other, *common, "--text", "a dog")
    check(r.returncode == 3 and "tiny_cnn" in text_of(r) and "CLIP" in text_of(r),
          "another model: %d %s" % (r.returncode, text_of(r)))
    r = run(exe, "similar", other, *common, "--model", "clip_vit_b32", "--text", "a dog")
    check(r.returncode == 3 and "tiny_cnn" in text_of(r) and "clip_vit_b32" in text_of(r),
          "another model, CLIP asked: %d %s" % (r.returncode, text_of(r)))
    print("a database of another model: exit 3 naming both")

    # a tower whose token table does not fit the vocabulary: exit 3
    small = os.path.join(tmp, "small")
    os.makedirs(small)
    ec.VOCAB = 1000
    try:
        torch.manual_seed(1)
        t = ec.TextTower(*ec.ARCHS["ViT-B/32"]["text"], 512).eval()
        ec.export(t, "text", os.path.join(small, "clip_vit_b32_text.onnx"), 224)
    finally:
        ec.VOCAB = 49408
    shutil.copy(os.path.join(src, "models", "clip_vit_b32.json"), small)
    r = run(exe, "embed", "--models-dir", small, "--text", "a dog")
    check(r.returncode == 3 and "1000 rows" in text_of(r) and "49408 ids" in text_of(r),
          "vocabulary mismatch: %d %s" % (r.returncode, text_of(r)))
    # a manifest whose vocabulary is nowhere: exit 3, saying how to get it
    with open(os.path.join(src, "models", "clip_vit_b32.json")) as f:
        m = json.load(f)
    m["text"]["vocab"] = "missing_vocab.txt.gz"
    with open(os.path.join(models, "clip_vit_b32.json"), "w") as f:
        json.dump(m, f)
    r = run(exe, "embed", *common, "--text", "a dog")
    check(r.returncode == 3 and "missing_vocab.txt.gz" in text_of(r) and
          "fetch-models.sh" in text_of(r), "missing vocabulary: %d %s" % (r.returncode, text_of(r)))
    print("a token table of another size, a missing vocabulary: exit 3")
    return 0


if __name__ == "__main__":
    sys.exit(main())
