"""The report: report.json (everything a user diffs) and report.html (the
same drawn for a person), from the graph, the plan, the tilings, the
verdict and the schedule (tessera.report; the out-of-core section:
tessera.storage.ooc)."""

import os

from ..config import views
from ..util import canon


def cost_meta(tcfg, root):
    """The cost model's inputs to the report: the coefficients (their
    content, so that a refit rebuilds the report), the activation DMA
    engine's dimensions and the cores."""
    from ..cost import model as cost_model

    file, _ = cost_model.source(root, tcfg)
    engine = views.dma_engine(tcfg, tcfg["place"]["activations"], tcfg["place"]["tiles"])
    return {"file": os.path.relpath(file, root),
            "coefficients": cost_model.for_target(cost_model.load(file), tcfg),
            "dims": tcfg["dma"][engine]["dims"] if engine is not None else 3, "cores": tcfg["cores"]}


def meta(tcfg, mcfg, cg, outdir, paths, root):
    """What the report reads besides the build's files: the target's and
    model's names, what the runner counts, the cost model's inputs, the
    card's figures (a storage level), and which interpreter checked the
    golden model (TFLite) or how far ONNX Runtime was (ort_check)."""
    out = {"target": tcfg["name"], "model": mcfg["name"], "counts": tcfg["runner"]["counts"],
           "dma": [dma["name"] for dma in tcfg["dma"]], "kernels": tcfg["kernels"],
           "isa": tcfg["toolchain"]["isa"]}
    if tcfg["runner"]["note"]:
        out["counts_note"] = tcfg["runner"]["note"]
    out["cost"] = cost_meta(tcfg, root)
    if "storage" in cg:
        lvl = tcfg["memory"][cg["storage"]["level"]]
        out["storage"] = dict({k: lvl[k] for k in ("size", "read_bandwidth", "write_bandwidth", "latency_us",
                                                   "block", "endurance")},
                              level=cg["storage"]["level"], clock_hz=tcfg["clock_hz"],
                              program=os.path.join(outdir, "program.json"))
    if paths.get("tflite"):
        tfl = canon.read_json(paths["tflite"])
        out["tflite"] = {"interpreter": tfl["interpreter"], "kernels": tfl["kernels"],
                         "tensors_compared": tfl["tensors"], "every_tensor_equal": tfl["equal"]}
    if paths.get("ort_check"):
        out["ort_check"] = canon.read_json(paths["ort_check"])
    return out


def fusion_section(sched):
    """The selector's decision: its groups and the activation bytes moved
    with and without them (schedule.json has every candidate's reason)."""
    return {"policy": sched["policy"], "totals": sched["totals"],
            "groups": [{k: s[k] for k in ("step", "layers", "activation_transfer_bytes", "reason")}
                       for s in sched["steps"] if s["kind"] != "layer"]}


def report(meta_view, graph, weights, the_plan, verdict, sched, docs):
    """(report.json's data, report.html's text); `docs` each layer's
    tiling then its solve side file, in layer order. (The console's
    summary is show(), at the end of the build.)"""
    from ..report import build
    from ..report.html import render_html
    from ..report.memmap import memory_map

    tilings = []
    for data in docs:
        if "tile" in data:
            tilings.append(data)
        else:
            tilings[-1].update(data)
    out = build.report(meta_view, graph, weights, the_plan, verdict, tilings)
    out["fusion"] = fusion_section(sched)
    if meta_view.get("storage"):
        from ..storage import ooc

        out["out_of_core"] = ooc.report(graph, the_plan, tilings, verdict, meta_view)
    return out, render_html(out, memory_map(graph, the_plan, tilings))


def verdict_line(data, outdir):
    """One line: the network, PASS or FAIL, how many layers matched, where
    the report is."""
    layers = data["layers"]
    bad = [layer["name"] for layer in layers if not layer.get("match", True)]
    where = os.path.join(outdir, "report.html")
    if where.startswith(os.getcwd() + os.sep):
        where = os.path.relpath(where)
    if data["verdict"] == "pass":
        return (f"tessera: PASS {data['model']} on {data['target']}: {len(layers)} layers bit-exact with the golden "
                f"model ({where})")
    what = f"{len(bad)} of {len(layers)} layers differ from the golden model, first {bad[0]}" if bad else \
        "the output differs"
    return f"tessera: FAIL {data['model']} on {data['target']}: {what} ({where})"


def show(data, outdir, console=None):
    """The end of a build on the console: the report's tables, then (the
    returned line) its verdict."""
    from ..report import build

    build.render(data, console)
    return verdict_line(data, outdir)
