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
           "isa": tcfg["toolchain"]["isa"], "prefix": cg["prefix"], "clock_hz": tcfg.get("clock_hz"),
           # the memory map, to count the linked firmware's bytes per level
           "levels": {name: {"address": lvl.get("address"), "size": lvl["size"], "kind": lvl["kind"],
                             "writable": lvl["writable"], "reserved": dict(lvl["reserved"])}
                      for name, lvl in tcfg["memory"].items()}}
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
                         "tensors_compared": tfl["tensors"], "every_tensor_equal": tfl["equal"],
                         **({"outputs": tfl["outputs"]} if "outputs" in tfl else {})}
    if paths.get("ort_check"):
        out["ort_check"] = canon.read_json(paths["ort_check"])
    return out


def fusion_section(sched):
    """The selector's decision: its groups and the activation bytes moved
    with and without them, and every candidate with what decided it (its
    estimates and bytes where the selector had them; schedule.json has the
    same); patched steps with their tile, policy and alternatives, and the
    need they meet."""
    keep = ("group", "kind", "layers", "chosen", "fused_estimate", "unfused_estimate", "fused_bytes",
            "unfused_bytes", "why_apart", "reason")
    held = sched.get("costs", {}).get("held", {})
    candidates = []
    for c in sched.get("candidates", []):
        row = {k: c[k] for k in keep if k in c}
        if c["group"] in held and not c.get("chosen"):
            row["why_apart"] = held[c["group"]]
        candidates.append(row)
    out = {"policy": sched["policy"], "totals": sched["totals"],
           "groups": [{k: s[k] for k in ("step", "layers", "activation_transfer_bytes", "reason", "patch", "form",
                                          "alternatives") if k in s}
                      for s in sched["steps"] if s["kind"] != "layer"],
           "candidates": candidates}
    if sched.get("patched", {}).get("steps"):
        out["patched"] = {k: sched["patched"][k] for k in ("need", "source", "chains_priced")}
    return out


def report(meta_view, graph, weights, the_plan, verdict, sched, docs, firmware=None, golden=None):
    """(report.json's data, report.html's text); `docs` each layer's
    tiling then its solve side file, in layer order, then the fused
    candidates' tilings; `firmware`: (the ELF's path, its link map's text)
    or None; `golden`: golden.npz's arrays. (The console's summary is
    show(), at the end of the build.)"""
    from ..report import build, footprint
    from ..report.html import render_html
    from ..report.memmap import memory_map

    tilings, fused = [], {}
    for data in docs:
        if "group" in data:
            fused[data["group"]] = data
        elif "tile" in data:
            tilings.append(data)
        else:
            tilings[-1].update(data)
    chosen = {s["step"] for s in sched.get("steps", []) if len(s["layers"]) > 1}
    fw = None
    if firmware is not None:
        fw = {"elf": footprint.read_elf(firmware[0]), "map": footprint.parse_map(firmware[1]),
              "name": os.path.basename(firmware[0])}
        # the link's stack check (tessera.check.stack), written by the same step as the ELF
        stacks = os.path.join(os.path.dirname(firmware[0]), "stack.json")
        if os.path.exists(stacks):
            fw["stacks"] = canon.read_json(stacks)
    outs = None if golden is None else {n: golden[n] for n in graph.outputs}
    out = build.report(meta_view, graph, weights, the_plan, verdict, tilings, sched,
                       {g: ft for g, ft in fused.items() if g in chosen}, fw, outs)
    out["fusion"] = fusion_section(sched)
    if meta_view.get("storage"):
        from ..storage import ooc

        out["out_of_core"] = ooc.report(graph, the_plan, tilings, verdict, meta_view)
    from ..report import patched

    page = render_html(out, memory_map(graph, the_plan, tilings))
    return out, page.replace("</body></html>", patched.html(out["fusion"]) + "</body></html>")


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
    from ..report import patched
    from ..report.console import make_console, render

    console = console or make_console()
    render(data, console)
    for line in patched.lines(data["fusion"]):
        console.print(line, markup=False, highlight=False)
    return verdict_line(data, outdir)
