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
    return 0


if __name__ == "__main__":
    sys.exit(main())
