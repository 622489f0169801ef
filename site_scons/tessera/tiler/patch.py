"""The patch tiler: every patch tile and halo policy a chain of layers may
run in (tessera.tiles.patches), with what each takes in the tile level.

A patched step's tile level holds, each aligned (codegen/patched.py lays
them out in this order):

    the buffers of tiles.patches.program     chain tensors' held rows, the
                                              output patch (two of them)
    per layer: weights, parameters           loaded once (unless they are
                                              read where they live: `direct`)
    scratch                                  the largest any call of any
                                              layer needs (the library's own
                                              terms for that call's tile)

A tile is (rows, columns) of the chain's output per patch: rows among the
splits of the output height into 1 to ROW_SPLITS even bands, columns into 1
to COL_SPLITS strips. Every combination with both policies is laid out;
those that fit the budget are the options (fusion/patch.py prices them and
the selector chooses).
"""

from .. import ir
from ..config.views import tiler_layer
from ..tiles import patches
from . import memory
from .library import DEFAULT_ALIGN, op_spec

ROW_SPLITS = 16
COL_SPLITS = 4


def splits(n, most):
    """The patch sizes that cut n into 1..most near-even parts."""
    return sorted({-(-n // k) for k in range(1, min(n, most) + 1)}, reverse=True)


def tiles(chain):
    Ho, Wo, _ = chain["tensors"][-1]["shape"]
    return [(ph, pw) for pw in splits(Wo, COL_SPLITS) for ph in splits(Ho, ROW_SPLITS)]


def _call_view(layer, chain, call):
    """A layer's tiler view restricted to one call: the call's input and
    output box, its padding."""
    h, w, ih, iw, pad = call
    ci = chain["tensors"][layer["inputs"][0]]["shape"][2]
    co = chain["tensors"][layer["output"]]["shape"][2]
    return dict(layer["view"], **{"in": [ih, iw, ci], "out": [h, w, co], "pad": list(pad)})


def scratch(chain, prog, target, memo=None):
    """The largest scratch a call of the step needs: each layer's library
    terms (tiler section) for its call's tile, every output channel.
    memo: {(layer, call): bytes} shared by a chain's programs."""
    memo = {} if memo is None else memo
    most = 0
    for o in prog["ops"]:
        if o["op"] != "call":
            continue
        call = (o["out"][1], o["out"][2], o["in"][1], o["in"][2], tuple(o["pad"]))
        key = (o["layer"], call)
        if key not in memo:
            layer = chain["layers"][o["layer"]]
            v = _call_view(layer, chain, call)
            # the call is one tile of its own view: its axes' tables hold that tile only
            tables = ({call[0]: (1, call[0], call[2])}, {call[1]: (1, call[1], call[3])})
            q = memory.quantities(v, target, _spec(target["kernels"], v["op"]), call[0], call[1], v["out"][2], 1,
                                  tables)
            memo[key] = q["scratch_bytes"]
        most = max(most, memo[key])
    return most


_specs = {}


def _spec(kernels, op):
    key = (id(kernels), op)
    if key not in _specs:
        _specs[key] = (kernels, op_spec(kernels, op))
    return _specs[key][1]


def l1_bytes(chain, prog, target, direct=False, memo=None):
    """{"buffers", "weights", "params", "scratch", "total"} of the step;
    `direct`: weights and parameters read where they live (no copy)."""
    a = target["kernels"].get("buffer_align", DEFAULT_ALIGN)
    weights = params = 0
    if not direct:
        for layer in chain["layers"]:
            co = chain["tensors"][layer["output"]]["shape"][2]
            weights += memory.align_up(layer["view"]["w_bytes_per_cout"] * co, a)
            params += memory.align_up(layer["view"]["param_bytes_per_cout"] * co, a)
    s = scratch(chain, prog, target, memo)
    out = {"buffers": prog["bytes"], "weights": weights, "params": params, "scratch": s}
    out["total"] = prog["bytes"] + weights + params + memory.align_up(s, a)
    return out


def options(chain, target, direct=False, budget=True):
    """Every tile and policy the chain runs in within target["l1_budget"]
    (budget=False: whatever their bytes):
    [{"tile", "policy", "patches", "l1_bytes", "loaded", "stored",
    "shifted", "program"}] (the program is a function of the tile and the
    policy: what a step records is those two)."""
    a = target["kernels"].get("buffer_align", DEFAULT_ALIGN)
    out, memo = [], {}
    for tile in tiles(chain):
        for policy in patches.POLICIES:
            try:
                prog = patches.program(chain, tile, policy, a)
                sizes = l1_bytes(chain, prog, target, direct, memo)
            except patches.Infeasible:
                continue
            if budget and sizes["total"] > target["l1_budget"]:
                continue
            out.append({"tile": list(tile), "policy": policy, "patches": prog["patches"], "l1_bytes": sizes,
                        "loaded": prog["loaded"], "stored": prog["stored"], "shifted": prog["shifted"],
                        "program": prog})
    return out


def chain_view(graph, names):
    """The chain as tiles.patches takes it, each layer with its tiler view
    and input offset (the cost model's)."""
    layers = [graph.layer(n) for n in names]
    first = layers[0].inputs[0]
    index = {first: 0}
    tensors = [first]
    for layer in layers:
        index[layer.output] = len(tensors)
        tensors.append(layer.output)
    return {"name": f"{names[0]}..{names[-1]}",
            "tensors": [{"name": t, "shape": list(graph.tensor(t).shape), "esize": ir.DTYPES[graph.tensor(t).dtype]}
                        for t in tensors],
            "layers": [{"name": layer.name, "op": layer.op, "kernel": list(layer.kernel),
                        "stride": list(layer.stride), "pad": list(layer.pad),
                        "inputs": [index[t] for t in layer.inputs], "output": index[layer.output],
                        "input_offset": layer.input_offset, "view": tiler_layer(layer, graph)}
                       for layer in layers]}


def step_program(graph, step):
    """(chain, program) of a patched step of schedule.json (its layers, its
    "patch": tile, policy, alignment), as the planner and the code
    generator rebuild it."""
    chain = chain_view(graph, step["layers"])
    p = step["patch"]
    return chain, patches.program(chain, p["tile"], p["policy"], p["align"])
