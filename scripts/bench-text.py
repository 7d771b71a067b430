#!/usr/bin/python3
"""Search by words, measured: CLIP's tokenizer and text tower (texts embedded per second,
against PyTorch and ONNX Runtime on the same weights), and a text query's latency over an archive
of CLIP image vectors with and without a search index. Prints the numbers and the ratios
measured in the same run; nothing is asserted.

    scripts/bench-text.py [--build DIR] [--texts 256] [--batch 32] [--runs 3] [--threads 2]
                          [--sizes 100000,1000000] [--queries 20]

1. Tokenizer: vidfeat's (C, through the Python package's TextEncoder.tokenize) against
   tests/python/clip_tokens.py (the reference's steps in Python with the regex module), on
   --texts captions.
2. Text tower (CLIP ViT-B/32's text side, scripts/export-clip.py's seeded random weights: the
   cost of the real one): vidfeat f32 at --batch and at batch 1, bf16 at --batch; PyTorch 1.13
   (the same module, torch.set_num_threads(--threads)) and ONNX Runtime 1.30 (the same ONNX
   file, scripts/ort_text_bench.js) at --batch. Texts per second, median of --runs runs.
3. Queries: for each size, an SQLite archive of that many 512-d vectors under a clip_vit_b32
   model row (the exported pair's, so the pairing check passes; 100 frames a file around 1,000
   scenes, and for each query text 5 files of footage that matches it: frames at cosine about
   0.3 with the text's embedding, as CLIP gives matching images), then `vidfeat similar --text`
   with --queries texts in one call: each text's search_ms (p50/p99) by the exact scan and
   through `vidfeat index` (auto) at its default probe and at --probe 4x that, recall@10 of the
   index against the scan, the embedding time, and one text's whole command (loading the text
   tower included), and the sum of the top 10's cosines against the scan's (near ties swap places
   within an index's rounding: a missed frame may be as good as the one it missed). --parts
   chooses among tokenizer, tower, queries; --work keeps the archives for the next run.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import vfbench

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORDS = ["dog", "cat", "red car", "harbour", "crowd with flags", "mountain", "bicycle", "beach",
         "street at night", "kitchen", "snow", "bird on a branch", "city skyline", "old film",
         "football match", "river", "train station", "forest", "market", "concert"]
TEMPLATES = ["a photo of a {}.", "a blurry photo of the {}", "A CLOSE-UP PHOTO OF A {}!",
             "there's a {} in the picture, isn't it?", "an old black-and-white film still of a {}",
             "{} &amp; more: 3.5 km/h", "the {} we'd seen yesterday, 12.5 cm"]


def captions(n):
    out = []
    for i in range(n):
        out.append(TEMPLATES[i % len(TEMPLATES)].format(WORDS[(i * 7) % len(WORDS)]))
    return out


def median_rate(fn, n, runs):
    fn()  # warm-up
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates)


def models(build):
    d = os.path.join(build, "bench-models", "clip")
    for f in ("clip_vit_b32.onnx", "clip_vit_b32_text.onnx"):
        if not os.path.exists(os.path.join(d, f)):
            subprocess.run([sys.executable, os.path.join(HERE, "export-clip.py"), "--out", d],
                           check=True, capture_output=True)
            break
    manifest = os.path.join(d, "clip_vit_b32.json")
    if not os.path.exists(manifest):
        with open(os.path.join(ROOT, "models", "clip_vit_b32.json")) as src, \
                open(manifest, "w") as dst:
            dst.write(src.read())
    return d


def archive(vidfeat, tmp, n, mdir, planted):
    """n 512-d vectors in an SQLite database under the exported pair's clip_vit_b32 row, with
    footage matching each of the planted text embeddings."""
    db = os.path.join(tmp, "text%d.db" % n)
    if os.path.exists(db):  # --work: made by an earlier run
        return db
    vfbench.write_archive(vidfeat, db, n, 512, {
        "name": "clip_vit_b32", "layer": "embed", "preprocessing": "bench",
        "file_sha256": vfbench.sha256(os.path.join(mdir, "clip_vit_b32.onnx")),
        "text_sha256": vfbench.sha256(os.path.join(mdir, "clip_vit_b32_text.onnx"))}, 11,
        planted=planted)
    return db


def queries(vidfeat, db, mdir, texts, extra):
    r = subprocess.run([vidfeat, "similar", db, "--models-dir", mdir, "--model", "clip_vit_b32",
                        "--json", *extra, *[a for t in texts for a in ("--text", t)]],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("vidfeat similar --text failed: " + r.stderr[-2000:])
    return [json.loads(line) for line in r.stdout.splitlines()]


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def planted_scenes(embeddings, cosine=0.3, files=5, seed=13):
    """For each text embedding, scene centres of `files` files whose frames lie at about that
    cosine with it (its direction, scaled, plus noise of the archive's scenes' size)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    dim = embeddings.shape[1]
    out = []
    for e in embeddings:
        u = e / np.linalg.norm(e)
        for _ in range(files):
            noise = rng.standard_normal(dim)
            noise -= (noise @ u) * u
            noise *= np.sqrt(dim) / np.linalg.norm(noise)
            # frames add noise of 0.35 and 0.2 x the scene's size: aim the centre a bit higher
            c = 1.15 * cosine
            out.append((c * u * np.sqrt(dim) + np.sqrt(1 - c * c) * noise).astype("<f4"))
    return np.stack(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--texts", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--parts", default="tokenizer,tower,queries")
    ap.add_argument("--work", help="keep the archives here (and use those there)")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.build, "python"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import numpy as np
    import vidfeat
    import clip_tokens
    vidfeat_cli = os.path.join(a.build, "src", "cli", "vidfeat")
    mdir = models(a.build)
    texts = captions(a.texts)
    print("bench-text on %s (%d threads), %d captions" % (vfbench.cpu_name(), a.threads, a.texts))

    parts = set(a.parts.split(","))
    tmp = a.work or tempfile.mkdtemp(prefix="vidfeat_bench_text_")
    os.makedirs(tmp, exist_ok=True)

    # 1. the tokenizer
    with vidfeat.TextEncoder("clip_vit_b32", models_dir=mdir, batch=a.batch,
                             threads=a.threads) as te:
        c_rate = median_rate(lambda: [te.tokenize(t) for t in texts], len(texts), a.runs)
        ids = np.stack([te.tokenize(t) for t in texts])
        vocab = te.vocab
    if "tokenizer" in parts:
        ref = clip_tokens.Reference(vocab)
        py_rate = median_rate(lambda: [ref.encode(t) for t in texts], len(texts), a.runs)
        print("tokenizer: vidfeat (C) %.0f texts/s, the Python reference %.0f texts/s (%.1fx)"
              % (c_rate, py_rate, c_rate / py_rate))
    if "tower" in parts:
        tower(a, vidfeat, ec_module(), mdir, texts, ids, tmp)
    if "queries" in parts:
        queries_table(a, vidfeat, vidfeat_cli, mdir, tmp)
    return 0


def ec_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("export_clip",
                                                  os.path.join(HERE, "export-clip.py"))
    ec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ec)
    return ec


def tower(a, vidfeat, ec, mdir, texts, ids, tmp):
    """texts/s of the text tower: vidfeat, PyTorch, ONNX Runtime."""
    import torch
    rows = []
    for prec, batch in (("f32", a.batch), ("f32", 1), ("bf16", a.batch)):
        with vidfeat.TextEncoder("clip_vit_b32", models_dir=mdir, batch=batch, precision=prec,
                                 threads=a.threads) as te:
            rows.append(("vidfeat %s batch %d" % (prec, batch),
                         median_rate(lambda: te(texts), len(texts), a.runs)))
    torch.set_num_threads(a.threads)
    model = ec.build("ViT-B/32", 32, tower="text")
    tids = torch.from_numpy(ids)

    def torch_run():
        with torch.no_grad():
            for i in range(0, len(texts), a.batch):
                model(tids[i:i + a.batch])
    rows.append(("PyTorch 1.13 f32 batch %d" % a.batch, median_rate(torch_run, len(texts),
                                                                    a.runs)))
    ids_path = os.path.join(tmp, "ids.bin")
    ids.astype("<i8").tofile(ids_path)
    env = dict(os.environ)
    env.setdefault("ORT_NODE_DIR", os.path.join(a.build, "ort", "node_modules",
                                                "onnxruntime-node"))
    r = subprocess.run(["node", os.path.join(HERE, "ort_text_bench.js"),
                        os.path.join(mdir, "clip_vit_b32_text.onnx"), ids_path, str(len(texts)),
                        "77", str(a.batch), str(a.runs), str(a.threads)],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode == 0:
        rows.append(("ONNX Runtime 1.30 f32 batch %d" % a.batch,
                     json.loads(r.stdout.strip().splitlines()[-1])["texts_per_s"]))
    else:
        print("ONNX Runtime: not measured (%s)" % r.stderr.strip()[-200:])
    base = rows[0][1]
    print("\n| text tower (CLIP ViT-B/32) | texts/s | vidfeat f32 batch %d against it |" % a.batch)
    print("|---|---|---|")
    for name, rate in rows:
        print("| %s | %.1f | %.2fx |" % (name, rate, base / rate))



def queries_table(a, vidfeat, vidfeat_cli, mdir, tmp):
    """Text queries over archives of each size: the scan, the index at two probes."""
    qtexts = captions(a.queries)
    with vidfeat.TextEncoder("clip_vit_b32", models_dir=mdir, threads=a.threads) as te:
        planted = planted_scenes(te(qtexts))
    print("\n| vectors | search | search_ms p50 / p99 | recall@10 | top-10 cosine / exact |"
          " embed_ms (%d texts) | one query, whole command s |" % a.queries)
    print("|---|---|---|---|---|---|---|")
    for n in [int(s) for s in a.sizes.split(",") if s]:
        db = archive(vidfeat_cli, tmp, n, mdir, planted)
        exact = queries(vidfeat_cli, db, mdir, qtexts, ["--exact"])
        t0 = time.perf_counter()
        queries(vidfeat_cli, db, mdir, qtexts[:1], ["--exact"])
        one_exact = time.perf_counter() - t0
        r = subprocess.run([vidfeat_cli, "index", db, "--model", "clip_vit_b32", "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("vidfeat index failed: " + r.stderr)
        rep = json.loads(r.stdout)
        kind = rep["kind"]
        def score(docs):
            return sum(h["similarity"] for d in docs for h in d["neighbours"][:10])
        rows = [("exact scan", exact, one_exact, "1 (itself)", "1 (itself)")]
        ivf = re.search(r"IVF(\d+)", kind)  # its default probe is a sixteenth of the lists
        for probe in ([], ["--probe", str(int(ivf.group(1)) // 4)]) if ivf else ([],):
            indexed = queries(vidfeat_cli, db, mdir, qtexts, probe)
            t0 = time.perf_counter()
            queries(vidfeat_cli, db, mdir, qtexts[:1], probe)
            one_index = time.perf_counter() - t0
            found = sum(len({(h["path"], h["frame_index"]) for h in x["neighbours"]} &
                            {(h["path"], h["frame_index"]) for h in y["neighbours"]})
                        for x, y in zip(indexed, exact))
            rows.append(("index %s%s" % (kind, " --probe " + probe[1] if probe else ""),
                         indexed, one_index, "%.3f" % (found / (10.0 * len(exact))),
                         "%.4f" % (score(indexed) / score(exact))))
        for name, docs, one, recall, ratio in rows:
            ms = [d["search_ms"] for d in docs]
            print("| %d | %s | %.1f / %.1f | %s | %s | %.0f | %.2f |"
                  % (n, name, pct(ms, 50), pct(ms, 99), recall, ratio, docs[0]["embed_ms"],
                     one))
        if not a.work:
            os.remove(db)


if __name__ == "__main__":
    sys.exit(main())
