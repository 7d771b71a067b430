#!/usr/bin/python3
"""Every command vidfeat or its documents tell a user to run can be run as written:

  scripts     each scripts/NAME named in src/, the Python package, README.md, docs/ and the
              model manifests exists; a script (not a module or C file) has its run bit and a
              #! line, and the ones messages send users to (export-*.py, fetch-models.sh)
              answer --help with exit 0
  models      `vidfeat models --json`: each model's "get" advice is a download only where the
              manifest has an address (fetch-models.sh refuses the others), an export script
              that exists, or, for a model with neither, where to put one's own copy
  missing     extracting with a model whose file is absent names the same way to get it
  suggested   every command fetch-models.sh (with no download possible) and `vidfeat models`
              suggest is one its script takes (an export script's names, a manifest with an
              address to fetch), else it says where to put one's own copy

usage: test_advice.py VIDFEAT SOURCE_DIR
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from vfcheck import check

MODULES = {"vfbench.py"}  # imported by the benchmark scripts, not run
SUGGESTION = re.compile(r"scripts/[A-Za-z0-9_.-]+(?: [A-Za-z0-9_./=-]+)*")


def runnable(src, cmd, where):
    """A scripts/ command line a message suggests, checked as far as it can be without running
    it: the script exists and runs; fetch-models.sh NAME has a manifest with an address (with
    --vocab: a vocabulary's); an export script takes the command's arguments (run with --help
    appended, so that argparse refuses a name it does not know)."""
    words = cmd.rstrip(".,;:)").split()
    script = os.path.join(src, words[0])
    check(os.path.isfile(script) and os.access(script, os.X_OK),
          "%s suggests %r: no such script" % (where, cmd))
    if words[0] == "scripts/fetch-models.sh":
        vocab = "--vocab" in words
        for name in (w for w in words[1:] if not w.startswith("-")):
            m = json.load(open(os.path.join(src, "models", name + ".json")))
            url = (m.get("text") or {}).get("vocab_url") if vocab else m.get("url")
            check(url, "%s suggests %r, but %s has no address to fetch from" % (where, cmd, name))
        return
    r = subprocess.run([script, *words[1:], "--help"], capture_output=True, text=True,
                       timeout=120)
    check(r.returncode == 0, "%s suggests %r, which its script refuses: %s"
          % (where, cmd, r.stderr.strip()[-300:]))


def named_scripts(src):
    files = glob.glob(os.path.join(src, "src", "**", "*.[ch]"), recursive=True)
    files += glob.glob(os.path.join(src, "python", "vidfeat", "*.py"))
    files += glob.glob(os.path.join(src, "docs", "*.md")) + [os.path.join(src, "README.md")]
    files += glob.glob(os.path.join(src, "models", "*.json"))
    named = {}
    for f in files:
        for m in re.finditer(r"scripts/([A-Za-z0-9_.-]+\.(?:py|sh|c|js))", open(f).read()):
            named.setdefault(m.group(1), os.path.relpath(f, src))
    return named


def main():
    exe, src = sys.argv[1:3]
    named = named_scripts(src)
    check(len(named) > 5, "hardly any scripts named: %r" % named)
    for name, where in sorted(named.items()):
        path = os.path.join(src, "scripts", name)
        check(os.path.isfile(path), "%s names scripts/%s, which does not exist" % (where, name))
        if name in MODULES or name.endswith(".c"):
            continue
        check(os.access(path, os.X_OK), "scripts/%s (named in %s) cannot be run: no run bit"
              % (name, where))
        check(open(path, "rb").read(2) == b"#!", "scripts/%s has no #! line" % name)
    for name in ("export-clip.py", "export-torchvision.py", "fetch-models.sh"):
        r = subprocess.run([os.path.join(src, "scripts", name), "--help"], capture_output=True,
                           text=True, timeout=120)
        check(r.returncode == 0, "scripts/%s --help: exit %d %s" % (name, r.returncode,
                                                                   r.stderr[-300:]))
    print("ok %d scripts named in the sources and documents exist and run" % len(named))

    with tempfile.TemporaryDirectory(prefix="vf_advice_") as tmp:
        empty = os.path.join(tmp, "models")
        os.mkdir(empty)
        env = dict(os.environ, VIDFEAT_MODELS=empty)
        r = subprocess.run([exe, "models", "--json"], capture_output=True, text=True, env=env,
                           cwd=tmp, timeout=60)
        check(r.returncode == 0, "vidfeat models: %d %s" % (r.returncode, r.stderr))
        models = json.loads(r.stdout)
        check(models, "vidfeat models lists nothing")
        clip = os.path.join(tmp, "clip.mp4")
        subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i",
                        "testsrc=size=64x48:rate=5", "-t", "1", clip], check=True)
        for m in models:
            manifest = json.load(open(os.path.join(src, "models", m["name"] + ".json")))
            get = m["get"]
            if get.startswith("scripts/fetch-models.sh"):
                check(manifest.get("url"), "%s: advice %r, but its manifest has no download "
                      "address" % (m["name"], get))
                check(get.split()[1:2] == [m["name"]], "%s: %r" % (m["name"], get))
            elif get.startswith("scripts/"):
                script = get.split()[0]
                check(os.access(os.path.join(src, script), os.X_OK),
                      "%s: advice %r names a script that cannot be run" % (m["name"], get))
            else:
                check(not manifest.get("url") and not manifest.get("export") and
                      manifest["file"] in get, "%s: advice %r" % (m["name"], get))
            if m["found"]:
                continue
            r = subprocess.run([exe, "--model", m["name"], "-o", os.path.join(tmp, "x.db"),
                                clip], capture_output=True, text=True, env=env, cwd=tmp,
                               timeout=60)
            said = get if not get.startswith("no download") else manifest["file"]
            check(r.returncode != 0 and said.split(" (")[0] in r.stderr,
                  "%s missing: %d, the message does not give %r: %s"
                  % (m["name"], r.returncode, said, r.stderr))
        print("ok %d models: each one's advice can be followed, and a missing file names it"
              % len(models))

        # fetch-models.sh where it cannot download (no address, or no network: a proxy that
        # refuses): every model and vocabulary, each message a way that works, as printed
        dead = dict(os.environ, https_proxy="http://127.0.0.1:9", http_proxy="http://127.0.0.1:9",
                    HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
        suggested = 0
        for m in models:
            for vocab in ([], ["--vocab"]):
                manifest = json.load(open(os.path.join(src, "models", m["name"] + ".json")))
                if vocab and not (manifest.get("text") or {}).get("vocab"):
                    continue
                r = subprocess.run([os.path.join(src, "scripts", "fetch-models.sh"), *vocab,
                                    m["name"], "--dir", os.path.join(tmp, "fetched")],
                                   capture_output=True, text=True, env=dead, timeout=120)
                said = [l for l in r.stderr.splitlines() if l.startswith("fetch-models:")]
                check(r.returncode == 1 and said, "fetch-models %s %s: exit %d %r"
                      % (" ".join(vocab), m["name"], r.returncode, r.stderr[-300:]))
                for cmd in SUGGESTION.findall(said[-1]):
                    runnable(src, cmd, "fetch-models %s %s" % (" ".join(vocab), m["name"]))
                    suggested += 1
                if not SUGGESTION.findall(said[-1]):  # then it says where to put a copy
                    check(" into " in said[-1] and (manifest["file"] in said[-1] or vocab),
                          "fetch-models %s %s: %r" % (" ".join(vocab), m["name"], said[-1]))
        for m in models:  # and vidfeat's own advice for each model
            for cmd in SUGGESTION.findall(m["get"]):
                runnable(src, cmd, "vidfeat models (%s)" % m["name"])
                suggested += 1
        print("ok fetch-models without a download and vidfeat models: %d suggested commands, "
              "each one its script takes" % suggested)
    return 0


if __name__ == "__main__":
    sys.exit(main())
