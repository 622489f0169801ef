"""Run and check: the firmware on the target's runner (tessera.runners),
its output checked layer by layer against the golden model and a peer's
reference files (tessera.check), and the gate that fails the build after
the report shows what did not match."""

from ..errors import RunError

# tessera.check (numpy) is imported where a step runs: declaring a build's
# steps, the no-op build too, does not load it


def runner(tcfg):
    """What a run reads of the target: its runner, less the note that only
    explains the counts (the report reads it)."""
    return {k: v for k, v in tcfg["runner"].items() if k != "note"}


def inside(sched):
    """{layer: its step} of the layers whose output stays in L1: all but
    the last layer of a fused step (the step's output is what is checked)."""
    return {n: s["step"] for s in sched["steps"] if s["kind"] != "layer" for n in s["layers"][:-1]}


def verdict(graph, golden, run_text, log, sched, run_view, firmware, reference=None):
    """verdict.json from the run's log (`log` its path, for messages). A
    mismatch reruns the firmware dumping the culprit layer's whole output,
    to name the element. `reference`: the peer's {"kind", "dir"}. A failing
    verdict is a result, not a broken step: the report shows it and the
    gate after it fails the build."""
    from .. import runners
    from ..check import runlog, verdict as checker

    fused = inside(sched)
    result = runlog.parse(run_text, log)
    out = checker.compare(graph, golden, result, fused)
    bad = out.get("first_mismatch")
    dumps = {}
    if bad is not None:
        dump = runlog.parse(runners.run(run_view, firmware, [f"dump={bad['index']}"]), "dump run")
        dumps = dump["dumps"]
        out = checker.locate(out, graph, golden, dumps.get(bad["index"]))
    if reference is not None:
        from ..model import reference as peer

        ref = peer.load(reference)
        against = checker.compare_reference(graph, ref, result, fused)
        i = checker.first_reference_mismatch(graph, against)
        if i is not None:
            if i not in dumps:
                dumps = runlog.parse(runners.run(run_view, firmware, [f"dump={i}"]), "dump run")["dumps"]
            against = checker.locate_reference(against, graph, ref, i, dumps.get(i))
        out = checker.with_reference(out, against)
    layers = result["layers"]
    out["counts"] = [layer["count"] for layer in layers]
    out["dma"] = [layer["dma"] for layer in layers]
    out["total_count"] = result["total"]
    if any("io" in layer for layer in layers):
        out["io"] = [layer.get("io") for layer in layers]
    if any("cores" in layer for layer in layers):
        out["cores"] = [layer["cores"] for layer in layers]
        out["dma_counts"] = [layer["dma_count"] for layer in layers]
        out["core_overlaps"] = result.get("core_overlaps", 0)
    return out


def reference_inputs(spec):
    """({"kind"}, [its files]): what the check reads of a model's
    `reference:` (the peer toolchain's expected outputs)."""
    from ..model import reference as peer

    ref = peer.load(spec)
    return {"kind": ref.kind}, sorted(ref.files())


def gate(result, network, where):
    """Fail (RunError) unless every layer matched; `where`: the verdict's
    and report's paths, for the message."""
    from ..check import verdict as checker

    if result["verdict"] != "pass":
        raise RunError(None, checker.describe(result, network), f"details in {where[0]} and {where[1]}")
