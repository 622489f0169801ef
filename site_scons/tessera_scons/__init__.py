"""SCons glue of tessera: a quantized network as build steps.

    env.Tool('tessera')                  # site_scons/site_tools/tessera.py
    net = env.TesseraNetwork(target='host', model='tiny', run=True)

From a firmware's own SConstruct (README, "Embedding in your firmware"):

    env.Tool('tessera', toolpath=['<tessera>/site_scons/site_tools'])
    net = env.TesseraNetwork(target='stm32h7', model='models/kws.yaml', out='build/tessera')
    env.Append(CPPPATH=net['include'], LIBPATH=[net['ld_dir']])
    env.Program('app.elf', objects, LIBS=net['libs'])

The library (site_scons/tessera/) does the work; this glue only declares
steps, their exact inputs (Value nodes holding canonical JSON: the
projections in tessera.views), and the library code each step runs (SCons
does not see code a Python action calls).

Steps, per network (under <out>/<target>/<model>/):
    tiling/<layer>.json   one CP-SAT solve per layer
    tiling/<dw>+<pw>.fused.json   one CP-SAT solve per fusion candidate (fusion != none; a
                                  prefix and digest where the name is too long for a file)
    schedule.json         the fusion selector's steps (a layer or a fused group), with reasons
    memplan.json, plan/<layer>.json
    src/<layer>.c, src/<layer>_w.c, src/network.[ch], src/harness.c, src/input.c
    obj/..., obj/libtessera_<prefix>.a, libtessera_kernels.a, libtessera_hal.a
                        compiled with the target's toolchain
    export/             the network for another build system (tessera_scons/export.py)
    firmware            the test firmware (run=True only)
    run.log             the firmware run on the target's runner
    verdict.json        every layer checked against golden.npz
    report.json         the summary, tiling, memory plan and run
"""

import os
import sys

from SCons.Script import Action, Exit

from tessera import canon, config, fusion, memplan, prepare, views
from tessera import overlap as overlap_mod
from tessera.codegen import linker
from tessera.errors import FitError, TesseraError
from tessera.cname import c_name
from tessera.ir import Graph

from . import export, steps
from .kernels import objects as kernel_objects
from .kernels import plan as kernel_plan
from .platforms import platform as platform_module


def _code(*packages):
    """The code a step runs: the tessera packages it uses and steps.py
    itself (an action's signature covers only its two-line wrapper, so an
    edit to the work function it calls would otherwise not rerun it)."""
    return canon.source_files(*packages) + [os.path.abspath(steps.__file__)]


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
KERNELS = os.path.join(ROOT, "kernels")
FUSION_POLICIES = fusion.POLICIES
FUSION_COSTS = fusion.COSTS


def fail(err, outdir=None, made=None):
    """Report a user mistake in one line and stop, without a traceback.
    A network that fails to build keeps no sign of an earlier success, and
    leaves no empty folder (`made`: the one SConstruct made for it). A
    failure while a network's steps are declared (a platform's toolchain
    check) is that network's."""
    if outdir is None and _networks:
        outdir = _networks[-1]
    if outdir is not None:
        retract(outdir)
    for path in (made, outdir):
        if path is not None:
            _remove_empty(path)
    sys.stderr.write(f"tessera: error: {err}\n")
    Exit(2)


# What a network's build leaves to say it passed, and what that claim rests
# on: removed when a later build of it fails, so no stale "pass" survives
# (SCons keeps a failed build's old targets in place).
SUCCESS_FILES = (".passed", "report.json", "report.html", "verdict.json", "run.log")
_networks = []   # outdirs declared in this invocation


def retract(outdir):
    for name in SUCCESS_FILES + tuple(n for n in _listdir(outdir) if n.startswith("firmware")):
        path = os.path.join(outdir, name)
        if os.path.isfile(path):
            os.remove(path)


def _remove_empty(netdir):
    """Remove <out>/<target>/<model> and <out>/<target> when empty."""
    for path in (netdir, os.path.dirname(netdir)):
        try:
            os.rmdir(path)
        except OSError:
            return


def _stem(value):
    return os.path.basename(str(value)).replace(".yaml", "")


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _cost_meta(tcfg, tname):
    """The cost model's inputs to the report: the coefficients (their
    content, so that a refit rebuilds the report) and the activation DMA
    engine's dimensions."""
    from tessera import views
    from tessera.cost import model as cost_model

    file, _ = cost_model.source(ROOT, tcfg)
    engine = views.dma_engine(tcfg, tcfg["place"]["activations"], tcfg["place"]["tiles"])
    return {"file": os.path.relpath(file, ROOT),
            "coefficients": cost_model.for_target(cost_model.load(file), tcfg),
            "dims": tcfg["dma"][engine]["dims"] if engine is not None else 3, "cores": tcfg["cores"]}


DEFAULT_FUSION = {"fusion": "min_latency", "fusion_cost": "model"}


def _fusion_defaults(tcfg, mcfg):
    """fusion and fusion_cost: the command line's (already in mcfg), else
    the model YAML's, else the target YAML's, else min_latency with the
    cost model (never slower than none: a group is fused only when its
    estimate beats its layers apart; without coefficients nothing is)."""
    return {k: mcfg.get(k) or tcfg.get(k) or v for k, v in DEFAULT_FUSION.items()}


def _fusion_cost(env, tcfg, mcfg, network, outdir):
    """What min_latency's selector compares: the cost model's coefficients
    for the target (fusion_cost=model), or the reports of the network built
    and run with fusion=none and with every feasible pair of each kind fused
    (measured; their report nodes under "verdicts", which the selector then
    reads)."""
    meta = _cost_meta(tcfg, tcfg["name"])
    cost = {"source": mcfg["fusion_cost"], "kernels": tcfg["kernels"], "target": tcfg["name"],
            "file": meta["file"], "cores": meta["cores"], "dims": meta["dims"], "unit": tcfg["runner"]["counts"]}
    if cost["source"] == "model":
        cost["coefficients"] = meta["coefficients"]
        return cost
    # measured: the same network twice more, in variants/, as ordinary
    # (cached) builds of this SConstruct; their per-layer counts are the costs
    verdicts = []
    for variant in ("none",) + fusion.VARIANTS:
        sub = os.path.join(outdir, "variants", variant)
        r = _declare(env, tcfg, dict(mcfg, fusion=variant), *network, sub, True)
        verdicts.append(r["report"][0])
    cost["verdicts"] = verdicts
    return cost


def _forget_damaged(nodes):
    """Remove generated files whose bytes are no longer what the build wrote
    (truncated, edited), so SCons makes them again: SCons itself only asks
    whether a target exists. A stat per file; the hash only when the size or
    the time differs from the signature database's record."""
    for node in nodes:
        node = node.disambiguate()   # a target named by a string is an Entry until then
        path = node.get_abspath()
        try:
            st = os.stat(path)
        except OSError:
            continue
        stored = node.get_stored_info()
        if stored is None:
            continue
        info = stored.ninfo
        size, stamp = getattr(info, "size", None), getattr(info, "timestamp", None)
        if size is None or (st.st_size == size and int(st.st_mtime) == stamp):
            continue
        if node.get_content_hash() != getattr(info, "csig", None):
            os.remove(path)


def _retract_failed():
    """At exit: every network with a failed step (other than its gate, whose
    failure the report itself shows) loses its success files."""
    from SCons.Script import GetBuildFailures

    for failure in GetBuildFailures():
        node = os.path.abspath(str(failure.node))
        for outdir in _networks:
            if node.startswith(outdir + os.sep) and os.path.basename(node) != ".passed":
                retract(outdir)


def _log(message):
    print(f"tessera: {message}", flush=True)


def _value(env, obj, name):
    # `name` documents the value here only: SCons (4.x) records a Value
    # dependency by its text, and --debug=explain prints that text and
    # matches it against a Value node made without a name, so a named
    # Value would show as replaced on every rebuild even when unchanged
    return env.Value(canon.dumps(obj))


def _fields(obj):
    """dataclasses.asdict without its deep copy of every list (a layer's
    tables and per-channel lists; every invocation, the no-op too, makes a
    view of each layer): the IR nests dataclasses only as fields."""
    from dataclasses import fields, is_dataclass
    out = {}
    for f in fields(obj):
        v = getattr(obj, f.name)
        out[f.name] = _fields(v) if is_dataclass(v) else v
    return out


def _layer_view(graph, layer):
    """Everything about one layer its code generation reads."""
    names = list(layer.inputs) + [layer.output]
    # index: the layer's place in the network (the out-of-core program names tiles by it)
    return {"model": graph.name, "layer": _fields(layer), "index": graph.layers.index(layer),
            "tensors": {n: _fields(graph.tensor(n)) for n in names}}


def _codegen_target(target, model_name):
    place = target["place"]
    cross = target["toolchain"]["kind"] != "host"
    act = views.dma_engine(target, place["activations"], place["tiles"])
    staging = views.weight_staging(target)
    # weights reach the tiles directly, or through a staging level (GAP8's L2)
    wgt = views.dma_engine(target, staging or place["weights"], place["tiles"])
    where = f"{target['path']}: dma"
    for role in ("activations", "weights"):
        if place[role] == place["tiles"]:
            # a network's tiles are copied between two levels: the same
            # level twice is a wrong place.*, not a missing engine
            raise TesseraError(f"{target['path']}: place.tiles", f"{place['tiles']!r} is also place.{role}",
                               f"tiles go to a faster level than {role}: place them in another level "
                               f"({', '.join(n for n in target['memory'] if n != place['tiles'])})")
    if act is None:
        raise TesseraError(where, f"no DMA engine between {place['activations']} and {place['tiles']}",
                           "declare one in the target's dma list")
    if wgt is None:
        raise TesseraError(where, f"no DMA engine between {place['weights']} and {place['tiles']}",
                           "declare one in the target's dma list")
    cg = {
        "prefix": c_name(model_name),
        "kernels": target["kernels"],
        "cores": target["cores"],
        "act_engine": act, "w_engine": wgt, "n_engines": len(target["dma"]),
        "act_level": place["activations"], "w_level": place["weights"], "tile_level": place["tiles"],
        # cross targets place each level's data in its own section (see the
        # platform's linker script); the host has one flat memory
        "sections": linker.sections(place) if cross else {"weights": "", "activations": "", "tiles": ""},
    }
    if staging is not None:
        cg["w_stage"] = {"level": staging, "engine": views.dma_engine(target, place["weights"], staging)}
    spill = views.activation_spill(target)
    if spill is not None:
        # where activations go when the activation level cannot hold them all
        cg["spill"] = {"level": spill, "engine": views.dma_engine(target, spill, place["activations"]),
                       "section": f".bss.tsr.{spill}" if cross else ""}
        if target["memory"][spill]["kind"] == "storage":
            # not memory: a window the HAL reads as offsets on the card
            cg["spill"].update(section="", window=target["memory"][spill]["address"])
    return cg


_targets_read = []


def _bundled_targets():
    """[(name, loaded target)] of the bundled targets that load, read once
    per invocation (each network's hint is made twice, every YAML costs)."""
    if not _targets_read:
        for name in config.available("target", ROOT):
            try:
                t = config.load_target(os.path.join(ROOT, "targets", name + ".yaml"), name)
            except TesseraError:
                continue
            _targets_read.append((name, t))
    return _targets_read


def tview_numbers(tview):
    return {k: v for k, v in tview.items() if k != "kernels"}


def _ram_cap(env, tcfg, mcfg):
    """ram_cap= on the command line, else the model's ram_cap:, else the
    target's; None without one."""
    given = str(env.get("ram_cap", "") or "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise TesseraError(f"ram_cap={given}", "not a positive number of bytes", "e.g. ram_cap=237773")
        return int(given)
    return mcfg.get("ram_cap") or tcfg.get("ram_cap")


def _fit_hint(target):
    """What to do when the weights do not fit: how much fits this target,
    and which bundled targets have more room for weights."""
    level = target["place"]["weights"]
    usable = config.usable_bytes(target["memory"][level])
    others = []
    for name, t in _bundled_targets():
        if name == target["name"]:
            continue
        w = t["memory"][t["place"]["weights"]]
        if config.usable_bytes(w) > usable:
            # external memory first: that is what a big model wants
            others.append((w["kind"] != "external", -config.usable_bytes(w), name, t["place"]["weights"], w["kind"]))
    room = f"{usable / 1e6:.2f} MB" if usable >= 100_000 else f"{usable} bytes"
    hint = (f"at most {room} of weights fit {target['name']}'s {level}, a model of about "
            f"{usable / 1e6:.1f} M int8 parameters" if usable >= 100_000 else
            f"at most {room} of weights fit {target['name']}'s {level}, {usable} int8 parameters")
    if others:
        hint += "; or use a target with more room for weights: " + ", ".join(
            f"{n} ({lvl}: {-b / 1e6:.1f} MB {kind})" for _, b, n, lvl, kind in sorted(others))
    return hint


def TesseraNetwork(env, target, model, out=None, run=False, fusion=None, fusion_cost=None):
    """Declare the steps that build (target, model) into
    <out>/<target>/<model>/: the network as a library, its export/ and,
    with run=True, the test firmware, its run, the check and the report.
    `target`/`model` are names bundled with tessera or YAML paths (relative
    ones to the calling SConscript's directory); `out` defaults to
    $TESSERA_OUT, else `generated/` under the top directory. Nothing here
    reads tessera's own SConstruct variables, so a firmware's SConstruct can
    call it (see README, "Embedding in your firmware").

    Returns a dict: library (the network's static library node), libs (it,
    the kernels and the HAL, in link order), include (directories with
    "<prefix>/network.h" and the kernel headers), ld_dir and fragment (the
    linker-script fragment to INCLUDE), export (export/ nodes), prefix,
    outdir, sources, network_h, tilings, memplan, schedule; with run=True also
    firmware, run, verdict, report, passed. `fusion` (none | min_latency |
    min_transfer | min_memory) and `fusion_cost` (model | measured) override the model
    YAML's."""
    out = os.path.abspath(out or env.get("TESSERA_OUT") or env.Dir("#generated").abspath)
    outdir = None
    made = os.path.join(out, _stem(target), _stem(model))   # as SConstruct names it
    try:
        tname, tpath = config.resolve("target", target, ROOT)
        mname, mpath = config.resolve("model", model, ROOT)
        # known before the files are read: a broken YAML retracts an
        # earlier build's success too
        outdir = os.path.join(out, tname, mname)
        tcfg = config.load_target(tpath, tname)
        mcfg = config.load_model(mpath, mname)
        if fusion is not None:
            if fusion not in FUSION_POLICIES:
                raise TesseraError(f"fusion={fusion}", "unknown fusion policy",
                                   f"choose one of: {', '.join(FUSION_POLICIES)}")
            mcfg = dict(mcfg, fusion=fusion)
        if fusion_cost is not None:
            if fusion_cost not in FUSION_COSTS:
                raise TesseraError(f"fusion_cost={fusion_cost}", "unknown fusion cost source",
                                   f"choose one of: {', '.join(FUSION_COSTS)}")
            mcfg = dict(mcfg, fusion_cost=fusion_cost)
        mcfg = dict(mcfg, **_fusion_defaults(tcfg, mcfg))
        # generated models are keyed by their parameters, so a cache may be
        # shared between output directories (the tests share one)
        model_cache = (os.environ.get("TESSERA_MODEL_CACHE") or env.get("TESSERA_MODEL_CACHE")
                       or os.path.join(out, ".models"))
        paths = prepare.prepare(mcfg, outdir, model_cache, log=_log)
        graph = Graph.from_json(canon.read_json(paths["graph"]))
        library = views.kernel_library(tcfg["kernels"])
        cg_target = _codegen_target(tcfg, mname)
        storage = views.storage_view(tcfg)
        if storage is not None:
            # the layers whose constants live on the card (known from their
            # sizes alone): their weight files are empty, storage.bin has them
            cg_target["storage"] = dict(storage, layers=sorted(
                memplan.storage_weights(graph, views.memory_target(tcfg))))
        plat = platform_module(tcfg["platform"], tpath)
        if getattr(plat, "COUNTS_PER_CORE", None):
            cg_target["core_counts"] = plat.COUNTS_PER_CORE   # "always" or "on request"
        # known before any tiling: stop at once rather than after the solves
        memplan.check_weights(graph, views.memory_target(tcfg), _fit_hint(tcfg))
    except FitError as err:
        fail(f"{mname} on {tname}: {err}", outdir, made)
    except TesseraError as err:
        fail(err, outdir, made)
    _networks.append(outdir)
    return _declare(env, tcfg, mcfg, graph, paths, library, cg_target, plat, outdir, run)


def _tile_cost(tcfg):
    from tessera import cost

    coefs = cost.coefficients(tcfg)
    if coefs is None:
        fail(TesseraError("tile_cost=model", f"no cost model coefficients for {tcfg['kernels']} on {tcfg['name']}",
                          f"build with tile_cost=library, or fit them with tools/fit_cost_model.py "
                          f"{tcfg['name']} (a target whose runner counts QEMU instructions or GVSoC cycles)"))
    return {"coefficients": coefs, "dims": cost.api._dims(tcfg)}


def _declare(env, tcfg, mcfg, graph, paths, library, cg_target, plat, outdir, run=True):
    tname, mname = tcfg["name"], mcfg["name"]
    d = lambda *p: os.path.join(outdir, *p)  # noqa: E731
    env = env.Clone(TESSERA_NET=f"{mname} on {tname}")

    # ---- tiling: one solve per layer, inputs are its projections only
    tview = views.tiler_target(tcfg, library)
    # the kernel library's tiler section apart from the target's few
    # numbers, so that --debug=explain shows a changed budget as a short
    # line: `{"buffering":2,"cores":1,"l1_budget":4096}' is a new dependency
    tnums = {k: v for k, v in tview.items() if k != "kernels"}
    if env.get("tile_cost", "library") == "model":     # the cost model picks the tiles (tiler/costed.py)
        tnums["cost"] = _tile_cost(tcfg)
    tiler_target = _value(env, tnums, f"tiler target of {tname}")
    tiler_kernels = _value(env, tview["kernels"], f"tiler section of kernels {tcfg['kernels']}")
    tiler_code = _code("tiler")
    tilings, solves = [], []
    # overlap=0: tensor-level planning only (whole tensors never share bytes)
    overlap_on = str(env.get("overlap", "1")) not in ("0", "no", "false")
    # with overlap, the layers at the memory peak are cut in row bands
    rows = set(overlap_mod.row_band_layers(graph)) if overlap_on else set()
    # layers touching a tensor that will live on a storage level prefer row bands
    swapped = memplan.predict_swapped(graph, views.memory_target(tcfg))
    # a layer writing such a tensor, its weights not streamed from storage
    # (their stream walks the channel tiles once), may gather its output in
    # row bands of every channel and write each once (a storage-level tile)
    streamed = memplan.storage_weights(graph, views.memory_target(tcfg)) if swapped else {}
    layer_views = {}
    for layer in graph.layers:
        view = views.tiler_layer(layer, graph)
        if layer.name in rows or (swapped & set(layer.inputs + [layer.output]) and not view.get("whole")):
            view["rows"] = 1
        if layer.output in swapped and layer.name not in streamed and not view.get("whole"):
            view["storage_out"] = 1
        layer_views[layer.name] = view

    # ---- memory plan's view of the target
    memory = views.memory_target(tcfg)
    memory["align"] = library["tiler"].get("buffer_align", 4)
    memory["fit_hint"] = _fit_hint(tcfg)
    memory["overlap"] = overlap_on
    # layers run in place (tessera.direct): the target's policy, direct=0 off
    policy = tcfg.get("direct", "none")
    # the loop orders tessera.direct models are this checkout's kernels', not
    # an upstream checkout's (cmsis_nn=<path>): then every layer is tiled
    upstream = library.get("build", {}).get("upstream")
    if upstream and env.get(upstream["variable"]):
        policy = "none"
    if (policy != "none" and str(env.get("direct", "1")) not in ("0", "no", "false")
            and not any(k in memory for k in ("staging", "spill", "storage"))):
        from tessera import direct as direct_mod
        # a layer fits in place when its kernel scratch fits the tile level
        room = memory["levels"][memory["place"]["tiles"]]["usable"]
        memory["direct"] = {"policy": policy, "eligible": {
            n: k for n, k in direct_mod.eligible(graph, tcfg["kernels"], rows).items()
            if direct_mod.scratch_bytes(graph.layer(n), graph, k) <= room},
            # what the cost model reads to price the options (rambudget.plan_flat;
            # the coefficients' content, so that a refit replans)
            "cost": {k: tcfg[k] for k in ("name", "kernels", "cores", "place", "dma", "platform", "toolchain",
                                          "runner", "cost_model") if k in tcfg},
            "cost_coefficients": _cost_meta(tcfg, tname)["coefficients"]}
    # fusion's inputs (its steps come after the tiles; a ram_cap's budget
    # step judges each rung with them)
    fusion_policy = mcfg.get("fusion", "none")
    cands = fusion.candidates(graph) if fusion_policy != "none" else []
    # min_latency without a cost model for the target (host): no group can
    # be chosen, so none is tiled (schedule.json still lists the candidates
    # and says why they stay apart)
    unpriced = (fusion_policy == "min_latency" and mcfg["fusion_cost"] == "model"
                and _cost_meta(tcfg, tname)["coefficients"] is None)
    solved = [c for c in cands if c["ok"]] if not unpriced else []
    # how the library's fused kernel shares the intermediate between cores
    # (codegen/libraries: FUSED_SCHEME), which sizes it in the fused tiling
    from tessera.codegen.libraries import library as cg_library
    # (and the model's PW->DW layout choice, fusion_pw_dw, when not auto)
    scheme_data = dict(getattr(cg_library(tcfg["kernels"]), "FUSED_SCHEME", {}))
    if "xpulpv2" in tcfg.get("toolchain", {}).get("isa", []) and scheme_data.get("dw_pw") == "shared":
        # the 3x3 depthwise's Xpulp plane path: the fused tiler reserves the planes
        scheme_data["dw_pw_plane"] = True
    if mcfg.get("fusion_pw_dw", "auto") != "auto":
        scheme_data["pw_dw_layout"] = mcfg["fusion_pw_dw"]
    scheme = _value(env, scheme_data, f"fused scheme {tcfg['kernels']}")
    decide = {"policy": fusion_policy, "candidates": cands}
    measured = []
    if fusion_policy == "min_latency":
        decide["cost"] = _fusion_cost(env, tcfg, mcfg, (graph, paths, library, cg_target, plat), outdir)
        measured = decide["cost"].pop("verdicts", [])
        if memory.get("direct", {}).get("policy") == "flat":
            # what the layers will cost apart there: in place (fusion.costs)
            decide["cost"]["in_place"] = sorted(memory["direct"]["eligible"])

    # a cap on total RAM: one step picks the largest tile budget that fits
    try:
        cap = _ram_cap(env, tcfg, mcfg)
    except TesseraError as err:
        fail(err, outdir)
    budget = []
    if cap is not None:
        memory["ram_cap"] = cap
        memory["where"] = f"ram_cap of {mname} on {tname}"
        judge = {"views": layer_views, "tiler": tnums, "memory": memory, "ram_cap": cap, "where": memory["where"]}
        if solved:
            # the fused steps the build will run at each rung count there too
            judge["fusion"] = {"decide": decide, "scheme": scheme_data}
        budget = env.Command(d("ram_budget.json"),
                             [paths["graph"], _value(env, judge, "ram_cap"), tiler_kernels] + measured,
                             Action(steps.ram_budget, "tessera: choose the tile budget $TARGET"))
        env.Depends(budget, _code("tiler", "memplan", "alloc", "overlap", "hazard", "rambudget", "direct")
                    + (_code("fusion", "views", "ir", "cost") if solved else []))
    for layer in graph.layers:
        lv = _value(env, layer_views[layer.name], f"layer {layer.name} (tiler view)")
        node = env.Command([d("tiling", layer.name + ".json"), d("tiling", layer.name + ".solve.json")],
                           [lv, tiler_target, tiler_kernels] + budget, Action(steps.tile, "tessera: tile $TARGET"))
        env.Depends(node, tiler_code)
        tilings.append(node[0])
        solves.append(node[1])

    # ---- fusion: one fused tiling per candidate pair, then the selector
    fused = []
    for c in solved:
        pv = _value(env, fusion.pair_view(graph, *c["layers"]), f"pair {c['group']}")
        # under a ram_cap, within the tile budget the cap chose, as the layers
        node = env.Command(d("tiling", f"{fusion.tiling_stem(c['group'])}.fused.json"),
                           [pv, tiler_target, tiler_kernels, scheme] + budget,
                           Action(steps.tile_fused, "tessera: tile fused $TARGET"))
        env.Depends(node, _code("fusion", "tiler"))
        fused.append(node[0])
    # one slice per candidate layer (its step), so that only the layers whose
    # decision changed are generated again
    # (a layer in two candidates, the depthwise of a PW->DW->PW chain, once)
    cand_layers = list(dict.fromkeys(n for c in solved for n in c["layers"]))
    schedule = env.Command([d("schedule.json")] + [d("schedule", n + ".json") for n in cand_layers],
                           [_value(env, decide, "fusion policy"), paths["graph"]]
                           + tilings + fused + measured, Action(steps.schedule, "tessera: select fusion $TARGET"))
    env.Depends(schedule, _code("fusion", "tiler", "views", "ir", "cost", "overlap", "memplan"))

    # ---- memory plan
    plan_targets = [d("memplan.json")] + [d("plan", layer.name + ".json") for layer in graph.layers]
    # with fusion, the plan reads the schedule (fused intermediates take no L2)
    fusion_in = [schedule[0]] + fused if fusion_policy != "none" else []
    plan_nodes = env.Command(plan_targets, [paths["graph"], _value(env, memory, f"memory {tname}")] + tilings
                             + fusion_in + budget,
                             Action(steps.plan, "tessera: plan memory $TARGET"))
    env.Depends(plan_nodes, _code("memplan", "alloc", "views", "ir", "overlap", "hazard", "tiler", "direct",
                                  "rambudget", "cost"))
    memplan_json, slices = plan_nodes[0], plan_nodes[1:]

    # ---- code generation: one file per layer (+ its constants), network files
    codegen_code = _code("codegen", "views", "ir", "tiler")
    cg_value = _value(env, cg_target, f"codegen target {tname}")
    sources = []
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    pairs = {}   # a fusion candidate's layers -> its group's extra codegen inputs
    sched_slice = dict(zip(cand_layers, schedule[1:]))
    # a layer's file reads its schedule slice; the first layer of a candidate
    # also the candidate's fused tiling and the second layer's view and plan
    # slice (the step is generated as the first layer's function)
    for name in cand_layers:
        pairs[name] = [sched_slice[name]]
    # (a layer first in several candidates, a DW->PW pair and the same pair
    # with its add epilogue: every such candidate's tiling, and the other
    # layers' views and plan slices; the step picks its group's)
    leads = {}
    for c, node in zip(solved, fused):
        mine = leads.setdefault(c["layers"][0], {"tilings": [], "others": []})
        mine["tilings"].append(node)
        mine["others"] += [n for n in c["layers"][1:] if n not in mine["others"]]
    for first, mine in leads.items():
        pairs[first] = [sched_slice[first]] + mine["tilings"]
        for other in mine["others"]:
            j = index[other]
            pairs[first] += [_value(env, _layer_view(graph, graph.layers[j]), f"layer {other}"), slices[j]]
    for layer, tiling, slice_ in zip(graph.layers, tilings, slices):
        lv = _value(env, _layer_view(graph, layer), f"layer {layer.name}")
        c = env.Command(d("src", layer.name + ".c"), [lv, tiling, slice_, cg_value] + pairs.get(layer.name, []),
                        Action(steps.gen_layer, "tessera: generate $TARGET"))
        env.Depends(c, codegen_code)
        sources.append(c[0])
        if layer.weights or views.param_arrays(layer):
            # the layer's view holds the digest of its arrays, so weights.npz
            # (written when SConstruct is read) is read but not a source: a
            # change to one layer's weights regenerates that layer's file only
            w = env.Command(d("src", layer.name + "_w.c"), [lv, cg_value],
                            Action(steps.gen_weights, "tessera: generate $TARGET"), WEIGHTS_NPZ=paths["weights"])
            env.Depends(w, codegen_code)
            sources.append(w[0])
    net_files = [d("src", f) for f in ("network.h", "network.c", "harness.c", "input.c")]
    # guard=1: the harness guards the free bytes (only the network files change)
    if str(env.get("guard", "0")) not in ("0", "", "no", "false"):
        net_value = _value(env, dict(cg_target, guard=1), f"codegen target {tname} (guard)")
    else:
        net_value = cg_value
    net = env.Command(net_files, [paths["graph"], memplan_json, net_value, paths["input"]],
                      Action(steps.gen_network, "tessera: generate $TARGET"))
    env.Depends(net, codegen_code)
    if "storage" in cg_target:
        # network.c's arena size comes from tessera.storage.firmware.declared_arena
        env.Depends(net, _code("storage"))
        # the scheduler's out-of-core program as C data (tessera.storage.firmware)
        from tessera.storage import costs as st_costs
        act = tcfg["place"]["activations"]
        lvl = tcfg["memory"][cg_target["storage"]["level"]]
        pv = {"prefix": cg_target["prefix"], "act_level": act, "clock_hz": tcfg["clock_hz"],
              "section": cg_target["sections"]["activations"],
              # None: the pools take the arena's free bytes; 0: no program; else dedicated bytes
              "pools": tcfg["memory"][act]["reserved"].get("pools"),
              "storage": {"level": cg_target["storage"]["level"], "costs": st_costs.storage_params(lvl)},
              # what tessera.cost needs to find the coefficients (a same-core
              # target's when this one has none: platform, toolchain, runner)
              "cost_target": {k: tcfg[k] for k in ("name", "kernels", "cores", "place", "dma", "platform",
                                                   "toolchain", "runner", "cost_model") if k in tcfg}}
        program = env.Command([d("src", "program.c"), d("program.json")],
                              [paths["graph"], memplan_json, schedule[0], _value(env, pv, f"program {tname}")]
                              + tilings, Action(steps.gen_program, "tessera: generate $TARGET"))
        env.Depends(program, _code("storage", "codegen", "views", "cost", "tiler"))
        sources.append(program[0])
    lib_sources = sources + [net[1]]      # the network; the test harness and its input are not in it
    sources = lib_sources + [net[2], net[3]]

    # ---- compile with the target's toolchain: the network as a library,
    # the kernels and the HAL as theirs
    tenv = env.Clone()
    # what a calling firmware's environment holds is for its own files: the
    # network builds with the target YAML's flags only (as in tessera's own
    # build, so the objects and their cache signatures are the same)
    for var in ("CPPPATH", "CPPDEFINES", "CCFLAGS", "CFLAGS", "ASFLAGS", "LINKFLAGS", "LIBS", "LIBPATH"):
        tenv[var] = []
    plat.configure(tenv, tcfg)
    tenv.Append(CPPPATH=[os.path.join(KERNELS, "include"), d("src")],
                CPPDEFINES=config.isa_defines(tcfg))
    if "storage" in cg_target:
        # pointers in this window are offsets on the card (tessera/hal.h)
        lvl = tcfg["memory"][cg_target["storage"]["level"]]
        tenv.Append(CPPDEFINES=[("TSR_STORAGE_WINDOW", f"0x{lvl['address']:08x}u"),
                                ("TSR_STORAGE_BYTES", f"0x{lvl['size']:08x}u")])
    objects = [tenv.Object(d("obj", os.path.basename(str(s))[:-2] + ".o"), s)[0] for s in sources]
    netlib = tenv.StaticLibrary(d("obj", f"libtessera_{cg_target['prefix']}"), objects[:len(lib_sources)])
    hal_dir = os.path.join(KERNELS, "hal", tcfg["platform"])
    hal_files = [os.path.join(hal_dir, f) for f in sorted(os.listdir(hal_dir)) if f.endswith((".c", ".S"))]
    kobjs = kernel_objects(tenv, tcfg["kernels"], library, d("obj", "kernels"))
    henv = tenv.Clone()
    henv.Append(CPPDEFINES=[("TSR_NCORES", tcfg["cores"])])
    hobjs = [henv.Object(d("obj", "hal", os.path.basename(f)[:-2] + ".o"), f)[0] for f in hal_files]
    klib = tenv.StaticLibrary(d("obj", "libtessera_kernels"), kobjs)
    hlib = henv.StaticLibrary(d("obj", "libtessera_hal"), hobjs)
    exp = export.declare(env, tcfg, mname, cg_target["prefix"], outdir, lib_sources, net[0],
                         kernel_plan(tenv, tcfg["kernels"], library), hal_files, graph, paths)
    env.Alias("export", exp["nodes"])
    _forget_damaged(tilings + solves + fused + list(schedule) + list(plan_nodes) + sources + objects + kobjs + hobjs
                    + [netlib[0], klib[0], hlib[0]])
    result = {"outdir": outdir, "prefix": cg_target["prefix"], "library": netlib[0],
              "libs": [netlib[0], klib[0], hlib[0]], "include": exp["include"], "ld_dir": exp["ld_dir"],
              "fragment": exp["fragment"], "export": exp["nodes"], "sources": sources, "network_h": net[0],
              "tilings": tilings, "memplan": memplan_json, "schedule": schedule[0]}
    if not run:
        return result
    firmware = plat.link(tenv, tcfg, objects + hobjs, klib, outdir)

    # ---- run, check, report
    # the note only explains the counts (the report reads it), it does not run anything
    runner = _value(env, {k: v for k, v in tcfg["runner"].items() if k != "note"}, f"runner {tname}")
    run_sources = [firmware, runner]
    if "storage" in cg_target:
        # the card's image: the storage layers' constants, then room for the
        # activations swapped out (the runner hands the firmware a copy)
        image = env.Command(d("storage.bin"), [paths["graph"], paths["weights"], memplan_json, cg_value],
                            Action(steps.storage_image, "tessera: write $TARGET"))
        env.Depends(image, _code("codegen", "views"))
        run_sources.append(image[0])
        result["storage_image"] = image[0]
    run_log = env.Command(d("run.log"), run_sources, Action(steps.run, "tessera: run $SOURCE"))
    env.Depends(run_log, _code("runners"))
    check_sources = [paths["graph"], paths["golden"], run_log, firmware, runner, schedule[0]]
    if mcfg.get("reference"):
        # the firmware is checked against the peer toolchain's files too
        from tessera import reference   # numpy and the frontend: only for such models
        ref = reference.load(mcfg["reference"])
        check_sources += [_value(env, {"kind": ref.kind}, "reference kind")] + sorted(ref.files())
    verdict = env.Command(d("verdict.json"), check_sources, Action(steps.check, "tessera: check $TARGET"))
    env.Depends(verdict, _code("check", "runlog", "runners", "reference", "frontend.layout"))
    meta = {"target": tname, "model": mname, "counts": tcfg["runner"]["counts"],
            "dma": [dma["name"] for dma in tcfg["dma"]], "kernels": tcfg["kernels"],
            "isa": tcfg["toolchain"]["isa"]}
    if tcfg["runner"]["note"]:
        meta["counts_note"] = tcfg["runner"]["note"]
    meta["cost"] = _cost_meta(tcfg, tname)
    if "storage" in cg_target:
        # the card's figures: the report's out-of-core section (tessera.ooc)
        lvl = tcfg["memory"][cg_target["storage"]["level"]]
        meta["storage"] = dict({k: lvl[k] for k in ("size", "read_bandwidth", "write_bandwidth", "latency_us",
                                                     "block", "endurance")},
                               level=cg_target["storage"]["level"], clock_hz=tcfg["clock_hz"],
                               program=os.path.join(outdir, "program.json"))
    if paths.get("tflite"):
        # which interpreter checked the golden model, and that every tensor matched
        tfl = canon.read_json(paths["tflite"])
        meta["tflite"] = {"interpreter": tfl["interpreter"], "kernels": tfl["kernels"],
                          "tensors_compared": tfl["tensors"], "every_tensor_equal": tfl["equal"]}
    if paths.get("ort_check"):
        meta["ort_check"] = canon.read_json(paths["ort_check"])
    report = env.Command([d("report.json"), d("report.html")],
                         [_value(env, meta, f"report {tname}/{mname}"), paths["graph"], paths["weights"],
                          memplan_json, verdict, schedule[0]] + [n for pair in zip(tilings, solves) for n in pair],
                         Action(steps.report, "tessera: report $TARGET"))
    env.Depends(report, _code("report", "cost", "memplan", "ir", "codegen.libraries", "tiler.geometry", "views",
                              "ooc", "storage"))
    # the build succeeds only when every layer matched (after the report
    # shows what did not)
    passed = env.Command(d(".passed"), [verdict, report], Action(steps.gate, None))
    env.Depends(passed, _code("check"))
    # a run checks that this machine's emulator or simulator runs the
    # firmware (and the host target counts time): never taken from a cache
    env.NoCache([run_log, verdict, report, passed])
    # `scons -c` also removes what the model preparation wrote (not SCons
    # targets: it runs when the SConstruct is read)
    env.Clean(passed, [p for k, p in paths.items() if k != "onnx"] + [d(".prepare.json")])
    env.Alias("run", run_log)
    _forget_damaged(list(firmware) + [run_log[0], verdict[0], report[0], report[1]])
    result.update(report=report, passed=passed, firmware=firmware, verdict=verdict, run=run_log)
    return result


def exists(env):
    return True


def generate(env):
    env.AddMethod(TesseraNetwork, "TesseraNetwork")
    if not getattr(generate, "registered", False):
        import atexit
        atexit.register(_retract_failed)
        generate.registered = True
