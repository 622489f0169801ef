"""SCons action functions: each reads its sources, calls one function of
tessera.pipeline (the stage's work, plain data in and out), writes its
targets. They stay small and stable, since SCons signs an action by its
own bytecode; the library code they call is declared with Depends (CODE).

A TesseraError becomes one line on stderr and a failed step (no traceback).
Each action is a two-line function calling `guarded(work, ...)`: a
decorator would make every action share one code object, and its closure's
repr (with a memory address) would change SCons's signature on every run.
"""

import importlib
import json
import os
import sys
import threading

from tessera.errors import TesseraError, from_os_error
from tessera.ir import Graph
from tessera.util import canon

# The library code each step runs, for Depends: its pipeline module and what
# that imports, directly or not (tests/test_architecture.py checks that
# each list covers those imports and steps.py's own). A list that misses a
# module misses rebuilds; one longer than this only rebuilds more.
_BASE = ("errors", "ir", "util")
_PLANNED = ("config", "cost", "planning", "tiler", "tiles") + _BASE
CODE = {
    "tile": ("pipeline.tiling", "config", "cost", "tiler", "tiles") + _BASE,
    "ram_budget": ("pipeline.budget", "pipeline.fusion", "pipeline.tiling", "codegen.libraries", "fusion") + _PLANNED,
    "tile_fused": ("pipeline.fusion", "pipeline.tiling", "codegen.libraries", "fusion") + _PLANNED,
    "schedule": ("pipeline.fusion", "pipeline.tiling", "codegen.libraries", "fusion") + _PLANNED,
    "plan": ("pipeline.plan", "codegen.libraries") + _PLANNED,
    "codegen": ("pipeline.codegen", "codegen", "storage") + _PLANNED,
    "program": ("pipeline.program", "codegen", "storage") + _PLANNED,
    "run": ("runners",) + _BASE,
    "check": ("pipeline.check", "check", "runners", "model.reference", "frontend.layout") + _BASE,
    "gate": ("pipeline.check", "check", "runners", "model.reference", "frontend.layout") + _BASE,
    "report": ("pipeline.report", "report", "codegen", "fusion", "storage") + _PLANNED,
}


# Heavy modules the steps import lazily (a no-op build never loads them).
# With -j the first imports happen in worker threads at once, and numpy's
# import is not safe against that ("partially initialized module"): the
# first step to run loads them, the others wait for it.
PRELOAD = ("numpy", "ortools.sat.python.cp_model")
_preload_lock = threading.Lock()


def _preload():
    with _preload_lock:
        for name in PRELOAD:
            importlib.import_module(name)


# the targets of steps that failed on an OSError and said so in their line
# (outdir.py does not name the full disk again)
HOST_ERRORS = set()


def guarded(work, target, source, env):
    """Run work(); a TesseraError becomes a one-line message, a non-zero
    status and no target left behind that could look up to date."""
    _preload()
    try:
        return work(target, source, env) or 0
    except (TesseraError, OSError) as err:
        # OSError: the machine refused (a full disk, an unwritable folder)
        if not isinstance(err, TesseraError):
            err = from_os_error(err, target[0])
            HOST_ERRORS.update(os.path.abspath(str(t)) for t in target)
        sys.stderr.write(f"tessera: error: {err}\n")
        for t in target:
            try:
                t.remove()
            except OSError:
                pass
        return 1


def _value(node):
    return json.loads(node.read())


def _json(node):
    return canon.read_json(str(node))


def _graph(node):
    return Graph.from_json(canon.read_json(str(node)))


# ---- tiling ---------------------------------------------------------------

def tile(target, source, env):
    return guarded(_tile, target, source, env)


def _tile(target, source, env):
    from tessera.pipeline import tiling

    # the layer's view, the target's numbers, the kernels' tiler section[, ram_budget.json]
    budget = _json(source[3]) if len(source) > 3 else None
    result, solve = tiling.tile(_value(source[0]), _value(source[1]), _value(source[2]), budget)
    canon.write_json(str(target[0]), result)
    canon.write_json(str(target[1]), solve)


def ram_budget(target, source, env):
    return guarded(_ram_budget, target, source, env)


def _ram_budget(target, source, env):
    from tessera.pipeline import budget

    chosen = budget.choose(_graph(source[0]), _value(source[1]), _value(source[2]), [_json(n) for n in source[3:]])
    canon.write_json(str(target[0]), chosen)


# ---- fusion ------------------------------------------------------------------

def tile_fused(target, source, env):
    return guarded(_tile_fused, target, source, env)


def _tile_fused(target, source, env):
    from tessera.pipeline import fusion

    budget = _json(source[4]) if len(source) > 4 else None
    canon.write_json(str(target[0]), fusion.tile_fused(*[_value(n) for n in source[:4]], budget))


def schedule(target, source, env):
    return guarded(_schedule, target, source, env)


def _schedule(target, source, env):
    from tessera.pipeline import fusion

    sched = fusion.schedule(_value(source[0]), _graph(source[1]), [_json(n) for n in source[2:]])
    canon.write_json(str(target[0]), sched)
    names = [os.path.basename(str(node))[:-len(".json")] for node in target[1:]]
    slices = fusion.slices(sched, names)     # a candidate layer's step, and whether it leads it
    for node, name in zip(target[1:], names):
        canon.write_json(str(node), slices[name])


# ---- memory plan ------------------------------------------------------------

def plan(target, source, env):
    return guarded(_plan, target, source, env)


def _plan(target, source, env):
    from tessera.pipeline import plan as planner

    the_plan, slices = planner.plan(_graph(source[0]), _value(source[1]), [_json(n) for n in source[2:]])
    canon.write_json(str(target[0]), the_plan)
    for node, slice_ in zip(target[1:], slices):     # one slice per layer, as declared
        canon.write_json(str(node), slice_)


# ---- code generation --------------------------------------------------------

def gen_layer(target, source, env):
    return guarded(_gen_layer, target, source, env)


def _gen_layer(target, source, env):
    from tessera.pipeline import codegen

    # view, tiling, plan slice, codegen target[, schedule slice[, fused tilings, views and slices]]
    rest = [_json(n) if str(n).endswith(".json") else _value(n) for n in source[5:]]
    mine = _json(source[4]) if len(source) > 4 else None
    text = codegen.layer_c(_value(source[0]), _json(source[1]), _json(source[2]), _value(source[3]), mine, rest,
                           weights_npz=env.get("WEIGHTS_NPZ"))
    canon.write_atomic(str(target[0]), text)


def gen_weights(target, source, env):
    return guarded(_gen_weights, target, source, env)


def _gen_weights(target, source, env):
    from tessera.pipeline import codegen

    # weights.npz is read, not a source: the view holds its arrays' digest
    canon.write_atomic(str(target[0]), codegen.weights_c(_value(source[0]), _value(source[1]), env["WEIGHTS_NPZ"]))


def gen_network(target, source, env):
    return guarded(_gen_network, target, source, env)


def _gen_network(target, source, env):
    from tessera.pipeline import codegen

    inputs = canon.load_npz(str(source[3])) if len(source) > 3 else None
    files = codegen.network_c(_graph(source[0]), _json(source[1]), _value(source[2]), inputs)
    for node in target:
        canon.write_atomic(str(node), files[os.path.basename(str(node))])


def gen_program(target, source, env):
    return guarded(_gen_program, target, source, env)


def _gen_program(target, source, env):
    from tessera.pipeline import program

    tilings = {t["layer"]: t for t in (_json(n) for n in source[4:])}
    c_text, data = program.program(_graph(source[0]), _json(source[1]), _json(source[2]), _value(source[3]), tilings)
    canon.write_atomic(str(target[0]), c_text)
    canon.write_json(str(target[1]), data)


def storage_image(target, source, env):
    return guarded(_storage_image, target, source, env)


def _storage_image(target, source, env):
    from tessera.pipeline import program

    data = program.image(_graph(source[0]), canon.load_npz(str(source[1])), _json(source[2]), _value(source[3]))
    canon.write_atomic(str(target[0]), data)


# ---- run and check ----------------------------------------------------------

def run(target, source, env):
    return guarded(_run, target, source, env)


def _run(target, source, env):
    from tessera import runners
    from tessera.errors import RunError

    log = str(target[0])
    try:
        text = runners.run(_value(source[1]), str(source[0]))
    except RunError as err:
        # keep what it printed for the user, under a name no step reads
        canon.write_atomic(log + ".failed", getattr(err, "output", "") or str(err))
        raise
    canon.write_atomic(log, text)
    if os.path.exists(log + ".failed"):
        os.remove(log + ".failed")     # an earlier run's: the tree is then a clean build's


def check(target, source, env):
    return guarded(_check, target, source, env)


def _check(target, source, env):
    from tessera.pipeline import check as checker

    # graph, golden, run.log, firmware, runner, schedule[, reference kind, its files]
    with open(str(source[2])) as f:
        run_text = f.read()
    ref = ({"kind": _value(source[6])["kind"], "dir": os.path.dirname(str(source[7]))} if len(source) > 6
           else None)
    verdict = checker.verdict(_graph(source[0]), canon.load_npz(str(source[1])), run_text, str(source[2]),
                              _json(source[5]), _value(source[4]), str(source[3]), ref)
    canon.write_json(str(target[0]), verdict)


def gate(target, source, env):
    return guarded(_gate, target, source, env)


def _gate(target, source, env):
    from tessera.pipeline import check as checker

    checker.gate(_json(source[0]), env.subst("$TESSERA_NET"), (source[0], source[1]))
    canon.write_atomic(str(target[0]), "pass\n")


# ---- report -----------------------------------------------------------------

def report(target, source, env):
    return guarded(_report, target, source, env)


def _report(target, source, env):
    from tessera.pipeline import report as reporter

    # meta, graph, weights, memplan, verdict, schedule, golden, the firmware and its map, then each
    # layer's tiling and solve side file, then the fused candidates' tilings
    with open(str(source[8])) as f:
        link_map = f.read()
    data, html = reporter.report(_value(source[0]), _graph(source[1]), canon.load_npz(str(source[2])),
                                 _json(source[3]), _json(source[4]), _json(source[5]), [_json(n) for n in source[9:]],
                                 (str(source[7]), link_map), canon.load_npz(str(source[6])))
    canon.write_json(str(target[0]), data)
    canon.write_atomic(str(target[1]), html)
    print(f"tessera: report {target[1]}")
