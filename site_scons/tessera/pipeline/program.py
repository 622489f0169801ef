"""The out-of-core program (docs/out_of_core.md), on a target with a
storage level: the IO scheduler's program for this build's tiles
(tessera.storage.firmware) as program.json and src/program.c
(tessera.codegen.program), and the card's image, storage.bin."""

from .. import ir
from ..storage import costs


def view(tcfg, cg):
    """What the program step reads of the target: the pools' room (None:
    the arena's free bytes; 0: no program; else dedicated bytes), the
    card's costs and what tessera.cost needs to find the coefficients (a
    same-core target's when this one has none)."""
    act = tcfg["place"]["activations"]
    level = cg["storage"]["level"]
    return {"prefix": cg["prefix"], "act_level": act, "clock_hz": tcfg["clock_hz"],
            "section": cg["sections"]["activations"],
            "pools": tcfg["memory"][act]["reserved"].get("pools"),
            "storage": {"level": level, "costs": costs.storage_params(tcfg["memory"][level])},
            "cost_target": {k: tcfg[k] for k in ("name", "kernels", "cores", "place", "dma", "platform",
                                                 "toolchain", "runner", "cost_model") if k in tcfg}}


def program(graph, the_plan, sched, v, tilings):
    """(src/program.c, program.json): the program the firmware executes, or
    why it runs in order. Each layer's compute is the cost model's count
    when the target has coefficients, else 2 cycles per MAC (an assumption;
    the report replays the program with the measured counts)."""
    from ..codegen.program import c_source
    from ..cost import api
    from ..storage import firmware

    compute, modelled = [], 0
    for layer in graph.layers:
        n = api.estimate_layer(v["cost_target"], layer, graph, tilings[layer.name])
        modelled += n is not None
        n = 2 * ir.macs(layer, graph) if n is None else n
        compute.append(int(round(n * 1e9 / v["clock_hz"])))
    res = firmware.build(graph, the_plan, tilings, sched["steps"], v["storage"], v["pools"], compute)
    keep = {k: res[k] for k in ("why", "candidate", "estimate_ns", "in_order_ns", "pools", "phases", "problem",
                                "program", "io") if res.get(k) is not None}
    keep["compute"] = f"cost model for {modelled} of {len(compute)} layers, else 2 cycles per MAC"
    keep["totals"] = firmware.totals(res)
    return c_source(v["prefix"], v["act_level"], res, len(graph.layers), v["section"]), keep


def image(graph, weights, the_plan, tgt):
    """storage.bin: the storage layers' constants, then room for the
    activations swapped out (the runner hands the firmware a copy)."""
    from ..codegen import image as card

    return card.image(graph, weights, the_plan, tgt)
