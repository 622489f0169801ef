"""SCons action functions: each reads its sources, calls the library, writes
its targets. They stay small and stable, since SCons signs an action by its
own bytecode; the library code they call is declared with Depends.

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

from tessera import canon
from tessera.errors import TesseraError
from tessera.ir import Graph, Layer, Requant, Tensor


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


def guarded(work, target, source, env):
    """Run work(); a TesseraError becomes a one-line message, a non-zero
    status and no target left behind that could look up to date."""
    _preload()
    try:
        return work(target, source, env) or 0
    except TesseraError as err:
        sys.stderr.write(f"tessera: error: {err}\n")
        for t in target:
            try:
                t.remove()
            except OSError:
                pass
        return 1


def _value(node):
    return json.loads(node.read())


def _layer_from_view(v):
    d = dict(v["layer"])
    if d.get("requant") is not None:
        d["requant"] = Requant(**d["requant"])
    layer = Layer(**d)
    graph = Graph(v["model"], "", {n: Tensor(**t) for n, t in v["tensors"].items()}, [layer], [], [])
    return layer, graph


# ---- tiling ---------------------------------------------------------------

def tile(target, source, env):
    return guarded(_tile, target, source, env)


# what the solver reports about its search rather than the tiling itself: it
# changes with the L1 size even when the chosen tile does not, so it goes to
# a side file only the report reads, and unchanged tilings stay byte-identical
SOLVE_FIELDS = ("l1_budget", "objective", "optimal")


# Solved tilings of this invocation, by the layer's view without its name:
# MobileNets repeat shapes, and the tiler's answer is a function of the view
# (its optimum is unique, ties broken by a fixed order), so a repeat takes
# the first solve's answer under its own name, the same bytes a solve gives.
_solved = {}


def _solve(layer, tgt):
    from tessera.tiler import solve_layer

    key = canon.dumps([{k: v for k, v in layer.items() if k != "name"}, tgt])
    if key not in _solved:
        _solved[key] = solve_layer(layer, tgt)
    return dict(_solved[key], layer=layer["name"])


def _tile(target, source, env):
    layer = _value(source[0])
    tgt = dict(_value(source[1]), kernels=_value(source[2]))   # target numbers, kernels' tiler section
    if len(source) > 3:
        # a ram_cap's choice of tile budget (ram_budget below)
        tgt["l1_budget"] = canon.read_json(str(source[3]))["l1_budget"]
    result = _solve(layer, tgt)
    canon.write_json(str(target[0]), {k: v for k, v in result.items() if k not in SOLVE_FIELDS})
    canon.write_json(str(target[1]), {k: result[k] for k in SOLVE_FIELDS + ("layer",)})


def ram_budget(target, source, env):
    return guarded(_ram_budget, target, source, env)


def _ram_budget(target, source, env):
    from tessera import rambudget

    graph = Graph.from_json(canon.read_json(str(source[0])))
    v = _value(source[1])
    tgt = dict(v["tiler"], kernels=_value(source[2]))
    schedule = None
    if v.get("fusion"):
        # with fusion, each rung is judged with the steps the build will run
        # there: the fused tilings and the selector's choice at that budget
        schedule = _rung_schedule(graph, v["fusion"], [canon.read_json(str(n)) for n in source[3:]])
    canon.write_json(str(target[0]), rambudget.choose(graph, v["views"], tgt, v["memory"], v["ram_cap"], _solve,
                                                      v["where"], schedule))


def _rung_schedule(graph, fz, reports):
    """schedule(tilings, tgt) for rambudget.choose: what tile_fused and
    schedule write at that budget (the same solvers, the same JSON)."""
    from tessera import fusion
    from tessera.fusion import decide

    pairs = {c["group"]: json.loads(canon.dumps(fusion.pair_view(graph, *c["layers"])))
             for c in fz["decide"]["candidates"] if c["ok"]}

    def schedule(tilings, tgt):
        ftgt = dict(tgt, fused_scheme=fz["scheme"])
        fused = {g: (pv, json.loads(canon.dumps(fusion.solve_dw_pw(pv, ftgt)))) for g, pv in sorted(pairs.items())}
        written = {n: json.loads(canon.dumps({k: x for k, x in t.items() if k not in SOLVE_FIELDS}))
                   for n, t in tilings.items()}
        sched = json.loads(canon.dumps(decide.schedule(graph, written, fused, fz["decide"], reports)))
        return sched, {g: ft for g, (_, ft) in fused.items()}
    return schedule


# ---- fusion ------------------------------------------------------------------

def tile_fused(target, source, env):
    return guarded(_tile_fused, target, source, env)


def _tile_fused(target, source, env):
    from tessera.fusion import solve_dw_pw

    pair = _value(source[0])
    tgt = dict(_value(source[1]), kernels=_value(source[2]), fused_scheme=_value(source[3]))
    if len(source) > 4:
        # a ram_cap's choice of tile budget (ram_budget below), as for a layer
        tgt["l1_budget"] = canon.read_json(str(source[4]))["l1_budget"]
    canon.write_json(str(target[0]), solve_dw_pw(pair, tgt))


def schedule(target, source, env):
    return guarded(_schedule, target, source, env)


def _schedule(target, source, env):
    from tessera import fusion

    v = _value(source[0])
    graph = Graph.from_json(canon.read_json(str(source[1])))
    tilings, fused, reports = {}, {}, []
    for node in source[2:]:
        t = canon.read_json(str(node))
        if "verdict" in t:
            reports.append(t)        # fusion_cost=measured: the variants' reports
        elif "group" in t:
            fused[t["group"]] = (fusion.pair_view(graph, *t["layers"]), t)
        else:
            tilings[t["layer"]] = t
    from tessera.fusion import decide

    sched = decide.schedule(graph, tilings, fused, v, reports)
    canon.write_json(str(target[0]), sched)
    # a candidate layer's slice: the step it runs in, and whether it leads it
    where = {name: s for s in sched["steps"] for name in s["layers"]}
    for node in target[1:]:
        name = os.path.basename(str(node))[:-len(".json")]
        s = where[name]
        canon.write_json(str(node), {"layer": name, "step": s["step"], "kind": s["kind"],
                                     "first": s["layers"][0] == name})


# ---- memory plan ------------------------------------------------------------

def plan(target, source, env):
    return guarded(_plan, target, source, env)


def _plan(target, source, env):
    from tessera import memplan

    graph = Graph.from_json(canon.read_json(str(source[0])))
    memory = _value(source[1])
    budget = memory["levels"][memory["place"]["tiles"]]["usable"]
    tilings, fused_tilings, sched, chosen = {}, {}, None, None
    for node in source[2:]:
        t = canon.read_json(str(node))
        if "ram_cap" in t:
            chosen = t          # ram_budget.json: the layers a cap runs in place
        elif "steps" in t:
            sched = t
        elif "group" in t:
            fused_tilings[t["group"]] = t
        else:
            tilings[t["layer"]] = dict(t, l1_budget=budget)
    from tessera import rambudget

    # a fused step's bands (either kind) let its output overlap its input
    # (memplan, checked by the replay, weight stream included); its layers
    # run fused, not in place (rambudget.with_fused, as the budget step did)
    fused, memory = rambudget.with_fused(memory, sched, fused_tilings)
    # layers in place (tessera.direct): a flat tile level takes them where
    # they lower total RAM; a faster one where ram_budget needed them
    policy = memory.get("direct", {}).get("policy", "none")
    eligible = memory.get("direct", {}).get("eligible", {})

    def plan_with(direct):
        return memplan.plan(graph, tilings, memory, memory["align"], memory["fit_hint"], fused, direct)
    if policy == "flat":
        the_plan = rambudget.plan_flat(graph, tilings, memory, plan_with, memory.get("ram_cap"))
    else:
        mine = (chosen or {}).get("direct", [])
        the_plan = plan_with({n: eligible[n] for n in mine if n in eligible})
    if memory.get("ram_cap") is not None:
        # ram_budget judged this very plan; a difference is a bug there
        ram = rambudget.total_ram(memplan.memory_report(the_plan))
        if ram > memory["ram_cap"] or ram != chosen["ram"]:
            raise TesseraError(memory.get("where", "ram_cap"),
                               f"the firmware needs {ram} bytes of RAM where the tile budget step counted "
                               f"{chosen['ram']} (ram_cap {memory['ram_cap']})",
                               "a bug: the budget step must plan as the build does (tessera.rambudget)")
    canon.write_json(str(target[0]), the_plan)
    # one slice per layer, in the order the targets were declared
    for layer, node in zip(graph.layers, target[1:]):
        canon.write_json(str(node), memplan.layer_slice(the_plan, layer))


# ---- code generation --------------------------------------------------------

def gen_layer(target, source, env):
    return guarded(_gen_layer, target, source, env)


def _gen_layer(target, source, env):
    from tessera.codegen import layer as layer_c

    v = _value(source[0])
    layer, graph = _layer_from_view(v)
    tiling = canon.read_json(str(source[1]))
    slice_ = canon.read_json(str(source[2]))
    tgt = _value(source[3])
    if len(source) > 4:
        # a fusion candidate's layer: a fused step, its empty half, or itself
        from tessera.codegen import fused

        mine = canon.read_json(str(source[4]))
        group = mine if mine["kind"] != "layer" else None
        if group is not None and mine["first"]:
            # the candidates' fused tilings, then each other layer's view and plan slice
            rest = [canon.read_json(str(n)) if str(n).endswith(".json") else _value(n) for n in source[5:]]
            ft = next(r for r in rest if r.get("group") == mine["step"])
            # a layer view holds the layer (a dict), a plan slice its name
            plans = {r["layer"]: r for r in rest if "group" not in r and isinstance(r.get("layer"), str)}
            parts = {}
            for r in rest:
                if isinstance(r.get("layer"), dict):
                    lay, g = _layer_from_view(r)
                    parts[lay.name] = (lay, g)
            names = ft["layers"]
            members = [layer] + [parts[n][0] for n in names[1:]]
            tensors = dict(graph.tensors)
            for n in names[1:]:
                tensors.update(parts[n][1].tensors)
            every = Graph(v["model"], "", tensors, members, [], [])
            second, second_slice = members[1], plans[names[1]]
            if ft["kind"] == "add":
                # an add epilogue: the layer's own loop on the epilogue's tiling
                text = layer_c.generate(layer, every, ft["tiling"], slice_, tgt, v["model"],
                                        epilogue=(second, second_slice))
            elif ft["kind"] in ("dw_pw_add", "pw_dw_add"):
                # a DW->PW or PW->DW step with its add epilogue
                text = fused.generate(layer, second, every, ft, slice_, second_slice, tgt, v["model"],
                                      epilogue=(members[2], plans[names[2]]))
            else:
                text = fused.generate(layer, second, every, ft, slice_, second_slice, tgt, v["model"])
            canon.write_atomic(str(target[0]), text)
            return
        if group is not None:
            canon.write_atomic(str(target[0]), fused.stub(layer, group["step"], v["model"], tgt["prefix"]))
            return
    if "storage" in tgt:
        tgt = dict(tgt, layer_index=v["index"])    # its tiles in the out-of-core program
    canon.write_atomic(str(target[0]), layer_c.generate(layer, graph, tiling, slice_, tgt, v["model"]))


def gen_weights(target, source, env):
    return guarded(_gen_weights, target, source, env)


def _gen_weights(target, source, env):
    from tessera.codegen import weights as weights_c

    v = _value(source[0])
    layer, graph = _layer_from_view(v)
    tgt = _value(source[1])
    arrays = canon.load_npz(env["WEIGHTS_NPZ"], [n for n in (layer.weights, layer.bias) if n])
    canon.write_atomic(str(target[0]), weights_c.generate(layer, graph, arrays, tgt))


def gen_network(target, source, env):
    return guarded(_gen_network, target, source, env)


def _gen_network(target, source, env):
    from tessera.codegen import network

    graph = Graph.from_json(canon.read_json(str(source[0])))
    the_plan = canon.read_json(str(source[1]))
    tgt = _value(source[2])
    v = network.view(graph, the_plan, tgt)
    outputs = {"network.h": network.header(v), "network.c": network.source(v),
               "harness.c": network.harness(v)}
    if len(source) > 3:
        outputs["input.c"] = network.golden_input(v, canon.load_npz(str(source[3])))
    for node in target:
        canon.write_atomic(str(node), outputs[os.path.basename(str(node))])


def gen_program(target, source, env):
    return guarded(_gen_program, target, source, env)


def _gen_program(target, source, env):
    """src/program.c and program.json: the out-of-core program the firmware
    executes (tessera.storage.firmware), or why it runs in order."""
    from tessera import ir
    from tessera.cost import api
    from tessera.storage import firmware

    graph = Graph.from_json(canon.read_json(str(source[0])))
    the_plan = canon.read_json(str(source[1]))
    sched = canon.read_json(str(source[2]))
    v = _value(source[3])
    tilings = {}
    for node in source[4:]:
        t = canon.read_json(str(node))
        tilings[t["layer"]] = t
    compute, modelled = [], 0
    for layer in graph.layers:
        # the cost model's count when the target has coefficients, else 2
        # cycles per MAC (an assumption; the report replays the program with
        # the measured counts)
        n = api.estimate_layer(v["cost_target"], layer, graph, tilings[layer.name])
        modelled += n is not None
        n = 2 * ir.macs(layer, graph) if n is None else n
        compute.append(int(round(n * 1e9 / v["clock_hz"])))
    res = firmware.build(graph, the_plan, tilings, sched["steps"], v["storage"], v["pools"], compute)
    canon.write_atomic(str(target[0]), firmware.c_source(v["prefix"], v["act_level"], res, len(graph.layers),
                                                                 v["section"]))
    keep = {k: res[k] for k in ("why", "candidate", "estimate_ns", "in_order_ns", "pools", "phases", "problem",
                                "program", "io") if res.get(k) is not None}
    keep["compute"] = f"cost model for {modelled} of {len(compute)} layers, else 2 cycles per MAC"
    keep["totals"] = firmware.totals(res)
    canon.write_json(str(target[1]), keep)


def storage_image(target, source, env):
    return guarded(_storage_image, target, source, env)


def _storage_image(target, source, env):
    from tessera.codegen import image

    graph = Graph.from_json(canon.read_json(str(source[0])))
    arrays = canon.load_npz(str(source[1]))
    the_plan = canon.read_json(str(source[2]))
    image.write(str(target[0]), graph, arrays, the_plan, _value(source[3]))


# ---- run and check ----------------------------------------------------------

def run(target, source, env):
    return guarded(_run, target, source, env)


def _run(target, source, env):
    from tessera import runners
    from tessera.errors import RunError

    runner = _value(source[1])
    log = str(target[0])
    try:
        text = runners.run(runner, str(source[0]))
    except RunError as err:
        # keep what it printed for the user, under a name no step reads
        canon.write_atomic(log + ".failed", getattr(err, "output", "") or str(err))
        raise
    canon.write_atomic(log, text)


def check(target, source, env):
    return guarded(_check, target, source, env)


def _check(target, source, env):
    from tessera import check as checker, runlog, runners
    from tessera.errors import RunError

    graph = Graph.from_json(canon.read_json(str(source[0])))
    golden = canon.load_npz(str(source[1]))
    with open(str(source[2])) as f:
        run_text = f.read()
    firmware, runner = str(source[3]), _value(source[4])
    sched = canon.read_json(str(source[5]))
    # the first layer of a fused step has no output outside L1: the step's
    # output (its last layer's) is what is checked
    inside = {n: s["step"] for s in sched["steps"] if s["kind"] != "layer" for n in s["layers"][:-1]}
    result = runlog.parse(run_text, str(source[2]))
    verdict = checker.compare(graph, golden, result, inside)
    bad = verdict.get("first_mismatch")
    dumps = {}
    if bad is not None:
        # rerun, dumping the culprit layer's whole output, to name the element
        dump = runlog.parse(runners.run(runner, firmware, [f"dump={bad['index']}"]), "dump run")
        dumps = dump["dumps"]
        verdict = checker.locate(verdict, graph, golden, dumps.get(bad["index"]))
    if len(source) > 6:
        # the peer toolchain's expected outputs: its kind, then its files
        from tessera import reference
        ref = reference.load({"kind": _value(source[6])["kind"], "dir": os.path.dirname(str(source[7]))})
        against = checker.compare_reference(graph, ref, result, inside)
        i = checker.first_reference_mismatch(graph, against)
        if i is not None:
            if i not in dumps:
                dumps = runlog.parse(runners.run(runner, firmware, [f"dump={i}"]), "dump run")["dumps"]
            against = checker.locate_reference(against, graph, ref, i, dumps.get(i))
        verdict = checker.with_reference(verdict, against)
    verdict["counts"] = [layer["count"] for layer in result["layers"]]
    verdict["dma"] = [layer["dma"] for layer in result["layers"]]
    verdict["total_count"] = result["total"]
    if any("io" in layer for layer in result["layers"]):
        verdict["io"] = [layer.get("io") for layer in result["layers"]]
    if any("cores" in layer for layer in result["layers"]):
        verdict["cores"] = [layer["cores"] for layer in result["layers"]]
        verdict["dma_counts"] = [layer["dma_count"] for layer in result["layers"]]
        verdict["core_overlaps"] = result.get("core_overlaps", 0)
    # a failing verdict is a result, not a broken step: the report shows it,
    # and the `passed` gate after the report fails the build
    canon.write_json(str(target[0]), verdict)


def gate(target, source, env):
    return guarded(_gate, target, source, env)


def _gate(target, source, env):
    from tessera import check as checker
    from tessera.errors import RunError

    verdict = canon.read_json(str(source[0]))
    if verdict["verdict"] != "pass":
        raise RunError(None, checker.describe(verdict, env.subst("$TESSERA_NET")),
                       f"details in {source[0]} and {source[1]}")
    canon.write_atomic(str(target[0]), "pass\n")


# ---- report -----------------------------------------------------------------

def report(target, source, env):
    return guarded(_report, target, source, env)


def _report(target, source, env):
    from tessera.report import build

    meta = _value(source[0])
    graph = Graph.from_json(canon.read_json(str(source[1])))
    weights = canon.load_npz(str(source[2]))
    the_plan = canon.read_json(str(source[3]))
    verdict = canon.read_json(str(source[4]))
    sched = canon.read_json(str(source[5]))
    tilings = []
    for node in source[6:]:   # tiling, solve side file, tiling, ...
        data = canon.read_json(str(node))
        if "tile" in data:
            tilings.append(data)
        else:
            tilings[-1].update(data)
    report_data = build.report(meta, graph, weights, the_plan, verdict, tilings)
    # the fusion selector's decision: its groups and the activation bytes
    # moved with and without them (schedule.json has every candidate's reason)
    report_data["fusion"] = {"policy": sched["policy"], "totals": sched["totals"],
                             "groups": [{k: s[k] for k in ("step", "layers", "activation_transfer_bytes", "reason")}
                                        for s in sched["steps"] if s["kind"] != "layer"]}
    if meta.get("storage"):
        from tessera import ooc
        report_data["out_of_core"] = ooc.report(graph, the_plan, tilings, verdict, meta)
    canon.write_json(str(target[0]), report_data)
    build.render(report_data)
    if len(target) > 1:
        from tessera.report.html import render_html
        from tessera.report.memmap import memory_map

        canon.write_atomic(str(target[1]), render_html(report_data, memory_map(graph, the_plan, tilings)))
        print(f"tessera: report {target[1]}")
