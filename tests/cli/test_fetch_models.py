#!/usr/bin/python3
"""scripts/fetch-models.sh against a model file served from a file:// address (no network):

  official     a manifest with the file's size and sha256: downloaded, kept, said to be official;
               run again: recognised as already there, nothing downloaded
  resume       a cut-off download (NAME.onnx.part, the file's first bytes) is resumed, not
               started again: a part whose bytes differ from the source's shows it (curl keeps
               them, the digest then fails)
  checked      a wrong sha256 or size in the manifest: exit 1, one line saying which, the file
               deleted (nothing under the model's name)
  manifests    the shipped manifests of the zoo's models carry a sha256 and a size
  vocab        --vocab: a CLIP model's tokenizer vocabulary (and its licence beside it),
               checked by sha256; a model without one: exit 1, one line

usage: test_fetch_models.py VIDFEAT SOURCE_DIR   (VIDFEAT unused: the script alone is tested)
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check


def main():
    src = sys.argv[2]
    if not shutil.which("curl"):
        print("skip: curl is not installed")
        return SKIP
    script = os.path.join(src, "scripts", "fetch-models.sh")
    for name in ("inception_v3", "vgg19", "resnet50"):
        with open(os.path.join(src, "models", name + ".json")) as f:
            m = json.load(f)
        check(len(m.get("sha256") or "") == 64 and m.get("size", 0) > 10**7 and
              "/d7a7b06/" in m.get("url", ""), "%s: manifest without identity: %r" % (name, m))
    print("ok the zoo's manifests carry sha256, size and the pinned address")

    tmp = tempfile.mkdtemp(prefix="vidfeat_fetch_")
    try:
        data = os.urandom(300000)
        served = os.path.join(tmp, "served.onnx")
        with open(served, "wb") as f:
            f.write(data)
        digest = hashlib.sha256(data).hexdigest()
        manifests, out = os.path.join(tmp, "manifests"), os.path.join(tmp, "out")
        os.mkdir(manifests)
        target = os.path.join(out, "m.onnx")

        def manifest(sha, size):
            with open(os.path.join(manifests, "m.json"), "w") as f:
                json.dump({"vidfeat_manifest": 1, "name": "m", "file": "m.onnx", "sha256": sha,
                           "size": size, "url": "file://" + served}, f)

        def fetch():
            return subprocess.run([script, "m", "--dir", out, "--manifests", manifests],
                                  capture_output=True, text=True, timeout=120)

        manifest(digest, len(data))
        r = fetch()
        check(r.returncode == 0 and "the official file" in r.stdout, "fetch: %r" % (r,))
        check(open(target, "rb").read() == data, "the fetched file differs")
        r = fetch()
        check(r.returncode == 0 and "already the official file" in r.stdout, "again: %r" % (r,))
        print("ok official: fetched and checked; again: already there")

        os.remove(target)
        part = target + ".part"
        with open(part, "wb") as f:  # first bytes changed: only a resume keeps them
            f.write(b"X" * 1000 + data[1000:120000])
        r = fetch()
        check(r.returncode == 1 and "resuming" in r.stdout and "is not the manifest's" in
              r.stderr and not os.path.exists(target) and not os.path.exists(part),
              "a resumed part with wrong bytes: %r" % (r,))
        with open(part, "wb") as f:
            f.write(data[:120000])
        r = fetch()
        check(r.returncode == 0 and "resuming" in r.stdout and "120000 bytes" in r.stdout and
              open(target, "rb").read() == data, "resume: %r" % (r,))
        print("ok resume: a cut-off download is continued from its bytes, then checked")

        for sha, size, says in ((digest[::-1], len(data), "sha256"),
                                (digest, len(data) + 1, "the manifest says %d" % (len(data) + 1))):
            os.remove(target)
            manifest(sha, size)
            r = fetch()
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 1 and len(lines) == 1 and says in lines[0] and
                  "deleted" in lines[0] and not os.listdir(out), "wrong %s: %r" % (says, r))
            with open(target, "wb") as f:
                f.write(data)
        print("ok a wrong sha256 or size: exit 1, one line, nothing kept")

        # --vocab: a CLIP model's tokenizer vocabulary and its licence, checked likewise
        vocab = os.path.join(tmp, "vocab.txt.gz")
        licence = os.path.join(tmp, "LICENSE")
        vdata, ldata = os.urandom(5000), b"a licence\n"
        for path, d in ((vocab, vdata), (licence, ldata)):
            with open(path, "wb") as f:
                f.write(d)
        with open(os.path.join(manifests, "c.json"), "w") as f:
            json.dump({"vidfeat_manifest": 1, "name": "c", "file": "c.onnx", "text": {
                "file": "c_text.onnx", "vocab": "v.txt.gz", "vocab_url": "file://" + vocab,
                "vocab_sha256": hashlib.sha256(vdata).hexdigest(), "vocab_licence": "V.LICENSE",
                "vocab_licence_url": "file://" + licence,
                "vocab_licence_sha256": hashlib.sha256(ldata).hexdigest()}}, f)
        r = subprocess.run([script, "--vocab", "c", "--dir", out, "--manifests", manifests],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and open(os.path.join(out, "v.txt.gz"), "rb").read() == vdata
              and open(os.path.join(out, "V.LICENSE"), "rb").read() == ldata,
              "--vocab: %r" % (r,))
        r = subprocess.run([script, "--vocab", "m", "--dir", out, "--manifests", manifests],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 1 and "names no tokenizer vocabulary" in r.stderr,
              "--vocab of a model without one: %r" % (r,))
        print("ok --vocab: a CLIP model's vocabulary and licence fetched and checked")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
