#!/usr/bin/python3
"""README as a new user meets it: a fresh clone of this repository's HEAD in a new directory
(no ../shared beside it), then every command of README's "Set up and run", "Tests" and "Common
tasks" run as written, in order, from the clone's top; each must exit 0. Prints each command,
its time and status; the first failure ends the run with its output's tail (exit 1).

usage: scripts/run-readme.py [--skip-tests] [--keep]
  --skip-tests  leave out "Tests" (scripts/test.sh: CI runs it already, in its own clone)
  --keep        keep the clone (its path is printed)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SECTIONS = ("Set up and run", "Tests", "Common tasks")


def commands(readme, skip_tests):
    """The indented command lines of the sections README lists, in order."""
    out, section = [], None
    for line in open(readme, encoding="utf-8"):
        m = re.match(r"^## (.*)", line)
        if m:
            section = m.group(1).split(" (")[0].strip()
            continue
        if section in SECTIONS and line.startswith("    ") and line.strip():
            if skip_tests and section == "Tests":
                continue
            out.append((section, line.strip()))
    return out


def main():
    args = sys.argv[1:]
    unknown = [a for a in args if a not in ("--skip-tests", "--keep")]
    if unknown:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    top = tempfile.mkdtemp(prefix="vidfeat_readme_")
    clone = os.path.join(top, "vidfeat")  # nothing beside it: no ../shared
    try:
        subprocess.run(["git", "clone", "-q", repo, clone], check=True)
        todo = commands(os.path.join(clone, "README.md"), "--skip-tests" in args)
        if not any(s == "Common tasks" for s, _ in todo):
            print("run-readme: README has no commands under 'Common tasks'")
            return 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIDFEAT_")}
        if os.environ.get("VIDFEAT_NO_APT"):  # the packages are there already (CI)
            env["VIDFEAT_NO_APT"] = os.environ["VIDFEAT_NO_APT"]
        for section, cmd in todo:
            t0 = time.time()
            r = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], cwd=clone, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=3600)
            print("run-readme: [%s] %s: exit %d in %.0f s" % (section, cmd, r.returncode,
                                                              time.time() - t0), flush=True)
            if r.returncode != 0:
                print(r.stdout[-4000:])
                return 1
        print("run-readme: all %d of README's commands exit 0 in a fresh clone without "
              "../shared" % len(todo))
        return 0
    finally:
        if "--keep" in args:
            print("run-readme: the clone is kept at %s" % clone)
        else:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
