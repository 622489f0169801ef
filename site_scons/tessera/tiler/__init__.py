"""tessera.tiler: one CP-SAT tiling model per layer, L2 -> L1.

API
---
    tiling = solve_layer(layer, target)   # canonical, JSON-able dict
    for t in tiles(layer, tiling): ...    # the tiles, in execution order
    TILER_VERSION                         # bump when answers may change

`layer` (canonical projection of one IR layer, all ints): name, op (conv2d,
depthwise, pointwise, linear, add, maxpool, avgpool, matmul: tiled like
pointwise, its right operand counted as weights), in [H, W, C],
out [Ho, Wo, Co], kernel [kh, kw], stride [sh, sw], pad [top, left, bottom,
right], in_bytes, out_bytes, n_inputs, w_bytes_per_cout, param_bytes_per_cout.

`target`: l1_budget (bytes for tiles), cores, buffering (2 = double
buffering when tiled) and kernels (the parsed `tiler:` section of the
kernel library's library.yaml, schema below).

A layer whose whole working set fits L1 with buffering 1 is not tiled (one
tile). A layer with `rows: 1` in its view is cut in row bands (full width
and all output channels, else all channels) when the smallest such tile fits (the best of those by the
same objective), so its tile order consumes the input from the top down
(segment-level overlap, tessera.planning.overlap); otherwise it is searched as usual. Otherwise the output tile (th, tw, tc) maximizes the library
objective subject to

    buffering * (n_inputs*A(in_tile) + A(out_tile) + A(tc*w) + A(tc*params))
        + A(scratch) <= l1_budget

where in_tile is the largest input tile actually read (clipped at the
borders), with all C input channels for conv2d/pointwise/linear and tc for
depthwise/pools/add, and A() rounds a buffer up to the library's
buffer_align (4 by default, as the allocator places buffers; with 1 this is
the plain byte count). Tiles are uniform except the last of each axis;
padding falls only on border tiles (tile sizes that would pad an inner tile
are not legal). Ties are broken towards more channels, then wider, then
taller tiles, so the optimum is unique. The solve is deterministic (one
worker, fixed seed, deterministic work bound), and only a proven optimum is
returned (`optimal` is always true; a search that ends early is an error). A layer whose smallest legal tile does not
fit raises tessera.errors.FitError with the bytes needed and available.

Result: {"layer", "tiled", "tile": {h, w, c}, "in_tile": {h, w, c},
"n_tiles": {h, w, c}, "buffering", "n_inputs", "l1_bytes": {in, out,
weights, params, scratch, total}, "l1_budget", "optimal", "objective"}.
l1_bytes in/out/weights/params/scratch are the exact size of ONE buffer of
that kind ("in": one input's tile); total is the budget's left-hand side
above (what tessera.planning.alloc's l1_layout packs, with the same alignment).

Kernel library `tiler:` section (schema 1)
------------------------------------------
    tiler:
      schema: 1
      buffer_align: 4           # optional, default 4
      defaults:                 # inherited by every op
        scratch:   {<term name>: <term>, ...}
        objective: {<term name>: <term>, ...}
      ops:                      # every op the library has a kernel for
        <op>:
          scratch:   {...}      # merged over defaults by term name;
          objective: {...}      # a term set to null drops the default
          scratch_core_align: 4 # optional: each core's share of the scratch
                                # (scratch // cores) a multiple of it

    <term> = {coef: <int>, of: [<quantity>, ...], when: {<quantity>: <cond>}}
    value  = coef * product(of) if every condition holds, else 0
    <cond> = {multiple_of | equals | at_least | at_most: <int or constant>}

scratch is the kernel's working memory in bytes (the sum of its terms,
coef >= 0, allocated once, not buffered; with scratch_core_align a, rounded
up to a multiple of cores * a: the generated code gives each core
scratch // cores bytes at scratch + core * that); the objective (maximized) is the
sum of its terms. Quantities:

  constants  cores, buffering, l1_budget, l1_permille (= l1_budget // 1000,
             so bonuses can be a share of L1 and mean the same on every
             target), kh, kw, kernel_area (kh*kw), patch (kh*kw*C), in_h,
             in_w, in_c, out_h, out_w, out_c, in_bytes, out_bytes, n_inputs
  per tile   tile_h, tile_w, tile_c (output tile), border_h, border_w,
             border_c (last tile of each axis), n_tiles_h, n_tiles_w,
             n_tiles_c, n_tiles, in_tile_h, in_tile_w, in_tile_c (largest
             input tile), tile_volume (th*tw*tc), in_tile_bytes (all
             inputs), out_tile_bytes, weight_tile_bytes, param_tile_bytes
             (one buffer each)
  objective  scratch_bytes, l1_bytes (total, as in the budget constraint)
  only

With target["cost"] ({"coefficients", "dims"}: tile_cost=model) the tile
is instead the one the cost model estimates cheapest (costed.py).

Modules: layer (validation, op traits), geometry (tiles, input ranges,
per-axis tables), library (schema, terms), memory (bytes and quantities on
numbers), model (CP-SAT), enumerator (brute-force oracle for tests).
"""

from ..errors import FitError, TesseraError
from ..tiles import geometry
from . import layer as layer_mod, library, memory

TILER_VERSION = "1"


def _check_target(target):
    for key, lo in (("l1_budget", 0), ("cores", 1), ("buffering", 1)):
        v = target.get(key) if isinstance(target, dict) else None
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ValueError(f"tiler: target field {key!r} must be an int >= {lo}, got {v!r}")
    if not isinstance(target.get("kernels"), dict):
        raise ValueError("tiler: target field 'kernels' must be the library's tiler section")


def _result(layer, target, q, tiled, optimal, objective):
    split = {"split": {"k": q["tile_k"], "n": q["n_chunks"]}} if q.get("n_chunks", 1) > 1 else {}
    return {**split,
        "layer": layer["name"],
        "tiled": tiled,
        "tile": {"h": q["tile_h"], "w": q["tile_w"], "c": q["tile_c"]},
        "in_tile": {"h": q["in_tile_h"], "w": q["in_tile_w"], "c": q["in_tile_c"]},
        "n_tiles": {"h": q["n_tiles_h"], "w": q["n_tiles_w"], "c": q["n_tiles_c"]},
        "buffering": q["buffering"],
        **({"weight_buffers": q["weight_buffers"]} if q.get("weight_buffers", q["buffering"]) != q["buffering"] else {}),
        "n_inputs": layer["n_inputs"],
        "l1_bytes": memory.breakdown(q),
        "l1_budget": target["l1_budget"],
        "optimal": bool(optimal),
        "objective": int(objective),
    }


def _fit_error(layer, q, budget):
    name, op = layer["name"], layer["op"]
    H, W, C = layer["in"]
    need = {"conv2d": f"; every tile needs all {C} input channels",
            "pointwise": f"; every tile needs all {C} input channels",
            "linear": f"; every tile needs the whole {H * W * C}-element input"}.get(op, "")
    return FitError(
        where=f"layer {name}",
        what=(f"smallest tile ({q['tile_h']}x{q['tile_w']}x{q['tile_c']} outputs, "
              f"buffering {q['buffering']}) needs {q['l1_bytes']} bytes of L1 but only "
              f"{budget} are available{need}"),
        fix=(f"give the target more L1 (a larger L1 level, or fewer reserved bytes, in "
             f"the target YAML; at least {q['l1_bytes']} bytes free for tiles), use a "
             f"kernel library with less scratch, or shrink this layer"))


def _whole_bytes(layer, align, t):
    """(one input buffer, output buffer, total) for blocks of t rows or
    channels (layer["split"]; t = the full extent: the whole tensors)."""
    H, W, C = layer["in"]
    Ho, Wo, Co = layer["out"]
    split = layer.get("split", "")
    if split == "k":        # one input at a time, blocks of t along the concatenation axis
        other = Ho * Wo * Co // layer["out"][layer["axis"]]
        one_in, out = other * t * layer["in_bytes"], other * t * layer["out_bytes"]
        return one_in, out, memory.align_up(one_in, align) + memory.align_up(out, align)
    if split == "c":        # every input holds C channels of its own H x W
        one_in = max(layer["in_sizes"]) // C * t * layer["in_bytes"]
        out = Ho * Wo * t * layer["out_bytes"]
    elif split == "h":      # every input holds Ho rows' worth (of its own width and channels): a
        # transpose's, reshape's or gather's block of output rows reads as many input values
        one_in = max(layer["in_sizes"]) // Ho * t * layer["in_bytes"]
        out = t * Wo * Co * layer["out_bytes"]
    else:
        one_in = max(layer["in_sizes"]) * layer["in_bytes"]
        out = Ho * Wo * Co * layer["out_bytes"]
    total = layer["n_inputs"] * memory.align_up(one_in, align) + memory.align_up(out, align)
    # a row-wise layer's constant tables (views.whole_constants) beside the blocks
    total += memory.align_up(layer.get("const_bytes", 0), align)
    # a recurrent layer's constants stay in L1 for the whole sequence, beside its states
    total += memory.align_up(_resident(layer)[0], align) + memory.align_up(_resident(layer)[1], align)
    return one_in, out, total


def _resident(layer):
    """(weight bytes, scratch bytes) a whole-tensor layer keeps in L1 (a
    recurrent layer: its constants and its states); 0 for the others."""
    return layer["w_bytes_per_cout"] * layer["out"][2], layer.get("scratch_bytes", 0)


def _streamed(layer, one_in, out, weights, total, budget, stream):
    H, W, C = layer["in"]
    Ho, Wo, Co = layer["out"]
    return {
        "layer": layer["name"], "tiled": False,
        "tile": {"h": Ho, "w": Wo, "c": Co}, "in_tile": {"h": H, "w": W, "c": C},
        "n_tiles": {"h": 1, "w": 1, "c": 1}, "buffering": 1, "n_inputs": layer["n_inputs"],
        "l1_bytes": {"in": one_in, "out": out, "weights": weights, "params": 0,
                     "scratch": layer.get("scratch_bytes", 0), "total": total},
        "l1_budget": budget, "optimal": True, "objective": 0, "whole": True, "weight_buffers": 1,
        "stream": stream,
    }


def _stream_cells(layer, align, budget):
    """A recurrent cell whose gate matrices do not fit L1 beside its
    sequences and states: they stream through two L1 buffers a block of
    cells at a time (every gate's rows of those cells), every step, the
    rest of its constants resident; the largest block that fits. None when
    not even one cell's rows do."""
    one_in, out, _ = _whole_bytes(dict(layer, w_bytes_per_cout=0, scratch_bytes=0), align, 1)
    base = memory.align_up(one_in, align) * layer["n_inputs"] + memory.align_up(out, align)
    base += memory.align_up(layer.get("scratch_bytes", 0), align)
    cells = layer["cells"]
    resident = sum(b for role, b in layer["sections"].items() if role not in ("w_input", "w_recurrent"))
    for block in range(cells["n_cell"], 0, -1):
        buf = memory.align_up(cells["gates"] * block * cells["row_bytes"], align)
        total = base + memory.align_up(resident, align) + 2 * buf
        if total <= budget:
            return _streamed(layer, one_in, out, memory.align_up(resident, align) + 2 * buf, total, budget,
                             {"cells": block, "buffer": buf})
    return None


def _stream_matrices(layer, align, budget):
    """A recurrent layer whose constants do not fit L1 beside its sequences
    and states: its largest matrices stream through two L1 buffers a block
    of rows at a time, every step (the rest stays resident); the fewest
    matrices, then the largest blocks, that fit. None when nothing does."""
    one_in, out, _ = _whole_bytes(dict(layer, w_bytes_per_cout=0, scratch_bytes=0), align, 1)
    base = memory.align_up(one_in, align) * layer["n_inputs"] + memory.align_up(out, align)
    base += memory.align_up(layer.get("scratch_bytes", 0), align)
    order = sorted(layer["matrices"], key=lambda mx: -mx["rows"] * mx["cols"])
    streamed = []
    for mx in order:
        streamed.append(mx)
        resident = sum(b for role, b in layer["sections"].items() if role not in {m["role"] for m in streamed})
        cols = max(m["cols"] for m in streamed)
        for rows in range(max(m["rows"] for m in streamed), 0, -1):
            buf = memory.align_up(rows * cols, align)
            total = base + memory.align_up(resident, align) + 2 * buf
            if total <= budget:
                return _streamed(layer, one_in, out, memory.align_up(resident, align) + 2 * buf, total, budget,
                                 {"ops": sorted(m["op"] for m in streamed), "rows": rows, "buffer": buf})
    return None


def _solve_whole(layer, target):
    """A layer computed on whole tensors: every input and the output in L1
    at once (one buffer each, sized for the largest input); when that does
    not fit, blocks of channels or rows (layer["split"]), the largest that
    fit, one after the other; else a FitError."""
    H, W, C = layer["in"]
    Ho, Wo, Co = layer["out"]
    split = layer.get("split", "")
    extent = {"c": C, "h": Ho}.get(split, 1)
    if split == "k":
        if _whole_bytes(dict(layer, split=""), library.DEFAULT_ALIGN if "kernels" not in target else
                        target["kernels"].get("buffer_align", library.DEFAULT_ALIGN), 1)[2] <= target["l1_budget"]:
            split = ""      # every input and the output fit at once
        else:
            extent = max(layer["in_sizes"]) // (Ho * Wo * Co // layer["out"][layer["axis"]])
    layer = dict(layer, split=split)
    align = target["kernels"].get("buffer_align", library.DEFAULT_ALIGN)
    budget = target["l1_budget"]
    fits = [t for t in range(extent, 0, -1) if _whole_bytes(layer, align, t)[2] <= budget]
    if not fits and (layer.get("matrices") or layer.get("cells")):
        streamed = (_stream_matrices if layer.get("matrices") else _stream_cells)(layer, align, budget)
        if streamed is not None:
            return streamed
    if not fits:
        total = _whole_bytes(layer, align, 1)[2]
        unit = {"c": "one channel at a time", "h": "one row at a time",
                "k": "one input slice at a time"}.get(split, "whole tensors (not tiled)")
        raise FitError(
            where=f"layer {layer['name']}",
            what=(f"{layer['op']} is computed on {unit}: its {layer['n_inputs']} input(s) and output "
                  f"need {total} bytes of L1 but only {budget} are available"),
            fix="give the target more L1 (a larger L1 level, or fewer reserved bytes, in the target "
                "YAML), or shrink the tensors around this layer")
    t = fits[0]
    one_in, out, total = _whole_bytes(layer, align, t)
    n = -(-extent // t)
    tile = {"h": t if split == "h" else Ho, "w": Wo, "c": t if split == "c" else Co}
    if split == "k":
        tile["hwc"[layer["axis"]]] = t
    return {
        "layer": layer["name"], "tiled": n > 1 or split == "k",
        "tile": tile, "in_tile": {"h": t if split == "h" else H, "w": W, "c": t if split == "c" else C},
        "n_tiles": {"h": n if split == "h" else 1, "w": 1, "c": n if split == "c" else 1},
        "buffering": 1, "n_inputs": 1 if split == "k" else layer["n_inputs"],
        "l1_bytes": {"in": one_in, "out": out, "weights": _resident(layer)[0], "params": layer.get("const_bytes", 0),
                     "scratch": _resident(layer)[1], "total": total},
        "l1_budget": budget, "optimal": True, "objective": 0, "whole": True, "weight_buffers": 1,
    }


def solve_layer(layer, target):
    """The L2 -> L1 tiling of one layer (see the module docstring). A layer
    with "rows": 1 (it reads or writes a tensor on a storage level) takes
    row bands of every channel when one fits, else any tile. A layer with
    "storage_out": 1 (its output will live on a storage level, its weights
    not) cut in channel slices walks its tiles row band first
    (`order: hcw`): a band of every channel is gathered in SRAM and written
    to storage once (docs/out_of_core.md), its weights reloaded per band."""
    if layer.get("storage_out"):
        result = solve_layer({k: v for k, v in layer.items() if k != "storage_out"}
                             | ({"storage_out_sliced": 1} if layer.get("band_weights") else {}), target)
        if result["tiled"] and result["tile"]["c"] < layer["out"][2] and result["tile"]["h"] < layer["out"][0]:
            result["order"] = "hcw"
        return result
    try:
        return _solve_any(layer, target, False)
    except FitError as err:
        # one output's reduction does not fit: the same again, its input
        # channels in chunks (docs/split_reduction.md)
        if layer["op"] not in memory.SPLIT_OPS or layer.get("whole") or layer["in"][2] < 2:
            raise
        try:
            return _solve_any(layer, target, True)
        except FitError:
            raise err from None


def _solve_any(layer, target, split):
    if layer.get("band_in") or layer.get("band_out"):
        # the SRAM share of a band on the card is a wish: a layer whose
        # smallest band exceeds it is tiled as without it
        try:
            return _solve_rows(layer, target, split)
        except FitError:
            layer = {k: v for k, v in layer.items() if k not in ("band_in", "band_out")}
    return _solve_rows(layer, target, split)


def _solve_rows(layer, target, split):
    if layer.get("rows"):
        # row bands of every channel, else tiles of every channel, else any
        for rows in (1, "c"):
            try:
                return _solve_layer(dict(layer, rows=rows), target, split)
            except FitError:
                pass
        return _solve_layer({k: v for k, v in layer.items() if k != "rows"}, target, split)
    return _solve_layer(layer, target, split)


def _solve_layer(layer, target, split=False):
    layer_mod.check(layer)
    _check_target(target)
    if layer.get("whole"):
        return _solve_whole(layer, target)
    spec = library.op_spec(target["kernels"], layer["op"])
    tables = tuple(geometry.axis_table(*ax) for ax in geometry.axes(layer))
    Ho, Wo, Co = layer["out"]
    budget = target["l1_budget"]

    # The whole layer at once, single-buffered: no tiling, no DMA overlap
    # needed, always preferred when it fits.
    whole = memory.quantities(layer, target, spec, Ho, Wo, Co, 1, tables)
    if whole["l1_bytes"] <= budget:
        return _result(layer, target, whole, False, True, spec.objective_value(whole))

    buffering = target["buffering"]
    smallest = (min(tables[0]), min(tables[1]), 1)
    tk = 1 if split else None
    q_small = memory.quantities(layer, target, spec, *smallest, buffering, tables, tk)
    small_fits = q_small["l1_bytes"] <= budget
    consts = memory.constants(layer, target, buffering)
    # CP-SAT (ortools, which loads pandas) only when a layer needs a search:
    # declaring a build's steps imports this package without solving
    from . import model
    r = None
    if layer.get("rows"):
        # row bands (the memory plan asked: see tessera.planning.overlap.row_band_layers):
        # full width and all channels when such a tile fits, else all
        # channels; else the usual search
        for tw in (Wo, None):
            if tw is not None and tw not in tables[1]:
                continue
            q_rows = memory.quantities(layer, target, spec, smallest[0], tw or smallest[1], Co,
                                       buffering, tables, tk)
            if q_rows["l1_bytes"] <= budget:
                r = model.solve(layer, target, spec, tables, consts, buffering,
                                hint=(smallest[0], tw or smallest[1], Co), tile_c=Co, tile_w=tw, split=split)
                if r["status"] == "optimal":
                    break
    if r is None or r["status"] != "optimal":
        # channel slices of a band on the card: the fewest bands first (each
        # reloads the layer's weights), then the library's objective
        bands = (model.fewest_bands(layer, target, spec, tables, consts, buffering, split)
                 if layer.get("band_out") and layer.get("storage_out_sliced") else None)
        r = model.solve(layer, target, spec, tables, consts, buffering,
                        hint=smallest if small_fits and bands is None else None, split=split, n_tiles_h=bands)
    if r["status"] == "infeasible" or (r["status"] == "unknown" and not small_fits):
        raise _fit_error(layer, q_small, budget)
    if r["status"] != "optimal":
        # Never seen on real layers, and never stored: a tile the solver did
        # not prove would be an answer that depends on where its search
        # stopped, and the build would keep it as up to date.
        raise TesseraError(f"layer {layer['name']}",
                           f"the tiler's CP-SAT search ended ({r['status']}) before proving the best tile",
                           f"raise tessera.tiler.model.MAX_DETERMINISTIC_TIME "
                           f"({model.MAX_DETERMINISTIC_TIME}) and report the layer's shape")
    q = memory.quantities(layer, target, spec, *r["tile"], buffering, tables, r.get("tile_k"))
    objective = spec.objective_value(q)
    if q["l1_bytes"] != r["l1_bytes"] or objective != r["objective"]:
        raise RuntimeError(f"tiler: CP-SAT model and byte count disagree on layer "
                           f"{layer['name']} tile {r['tile']}: {r} vs l1_bytes "
                           f"{q['l1_bytes']}, objective {objective}")
    if target.get("cost"):        # tile_cost=model: the library's tile is one candidate (costed.py)
        from . import costed
        q = costed.best_tile(layer, target, spec, tables, buffering, q,
                             lambda q: _result(layer, target, q, True, True, 0))
        objective = spec.objective_value(q)
    return _result(layer, target, q, True, r["status"] == "optimal", objective)


def explain(layer, target, tiling):
    """Why the tile is what it is, for the report: {"bound": what stopped
    it growing ("whole layer": it fits L1 whole; "L1 budget": the next
    larger tile on some axis needs more L1 than the budget; "objective":
    every larger tile fits but the library's objective, or the cost model
    with tile_cost=model, prefers this one; "whole tensors": computed
    whole or in blocks), "axes": per cut axis the next larger tile size and
    what it would need or score, and "runner_up": the best-scoring tile one
    step away on one axis (a cheap neighbour, not the global second best)}.
    Plain arithmetic on memory.quantities: no solve."""
    budget = target["l1_budget"]
    tile = tiling["tile"]
    if tiling.get("whole"):
        return {"bound": "whole tensors", "l1_bytes": tiling["l1_bytes"]["total"], "l1_budget": budget}
    if not tiling["tiled"]:
        return {"bound": "whole layer", "l1_bytes": tiling["l1_bytes"]["total"], "l1_budget": budget}
    layer = dict(layer)
    if layer.get("storage_out"):
        layer.pop("storage_out")
    spec = library.op_spec(target["kernels"], layer["op"])
    tables = tuple(geometry.axis_table(*ax) for ax in geometry.axes(layer))
    buffering = tiling["buffering"]
    now = (tile["h"], tile["w"], tile["c"])
    q0 = memory.quantities(layer, target, spec, *now, buffering, tables)
    score = spec.objective_value(q0) if q0 else None
    extent = dict(zip("hwc", layer["out"]))
    sizes = {"h": sorted(tables[0]), "w": sorted(tables[1]), "c": list(range(1, extent["c"] + 1))}
    axes, near = {}, []
    for k, axis in enumerate("hwc"):
        for step in (1, -1):
            legal = [t for t in sizes[axis] if (t > now[k] if step > 0 else t < now[k])]
            if not legal:
                continue
            t = legal[0] if step > 0 else legal[-1]
            cand = list(now)
            cand[k] = t
            q = memory.quantities(layer, target, spec, *cand, buffering, tables)
            if q is None:
                continue
            row = {"tile": dict(zip("hwc", cand)), "l1_bytes": q["l1_bytes"], "objective": spec.objective_value(q)}
            if q["l1_bytes"] <= budget:
                near.append(row)
            if step > 0:
                row["why"] = "L1 budget" if q["l1_bytes"] > budget else "objective"
                axes[axis] = row
    bound = ("row bands" if layer.get("rows") else
             "L1 budget" if any(a["why"] == "L1 budget" for a in axes.values()) else
             "cost model" if target.get("cost") else "objective")
    out = {"bound": bound, "l1_bytes": tiling["l1_bytes"]["total"], "l1_budget": budget, "objective": score,
           "axes": axes}
    if near:
        out["runner_up"] = max(near, key=lambda r: (r["objective"], -r["l1_bytes"]))
    return out


def tiles(layer, tiling):
    """Every tile of `tiling`, in execution order (see geometry.tiles)."""
    return geometry.tiles(layer, tiling)


def grid(layer, tiling):
    """The same tiles as per-axis tables (see geometry.grid)."""
    return geometry.grid(layer, tiling)


__all__ = ["solve_layer", "explain", "tiles", "grid", "TILER_VERSION"]
