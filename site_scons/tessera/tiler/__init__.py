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

    <term> = {coef: <int>, of: [<quantity>, ...], when: {<quantity>: <cond>}}
    value  = coef * product(of) if every condition holds, else 0
    <cond> = {multiple_of | equals | at_least | at_most: <int or constant>}

scratch is the kernel's working memory in bytes (the sum of its terms,
coef >= 0, allocated once, not buffered); the objective (maximized) is the
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
    return {
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
    # a row-wise layer's constant tables (views.whole_constants) beside the blocks
    total = (layer["n_inputs"] * memory.align_up(one_in, align) + memory.align_up(out, align)
             + memory.align_up(layer.get("const_bytes", 0), align))
    return one_in, out, total


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
        "l1_bytes": {"in": one_in, "out": out, "weights": 0, "params": layer.get("const_bytes", 0), "scratch": 0,
                     "total": total},
        "l1_budget": budget, "optimal": True, "objective": 0, "whole": True,
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
        result = solve_layer({k: v for k, v in layer.items() if k != "storage_out"}, target)
        if result["tiled"] and result["tile"]["c"] < layer["out"][2] and result["tile"]["h"] < layer["out"][0]:
            result["order"] = "hcw"
        return result
    if layer.get("rows"):
        # row bands of every channel, else tiles of every channel, else any
        for rows in (1, "c"):
            try:
                return _solve_layer(dict(layer, rows=rows), target)
            except FitError:
                pass
        return _solve_layer({k: v for k, v in layer.items() if k != "rows"}, target)
    return _solve_layer(layer, target)


def _solve_layer(layer, target):
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
    q_small = memory.quantities(layer, target, spec, *smallest, buffering, tables)
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
                                       buffering, tables)
            if q_rows["l1_bytes"] <= budget:
                r = model.solve(layer, target, spec, tables, consts, buffering,
                                hint=(smallest[0], tw or smallest[1], Co), tile_c=Co, tile_w=tw)
                if r["status"] == "optimal":
                    break
    if r is None or r["status"] != "optimal":
        r = model.solve(layer, target, spec, tables, consts, buffering,
                        hint=smallest if small_fits else None)
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
    q = memory.quantities(layer, target, spec, *r["tile"], buffering, tables)
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


def tiles(layer, tiling):
    """Every tile of `tiling`, in execution order (see geometry.tiles)."""
    return geometry.tiles(layer, tiling)


def grid(layer, tiling):
    """The same tiles as per-axis tables (see geometry.grid)."""
    return geometry.grid(layer, tiling)


__all__ = ["solve_layer", "tiles", "grid", "TILER_VERSION"]
