"""Patched steps chosen under a RAM need (tessera.tiles.patches: a chain of
layers run patch by patch, its intermediates only as buffers in the tile
level).

Which chains: runs of layers in execution order (convolution, depthwise,
pointwise, pooling, adds) with one input from outside and every tensor in
between read only inside (`chains`, from the graph alone): the first,
high-resolution stages of a MobileNet (MCUNetV2, StreamNet), an inverted
bottleneck with its residual add (vMCU's multi-layer kernel), or longer.

How, under a budget of activation bytes (`need`: a ram_cap's share of the
activation level, or min_memory's least), as msf-CNN does: the schedule is
a path over the layer chain, each edge a step (a layer, a fused group the
selector chose, or a patched chain at its best tile and halo policy), each
step's activation footprint (the whole tensors live while it runs, a
patched step's intermediates gone, its output overlapping its consumed
input as far as its patches allow) at most `need`, the cost (the cost
model's estimate, else MACs) least: a dynamic program over the step
boundaries. A chain is only offered where it covers a step over the need:
with no RAM need nothing is patched, so the default never pays for patches
it does not need.

Each chain's options come from the patch tiler (tiler/patch.py): every
tile and policy that fits the tile level, priced by cost/patched.py; the
cheapest is the chain's; the others and the neighbouring chains are
recorded as the alternatives with the reason they lost.
"""

from .. import ir
from ..config.views import is_whole, param_arrays
from ..cost import model as cost_model, patched as cost_patched
from ..planning.overlap import row_band_layers, step_floors
from ..tiler import patch as patch_tiler
from ..tiler.patch import chain_view
from ..tiles import patches
from ..tiles.geometry import steps_gap

MAX_LAYERS = 16


def _why_not_layer(layer, graph):
    if layer.op not in patches.OPS:
        return f"{layer.op} has no patched form"
    if is_whole(layer, graph):
        return "computed on whole tensors"
    if layer.dilation and list(layer.dilation) != [1, 1]:
        return "dilated"
    if any(len(graph.tensor(n).shape) != 3 or graph.tensor(n).dtype != "int8" for n in layer.inputs + [layer.output]):
        return "not int8 HWC tensors"
    if layer.op != "maxpool" and layer.requant is None:
        return "int32 output"
    if layer.requant is not None and (layer.requant.shape or layer.requant.divisor):
        return "parameters per element"
    if layer.op == "avgpool" and any(layer.pad):
        return "a padded average pool"
    if layer.op == "add" and (len(layer.inputs) != 2 or layer.in_shift or param_arrays(layer)):
        return "an add whose requantization is not one per tensor"
    return None


def chains(graph, most=MAX_LAYERS):
    """[[layer name]] of every chain of 2 to `most` layers (module
    docstring), in order of first layer then length."""
    ok = [_why_not_layer(layer, graph) is None for layer in graph.layers]
    readers = graph.readers()
    out = []
    n = len(graph.layers)
    for i in range(n):
        if not ok[i] or len(graph.layers[i].inputs) != 1:
            continue
        x = graph.layers[i].inputs[0]
        inside = set()
        for j in range(i, min(n, i + most)):
            layer = graph.layers[j]
            if not ok[j] or any(t != x and t not in inside for t in layer.inputs):
                break
            inside.add(layer.output)
            if j > i and all(max(readers.get(t, [n])) <= j and t not in graph.outputs
                             for t in inside - {layer.output}):
                out.append([m.name for m in graph.layers[i:j + 1]])
    return out


def group_name(names):
    return f"{names[0]}..{names[-1]}"


def form(graph, names):
    """"inverted bottleneck" for expand 1x1, depthwise, project 1x1 (and the
    residual add of the block's input), vMCU's multi-layer kernel; else
    "stages" (MCUNetV2's patched first stages, or any other chain)."""
    layers = [graph.layer(n) for n in names]
    ops = [layer.op for layer in layers]
    if ops[:3] == ["pointwise", "depthwise", "pointwise"] and (
            len(ops) == 3 or (len(ops) == 4 and ops[3] == "add" and layers[0].inputs[0] in layers[3].inputs)):
        return "inverted bottleneck"
    return "stages"


# Priced options of the chains this process has seen, whatever the tile
# budget (the ram_cap step asks at every rung; its schedules and the schedule
# step's are the same function of the same data): (what the prices read,
# the chain) -> options
_priced = {}


class Patcher:
    """Chains' options and prices for one graph and target, memoized (the
    budget step asks at every rung). ctx: {"tiler": the tiler's target
    (l1_budget, cores, kernels), "direct": weights read where they live,
    "coefficients": the cost model's or None, "dims": the activation DMA's
    dimensions, "unit": what the estimates count, "overlap": segment
    overlap on}."""

    def __init__(self, graph, ctx):
        from ..util import canon

        self.graph, self.ctx = graph, ctx
        self.key = canon.digest({k: v for k, v in dict(ctx, tiler=dict(ctx["tiler"], l1_budget=0)).items()})
        self.valid = {tuple(c) for c in chains(graph)}
        self._opts = {}
        self.producer, self.last = graph.producer(), graph.last_use()
        self.index = {layer.name: i for i, layer in enumerate(graph.layers)}

    def options(self, names):
        """The chain's options, cheapest first: [{"tile", "policy",
        "l1_bytes", "cost", "estimate" or "macs", "gap", ...}]."""
        key = tuple(names)
        if key not in self._opts:
            from ..util import canon

            whole = (self.key, canon.dumps(chain_view(self.graph, names)))
            if whole not in _priced:
                _priced[whole] = self._price(names)
            budget = self.ctx["tiler"]["l1_budget"]
            self._opts[key] = [o for o in _priced[whole] if o["l1_bytes"]["total"] <= budget]
        return self._opts[key]

    def _price(self, names):
        chain = chain_view(self.graph, names)
        tgt = self.ctx["tiler"]
        out = []
        x, y = chain["tensors"][0], chain["tensors"][-1]
        for opt in patch_tiler.options(chain, tgt, self.ctx.get("direct", False), budget=False):
            prog = opt.pop("program")
            wins = patches.windows(chain, prog)
            summary = dict(opt, transfers=sum(len(r) + len(w) for r, w in wins)
                           + sum(1 for o in prog["ops"] if o["op"] == "shift"))
            feats = cost_patched.features(chain, patches.calls(chain, prog), summary, tgt["cores"],
                                          self.ctx.get("direct", False))
            macs, calls = cost_patched.proxy(feats)
            entry = dict(opt, macs=macs, calls=calls,
                         gap=steps_gap(wins, x["shape"], x["esize"], y["shape"], y["esize"]))
            coefs = self.ctx.get("coefficients")
            if coefs is not None:
                entry["estimate"] = cost_patched.estimate(coefs, chain, feats)
                entry["cost"] = (entry["estimate"], calls)
            else:
                entry["cost"] = (macs, calls)
            out.append(entry)
        out.sort(key=lambda e: (e["cost"], e["l1_bytes"]["total"], e["policy"], e["tile"]))
        return out

    def footprint(self, a, b, drop=(), opt=None, least=False):
        """Activation bytes live while steps [a, b) run: every tensor whose
        life meets them but `drop` (the step's intermediates); with a
        patched step's option, its output may overlap its consumed input by
        the option's gap (least: by as much as any option could)."""
        g = self.graph
        total = 0
        for name, t in g.tensors.items():
            if name in drop or (name not in self.producer and name not in g.inputs):
                continue
            start = 0 if name in g.inputs else self.producer[name]
            end = self.last.get(name, start)
            if start <= b - 1 and end >= a:
                total += t.nbytes
        if (opt is not None or least) and self.ctx.get("overlap", True):
            first, last = g.layers[a], g.layers[b - 1]
            x = first.inputs[0]
            if x not in g.inputs and x not in g.outputs and self.last.get(x) == b - 1 \
                    and last.output not in g.outputs:
                xs, ys = g.tensor(x).nbytes, g.tensor(last.output).nbytes
                total -= xs + ys - max(xs + (0 if least else opt["gap"]), ys)
        return total


def _layer_costs(graph, tilings, ctx):
    """Per layer its cost apart: the cost model's estimate on its tiling,
    else (MACs, tiles)."""
    from ..cost import features

    coefs = ctx.get("coefficients")
    out = {}
    for layer in graph.layers:
        t = tilings[layer.name]
        f = features.layer_features(layer, graph, t, ctx.get("dims", 2), ctx["tiler"]["cores"])
        if coefs is not None:
            out[layer.name] = (cost_model.estimate(coefs, layer.op, f, t.get("buffering", 2)), f["tiles"])
        else:
            out[layer.name] = (f["macs"], f["tiles"])
    return out


def _add(a, b):
    return (a[0] + b[0], a[1] + b[1])


def plan(graph, steps, tilings, need, ctx, patcher=None):
    """The steps with patched chains where a step's footprint is over
    `need` (module docstring): (steps, record) or (None, record) when no
    path fits. steps: the selector's (layers and fused groups)."""
    p = patcher or Patcher(graph, ctx)
    index = p.index
    costs = _layer_costs(graph, tilings, ctx)
    live, floors = step_floors(graph)
    banded = set(row_band_layers(graph)) if ctx.get("overlap", True) else set()
    starts = {}
    for s in steps:
        a = index[s["layers"][0]]
        b = a + len(s["layers"])
        if s["kind"] == "layer":
            fp = floors[a] if s["layers"][0] in banded else live[a]
        else:
            inner = {graph.layer(n).output for n in s["layers"][:-1]}
            fp = p.footprint(a, b, inner)
        cost = (0, 0)
        for n in s["layers"]:
            cost = _add(cost, costs[n])
        starts[a] = (b, s, fp, cost)
    n = len(graph.layers)
    hot = [False] * n
    for a, (b, s, fp, _) in starts.items():
        if fp > need:
            for i in range(a, b):
                hot[i] = True
    best = [None] * (n + 1)
    best[0] = ((0, 0), 0, [])
    evaluated = {}
    for i in range(n):
        if best[i] is None or i not in starts:
            continue
        cost, chosen, path = best[i]
        b, s, fp, c = starts[i]
        if fp <= need:
            cand = (_add(cost, c), chosen, path + [("step", s)])
            if best[b] is None or cand[:2] < best[b][:2]:
                best[b] = cand
        for j in range(i + 2, min(n, i + MAX_LAYERS) + 1):
            if j not in starts and j != n:
                continue
            names = [layer.name for layer in graph.layers[i:j]]
            if tuple(names) not in p.valid or not any(hot[i:j]):
                continue
            drop = {graph.layer(m).output for m in names[:-1]}
            if p.footprint(i, j, drop, least=True) > need:
                continue        # its input and output alone are over the need: not priced
            opts = p.options(names)
            fits = [o for o in opts if p.footprint(i, j, drop, o) <= need]
            evaluated[group_name(names)] = {"layers": names, "best": opts[0] if opts else None,
                                            "fits": fits[0] if fits else None,
                                            "footprint": p.footprint(i, j, drop, fits[0] if fits else
                                                                     (opts[0] if opts else None))}
            if not fits:
                continue
            cand = (_add(cost, fits[0]["cost"]), chosen + 1, path + [("patch", names, fits[0])])
            if best[j] is None or cand[:2] < best[j][:2]:
                best[j] = cand
    record = {"need": need, "evaluated": len(evaluated)}
    if best[n] is None:
        return None, record
    record["cost"] = list(best[n][0])
    out = []
    for item in best[n][2]:
        if item[0] == "step":
            out.append(item[1])
            continue
        _, names, opt = item
        g = group_name(names)
        i = index[names[0]]
        apart = (0, 0)
        for m in names:
            apart = _add(apart, costs[m])
        drop = {graph.layer(m).output for m in names[:-1]}
        entry = {"step": g, "kind": "patch", "layers": names, "form": form(graph, names),
                 "patch": {"direct": bool(ctx.get("direct")), "align": ctx["tiler"]["kernels"].get("buffer_align", 4),
                           **{k: opt[k] for k in ("tile", "policy", "patches", "l1_bytes", "macs", "calls", "gap",
                                               "loaded", "stored", "shifted")}},
                 "footprint": p.footprint(i, i + len(names), drop, opt)}
        unit = ctx.get("unit", "MACs") if ctx.get("coefficients") is not None else "MACs"
        if "estimate" in opt:
            entry["patch"]["estimate"] = opt["estimate"]
        n = opt["patches"]
        entry["reason"] = (f"its layers apart keep {max(starts[index[m]][2] for m in names if index[m] in starts)} B "
                           f"of activations live, over the need of {need} B; in {n} patch{'es' if n != 1 else ''} "
                           f"of {opt['tile'][0]}x{opt['tile'][1]} output pixels (halos "
                           f"{'recomputed' if opt['policy'] == 'recompute' else 'cached'}) it keeps "
                           f"{entry['footprint']} B and takes {opt['l1_bytes']['total']} of the tile level's "
                           f"{ctx['tiler']['l1_budget']} B, at {opt['cost'][0]} {unit} against {apart[0]} apart")
        entry["alternatives"] = _alternatives(names, opt, p.options(names), evaluated, need, unit,
                                              ctx["tiler"]["l1_budget"], p)
        out.append(entry)
    return out, record


def _alternatives(names, chosen, opts, evaluated, need, unit, budget, p):
    """What the chosen chain beat: its own best option of each policy and
    tile shape (first few), and the chains over the same layers."""
    out = []
    i0 = p.index[names[0]]
    drop = {p.graph.layer(m).output for m in names[:-1]}
    seen = {(tuple(chosen["tile"]), chosen["policy"])}
    for o in opts:
        key = (tuple(o["tile"]), o["policy"])
        if key in seen:
            continue
        seen.add(key)
        fp = p.footprint(i0, i0 + len(names), drop, o)
        why = (f"needs {fp} bytes of activations, over {need}" if fp > need
               else f"{o['cost'][0]} {unit}, not fewer than {chosen['cost'][0]}")
        out.append({"layers": group_name(names), "tile": o["tile"], "policy": o["policy"],
                    "l1_bytes": o["l1_bytes"]["total"], "cost": o["cost"][0], "why": why})
        if len(out) >= 4:
            break
    mine = set(names)
    others = sorted((g for g, e in evaluated.items() if set(e["layers"]) & mine and e["layers"] != names),
                    key=lambda g: (evaluated[g]["best"]["cost"] if evaluated[g]["best"] else (1 << 62, 0), g))
    for g in others[:4]:
        e = evaluated[g]
        if e["best"] is None:
            why = f"no tile fits the {budget} bytes of the tile level"
            out.append({"layers": g, "why": why})
            continue
        o = e["fits"] or e["best"]
        why = (f"needs {e['footprint']} bytes of activations, over {need}" if e["fits"] is None
               else f"{o['cost'][0]} {unit} (with the steps around it the path costs more)")
        out.append({"layers": g, "tile": o["tile"], "policy": o["policy"], "l1_bytes": o["l1_bytes"]["total"],
                    "cost": o["cost"][0], "why": why})
    return out


def least_need(graph, steps, tilings, ctx):
    """min_memory: the least activation need any path meets, and the
    cheapest steps that meet it (each round asks for less than the last
    path's highest footprint, until no path fits)."""
    p = Patcher(graph, ctx)
    got, _ = plan(graph, steps, tilings, float("inf"), ctx, p)
    cur = _peak(p, graph, got)
    while True:
        got, _ = plan(graph, steps, tilings, cur - 1, ctx, p)
        if got is None:
            break
        cur = _peak(p, graph, got)
    return plan(graph, steps, tilings, cur, ctx, p)


def _peak(p, graph, steps):
    live, floors = step_floors(graph)
    banded = set(row_band_layers(graph)) if p.ctx.get("overlap", True) else set()
    top = 0
    for s in steps:
        a = p.index[s["layers"][0]]
        if s["kind"] == "patch":
            top = max(top, s["footprint"])
        elif s["kind"] == "layer":
            top = max(top, floors[a] if s["layers"][0] in banded else live[a])
        else:
            inner = {graph.layer(n).output for n in s["layers"][:-1]}
            top = max(top, p.footprint(a, a + len(s["layers"]), inner))
    return top
