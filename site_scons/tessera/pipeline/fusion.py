"""Fusion: the candidates, one fused tiling per candidate, the selector's
schedule (tessera.fusion).

setup() says what the fusion steps read: the policy, the candidates, those
worth a fused tiling, and the fused scheme of the target's kernel library
(how its fused kernel shares the intermediate between cores, which sizes
it in the fused tiling). cost() says what min_latency compares.
"""

import json

from .. import fusion
from ..fusion import decide
from ..util import canon
from .tiling import SOLVE_FIELDS, with_budget


def scheme(tcfg, mcfg):
    """The fused tiler's view of the kernel library: its FUSED_SCHEME
    (codegen/libraries), the 3x3 depthwise's Xpulp plane path (the fused
    tiler reserves the planes) and the model's PW->DW layout choice
    (fusion_pw_dw, when not auto)."""
    from ..codegen.libraries import library

    out = dict(getattr(library(tcfg["kernels"]), "FUSED_SCHEME", {}))
    if "xpulpv2" in tcfg.get("toolchain", {}).get("isa", []) and out.get("dw_pw") == "shared":
        out["dw_pw_plane"] = True
    if mcfg.get("fusion_pw_dw", "auto") != "auto":
        out["pw_dw_layout"] = mcfg["fusion_pw_dw"]
    return out


def setup(graph, tcfg, mcfg, coefficients):
    """{"policy", "candidates", "solved", "scheme"}: `solved` the feasible
    candidates that get a fused tiling. min_latency with the cost model and
    no coefficients for the target (`coefficients` None: host) is unpriced:
    no group can be chosen, so none is tiled (schedule.json still lists the
    candidates and says why they stay apart)."""
    policy = mcfg.get("fusion", "none")
    cands = fusion.candidates(graph) if policy != "none" else []
    unpriced = policy == "min_latency" and mcfg["fusion_cost"] == "model" and coefficients is None
    return {"policy": policy, "candidates": cands, "solved": [c for c in cands if c["ok"]] if not unpriced else [],
            "scheme": scheme(tcfg, mcfg)}


def cost(tcfg, mcfg, meta):
    """What min_latency's selector compares (`meta`: report.cost_meta): the
    cost model's coefficients (fusion_cost=model); with measured, the
    reports of the network built with fusion=none and with each fusion
    VARIANT, which the glue declares and the schedule step reads."""
    out = {"source": mcfg["fusion_cost"], "kernels": tcfg["kernels"], "target": tcfg["name"],
           "file": meta["file"], "cores": meta["cores"], "dims": meta["dims"], "unit": tcfg["runner"]["counts"]}
    if out["source"] == "model":
        out["coefficients"] = meta["coefficients"]
    return out


MEASURED_VARIANTS = ("none",) + fusion.VARIANTS


def variants(decide_view):
    """The fusion policies whose builds' reports are min_latency's costs
    with fusion_cost=measured (the glue declares them in variants/); none
    otherwise."""
    chosen = decide_view.get("cost")
    return MEASURED_VARIANTS if chosen is not None and chosen["source"] == "measured" else ()


def tile_fused(pair, numbers, kernels, fused_scheme, budget=None):
    """A candidate's fused tiling, under a ram_cap within the tile budget it
    chose (as the layers)."""
    return fusion.solve_dw_pw(pair, dict(with_budget(numbers, kernels, budget), fused_scheme=fused_scheme))


def chains(graph):
    """The chains a patched step may run (their first layers' files read
    the others' views and plan slices)."""
    from ..fusion.patch import chains as patch_chains

    return patch_chains(graph)


def over_capacity(graph, view):
    """Whether no plan of the layers apart fits the activation level (its
    floor, every overlap at its best, is over the level's usable bytes) on
    a target with nowhere else for activations."""
    from ..planning.overlap import step_floors

    if "capacity" not in view:
        return False
    return max(step_floors(graph)[1], default=0) > view["capacity"]


def patch_view(numbers, kernels, memory, meta, tcfg):
    """What the patch tiler and its prices read (fusion/patch.py): the
    tiler's target, whether weights are read where they live (a target
    whose layers may run in place reads them there), the cost model's
    coefficients (None: MACs rank the options), segment overlap."""
    out = {"tiler": dict(numbers, kernels=kernels), "direct": "direct" in memory,
           "coefficients": meta["coefficients"], "dims": meta["dims"], "unit": tcfg["runner"]["counts"],
           "overlap": memory["overlap"]}
    if not any(k in memory for k in ("spill", "storage")):
        # nowhere else for activations: what the activation level holds is a RAM need of its own
        out["capacity"] = memory["levels"][memory["place"]["activations"]]["usable"]
    return out


def schedule(decide_view, graph, docs):
    """schedule.json from the layers' tilings, the candidates' fused tilings,
    (fusion_cost=measured) the variants' reports and (ram_cap)
    ram_budget.json, in any order."""
    tilings, fused, reports, budget = {}, {}, [], {}
    for t in docs:
        if "ram_cap" in t:
            budget = t          # with patched steps: the need they meet, at its tile budget
        elif "verdict" in t:
            reports.append(t)        # fusion_cost=measured: the variants' reports
        elif "group" in t:
            fused[t["group"]] = (fusion.pair_view(graph, *t["layers"]), t)
        else:
            tilings[t["layer"]] = t
    need = budget.get("patch_need")
    return decide.schedule(graph, tilings, fused, decide_view, reports, need, budget.get("patch_l1"))


def slices(sched, names):
    """{layer: its schedule slice} for the candidates' layers `names`: the
    step it runs in and whether it leads it (only the layers whose step
    changed are generated again)."""
    where = {name: s for s in sched["steps"] for name in s["layers"]}
    out = {name: {"layer": name, "step": where[name]["step"], "kind": where[name]["kind"],
                  "first": where[name]["layers"][0] == name} for name in names}
    for name, mine in out.items():
        if mine["kind"] == "patch" and mine["first"]:
            # what the step's code is generated from: its layers, tile and policy
            mine.update(layers=where[name]["layers"], patch=where[name]["patch"])
    return out


def rung_schedule(graph, fz, reports):
    """schedule(tilings, tgt) for planning.rambudget.choose: what the fused
    tile and schedule steps write at that budget (the same solvers, the same
    JSON). fz: the budget's {"decide", "scheme"}."""
    pairs = {c["group"]: json.loads(canon.dumps(fusion.pair_view(graph, *c["layers"])))
             for c in fz["decide"]["candidates"] if c["ok"]}

    def at_rung(tilings, tgt, need=None, patch_l1=None):
        ftgt = dict(tgt, fused_scheme=fz["scheme"])
        fused = {g: (pv, json.loads(canon.dumps(fusion.solve_dw_pw(pv, ftgt)))) for g, pv in sorted(pairs.items())}
        written = {n: json.loads(canon.dumps({k: x for k, x in t.items() if k not in SOLVE_FIELDS}))
                   for n, t in tilings.items()}
        sched = json.loads(canon.dumps(decide.schedule(graph, written, fused, fz["decide"], reports, need,
                                                       patch_l1 if need is not None else None)))
        return sched, {g: ft for g, (_, ft) in fused.items()}
    # the budget step tries patched steps when no rung fits without
    at_rung.patches = fz["decide"].get("patch") is not None
    return at_rung
