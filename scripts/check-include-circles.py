#!/usr/bin/env python3
"""No include circle between the modules of src/ (a module: a .c and its .h, named by path
without the extension). Prints each circle and exits 1, or exits 0. Run by check-layers.sh."""
import os, re, sys
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
edges = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith((".c", ".h", ".cu")):
            continue
        p = os.path.join(d, f)
        mod = os.path.relpath(p, root).rsplit(".", 1)[0]
        for inc in re.findall(r'#include "([a-z_]+/[a-z0-9_]+)\.h"', open(p).read()):
            if inc != mod:
                edges.setdefault(mod, set()).add(inc)
# cycles by DFS
state, stack, found = {}, [], []
def dfs(u):
    state[u] = 1; stack.append(u)
    for v in sorted(edges.get(u, ())):
        if state.get(v) == 1:
            found.append(stack[stack.index(v):] + [v])
        elif not state.get(v):
            dfs(v)
    stack.pop(); state[u] = 2
for u in sorted(edges):
    if not state.get(u):
        dfs(u)
for c in found:
    print("include circle: " + " -> ".join(c))
sys.exit(1 if found else 0)
