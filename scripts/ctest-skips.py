#!/usr/bin/env python3
"""List the tests a ctest run skipped, each with the reason it printed, and with --only-gpu fail
(exit 1) when any of them is not a GPU test (label 'gpu'): on a machine with everything
installed and ../shared beside the repository, only the GPU tests may skip, and the bf16 checks
where this CPU has no bf16 instructions (no avx512_bf16 or amx_bf16 in /proc/cpuinfo, or capped
by VIDFEAT_ISA=avx2 or ONEDNN_MAX_CPU_ISA): their reason says "has no AVX512-BF16 or AMX".

usage: ctest-skips.py BUILD_DIR JUNIT_XML [--only-gpu]
"""
import json
import subprocess
import sys
import os
import xml.etree.ElementTree as ET

NO_BF16 = "has no AVX512-BF16 or AMX"


def cpu_lacks_bf16():
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", "").lower()
    if os.environ.get("VIDFEAT_ISA", "").lower() == "avx2" or (
            onednn and "bf16" not in onednn and "amx" not in onednn and onednn != "all"):
        return True
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" not in flags and "amx_bf16" not in flags


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    build, junit = sys.argv[1:3]
    only_gpu = "--only-gpu" in sys.argv[3:]
    shown = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                           capture_output=True, text=True, check=True).stdout
    labels = {}
    for t in json.loads(shown)["tests"]:
        for p in t.get("properties", []):
            if p["name"] == "LABELS":
                labels[t["name"]] = p["value"]
    skipped = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("skipped") is None:
            continue
        out = (case.findtext("system-out") or "").strip().splitlines()
        # a test's own "SKIP: why" line first (pytest's closing line also says "skipped")
        why = next((l for l in reversed(out) if l.lstrip().startswith("SKIP")),
                   next((l for l in reversed(out) if "skip" in l.lower()), out[-1] if out else ""))
        skipped.append((case.get("name"), "gpu" in labels.get(case.get("name"), []), why))
    print("skipped tests: %d" % len(skipped))
    for name, gpu, why in skipped:
        print("  %-24s %-4s %s" % (name, "gpu" if gpu else "", why.strip()[:160]))
    hardware = cpu_lacks_bf16()
    bad = [name for name, gpu, why in skipped if not gpu and not (hardware and NO_BF16 in why)]
    if only_gpu and bad:
        print("FAIL: tests outside the GPU set skipped: %s" % " ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
