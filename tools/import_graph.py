#!/usr/bin/env python3
"""The library's import graph, read from the source (no import runs):

    tools/import_graph.py            modules, imports, circles; the stages and who imports whom
    tools/import_graph.py --edges    every import, module -> module

The layering itself is a contract (.importlinter, `lint-imports`); this
adds what a contract between packages does not see: circles inside a
package. tests/test_architecture.py uses both.
"""

import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE = os.path.join(ROOT, "site_scons")


def modules(site=SITE, package="tessera"):
    """{module name: its file} of a package under `site`."""
    out = {}
    for d, dirs, files in os.walk(os.path.join(site, package)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                name = os.path.relpath(os.path.join(d, f), site)[:-3].replace(os.sep, ".")
                out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = os.path.join(d, f)
    return out


def imports(site=SITE, package="tessera"):
    """{module: sorted modules of the package it imports}, at module level
    or inside functions alike (a name imported from a package resolves to
    its module when it is one, else to the package)."""
    mods = modules(site, package)

    def owner(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, path in mods.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        here = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out |= {owner(a.name) for a in node.names if a.name.split(".")[0] == package}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                if base.split(".")[0] != package:
                    continue
                for a in node.names:
                    full = f"{base}.{a.name}"
                    out.add(full if full in mods else owner(base))
        out.discard(name)
        out.discard("")
        graph[name] = sorted(out)
    return graph


def closure(graph, start):
    """The modules `start` imports, directly or not, itself included."""
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += graph.get(m, [])
    return seen


def circles(graph):
    """The strongly connected components of more than one module (Tarjan),
    each sorted; [] when the graph has no circle."""
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def stage(module, package="tessera"):
    """The stage package a module belongs to (the root's own modules: themselves)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def main(argv):
    graph = imports()
    if "--edges" in argv:
        for m in sorted(graph):
            for t in graph[m]:
                print(m, "->", t)
        return 0
    found = circles(graph)
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} imports, {len(found)} circles")
    for c in found:
        print("  circle:", " ".join(c))
    by_stage = {}
    for m, targets in graph.items():
        by_stage.setdefault(stage(m), set()).update(stage(t) for t in targets if stage(t) != stage(m))
    for s in sorted(by_stage):
        print(f"  {s} -> {', '.join(sorted(by_stage[s])) or '(nothing)'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
