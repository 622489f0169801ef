"""The shape of the code (docs/architecture.md): the library's layering is
the import-linter contract in .importlinter and holds; an import from an
earlier stage up to a later one breaks it; no module imports itself back
through others; every build step depends on the library code it runs; and
the glue stays one small function per stage."""

import ast
import os
import shutil
import subprocess
import sys

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import import_graph  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "site_scons"))
from tessera.util import canon  # noqa: E402
from tessera_scons import export as export_glue, steps  # noqa: E402

LINT = os.path.join(os.path.dirname(sys.executable), "lint-imports")


def lint(site):
    """lint-imports over the library found in `site` (the repository's
    contracts); (exit status, output)."""
    env = dict(os.environ, PYTHONPATH=site)
    res = subprocess.run([LINT, "--config", os.path.join(ROOT, ".importlinter"), "--no-cache"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    return res.returncode, res.stdout + res.stderr


def test_the_layers_contract_holds():
    status, out = lint(os.path.join(ROOT, "site_scons"))
    assert status == 0, out
    assert "3 kept, 0 broken" in out


def test_an_import_up_the_pipeline_breaks_the_contract(tmp_path):
    """The tiler (an early stage) reading the code generator (a later one):
    the check that guards the layering can fail."""
    site = tmp_path / "site_scons"
    shutil.copytree(os.path.join(ROOT, "site_scons", "tessera"), site / "tessera",
                    ignore=shutil.ignore_patterns("__pycache__"))
    library = site / "tessera" / "tiler" / "library.py"
    library.write_text(library.read_text() + "\nfrom ..codegen import cfmt  # noqa: E402,F401\n")
    status, out = lint(str(site))
    assert status != 0
    assert "A stage imports only the stages before it" in out and "BROKEN" in out
    assert "tessera.tiler.library -> tessera.codegen.cfmt" in out


def test_no_module_imports_itself_back():
    graph = import_graph.imports()
    assert len(graph) > 100
    assert import_graph.circles(graph) == []


def test_a_circle_is_found(tmp_path):
    # the same reader on two modules that import each other
    pkg = tmp_path / "tessera"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import g\n")
    assert import_graph.circles(import_graph.imports(str(tmp_path))) == [["tessera.a", "tessera.b"]]


def _imports(path, functions=None):
    """The tessera modules a glue file imports at its top and, with
    `functions`, inside those functions (what their actions run)."""
    mods = import_graph.modules()
    tree = ast.parse(open(path).read())
    nodes = list(tree.body)
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name in (functions or ()):
            nodes += list(ast.walk(fn))
    out = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tessera"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(full if full in mods else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("tessera.")}
    return out


def _missing(code, glue_file, roots):
    graph, mods = import_graph.imports(), import_graph.modules()
    needed = set().union(*(import_graph.closure(graph, m) for m in roots))
    have = {os.path.realpath(f) for f in canon.source_files(*code)} | {os.path.realpath(glue_file)}
    return sorted(m for m in needed if os.path.realpath(mods[m]) not in have)


# the actions (steps.py) behind each entry of steps.CODE
ACTIONS = {"codegen": ["_gen_layer", "_gen_weights", "_gen_network"], "program": ["_gen_program", "_storage_image"]}


def test_every_step_depends_on_the_code_it_runs():
    """A step's Depends (steps.CODE) covers every module its actions
    import, directly or not: a change to any of them reruns the step (SCons
    signs an action by its own bytecode only)."""
    for step, code in steps.CODE.items():
        roots = _imports(steps.__file__, ACTIONS.get(step, [f"_{step}"]))
        assert any(r.startswith("tessera.pipeline.") for r in roots) or step == "run", step
        assert not _missing(code, steps.__file__, roots), step
    for step, code in export_glue.CODE.items():
        roots = _imports(export_glue.__file__, [f"_{'write_' if step == 'vectors' else ''}{step}"])
        assert not _missing(code, export_glue.__file__, roots), f"export {step}"


def test_a_step_declared_on_missing_code_is_an_error():
    try:
        canon.source_files("tiler.geometry")
    except ValueError as err:
        assert "tiler.geometry" in str(err)
    else:
        raise AssertionError("a package that is not there was taken")


def test_the_glue_is_small_functions():
    """The glue declares; the library decides: no function of
    site_scons/tessera_scons longer than 60 lines."""
    glue = os.path.join(ROOT, "site_scons", "tessera_scons")
    long = []
    for d, _, files in os.walk(glue):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                for node in ast.walk(ast.parse(open(path).read())):
                    if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 60:
                        long.append(f"{os.path.relpath(path, glue)}:{node.name} "
                                    f"({node.end_lineno - node.lineno + 1} lines)")
    assert not long, long
