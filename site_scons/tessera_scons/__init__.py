"""SCons glue of tessera: a quantized network as build steps.

    env.Tool('tessera')                  # site_scons/site_tools/tessera.py
    net = env.TesseraNetwork(target='host', model='tiny', run=True)

From a firmware's own SConstruct (docs/embedding.md):

    env.Tool('tessera', toolpath=['<tessera>/site_scons/site_tools'])
    net = env.TesseraNetwork(target='stm32h7', model='models/kws.yaml', out='build/tessera')
    env.Append(CPPPATH=net['include'], LIBPATH=[net['ld_dir']])
    env.Program('app.elf', objects, LIBS=net['libs'])

The library (site_scons/tessera/) decides; this glue only declares nodes:
one function per stage (stages.py), each taking the earlier stages' nodes
and returning its own, its inputs Value nodes of canonical JSON that
tessera.pipeline computes, its actions (steps.py) one pipeline call each,
and the library code each action runs declared with Depends (SCons does not
see code a Python action calls). This file: the tool, the model stage
(TesseraNetwork) and what a failed build leaves behind.

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

from SCons.Script import Exit

from tessera import config
from tessera.config import views
from tessera.errors import FitError, TesseraError, from_os_error
from tessera.ir import Graph
from tessera.model import prepare
from tessera.pipeline import model as configuration, options
from tessera.pipeline.codegen import target as codegen_target
from tessera.planning import memplan
from tessera.util import canon

from . import stages
from .platforms import platform as platform_module

ROOT = stages.ROOT   # the bundled targets and models (tessera.util.paths)


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
    "<prefix>/network.h" and the kernel headers), headers (the header files
    in them: a firmware that includes network.h under a macro's name
    depends on them explicitly, as SCons's scanner does not expand
    macros), ld_dir and fragment (the
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
        tcfg, mcfg = configuration.load(tname, tpath, mname, mpath, fusion, fusion_cost)
        net = _model(env, tcfg, mcfg, tpath, out, outdir)
    except FitError as err:
        fail(f"{mname} on {tname}: {err}", outdir, made)
    except TesseraError as err:
        fail(err, outdir, made)
    except OSError as err:      # the model stage writes while SConstruct is read: a full disk, no access
        fail(from_os_error(err, outdir), outdir, made)
    _networks.append(outdir)
    return _declare(env, net, run)


def _model(env, tcfg, mcfg, tpath, out, outdir):
    """The model stage: it runs while SConstruct is read (every later node
    depends on the graph it makes), cached by what it reads
    (tessera.model.prepare); then what every stage shares."""
    # generated models are keyed by their parameters, so a cache may be
    # shared between output directories (the tests share one)
    model_cache = (os.environ.get("TESSERA_MODEL_CACHE") or env.get("TESSERA_MODEL_CACHE")
                   or os.path.join(out, ".models"))
    paths = prepare.prepare(mcfg, outdir, model_cache, log=_log)
    graph = Graph.from_json(canon.read_json(paths["graph"]))
    tcfg = configuration.with_network_data(tcfg, graph)
    library = views.kernel_library(tcfg["kernels"])
    plat = platform_module(tcfg["platform"], tpath)
    cg = codegen_target(tcfg, mcfg["name"], graph, getattr(plat, "COUNTS_PER_CORE", None))
    # known before any tiling: stop at once rather than after the solves
    memplan.check_weights(graph, views.memory_target(tcfg),
                          configuration.fit_hint(tcfg, configuration.bundled_targets(ROOT), graph))
    return stages.Network(tcfg, mcfg, graph, paths, library, cg, plat, outdir)


def _declare(env, net, run=True):
    """The stages of one network, in pipeline order (stages.py)."""
    env = env.Clone(TESSERA_NET=f"{net.mcfg['name']} on {net.tcfg['name']}")
    net.env = env
    try:
        given = {k: env.get(k, v) for k, v in options.variables(net.library).items()}
        opts = options.network(net.graph, net.tcfg, net.mcfg, net.library, given, ROOT)
    except TesseraError as err:
        fail(err, net.outdir)
    # fusion_cost=measured: the same network with fusion=none and each
    # variant, as ordinary (cached) builds in variants/; their reports
    # are the selector's costs
    measured = [_declare(env, net.variant(v), True)["report"][0] for v in stages.measured_variants(opts)]
    budget = stages.ram_budget(net, opts, measured)
    tiles = stages.tiling(net, opts, budget)
    fused = stages.fusion(net, opts, tiles, measured, budget)
    plan = stages.memory_plan(net, opts, tiles, fused, budget)
    sources = stages.codegen(net, opts, tiles, fused, plan)
    built = stages.compile(net, sources)
    exp = stages.export(net, sources, built)
    _forget_damaged(tiles["tilings"] + tiles["solves"] + fused["tilings"] + fused["schedule"] + plan["nodes"]
                    + sources["all"] + built["objects"] + built["libs"])
    result = {"outdir": net.outdir, "prefix": net.cg["prefix"], "library": built["libs"][0], "libs": built["libs"],
              "include": exp["include"], "headers": exp["headers"], "ld_dir": exp["ld_dir"], "fragment": exp["fragment"],
              "export": exp["nodes"], "sources": sources["all"], "network_h": sources["network_h"],
              "tilings": tiles["tilings"], "memplan": plan["memplan"], "schedule": fused["schedule"][0]}
    if not run:
        return result
    ran = stages.run_check(net, built, fused, plan)
    report = stages.report(net, tiles, fused, plan, ran)
    _forget_damaged(list(ran["firmware"]) + [ran["run"][0], ran["verdict"][0]] + list(report["report"]))
    result.update(ran, **report)
    return result


def exists(env):
    return True


def generate(env):
    env.AddMethod(TesseraNetwork, "TesseraNetwork")
    if not getattr(generate, "registered", False):
        import atexit
        atexit.register(_retract_failed)
        generate.registered = True
