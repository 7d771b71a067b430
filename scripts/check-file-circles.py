#!/usr/bin/env python3
"""No circle of files in src/ by what they call: file A uses a function or table that file B
defines, and B (however indirectly) uses one of A's. Read from the built objects' symbols
(`nm`: each file's defined and undefined global symbols), so it sees calls, not includes (the
include circles are check-include-circles.py's). Run by check-layers.sh.

The circles the code had when this check was written (the loader and the oneDNN and CUDA backends
split by history, their side files reaching back into the main file's helpers) are gone (issue 41);
KNOWN lists any that must be tolerated for a while: a circle not listed fails, and so does a listed
one that is gone (so the list only shrinks). Exit 0; 1 with each circle printed; 77 (skipped) when
no build is there.

usage: scripts/check-file-circles.py [BUILD_DIR]   (default build)
"""
import collections
import glob
import os
import subprocess
import sys

KNOWN = []


def graph(objdirs):
    """file -> the files whose symbols it uses, among the objects of objdirs (one link unit)."""
    defined, uses = {}, collections.defaultdict(set)
    objs = [(d, o) for d in objdirs for o in glob.glob(os.path.join(d, "**", "*.o"),
                                                       recursive=True)]
    for objdir, obj in objs:
        name = os.path.relpath(obj, objdir)[:-2]  # engine/onnx.c
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBRVW":
                defined[parts[2]] = name
            elif len(parts) == 2 and parts[0] == "U":
                uses[name].add(parts[1])
    g = collections.defaultdict(set)
    for f, syms in uses.items():
        for s in syms:
            if s in defined and defined[s] != f:
                g[f].add(defined[s])
    return g


def circles(g):
    """The strongly connected components of more than one file (Tarjan, iteratively)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build")
    cmake = os.path.join(build, "src", "CMakeFiles")
    objdir = os.path.join(cmake, "vidfeat_objs.dir")
    if not glob.glob(os.path.join(objdir, "**", "*.o"), recursive=True):
        print("file circles: not checked, no objects in %s (build first)" % objdir)
        return 77
    found = circles(graph([objdir]))
    # the CUDA backend's run-time module, linked on its own, where the build has it
    cuda = [os.path.join(cmake, d) for d in ("vidfeat_cuda.dir", "vidfeat_cuda_kernels.dir")]
    if glob.glob(os.path.join(cuda[0], "**", "*.o"), recursive=True):
        found += [c for c in circles(graph(cuda)) if c not in found]
    status = 0
    for c in found:
        if c not in KNOWN:
            print("file circle: %s" % " <-> ".join(sorted(c)))
            status = 1
    for k in KNOWN:
        if k not in found:
            print("file circle gone (remove it from KNOWN in %s): %s" % (
                os.path.basename(__file__), " <-> ".join(sorted(k))))
            status = 1
    if status == 0:
        print("file circles: none" + (" but the %d known ones" % len(KNOWN) if KNOWN else ""))
    return status


if __name__ == "__main__":
    sys.exit(main())
