#!/usr/bin/python3
"""Build the ONNX Runtime reference outputs that tests/test_conformance.c compares vidfeat with.

For each model: export it (torchvision, seeded random weights) unless it is already in the
cache, add the feature tensors as extra graph outputs in a copy, run ONNX Runtime 1.30
(onnxruntime-node, CPU) on photos from ../shared/images (on a clone without them, on eight test
pictures the ffmpeg CLI draws) one image at a time, and record a case in OUT/cases.tsv.  The
real-weight MobileNetV2 from ../shared/models runs on the 15 photos of
../shared/images, decoded and stretched to 224x224 by the ffmpeg CLI (bilinear), and the top-1
classes its verification file lists are written to OUT/top1.tsv.

Exits 77 (skipped) when a tool it needs is missing: python3-onnx, python3-numpy, python3-torch,
node with onnxruntime-node (ORT_NODE_DIR), the ffmpeg CLI.

usage: /usr/bin/python3 scripts/make_conformance.py --out DIR [--shared DIR] [--quick]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SKIP = 77

# model, input size, [(layer as given to --layer, tensor, H*W averaged by vidfeat or 0, or
# "tokens": the mean of a ViT's patch tokens)], images
CASES = [
    ("vgg19", 224, [("fc7", "/classifier/classifier.4/Relu_output_0", 0),
                    ("pool5", "/features/features.36/MaxPool_output_0", 49)], 8),
    ("inception_v3", 299, [("pool", "/avgpool/GlobalAveragePool_output_0", 0)], 8),
    ("resnet50", 224, [("pool", "/avgpool/GlobalAveragePool_output_0", 0)], 8),
    ("squeezenet1_1", 224, [("output", "output", 0)], 8),
    ("densenet121", 224, [("output", "output", 0)], 8),
    ("mobilenet_v2", 224, [("pool", "/GlobalAveragePool_output_0", 0)], 8),
    # vision transformers and a modern CNN: layers by manifest name (vit_b_16's class token)
    ("vit_b_16", 224, [("cls", "/Gather_4_output_0", 0), ("logits", "output", 0),
                       ("mean", "/encoder/ln/LayerNormalization_output_0", "tokens")], 8),
    ("swin_t", 224, [("pool", "/flatten/Flatten_output_0", 0), ("logits", "output", 0)], 8),
    ("convnext_tiny", 224, [("pool", "/classifier/classifier.1/Flatten_output_0", 0),
                            ("logits", "output", 0)], 8),
    # CLIP's image tower (scripts/export-clip.py: the published architecture, random weights)
    ("clip_vit_b32", 224, [("embed", "embed", 0)], 8),
]
EXPORT_CLIP = {"clip_vit_b32": "ViT-B/32"}
# CLIP's text tower: token ids of these texts (tokenized by tests/python/clip_tokens.py's
# rendering of the reference where the vocabulary is, else made up), under a name no manifest
# uses (vidfeat runs it on the ids alone)
TEXTS = ["a photo of a dog", "a red car at night", "the harbour in snow", "a crowd with flags",
         "two cats on a sofa", "&amp; more: 3.5 km/h!", "東京の夜景", "a diagram of " * 40]
QUICK = {"squeezenet1_1", "mobilenet_v2"}
# Clip models (scripts/export-torchvision.py, seeded random weights): file name, architecture,
# frames and size (None: the export's own), [(layer, tensor)], windows. The "_small" exports are
# the same architectures on small windows, for the reference backend too (test_conformance runs
# models named so on it); they are asked for by tensor, having no manifest.
CLIP_CASES = [
    ("r2plus1d_18", "r2plus1d_18", None, None,
     [("pool", "/avgpool/GlobalAveragePool_output_0"), ("logits", "output")], 4),
    ("r3d_18", "r3d_18", None, None, [("pool", "/avgpool/GlobalAveragePool_output_0")], 4),
    ("mc3_18", "mc3_18", None, None, [("pool", "/avgpool/GlobalAveragePool_output_0")], 4),
    ("s3d", "s3d", None, None,
     [("pool", "/avgpool/AveragePool_output_0"), ("logits", "output")], 4),
    ("i3d", "i3d", None, None, [("pool", "/avg_pool/AveragePool_output_0")], 4),
    ("mvit_v2_s", "mvit_v2_s", None, None, [("cls", "/Gather_output_0"), ("logits", "output")],
     4),
    ("r2plus1d_18_small", "r2plus1d_18", 4, 32, [("/avgpool/GlobalAveragePool_output_0", None)], 4),
    ("r3d_18_small", "r3d_18", 4, 32, [("/avgpool/GlobalAveragePool_output_0", None)], 4),
    ("mc3_18_small", "mc3_18", 4, 32, [("/avgpool/GlobalAveragePool_output_0", None)], 4),
    ("mvit_v2_s_small", "mvit_v2_s", 4, 32, [("/Gather_output_0", None)], 4),
]
CLIP_SIZES = {"r3d_18": (16, 112), "mc3_18": (16, 112), "r2plus1d_18": (16, 112), "s3d": (16, 224),
              "i3d": (16, 224), "mvit_v2_s": (16, 224)}
# Audio models (scripts/export-audio.py, seeded random weights): name, [(layer, tensor)]; their
# inputs are log-mel patches of sounds the ffmpeg CLI makes, computed by the front end's numpy
# reference (tests/python/logmel_refs.py) from the model's manifest, one patch a sound.
AUDIO_CASES = [
    ("vggish", [("embedding", "output")]),
    ("panns_cnn14", [("embedding", "/Relu_output_0"), ("tags", "output")]),
]
KINETICS_MEAN = [0.43216 * 255, 0.394666 * 255, 0.37645 * 255]
KINETICS_STD = [0.22803 * 255, 0.22145 * 255, 0.216989 * 255]


def need(module):
    try:
        return __import__(module)
    except ImportError:
        print("make_conformance: python module %s missing: skipped" % module)
        sys.exit(SKIP)


def run_ort(model, inp, n, size, prefix, names, channels="3", width=None):
    env = dict(os.environ)
    subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model, inp, str(n), channels,
                    str(size), str(width or size), prefix] + names, check=True, env=env, cwd=ROOT)
    safe = lambda s: "".join(c if c.isalnum() or c in "_.-" else "_" for c in s)
    return ["%s.%s.bin" % (prefix, safe(nm)) for nm in names]


def with_outputs(onnx, src, dst, tensors):
    """Copy of src whose graph outputs include the given tensors."""
    m = onnx.load(src)
    have = {o.name for o in m.graph.output}
    for t in tensors:
        if t not in have:
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(t))
    onnx.save(m, dst)


# Test pictures the ffmpeg CLI draws, for a clone without ../shared/images: eight different
# patterns (colours, edges, gradients, fine detail), so that the networks' outputs vary.
GENERATED = ["testsrc2=size=320x240", "smptehdbars=size=320x240", "mandelbrot=size=320x240",
             "rgbtestsrc=size=320x240", "cellauto=size=320x240:rule=110",
             "life=size=320x240:mold=10:ratio=0.3:seed=7", "gradients=size=320x240:seed=3",
             "testsrc=size=320x240"]


def generated_images(out):
    """GENERATED drawn into OUT/generated/ as PNG files; their directory."""
    d = os.path.join(out, "generated")
    os.makedirs(d, exist_ok=True)
    for k, src in enumerate(GENERATED):
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", src,
                        "-ss", "0.4", "-frames:v", "1", os.path.join(d, "%02d.png" % k)],
                       check=True)
    return d


def load_photos(np, images_dir, names, size, mean, std):
    """Photos stretched to size x size (bilinear, ffmpeg CLI), normalised, planar float32."""
    planes = []
    for name in names:
        raw = subprocess.run(["ffmpeg", "-v", "error", "-i", os.path.join(images_dir, name),
                              "-vf", "scale=%d:%d:flags=bilinear" % (size, size), "-frames:v", "1",
                              "-pix_fmt", "rgb24", "-f", "rawvideo", "-"],
                             check=True, capture_output=True).stdout
        img = np.frombuffer(raw, np.uint8).reshape(size, size, 3).astype(np.float32)
        planes.append(((img - np.float32(mean)) / np.float32(std)).transpose(2, 0, 1))
    return np.stack(planes).astype("<f4")


def clips(np, images_dir, names, frames, size):
    """Windows [n, 3, frames, size, size] made of photos: frame t of window i is photo i panned
    by 3t pixels and lightened by 2t levels (time has to matter), Kinetics-normalised."""
    x = load_photos(np, images_dir, names, size, [0, 0, 0], [1, 1, 1])
    out = []
    for img in x:
        seq = [np.roll(img, 3 * t, axis=2) + 2.0 * t for t in range(frames)]
        w = np.stack(seq, axis=1)  # [3, frames, size, size]
        mean = np.float32(KINETICS_MEAN).reshape(3, 1, 1, 1)
        std = np.float32(KINETICS_STD).reshape(3, 1, 1, 1)
        out.append((w - mean) / std)
    return np.stack(out).astype("<f4")


def clip_cases(np, onnx, images_dir, images, cache, out):
    """CLIP_CASES: exported, run by ONNX Runtime one window at a time; their cases.tsv lines."""
    lines = []
    for name, arch, frames, size, layers, n in CLIP_CASES:
        frames, size = frames or CLIP_SIZES[arch][0], size or CLIP_SIZES[arch][1]
        src = os.path.join(cache, name + ".onnx")
        if not os.path.exists(src):  # I3D's architecture is written in its own script
            script = "export-i3d.py" if arch == "i3d" else "export-torchvision.py"
            subprocess.run([sys.executable, os.path.join(HERE, script), "--out", cache,
                            "--frames", str(frames), "--size", str(size), "--name", name]
                           + ([] if arch == "i3d" else [arch]), check=True)
        tensors = [t or layer for layer, t in layers]
        aug = os.path.join(out, name + ".ref.onnx")
        with_outputs(onnx, src, aug, tensors)
        x = clips(np, images_dir, images[:n], frames, size)
        inp = os.path.join(out, name + ".input.bin")
        x.tofile(inp)
        refs = run_ort(aug, inp, n, size, os.path.join(out, name), tensors,
                       channels="3x%d" % frames)
        os.remove(aug)
        for (layer, _), ref in zip(layers, refs):
            y = np.fromfile(ref, "<f4").reshape(n, -1)
            spread = float(np.std(y, axis=0).mean() / (np.abs(y).mean() + 1e-30))
            print("%-18s %-6s %5d-d  spread across windows %.3f"
                  % (name, layer[:6], y.shape[1], spread))
            lines.append("\t".join([src, layer, inp, ref, str(n), str(size), str(y.shape[1]),
                                    str(frames)]))
    return lines


def audio_cases(np, onnx, cache, out):
    """AUDIO_CASES: exported, run by ONNX Runtime one patch at a time; their cases.tsv lines
    (the size column holds a patch's frames, a ninth its bands)."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import logmel_refs
    lines = []
    for name, layers in AUDIO_CASES:
        src = os.path.join(cache, name + ".onnx")
        if not os.path.exists(src):
            subprocess.run([sys.executable, os.path.join(HERE, "export-audio.py"), "--out", cache,
                            name], check=True)
        with open(os.path.join(ROOT, "models", name + ".json")) as f:
            c = json.load(f)["audio"]
        logmel = logmel_refs.vggish_logmel if c["triangles"] == "mel" else logmel_refs.panns_logmel
        patches = []
        for sound, graph, _ in logmel_refs.SOUNDS:
            if sound in ("silence", "short"):
                continue
            wav = os.path.join(out, "%s_%s.f32" % (name, sound))
            x = logmel_refs.make_sound(graph, 1.5, c["sample_rate"], wav)
            os.remove(wav)
            patches.append(logmel(x, c)[:c["patch"]])
        x = np.stack(patches).astype("<f4")  # [n, patch, bands]
        n = len(patches)
        tensors = [t for _, t in layers]
        aug = os.path.join(out, name + ".ref.onnx")
        with_outputs(onnx, src, aug, tensors)
        inp = os.path.join(out, name + ".input.bin")
        x.tofile(inp)
        refs = run_ort(aug, inp, n, c["patch"], os.path.join(out, name), tensors, channels="1",
                       width=c["mels"])
        os.remove(aug)
        for (layer, _), ref in zip(layers, refs):
            y = np.fromfile(ref, "<f4").reshape(n, -1)
            spread = float(np.std(y, axis=0).mean() / (np.abs(y).mean() + 1e-30))
            print("%-18s %-9s %5d-d  spread across sounds %.3f" % (name, layer, y.shape[1], spread))
            lines.append("\t".join([src, layer, inp, ref, str(n), str(c["patch"]),
                                    str(y.shape[1]), "0", str(c["mels"])]))
    return lines


def photos(np, shared, out):
    """The 15 photos with MobileNetV2's preprocessing, and their expected top-1 classes."""
    ver = json.load(open(os.path.join(shared, "models", "mobilenet_v2_1.0_224.verification.json")))
    names = [im["image"] for im in ver["images"]]
    x = load_photos(np, os.path.join(shared, "images"), names, 224, 127.5, 127.5)
    path = os.path.join(out, "photos.bin")
    x.tofile(path)
    with open(os.path.join(out, "top1.tsv"), "w") as f:
        for im in ver["images"]:
            f.write("%s\t%d\n" % (im["image"], im["top5"][0][0]))
    return path, len(names)


def text_case(np, onnx, shared, cache, out):
    """CLIP ViT-B/32's text tower (random weights) on the token ids of TEXTS."""
    src = os.path.join(cache, "clip_text_conformance.onnx")
    if not os.path.exists(src):
        subprocess.run([sys.executable, os.path.join(HERE, "export-clip.py"), "--out", cache,
                        "--tower", "text"], check=True)
        os.replace(os.path.join(cache, "clip_vit_b32_text.onnx"), src)
    vocab = os.path.join(shared, "models", "clip", "bpe_simple_vocab_16e6.txt.gz")
    ids = np.zeros((len(TEXTS), 77), np.int64)
    if os.path.exists(vocab):
        sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
        import clip_tokens
        ref = clip_tokens.Reference(vocab)
        for i, t in enumerate(TEXTS):
            got = ref.encode(t)
            ids[i, :len(got)] = got
    else:  # ids as a tokenizer makes them: start, text, the end token at another place each
        rng = np.random.default_rng(7)
        for i in range(len(TEXTS)):
            n = 4 + 9 * i
            ids[i, 0], ids[i, 1:n], ids[i, n] = 49406, rng.integers(0, 49406, n - 1), 49407
    inp = os.path.join(out, "clip_text.ids.bin")
    ids.astype("<i8").tofile(inp)
    env = dict(os.environ)
    prefix = os.path.join(out, "clip_text")
    subprocess.run(["node", os.path.join(HERE, "ort_run.js"), src, inp, str(len(TEXTS)), "ids",
                    "77", "1", prefix, "embed"], check=True, env=env, cwd=ROOT)
    ref = prefix + ".embed.bin"
    y = np.fromfile(ref, "<f4").reshape(len(TEXTS), -1)
    print("%-14s %-6s %5d-d  %d texts" % ("clip_text", "text", y.shape[1], len(TEXTS)))
    return "\t".join([src, "text", inp, ref, str(len(TEXTS)), "77", str(y.shape[1])])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shared", default=os.environ.get("VIDFEAT_SHARED",
                                                       os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--cache", help="where exported models live (default OUT/models)")
    ap.add_argument("--quick", action="store_true", help="only the small models")
    args = ap.parse_args()
    np = need("numpy")
    onnx = need("onnx")
    need("onnx.helper")
    need("torch")
    ort_dir = os.environ.get("ORT_NODE_DIR",
                             os.path.join(ROOT, "build", "ort", "node_modules", "onnxruntime-node"))
    if not shutil.which("node") or not os.path.isdir(ort_dir):
        print("make_conformance: node or onnxruntime-node (%s) missing: skipped" % ort_dir)
        return SKIP
    os.environ["ORT_NODE_DIR"] = ort_dir
    if not shutil.which("ffmpeg"):
        print("make_conformance: the ffmpeg CLI is missing: skipped")
        return SKIP
    out = os.path.abspath(args.out)
    cache = os.path.abspath(args.cache or os.path.join(out, "models"))
    os.makedirs(out, exist_ok=True)
    os.makedirs(cache, exist_ok=True)
    lines = []
    images_dir = os.path.join(args.shared, "images")
    if not os.path.isdir(images_dir):  # a clone without ../shared: pictures drawn here
        print("make_conformance: %s missing: networks compared on %d generated pictures"
              % (images_dir, len(GENERATED)))
        images_dir = generated_images(out)
    images = sorted(f for f in os.listdir(images_dir))
    imagenet_mean = [123.675, 116.28, 103.53]
    imagenet_std = [58.395, 57.12, 57.375]

    for name, size, layers, n in CASES:
        if args.quick and name not in QUICK:
            continue
        src = os.path.join(cache, name + ".onnx")
        if not os.path.exists(src) and name in EXPORT_CLIP:
            subprocess.run([sys.executable, os.path.join(HERE, "export-clip.py"), "--out", cache,
                            "--arch", EXPORT_CLIP[name]], check=True)
        elif not os.path.exists(src):
            subprocess.run([sys.executable, os.path.join(HERE, "export-torchvision.py"),
                            "--out", cache, name], check=True)
        tensors = [t for _, t, _ in layers]
        aug = os.path.join(out, name + ".ref.onnx")
        with_outputs(onnx, src, aug, tensors)
        x = load_photos(np, images_dir, images[:n], size, imagenet_mean, imagenet_std)
        inp = os.path.join(out, name + ".input.bin")
        x.tofile(inp)
        refs = run_ort(aug, inp, n, size, os.path.join(out, name), tensors)
        os.remove(aug)
        for (layer, tensor, spatial), ref in zip(layers, refs):
            y = np.fromfile(ref, "<f4").reshape(n, -1)
            if spatial == "tokens":  # a ViT's mean of its patch tokens (all but the class token)
                y = y.reshape(n, 197, -1)[:, 1:].mean(axis=1, dtype=np.float64).astype("<f4")
                y.tofile(ref)
            elif spatial:  # vidfeat global-average-pools a 4-D map
                y = y.reshape(n, -1, spatial).mean(axis=2, dtype=np.float64).astype("<f4")
                y.tofile(ref)
            spread = float(np.std(y, axis=0).mean() / (np.abs(y).mean() + 1e-30))
            print("%-14s %-6s %5d-d  spread across images %.3f" % (name, layer, y.shape[1], spread))
            # models with a manifest are asked for by layer name, the others by tensor name
            has_manifest = os.path.exists(os.path.join(ROOT, "models", name + ".json"))
            lines.append("\t".join([src, layer if has_manifest else tensor, inp, ref,
                                    str(n), str(size), str(y.shape[1])]))

    if not args.quick:
        lines.append(text_case(np, onnx, args.shared, cache, out))
        lines += clip_cases(np, onnx, images_dir, images, cache, out)
        lines += audio_cases(np, onnx, cache, out)

    shared_model = os.path.join(args.shared, "models", "mobilenet_v2_1.0_224.onnx")
    if os.path.exists(shared_model):
        inp, n = photos(np, args.shared, out)
        refs = run_ort(shared_model, inp, n, 224, os.path.join(out, "mobilenet_real"),
                       ["features", "probs"])
        for layer, ref in zip(["features", "probs"], refs):
            dim = np.fromfile(ref, "<f4").size // n
            lines.append("\t".join([shared_model, layer, inp, ref, str(n), "224", str(dim)]))
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("# model\tlayer\tinput\treference\timages\tsize\tdim[\tframes[\tbands]]\n")
        f.write("\n".join(lines) + "\n")
    print("make_conformance: %d cases in %s" % (len(lines), os.path.join(out, "cases.tsv")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
