"""One function per stage of a network's build, in pipeline order: each
takes the earlier stages' nodes and declares its own (docs/architecture.md
draws them). The data a stage's steps read comes from tessera.pipeline
(computed once: pipeline.options.network); a step's action is in steps.py;
the library code it runs is declared with Depends (steps.CODE).

    budget = ram_budget(net, opts, measured)          ram_budget.json (with a ram_cap)
    tiles = tiling(net, opts, budget)                 tiling/<layer>.json
    fused = fusion(net, opts, tiles, measured, budget)    tiling/*.fused.json, schedule.json
    plan = memory_plan(net, opts, tiles, fused, budget)   memplan.json, plan/<layer>.json
    sources = codegen(net, opts, tiles, fused, plan)  src/ (program.c: storage_program)
    built = compile(net, sources)                     obj/, the three static libraries
    exp = export(net, sources, built)                 export/
    ran = run_check(net, built, fused, plan)          firmware, storage.bin, run.log, verdict.json
    rep = report(net, tiles, fused, plan, ran)        report.json/.html, .passed
"""

import os

from SCons.Script import Action

from tessera import fusion as fusion_lib
from tessera.config import isa_defines
from tessera.pipeline import check as checking, codegen as generation, program as programs, report as reporting
from tessera.pipeline import kernels as kernel_files
from tessera.pipeline.fusion import variants
from tessera.util import canon, paths

from . import bounded, export as exporting, steps
from .kernels import objects as kernel_objects, plan as kernel_plan

ROOT = paths.DATA    # targets/, models/, kernels/: the checkout, or the installed package's data
KERNELS = paths.KERNELS


class Network:
    """One network as the stages see it: its configuration, graph and
    prepared files (the model stage), the platform glue, and the
    environment its steps are declared in (`env`, set by the caller)."""

    def __init__(self, tcfg, mcfg, graph, paths, library, cg, plat, outdir):
        self.tcfg, self.mcfg, self.graph, self.paths = tcfg, mcfg, graph, paths
        self.library, self.cg, self.plat, self.outdir = library, cg, plat, outdir
        self.env = None

    def path(self, *parts):
        return os.path.join(self.outdir, *parts)

    def value(self, obj):
        # SCons (4.x) records a Value dependency by its text, and
        # --debug=explain matches it against a Value node made without a
        # name: a named Value would show as replaced on every rebuild
        return self.env.Value(canon.dumps(obj))

    def command(self, targets, sources, step, message, code=None, **kw):
        """A step: its targets, sources, action (steps.<step>) and the
        library code it runs (steps.CODE[code or step])."""
        nodes = self.env.Command(targets, sources, Action(getattr(steps, step), message), **kw)
        self.env.Depends(nodes, library_code(code or step))
        return nodes

    def variant(self, policy):
        """The same network with another fusion policy, in variants/."""
        return Network(self.tcfg, dict(self.mcfg, fusion=policy), self.graph, self.paths, self.library, self.cg,
                       self.plat, os.path.join(self.outdir, "variants", policy))


def library_code(step):
    """The files of the code a step runs: the tessera packages it uses and
    steps.py itself (an action's signature covers only its two-line
    wrapper, so an edit to the work function it calls would otherwise not
    rerun it)."""
    return canon.source_files(*steps.CODE[step]) + [os.path.abspath(steps.__file__)]


def measured_variants(opts):
    """fusion_cost=measured: the fusion policies whose builds' reports are
    the selector's costs (none otherwise)."""
    return variants(opts["decide"])


def ram_budget(net, opts, measured):
    """A cap on total RAM: one step picks the largest tile budget that
    fits (each rung judged with the fused steps the build will run there)."""
    if opts["judge"] is None:
        return []
    return net.command(net.path("ram_budget.json"),
                       [net.paths["graph"], net.value(opts["judge"]), net.value(opts["kernels"])] + measured,
                       "ram_budget", "tessera: choose the tile budget $TARGET")


def tiling(net, opts, budget):
    """One solve per layer, its inputs its projections only."""
    numbers, kernels = net.value(opts["tiler"]), net.value(opts["kernels"])
    tilings, solves = [], []
    for layer in net.graph.layers:
        node = net.command([net.path("tiling", layer.name + ".json"), net.path("tiling", layer.name + ".solve.json")],
                           [net.value(opts["layers"][layer.name]), numbers, kernels] + budget,
                           "tile", "tessera: tile $TARGET")
        tilings.append(node[0])
        solves.append(node[1])
    return {"tilings": tilings, "solves": solves, "numbers": numbers, "kernels": kernels}


def fusion(net, opts, tiles, measured, budget):
    """One fused tiling per candidate, then the selector; a slice of the
    schedule per candidate layer (its step), so that only the layers whose
    decision changed are generated again."""
    fz = opts["fusion"]
    scheme = net.value(fz["scheme"])
    fused = []
    for c in fz["solved"]:
        pair = net.value(fusion_lib.pair_view(net.graph, *c["layers"]))
        fused += net.command(net.path("tiling", f"{fusion_lib.tiling_stem(c['group'])}.fused.json"),
                             [pair, tiles["numbers"], tiles["kernels"], scheme] + budget,
                             "tile_fused", "tessera: tile fused $TARGET")
    # (a layer in two candidates, the depthwise of a PW->DW->PW chain, once;
    # with a RAM need, every layer a patched chain may hold)
    chains = fz.get("chains", [])
    layers = list(dict.fromkeys([n for c in fz["solved"] for n in c["layers"]] + [n for c in chains for n in c]))
    schedule = net.command([net.path("schedule.json")] + [net.path("schedule", n + ".json") for n in layers],
                           [net.value(opts["decide"]), net.paths["graph"]] + tiles["tilings"] + fused + measured
                           + (budget if chains else []), "schedule", "tessera: select fusion $TARGET")
    return {"tilings": fused, "schedule": schedule, "slices": dict(zip(layers, schedule[1:])),
            "solved": fz["solved"], "chains": chains, "policy": fz["policy"]}


def memory_plan(net, opts, tiles, fused, budget):
    """memplan.json and a slice per layer; with fusion it reads the
    schedule (fused intermediates take no room)."""
    targets = [net.path("memplan.json")] + [net.path("plan", layer.name + ".json") for layer in net.graph.layers]
    fusion_in = [fused["schedule"][0]] + fused["tilings"] if fused["policy"] != "none" else []
    nodes = net.command(targets, [net.paths["graph"], net.value(opts["memory"])] + tiles["tilings"] + fusion_in + budget,
                        "plan", "tessera: plan memory $TARGET")
    return {"nodes": list(nodes), "memplan": nodes[0], "slices": nodes[1:]}


def codegen(net, opts, tiles, fused, plan):
    """One file per layer and one of its constants, the network's files and,
    out of core, the program; `lib` the network library's sources."""
    graph, cg = net.graph, net.value(net.cg)
    # a candidate layer's file reads its schedule slice; the first layer of
    # a candidate also the candidates' fused tilings and the other layers'
    # views and plan slices (the step is generated as its function)
    extra = {name: [node] for name, node in fused["slices"].items()}
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    for first, mine in generation.group_inputs(fused["solved"], fused["chains"]).items():
        extra[first] = [fused["slices"][first]] + [fused["tilings"][i] for i in mine["tilings"]]
        for other in mine["others"]:
            j = index[other]
            extra[first] += [net.value(generation.layer_view(graph, graph.layers[j])), plan["slices"][j]]
    sources = []
    for layer, tiling, slice_ in zip(graph.layers, tiles["tilings"], plan["slices"]):
        view = net.value(generation.layer_view(graph, layer))
        # weights.npz is read (the depthwise's requantization cut), not a source: as below
        sources += net.command(net.path("src", layer.name + ".c"), [view, tiling, slice_, cg] + extra.get(layer.name, []),
                               "gen_layer", "tessera: generate $TARGET", "codegen", WEIGHTS_NPZ=net.paths["weights"])
        if generation.has_constants(layer):
            # weights.npz is read, not a source (the view holds its arrays'
            # digest): a change to one layer's weights regenerates its file only
            sources += net.command(net.path("src", layer.name + "_w.c"), [view, cg], "gen_weights",
                                   "tessera: generate $TARGET", "codegen", WEIGHTS_NPZ=net.paths["weights"])
    files = [net.path("src", f) for f in ("network.h", "network.c", "harness.c", "input.c")]
    network = net.command(files, [net.paths["graph"], plan["memplan"],
                                  net.value(generation.network_target(net.cg, opts["guard"])), net.paths["input"]],
                          "gen_network", "tessera: generate $TARGET", "codegen")
    sources += storage_program(net, tiles, fused, plan)
    lib = sources + [network[1]]      # the network; the test harness and its input are not in it
    return {"lib": lib, "all": lib + [network[2], network[3]], "network_h": network[0]}


def storage_program(net, tiles, fused, plan):
    """Out of core: the IO scheduler's program as C data and program.json."""
    if "storage" not in net.cg:
        return []
    program = net.command([net.path("src", "program.c"), net.path("program.json")],
                          [net.paths["graph"], plan["memplan"], fused["schedule"][0],
                           net.value(programs.view(net.tcfg, net.cg))] + tiles["tilings"],
                          "gen_program", "tessera: generate $TARGET", "program")
    return [program[0]]


def compile(net, sources):
    """The network as a library, the kernels and the HAL as theirs, with
    the target's toolchain."""
    tcfg = net.tcfg
    tenv = net.env.Clone()
    # what a calling firmware's environment holds is for its own files: the
    # network builds with the target YAML's flags only (as in tessera's own
    # build, so the objects and their cache signatures are the same)
    for var in ("CPPPATH", "CPPDEFINES", "CCFLAGS", "CFLAGS", "ASFLAGS", "LINKFLAGS", "LIBS", "LIBPATH"):
        tenv[var] = []
    net.plat.configure(tenv, tcfg)
    tenv["SPAWN"] = bounded.spawn      # a hung compiler, archiver or linker ends in one line
    tenv.Append(CPPPATH=[os.path.join(KERNELS, "include"), net.path("src")],
                CPPDEFINES=isa_defines(tcfg) + generation.storage_defines(tcfg, net.cg))
    objects = [tenv.Object(net.path("obj", os.path.basename(str(s))[:-2] + ".o"), s)[0] for s in sources["all"]]
    netlib = tenv.StaticLibrary(net.path("obj", f"libtessera_{net.cg['prefix']}"), objects[:len(sources["lib"])])
    hal_files = kernel_files.hal_files(tcfg["platform"])
    kobjs = kernel_objects(tenv, tcfg["kernels"], net.library, net.path("obj", "kernels"))
    henv = tenv.Clone()
    henv.Append(CPPDEFINES=[("TSR_NCORES", tcfg["cores"])])
    hobjs = [henv.Object(net.path("obj", "hal", os.path.basename(f)[:-2] + ".o"), f)[0] for f in hal_files]
    klib = tenv.StaticLibrary(net.path("obj", "libtessera_kernels"), kobjs)
    hlib = henv.StaticLibrary(net.path("obj", "libtessera_hal"), hobjs)
    return {"env": tenv, "network_objects": objects, "hal_objects": hobjs, "objects": objects + kobjs + hobjs,
            "hal_files": hal_files, "klib": klib, "libs": [netlib[0], klib[0], hlib[0]]}


def export(net, sources, built):
    """export/: the network for another build system (export.py)."""
    exp = exporting.declare(net.env, net.tcfg, net.mcfg["name"], net.cg["prefix"], net.outdir, sources["lib"],
                            sources["network_h"], kernel_plan(built["env"], net.tcfg["kernels"], net.library),
                            built["hal_files"], net.graph, net.paths)
    net.env.Alias("export", exp["nodes"])
    return exp


def run_check(net, built, fused, plan):
    """The test firmware, its run on the target's runner (out of core with
    the card's image) and the layer-by-layer check."""
    firmware = net.plat.link(built["env"], net.tcfg, built["network_objects"] + built["hal_objects"], built["klib"],
                             net.outdir)
    runner = net.value(checking.runner(net.tcfg))
    out = {"firmware": firmware}
    run_sources = [firmware, runner]
    if "storage" in net.cg:
        image = net.command(net.path("storage.bin"), [net.paths["graph"], net.paths["weights"], plan["memplan"],
                                                      net.value(net.cg)],
                            "storage_image", "tessera: write $TARGET", "program")
        run_sources.append(image[0])
        out["storage_image"] = image[0]
    run = net.command(net.path("run.log"), run_sources, "run", "tessera: run $SOURCE")
    check_sources = [net.paths["graph"], net.paths["golden"], run, firmware, runner, fused["schedule"][0]]
    if net.mcfg.get("reference"):
        # the firmware is checked against the peer toolchain's files too
        kind, files = checking.reference_inputs(net.mcfg["reference"])
        check_sources += [net.value(kind)] + files
    verdict = net.command(net.path("verdict.json"), check_sources, "check", "tessera: check $TARGET")
    net.env.Alias("run", run)
    return dict(out, run=run, verdict=verdict)


def report(net, tiles, fused, plan, ran):
    """report.json and report.html, then the gate: the build succeeds only
    when every layer matched (after the report shows what did not)."""
    meta = reporting.meta(net.tcfg, net.mcfg, net.cg, net.outdir, net.paths, ROOT)
    # the linked firmware and its map: every byte of RAM and flash
    firmware = [ran["firmware"][0], os.path.join(os.path.dirname(str(ran["firmware"][0])), "firmware.map")]
    report = net.command([net.path("report.json"), net.path("report.html")],
                         [net.value(meta), net.paths["graph"], net.paths["weights"], plan["memplan"], ran["verdict"],
                          fused["schedule"][0], net.paths["golden"]] + firmware
                         + [n for pair in zip(tiles["tilings"], tiles["solves"]) for n in pair] + fused["tilings"],
                         "report", "tessera: report $TARGET")
    passed = net.command(net.path(".passed"), [ran["verdict"], report], "gate", None)
    # a run checks that this machine's emulator or simulator runs the
    # firmware (and the host target counts time): never taken from a cache
    net.env.NoCache([ran["run"], ran["verdict"], report, passed])
    # `scons -c` also removes what the model preparation wrote (not SCons
    # targets: it runs when the SConstruct is read)
    net.env.Clean(passed, [p for k, p in net.paths.items() if k != "onnx"] + [net.path(".prepare.json")])
    return {"report": report, "passed": passed}
