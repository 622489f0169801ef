"""Property tests of tessera.tiler on random small layers.

Everything here is recomputed by brute force, independently of the tiler's
own geometry and memory code: which input rows/cols each output needs, how
much L1 the tile list needs, which output elements are covered.
"""

import copy
import os
import re

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tessera.errors import FitError
from tessera.tiler import solve_layer, tiles
from tessera.tiler import enumerator, library, memory
from tessera.tiles import geometry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "kernels", "reference", "library.yaml")) as f:
    REF = yaml.safe_load(f)["tiler"]

CHANNEL_WISE = ("depthwise", "add", "maxpool", "avgpool")

# A library that exercises every kind of term the schema allows: products of
# tile variables, negative weights, comparisons against tile quantities,
# per-core scratch that grows with the tile. The CP-SAT model must agree
# with plain-number evaluation on all of it.
STRESS = {
    "schema": 1,
    "buffer_align": 8,
    "defaults": {
        "scratch": {"rowbuf": {"coef": 1, "of": ["cores", "in_tile_w", "in_tile_c"]}},
        "objective": {
            "area": {"coef": 3, "of": ["tile_h", "tile_w"]},
            "vol": {"coef": 1, "of": ["tile_volume"]},
            "tiles": {"coef": -7, "of": ["n_tiles"]},
            "halo": {"coef": -1, "of": ["in_tile_bytes"]},
            "even_split_w": {"coef": 11, "when": {"border_w": {"equals": "tile_w"}}},
            "tall": {"coef": 5, "of": ["tile_c"], "when": {"tile_h": {"at_least": "tile_w"}}},
            "narrow_c": {"coef": -4, "when": {"tile_c": {"at_most": 3}}},
            "h_cores": {"coef": 9, "of": ["l1_permille"],
                        "when": {"tile_h": {"multiple_of": "cores"},
                                 "border_h": {"multiple_of": 2}}},
            "c3": {"coef": 13, "when": {"tile_c": {"multiple_of": 3}}},
            "used": {"coef": 1, "of": ["l1_bytes"], "when": {"n_tiles_c": {"equals": 1}}},
        },
    },
    "ops": {op: {} for op in ("conv2d", "depthwise", "pointwise", "linear", "add",
                              "maxpool", "avgpool")},
}
STRESS["ops"]["conv2d"] = {"scratch": {"im2col": {"coef": 2, "of": ["cores", "patch"]}}}


def ref_scratch(layer, cores):
    """The reference library's scratch, written out by hand."""
    kh, kw = layer["kernel"]
    if layer["op"] == "conv2d":
        return 2 * cores * kh * kw * layer["in"][2]
    if layer["op"] == "depthwise":
        return cores * kh * kw
    return 0


@st.composite
def layers(draw, max_hw=12, max_c=12):
    op = draw(st.sampled_from(["conv2d", "depthwise", "pointwise", "linear", "add",
                               "maxpool", "avgpool"]))
    H = draw(st.integers(1, max_hw))
    W = draw(st.integers(1, max_hw))
    C = draw(st.integers(1, max_c))
    if op == "linear":
        Co = draw(st.integers(1, 2 * max_c))
        return {"name": "fc", "op": op, "in": [H, W, C], "out": [1, 1, Co],
                "kernel": [1, 1], "stride": [1, 1], "pad": [0, 0, 0, 0],
                "in_bytes": 1, "out_bytes": draw(st.sampled_from([1, 4])), "n_inputs": 1,
                "w_bytes_per_cout": H * W * C,
                "param_bytes_per_cout": draw(st.integers(0, 9))}
    if op in ("pointwise", "add"):
        kh = kw = sh = sw = 1
        pad = [0, 0, 0, 0]
    else:
        kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
        sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        pad = [draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)),
               draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))]
    assume(H + pad[0] + pad[2] >= kh and W + pad[1] + pad[3] >= kw)
    Ho = (H + pad[0] + pad[2] - kh) // sh + 1
    Wo = (W + pad[1] + pad[3] - kw) // sw + 1
    Co = C if op in CHANNEL_WISE else draw(st.integers(1, max_c))
    wpc = {"conv2d": kh * kw * C, "pointwise": C, "depthwise": kh * kw}.get(op, 0)
    ppc = 0 if op in ("add", "maxpool", "avgpool") else draw(st.integers(0, 9))
    return {"name": f"{op}_x", "op": op, "in": [H, W, C], "out": [Ho, Wo, Co],
            "kernel": [kh, kw], "stride": [sh, sw], "pad": pad,
            "in_bytes": 1, "out_bytes": draw(st.sampled_from([1, 1, 4])),
            "n_inputs": 2 if op == "add" else 1,
            "w_bytes_per_cout": wpc, "param_bytes_per_cout": ppc}


def A(n, align):
    return -(-n // align) * align


def whole_bytes(layer, cores):
    """L1 bytes of the untiled layer (one tile, buffering 1), by hand: the
    input part is the box the outputs read (strides larger than the kernel
    skip rows, which are never moved)."""
    Ho, Wo, Co = layer["out"]
    full = {"oh0": 0, "oh": Ho, "ow0": 0, "ow": Wo, "oc0": 0, "oc": Co}
    _, ih, _, iw, _, ic, _ = needed_input(layer, full)
    return (layer["n_inputs"] * A(layer["in_bytes"] * ih * iw * ic, 4)
            + A(layer["out_bytes"] * Ho * Wo * Co, 4)
            + A(Co * layer["w_bytes_per_cout"], 4) + A(Co * layer["param_bytes_per_cout"], 4)
            + A(ref_scratch(layer, cores), 4))


def needed_input(layer, t):
    """Brute force: the input box and padding a tile's outputs read.

    Walks every output element of the tile and every kernel tap; returns
    (ih0, ih, iw0, iw, ic0, ic, [top, left, bottom, right]).
    """
    H, W, C = layer["in"]
    if layer["op"] == "linear":
        return 0, H, 0, W, 0, C, [0, 0, 0, 0]
    (kh, kw), (sh, sw) = layer["kernel"], layer["stride"]
    top, left = layer["pad"][0], layer["pad"][1]
    rows = {oh * sh - top + dy for oh in range(t["oh0"], t["oh0"] + t["oh"]) for dy in range(kh)}
    cols = {ow * sw - left + dx for ow in range(t["ow0"], t["ow0"] + t["ow"]) for dx in range(kw)}
    in_rows = [r for r in rows if 0 <= r < H]
    in_cols = [c for c in cols if 0 <= c < W]
    pad = [max(0, -min(rows)), max(0, -min(cols)),
           max(0, max(rows) - (H - 1)), max(0, max(cols) - (W - 1))]
    if layer["op"] in CHANNEL_WISE:
        ic0, ic = t["oc0"], t["oc"]
    else:
        ic0, ic = 0, C
    return (min(in_rows), max(in_rows) - min(in_rows) + 1,
            min(in_cols), max(in_cols) - min(in_cols) + 1, ic0, ic, pad)


def check_tiling(layer, target, r, scratch, align=4):
    """Every invariant of a tiling, recomputed from its tile list."""
    H, W, C = layer["in"]
    Ho, Wo, Co = layer["out"]
    tl = list(tiles(layer, r))
    assert [t["index"] for t in tl] == list(range(len(tl)))
    n = r["n_tiles"]
    assert len(tl) == n["h"] * n["w"] * n["c"]

    # every output element exactly once
    cover = np.zeros((Ho, Wo, Co), dtype=np.int32)
    for t in tl:
        cover[t["oh0"]:t["oh0"] + t["oh"], t["ow0"]:t["ow0"] + t["ow"],
              t["oc0"]:t["oc0"] + t["oc"]] += 1
    assert (cover == 1).all()

    # execution order: channel tiles outermost, then rows, then cols
    keys = [(t["oc0"], t["oh0"], t["ow0"]) for t in tl]
    assert keys == sorted(keys)

    # uniform tiles except the last of each axis; input ranges and padding
    # exactly what the convolution needs; padding only on border tiles
    tile = r["tile"]
    for t in tl:
        for ax, o0, o, nax, size in (("h", "oh0", "oh", n["h"], Ho),
                                     ("w", "ow0", "ow", n["w"], Wo),
                                     ("c", "oc0", "oc", n["c"], Co)):
            assert t[o0] % tile[ax] == 0
            last = t[o0] // tile[ax] == nax - 1
            assert t[o] == (size - t[o0] if last else tile[ax])
        got = (t["ih0"], t["ih"], t["iw0"], t["iw"], t["ic0"], t["ic"], t["pad"])
        assert got == needed_input(layer, t), t
        top, left, bottom, right = t["pad"]
        assert top == 0 or t["oh0"] == 0
        assert left == 0 or t["ow0"] == 0
        assert bottom == 0 or t["oh0"] + t["oh"] == Ho
        assert right == 0 or t["ow0"] + t["ow"] == Wo
        assert 0 <= t["ih0"] and t["ih0"] + t["ih"] <= H
        assert 0 <= t["iw0"] and t["iw0"] + t["iw"] <= W

    # memory, from the tile list: one buffer per kind sized for the largest
    # tile, `buffering` copies, each buffer aligned as the allocator packs it
    buf = target["buffering"] if r["tiled"] else 1
    assert r["buffering"] == buf and r["n_inputs"] == layer["n_inputs"]
    # a split reduction: each step reads a chunk of kc input channels (and
    # their weights), the tile's int32 sums stay in L1, no scratch
    kc = r["split"]["k"] if "split" in r else None
    if kc is not None:
        assert layer["op"] in ("conv2d", "pointwise", "linear") and 1 <= kc < C
        assert r["split"]["n"] == -(-C // kc)
        scratch = 0
    in_b = max(t["ih"] * t["iw"] * (kc or t["ic"]) for t in tl) * layer["in_bytes"]
    out_b = max(t["oh"] * t["ow"] * t["oc"] for t in tl) * layer["out_bytes"]
    oc = max(t["oc"] for t in tl)
    w_b, p_b = oc * layer["w_bytes_per_cout"], oc * layer["param_bytes_per_cout"]
    if kc is not None:
        w_b = w_b // C * kc
    acc = 4 * max(t["oh"] * t["ow"] * t["oc"] for t in tl) if kc else 0
    total = (buf * (layer["n_inputs"] * A(in_b, align) + A(out_b, align) + A(w_b, align)
                    + A(p_b, align)) + A(scratch, align) + A(acc, align))
    assert total <= target["l1_budget"]
    assert r["l1_bytes"] == dict({"in": in_b, "out": out_b, "weights": w_b, "params": p_b,
                                  "scratch": scratch, "total": total}, **({"acc": acc} if kc else {}))
    assert r["in_tile"] == {"h": max(t["ih"] for t in tl), "w": max(t["iw"] for t in tl),
                            "c": kc or max(t["ic"] for t in tl)}
    return tl


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layer=layers(), cores=st.integers(1, 8), frac=st.floats(0.1, 1.2), data=st.data())
def test_solutions_fit_cover_and_read_exactly(layer, cores, frac, data):
    whole = whole_bytes(layer, cores)
    budget = int(whole * frac) + data.draw(st.integers(0, 64))
    target = {"l1_budget": budget, "cores": cores, "buffering": 2, "kernels": REF}
    try:
        r = solve_layer(layer, target)
    except FitError as e:
        event("does not fit")
        msg = str(e)
        need = int(re.search(r"needs (\d+) bytes of L1", msg).group(1))
        assert f"only {budget} are available" in msg and need > budget
        assert msg.startswith(f"layer {layer['name']}:")
        # and truly nothing fits: no tile at all, nor the whole layer
        spec = library.op_spec(REF, layer["op"])
        assert enumerator.best_tile(layer, target, spec) is None
        assert whole > budget
        return
    event(f"{layer['op']} {'tiled' if r['tiled'] else 'whole'}")
    assert r["tiled"] == (whole > budget)
    if not r["tiled"]:
        assert r["tile"] == dict(zip("hwc", layer["out"]))
        assert r["n_tiles"] == {"h": 1, "w": 1, "c": 1}
    check_tiling(layer, target, r, ref_scratch(layer, cores))


def _oracle_case(layer, cores, budget, kernels):
    target = {"l1_budget": budget, "cores": cores, "buffering": 2, "kernels": kernels}
    spec = library.op_spec(kernels, layer["op"])
    best = enumerator.best_tile(layer, target, spec)
    if best is None and layer["op"] in ("conv2d", "pointwise", "linear") and layer["in"][2] > 1:
        # nothing fits unsplit: the best with the reduction in chunks
        best = enumerator.best_tile(layer, target, spec, split=True)
    try:
        r = solve_layer(layer, target)
    except FitError:
        assert best is None
        return None
    if not r["tiled"]:
        return r
    assert r["optimal"]
    assert best is not None
    assert ("split" in r) == ("tile_k" in best), "split only when the unsplit tiling cannot fit"
    if "split" in r:
        assert r["split"]["k"] == best["tile_k"]
    assert r["objective"] == best["objective"]
    # the tie-break makes the optimum unique, so the tile itself must match
    assert (r["tile"]["h"], r["tile"]["w"], r["tile"]["c"]) == best["tile"]
    assert r["l1_bytes"]["total"] == best["l1_bytes"]
    return r


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layer=layers(max_hw=8, max_c=8), cores=st.integers(1, 8),
       frac=st.floats(0.0, 1.0), stress=st.booleans())
def test_cpsat_matches_exhaustive_enumeration(layer, cores, frac, stress):
    kernels = STRESS if stress else REF
    # budgets between what the smallest tile needs and what the whole layer
    # needs, where the search is not trivial
    spec = library.op_spec(kernels, layer["op"])
    tables = [geometry.axis_table(*ax) for ax in geometry.axes(layer)]
    target = {"l1_budget": 10**9, "cores": cores, "buffering": 2, "kernels": kernels}
    lo = memory.quantities(layer, target, spec, min(tables[0]), min(tables[1]), 1, 2,
                           tables)["l1_bytes"]
    hi = memory.quantities(layer, target, spec, *layer["out"], 1, tables)["l1_bytes"]
    budget = int(lo * 0.9 + (hi - lo * 0.9) * frac)
    r = _oracle_case(layer, cores, budget, kernels)
    event("does not fit" if r is None else f"{layer['op']} {'tiled' if r['tiled'] else 'whole'}")
    if r is not None and stress:
        # STRESS scratch by hand: a row buffer per core (+ im2col for conv2d)
        scratch = cores * r["in_tile"]["w"] * r["in_tile"]["c"]
        if layer["op"] == "conv2d":
            scratch += ref_scratch(layer, cores)
        check_tiling(layer, {"l1_budget": budget, "buffering": 2}, r, scratch, align=8)


@pytest.mark.parametrize("op,shape,budget", [
    ("conv2d", ([9, 9, 3], [5, 5, 8], [3, 3], [2, 2], [1, 1, 1, 1]), 700),
    ("conv2d", ([7, 6, 2], [7, 6, 6], [3, 3], [1, 1], [1, 1, 1, 1]), 400),
    ("depthwise", ([8, 8, 8], [8, 8, 8], [3, 3], [1, 1], [1, 1, 1, 1]), 500),
    ("depthwise", ([10, 7, 4], [5, 4, 4], [5, 5], [2, 2], [2, 2, 2, 2]), 300),
    ("pointwise", ([6, 8, 8], [6, 8, 12], [1, 1], [1, 1], [0, 0, 0, 0]), 900),
    ("maxpool", ([8, 8, 6], [4, 4, 6], [2, 2], [2, 2], [0, 0, 0, 0]), 200),
    ("avgpool", ([7, 7, 5], [3, 3, 5], [3, 3], [2, 2], [0, 0, 0, 0]), 150),
    ("add", ([6, 6, 7], [6, 6, 7], [1, 1], [1, 1], [0, 0, 0, 0]), 300),
])
@pytest.mark.parametrize("kernels", ["ref", "stress"])
def test_cpsat_matches_enumeration_fixed(op, shape, budget, kernels):
    i, o, k, s, p = shape
    C = i[2]
    layer = {"name": op, "op": op, "in": i, "out": o, "kernel": k, "stride": s, "pad": p,
             "in_bytes": 1, "out_bytes": 1, "n_inputs": 2 if op == "add" else 1,
             "w_bytes_per_cout": {"conv2d": k[0] * k[1] * C, "pointwise": C,
                                  "depthwise": k[0] * k[1]}.get(op, 0),
             "param_bytes_per_cout": 0 if op in ("add", "maxpool", "avgpool") else 9}
    r = _oracle_case(layer, 4, budget, REF if kernels == "ref" else copy.deepcopy(STRESS))
    assert r is not None and r["tiled"]


# STRESS with each core's share of the depthwise scratch in whole words
# (library.yaml's scratch_core_align: pulp_nn's depthwise) and an odd plane term
CORE_ALIGNED = copy.deepcopy(STRESS)
CORE_ALIGNED["ops"]["depthwise"] = {"scratch_core_align": 4, "scratch": {
    "plane": {"coef": 1, "of": ["cores", "in_tile_h", "in_tile_w"]}, "pad": {"coef": 1, "of": ["cores"]}}}


@pytest.mark.parametrize("shape,cores,budget", [
    (([8, 8, 8], [8, 8, 8], [3, 3], [1, 1], [1, 1, 1, 1]), 3, 500),
    (([9, 7, 6], [9, 7, 6], [3, 3], [1, 1], [1, 1, 1, 1]), 8, 900),
    (([10, 7, 4], [5, 4, 4], [5, 5], [2, 2], [2, 2, 2, 2]), 4, 400),
])
def test_scratch_core_align_cpsat_matches_enumeration(shape, cores, budget):
    i, o, k, s, p = shape
    layer = {"name": "dw", "op": "depthwise", "in": i, "out": o, "kernel": k, "stride": s, "pad": p,
             "in_bytes": 1, "out_bytes": 1, "n_inputs": 1, "w_bytes_per_cout": k[0] * k[1],
             "param_bytes_per_cout": 9}
    r = _oracle_case(layer, cores, budget, CORE_ALIGNED)
    assert r is not None and r["tiled"]
    # the terms' sum, each core's share rounded up to whole words
    t = r["in_tile"]
    raw = cores * t["w"] * t["c"] + cores * t["h"] * t["w"] + cores
    assert r["l1_bytes"]["scratch"] == -(-raw // (4 * cores)) * 4 * cores
    assert r["l1_bytes"]["scratch"] // cores % 4 == 0
