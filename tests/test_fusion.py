"""The fusion engine, fused tiler and selector (tessera.fusion) on small
hand-built graphs: which pairs may fuse and why not, the fused band against a
brute-force enumeration of the same byte count and objective, the band-wise
execution of the golden model equal to the two layers run whole, and the
selector's schedule under each policy."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tessera import fusion
from tessera.fusion import tiler as ftiler
from tessera.golden import ops
from tessera.ir import Graph, Layer, Requant, Tensor
from tessera.tiles import geometry
from tessera.tiler import solve_layer
from tessera.config.views import kernel_library, tiler_layer

KERNELS = kernel_library("reference")["tiler"]


def rq(n, zp=0):
    return Requant(mul=[1 << 14] * n, add=[0], shift=[20] * n, rounding="half_up", zero_point=zp, lo=-128, hi=127)


def dw_pw_graph(h=12, w=10, c=8, co=16, k=3, s=1, pad=1, extra_reader=False, dw_requant=True):
    ho = (h + 2 * pad - k) // s + 1
    wo = (w + 2 * pad - k) // s + 1
    t = {"x": Tensor("x", [h, w, c]), "m": Tensor("m", [ho, wo, c], "int8" if dw_requant else "int32"),
         "y": Tensor("y", [ho, wo, co])}
    layers = [Layer("dw", "depthwise", ["x"], "m", kernel=[k, k], stride=[s, s], pad=[pad] * 4,
                    input_offset=3, weights="dw_w", bias="dw_b", requant=rq(c, -5) if dw_requant else None),
              Layer("pw", "pointwise", ["m"], "y", input_offset=5, weights="pw_w", bias="pw_b", requant=rq(co, 2))]
    outputs = ["y"]
    if extra_reader:
        t["z"] = Tensor("z", [ho, wo, c])
        layers.append(Layer("pool", "maxpool", ["m"], "z", kernel=[1, 1]))
        outputs.append("z")
    return Graph("g", "test", t, layers, ["x"], outputs)


# the `layers` scheme's scratch is the library's layer scratch: CMSIS-NN's has some
CMSIS = kernel_library("cmsis_nn")["tiler"]


def target(budget, cores=8, scheme="per_core", pw_dw=None):
    """scheme: DW->PW's; pw_dw: PW->DW's (default: `layers` when scheme is,
    else per_core); a `layers` scheme takes CMSIS-NN's tiler terms."""
    if pw_dw is None:
        pw_dw = scheme if scheme == "layers" else "per_core"
    return {"l1_budget": budget, "cores": cores, "buffering": 2,
            "kernels": CMSIS if "layers" in (scheme, pw_dw) else KERNELS,
            "fused_scheme": {"dw_pw": scheme, "pw_dw": pw_dw}}


# ---- engine ------------------------------------------------------------------

def test_engine_finds_the_pair():
    assert fusion.candidates(dw_pw_graph()) == [{"kind": "dw_pw", "layers": ["dw", "pw"], "group": "dw+pw",
                                                 "dw": "dw", "pw": "pw", "ok": True, "reason": "fusable"}]


def test_engine_says_why_not():
    (c,) = fusion.candidates(dw_pw_graph(extra_reader=True))
    assert not c["ok"] and "other readers" in c["reason"]
    (c,) = fusion.candidates(dw_pw_graph(dw_requant=False))
    assert not c["ok"] and "int32" in c["reason"]


# ---- fused tiler ---------------------------------------------------------------

def brute_force(pair, tgt):
    """The docstring's rule by enumeration: single-buffered whole pair if it
    fits, else the lexicographic best (th, th % cores == 0, fd); with the
    shared scheme (one intermediate of fd <= th rows for all cores) the best
    (fd, th, th % cores == 0)."""
    dw = pair["dw"]
    Ho, cores, budget = dw["out"][0], tgt["cores"], tgt["l1_budget"]
    shared = tgt["fused_scheme"]["dw_pw"] in ("shared", "layers")
    most = (lambda th: th) if shared else (lambda th: -(-th // cores))   # noqa: E731
    table = geometry.axis_table(*geometry.axes(dw)[0])
    if Ho in table and ftiler._bytes(pair, tgt, Ho, table[Ho][2], most(Ho), 1)["total"] <= budget:
        return Ho, most(Ho), 1
    best = None
    for th in table:
        for fd in range(1, most(th) + 1):
            if ftiler._bytes(pair, tgt, th, table[th][2], fd, 2)["total"] <= budget:
                key = (fd, th, th % cores == 0) if shared else (th, th % cores == 0, fd)
                best = max(best or key, key)
    if best is None:
        return None
    return (best[1], best[0], 2) if shared else (best[0], best[2], 2)


@given(h=st.integers(3, 20), w=st.integers(3, 12), c=st.integers(1, 16), co=st.integers(1, 24),
       k=st.sampled_from([1, 3, 5]), s=st.integers(1, 2), cores=st.sampled_from([1, 2, 8]),
       budget=st.integers(200, 6000), scheme=st.sampled_from(["per_core", "shared", "layers"]),
       plane=st.booleans())
@settings(max_examples=80, deadline=None)
def test_fused_tiler_matches_enumeration(h, w, c, co, k, s, cores, budget, scheme, plane):
    """plane: the shared scheme's depthwise takes each core's padded plane
    of the block's rows (PULP-NN's Xpulp path, a 3x3 window only)."""
    g = dw_pw_graph(h, w, c, co, k, s, pad=k // 2)
    pair = fusion.pair_view(g, "dw", "pw")
    tgt = target(budget, cores, scheme)
    tgt["fused_scheme"]["dw_pw_plane"] = plane
    got = fusion.solve_dw_pw(pair, tgt)
    want = brute_force(pair, tgt)
    if want is None:
        assert not got["feasible"] and "needs" in got["reason"]
        return
    assert got["feasible"]
    assert (got["band_h"], got["fd"], got["buffering"]) == want
    assert got["l1_bytes"]["total"] <= budget
    assert sum(b["oh"] for b in got["bands"]) == g.tensor("y").shape[0]


def test_band_wise_golden_equals_layers_apart():
    """Computing the pair band by band (each band's input rows with its own
    padding, the intermediate only for those rows) gives the two layers'
    output exactly: the geometry the fused step's code walks."""
    g = dw_pw_graph(h=13, w=9, c=6, co=10, k=3, s=2, pad=1)
    pair = fusion.pair_view(g, "dw", "pw")
    ft = fusion.solve_dw_pw(pair, target(1500, cores=2))
    assert len(ft["bands"]) > 1
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, size=(13, 9, 6)).astype(np.int8)
    w1 = rng.integers(-128, 128, size=(3, 3, 6)).astype(np.int8)
    w2 = rng.integers(-128, 128, size=(10, 6)).astype(np.int8)
    b1 = rng.integers(-999, 999, size=6).astype(np.int32)
    b2 = rng.integers(-999, 999, size=10).astype(np.int32)
    dw, pw = g.layers

    def two(xin, pad):
        mid = ops.requantize(ops.depthwise(xin, w1, b1, dw.input_offset, (3, 3), (2, 2), pad), dw.requant)
        return ops.requantize(ops.pointwise(mid.astype(np.int8), w2, b2, pw.input_offset), pw.requant)
    whole = two(x, dw.pad)
    bands = [two(x[b["ih0"]:b["ih0"] + b["ih"]], (b["pad_t"], 1, b["pad_b"], 1)) for b in ft["bands"]]
    np.testing.assert_array_equal(np.concatenate(bands), whole)


# ---- selector ------------------------------------------------------------------

def schedule(g, policy, budget):
    tgt = target(budget)
    tilings = {layer.name: solve_layer(tiler_layer(layer, g), tgt) for layer in g.layers}
    cands = fusion.candidates(g)
    fused = {}
    for c in cands:
        pair = fusion.pair_view(g, c["dw"], c["pw"])
        fused[pair["name"]] = (pair, fusion.solve_dw_pw(pair, tgt))
    return fusion.select(g, tilings, fused, policy, cands)


def test_none_keeps_every_layer():
    s = schedule(dw_pw_graph(), "none", 64000)
    assert [st_["step"] for st_ in s["steps"]] == ["dw", "pw"]
    assert s["totals"]["activation_transfer_bytes"] == s["totals"]["unfused_activation_transfer_bytes"]
    assert s["candidates"][0]["why_apart"] == "fusion=none"


def test_min_transfer_fuses_and_counts():
    g = dw_pw_graph(h=12, w=10, c=8, co=16)
    s = schedule(g, "min_transfer", 64000)
    assert [st_["step"] for st_ in s["steps"]] == ["dw+pw"]
    # whole tensors each way: apart x in, m out, m in, y out; fused x in, y out
    x, m, y = (g.tensor(n).nbytes for n in "xmy")
    assert s["totals"]["unfused_activation_transfer_bytes"] == x + 2 * m + y
    assert s["totals"]["activation_transfer_bytes"] == x + y


def test_min_transfer_keeps_an_unfittable_pair_apart():
    g = dw_pw_graph(h=12, w=10, c=8, co=16)
    s = schedule(g, "min_transfer", 900)
    assert [st_["step"] for st_ in s["steps"]] == ["dw", "pw"]
    assert "needs" in s["candidates"][0]["why_apart"]


def latency_schedule(g, costs, budget=64000):
    tgt = target(budget)
    tilings = {layer.name: solve_layer(tiler_layer(layer, g), tgt) for layer in g.layers}
    cands = fusion.candidates(g)
    pair = fusion.pair_view(g, "dw", "pw")
    fused = {pair["name"]: (pair, fusion.solve_dw_pw(pair, tgt))}
    return fusion.select(g, tilings, fused, "min_latency", cands, costs)


def costs(dw, pw, group):
    return {"source": "test", "unit": "qemu-instructions", "layers": {"dw": dw, "pw": pw}, "groups": {"dw+pw": group},
            "missing": "no estimate for this kernel"}


def test_min_latency_fuses_only_what_is_estimated_faster():
    g = dw_pw_graph()
    s = latency_schedule(g, costs(700, 500, 1100))
    assert [st_["step"] for st_ in s["steps"]] == ["dw+pw"]
    assert "estimated 1100 qemu-instructions against 1200 apart" in s["steps"][0]["reason"]
    assert s["totals"]["estimated_count"] == 1100 and s["totals"]["unfused_estimated_count"] == 1200
    # a tie keeps the layers apart (fusing must be expected to pay)
    s = latency_schedule(g, costs(700, 500, 1200))
    assert [st_["step"] for st_ in s["steps"]] == ["dw", "pw"]
    assert "not fewer than 1200 apart" in s["candidates"][0]["why_apart"]
    # slower: apart, whatever it saves in transfers
    s = latency_schedule(g, costs(700, 500, 1300))
    assert [st_["step"] for st_ in s["steps"]] == ["dw", "pw"]
    assert s["totals"]["activation_transfer_bytes"] == s["totals"]["unfused_activation_transfer_bytes"]


def test_min_latency_without_estimates_keeps_layers_apart():
    g = dw_pw_graph()
    s = latency_schedule(g, costs(700, 500, None))
    assert [st_["step"] for st_ in s["steps"]] == ["dw", "pw"]
    assert s["candidates"][0]["why_apart"] == "no estimate for this kernel"
    s = latency_schedule(g, {"source": "test", "none": "no calibrated cost model"})
    assert [st_["step"] for st_ in s["steps"]] == ["dw", "pw"]
    assert s["candidates"][0]["why_apart"] == "no calibrated cost model"


def test_group_estimate_prices_compute_and_transfers():
    """The fused step's estimate from hand-set coefficients: MACs priced
    alike fused or apart; activation bytes priced on the step's own moves
    (the depthwise's input and the pointwise's output, never the
    intermediate)."""
    from tessera.cost import fused as cfused, model
    g = dw_pw_graph(h=12, w=10, c=8, co=16)
    pair = fusion.pair_view(g, "dw", "pw")
    ft = fusion.solve_dw_pw(pair, target(64000, scheme="shared"))
    dw, pw = g.layers
    zero = {k: 0.0 for k in model.COMPUTE}
    only = lambda **kw: {"combine": "sum", "default": dict(zero), "ops": {}, "dma": dict(  # noqa: E731
        {k: 0.0 for k in model.DMA}, **kw)}
    macs = only()
    macs["default"]["macs"] = 2.0
    x, m, y = (g.tensor(n) for n in "xmy")
    dw_macs = m.size * 9
    pw_macs = y.size * 8
    assert cfused.group_estimate(macs, dw, pw, g, ft, 8) == 2 * (dw_macs + pw_macs)
    assert cfused.group_estimate(only(act_bytes=3.0), dw, pw, g, ft, 8) == 3 * (x.nbytes + y.nbytes)
    # a per-core fused kernel is not the layers' kernels: no estimate
    ft_pc = fusion.solve_dw_pw(pair, target(64000))
    assert cfused.group_estimate(macs, dw, pw, g, ft_pc, 8) is None


# ---- PW->DW ------------------------------------------------------------------

def chain_graph(h=12, w=10, ci=4, cm=12, co=8, k=3, s=1, pad=1):
    """pw1 -> dw -> pw2: the depthwise is in a PW->DW and a DW->PW candidate."""
    ho = (h + 2 * pad - k) // s + 1
    wo = (w + 2 * pad - k) // s + 1
    t = {"x": Tensor("x", [h, w, ci]), "e": Tensor("e", [h, w, cm]), "m": Tensor("m", [ho, wo, cm]),
         "y": Tensor("y", [ho, wo, co])}
    layers = [Layer("pw1", "pointwise", ["x"], "e", input_offset=1, weights="p1w", bias="p1b", requant=rq(cm, 3)),
              Layer("dw", "depthwise", ["e"], "m", kernel=[k, k], stride=[s, s], pad=[pad] * 4,
                    input_offset=-3, weights="dw_w", bias="dw_b", requant=rq(cm, -5)),
              Layer("pw2", "pointwise", ["m"], "y", input_offset=5, weights="p2w", bias="p2b", requant=rq(co, 2))]
    return Graph("g", "test", t, layers, ["x"], ["y"])


def test_engine_finds_both_kinds_in_a_chain():
    got = [(c["kind"], c["group"], c["ok"]) for c in fusion.candidates(chain_graph())]
    assert got == [("pw_dw", "pw1+dw", True), ("dw_pw", "dw+pw2", True)]


def brute_force_pw_dw(pair, tgt):
    dw = pair["dw"]
    Ho, C, cores, budget = dw["out"][0], dw["out"][2], tgt["cores"], tgt["l1_budget"]
    shared = tgt["fused_scheme"]["pw_dw"] == "shared"
    most = C if shared else -(-C // cores)
    # shared: blocks of a multiple of lcm(4, cores) channels, or all of them
    q = {1: 4, 2: 4, 8: 8}[cores]
    fds = sorted({fd for fd in range(1, most + 1) if not shared or fd == C or fd % q == 0})
    table = geometry.axis_table(*geometry.axes(dw)[0])
    if Ho in table and ftiler._pw_dw_bytes(pair, tgt, Ho, table[Ho][2], most, 1)["total"] <= budget:
        return Ho, most, 1
    # the layers scheme (CMSIS-NN): the most channels per block first, then the tallest band
    layers = tgt["fused_scheme"]["pw_dw"] == "layers"
    best = None
    for th in table:
        for fd in fds:
            if ftiler._pw_dw_bytes(pair, tgt, th, table[th][2], fd, 2)["total"] <= budget:
                # shared (PULP-NN): the fewest blocks in all, then the fewest bands, then the most
                # channels per block, then the tallest band
                key = ((fd, th, th % cores == 0) if layers
                       else (-table[th][0] * -(-C // fd), -table[th][0], fd, th, th % cores == 0) if shared
                       else (th, fd, th % cores == 0))
                best = max(best or key, key)
    if best is None:
        return None
    if shared:
        return best[3], best[2], 2
    return (best[1], best[0], 2) if layers else (best[0], best[1], 2)


@given(h=st.integers(3, 16), w=st.integers(3, 10), ci=st.integers(1, 12), cm=st.integers(1, 24),
       k=st.sampled_from([1, 3, 5]), s=st.integers(1, 2), cores=st.sampled_from([1, 2, 8]),
       budget=st.integers(200, 6000), scheme=st.sampled_from(["per_core", "shared", "layers"]))
@settings(max_examples=80, deadline=None)
def test_pw_dw_tiler_matches_enumeration(h, w, ci, cm, k, s, cores, budget, scheme):
    g = chain_graph(h, w, ci, cm, 4, k, s, pad=k // 2)
    pair = fusion.pair_view(g, "pw1", "dw")
    assert pair["kind"] == "pw_dw"
    tgt = target(budget, cores, pw_dw=scheme)
    got = ftiler.solve_pw_dw(pair, tgt)
    want = brute_force_pw_dw(pair, tgt)
    if want is None:
        assert not got["feasible"] and "needs" in got["reason"]
        return
    assert got["feasible"] and (got["band_h"], got["fd"], got["buffering"]) == want
    assert got["l1_bytes"]["total"] <= budget
    assert sum(b["oh"] for b in got["bands"]) == g.tensor("m").shape[0]


def brute_force_rows(pair, tgt):
    dw = pair["dw"]
    Ho, cores, budget = dw["out"][0], tgt["cores"], tgt["l1_budget"]
    shared = tgt["fused_scheme"]["pw_dw"] == "shared"
    table = geometry.axis_table(*geometry.axes(dw)[0])
    most = Ho if shared else -(-Ho // cores)
    if Ho in table and ftiler._rows_bytes(pair, tgt, Ho, table[Ho][2], most, 1)["total"] <= budget:
        return Ho, most, 1
    best = None
    per_band, per_block = ftiler.rows_overhead(pair)
    for th in table:
        for fd in range(1, (th if shared else -(-th // cores)) + 1):
            if ftiler._rows_bytes(pair, tgt, th, table[th][2], fd, 2)["total"] <= budget:
                key = (th, fd, th % cores == 0)
                if tgt["fused_scheme"]["pw_dw"] == "layers":
                    # the fewest estimated extra instructions first: every band's
                    # halo, every row block's calls (the bands as the fused step runs them)
                    n, border = table[th][:2]
                    blocks = (n - 1) * -(-th // fd) + -(-border // fd)
                    key = (-(n * per_band + blocks * per_block),) + key
                best = max(best or key, key)
    return None if best is None else (best[-3], best[-2], 2)


@given(h=st.integers(3, 16), w=st.integers(3, 10), ci=st.integers(1, 12), cm=st.integers(1, 24),
       k=st.sampled_from([1, 3, 5]), s=st.integers(1, 2), cores=st.sampled_from([1, 2, 8]),
       budget=st.integers(200, 6000), scheme=st.sampled_from(["per_core", "shared", "layers"]))
@settings(max_examples=80, deadline=None)
def test_pw_dw_rows_tiler_matches_enumeration(h, w, ci, cm, k, s, cores, budget, scheme):
    """The row-wise (shifted buffer) PW->DW tiler against enumeration; the
    pair's tiling is channel-wise when that fits, else row-wise (rows:
    row-wise when that fits)."""
    g = chain_graph(h, w, ci, cm, 4, k, s, pad=k // 2)
    pair = fusion.pair_view(g, "pw1", "dw")
    tgt = target(budget, cores, pw_dw=scheme)
    got = ftiler.solve_pw_dw_rows(pair, tgt)
    want = brute_force_rows(pair, tgt)
    if want is None:
        assert not got["feasible"] and "needs" in got["reason"]
    else:
        assert got["feasible"] and (got["band_h"], got["fd"], got["buffering"]) == want
        assert got["layout"] == "rows" and got["l1_bytes"]["total"] <= budget
    either, ch = fusion.solve_dw_pw(pair, tgt), ftiler.solve_pw_dw(pair, tgt)
    # auto: channel-wise when it fits, else row-wise when that fits
    want_layout = None if ch["feasible"] or not got["feasible"] else "rows"
    if scheme == "layers" and ch["feasible"] and got["feasible"]:
        # both fit: row-wise where fewer estimated extra instructions (per band
        # the halo, per row block the calls; channel-wise: one set-up a band)
        per_band, per_block = ftiler.rows_overhead(pair)
        blocks = sum(-(-b["oh"] // got["fd"]) for b in got["bands"])
        rows_cost = len(got["bands"]) * per_band + blocks * per_block
        want_layout = "rows" if rows_cost < len(ch["bands"]) * (per_band + per_block) else None
    assert either.get("layout") == want_layout and either["feasible"] == (ch["feasible"] or got["feasible"])
    # fusion_pw_dw: rows, row-wise when it fits
    tgt["fused_scheme"]["pw_dw_layout"] = "rows"
    assert fusion.solve_dw_pw(pair, tgt).get("layout") == ("rows" if got["feasible"] else None)


def test_auto_takes_rows_on_cmsis_nn_where_channel_wise_needs_more_bands():
    """On CMSIS-NN (`layers`), fusion_pw_dw: auto compares the two PW->DW
    tilings: a 16x10 map of 24 channels and a 5x5 depthwise in 9000 bytes
    runs channel-wise in more bands (each recomputing 4 halo rows of the
    pointwise) than row-wise, whose few row blocks cost less: row-wise. With
    the whole pair in one band both layouts are one block: channel-wise."""
    g = chain_graph(16, 10, 12, 24, 4, 5, 1, pad=2)
    pair = fusion.pair_view(g, "pw1", "dw")
    tgt = target(9000, 1, pw_dw="layers")
    ch, rows = ftiler.solve_pw_dw(pair, tgt), ftiler.solve_pw_dw_rows(pair, tgt)
    assert ch["feasible"] and rows["feasible"] and len(ch["bands"]) > len(rows["bands"])
    assert fusion.solve_dw_pw(pair, tgt).get("layout") == "rows"
    roomy = target(200000, 1, pw_dw="layers")
    whole = fusion.solve_dw_pw(pair, roomy)
    assert len(whole["bands"]) == 1 and whole.get("layout") is None


def chain_schedule(g, policy, budget, tilings_budget=64000):
    tgt = target(budget)
    tilings = {layer.name: solve_layer(tiler_layer(layer, g), target(tilings_budget)) for layer in g.layers}
    cands = fusion.candidates(g)
    fused = {}
    for c in cands:
        pair = fusion.pair_view(g, *c["layers"])
        fused[pair["name"]] = (pair, fusion.solve_dw_pw(pair, tgt))
    return fusion.select(g, tilings, fused, policy, cands), tilings, fused


def test_selector_chooses_exactly_in_a_pw_dw_pw_chain():
    """Both candidates overlap on the depthwise: the selector takes the one
    moving fewer bytes, which is the better of the three schedules counted
    by hand (apart, pw1+dw then pw2, pw1 then dw+pw2)."""
    g = chain_graph(ci=4, cm=24, co=4, s=2)
    s, tilings, fused = chain_schedule(g, "min_transfer", 64000)
    x, e, m, y = (g.tensor(n).nbytes for n in "xemy")
    # whole tensors (everything fits): apart x+e | e+m | m+y
    options = {("pw1", "dw", "pw2"): x + 2 * e + 2 * m + y,
               ("pw1+dw", "pw2"): x + m + m + y,
               ("pw1", "dw+pw2"): x + e + e + y}
    best = min(options, key=options.get)
    assert sorted(options.values())[0] < sorted(options.values())[1]     # no tie
    assert tuple(st_["step"] for st_ in s["steps"]) == best
    assert s["totals"]["activation_transfer_bytes"] == options[best]
    chosen = [c for c in s["candidates"] if c["chosen"]]
    assert len(chosen) == 1
    other = [c for c in s["candidates"] if not c["chosen"]][0]
    # it saves bytes too: its reason names the overlapping group chosen instead
    assert other["fusable"] and other["fused_bytes"] < other["unfused_bytes"]
    assert f"the chosen groups it overlaps ({chosen[0]['group']}) save more" in other["why_apart"]


def test_pw_dw_band_wise_golden_equals_layers_apart():
    """The PW->DW step's geometry: per band, the pointwise over the band's
    input rows, then the depthwise with the band's padding, equals the two
    layers run whole."""
    g = chain_graph(h=13, w=9, ci=5, cm=6, co=3, k=3, s=2, pad=1)
    pair = fusion.pair_view(g, "pw1", "dw")
    ft = fusion.solve_dw_pw(pair, target(900, cores=2))
    assert len(ft["bands"]) > 1
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, size=(13, 9, 5)).astype(np.int8)
    w1 = rng.integers(-128, 128, size=(6, 5)).astype(np.int8)
    w2 = rng.integers(-128, 128, size=(3, 3, 6)).astype(np.int8)
    b1 = rng.integers(-999, 999, size=6).astype(np.int32)
    b2 = rng.integers(-999, 999, size=6).astype(np.int32)
    pw, dw, _ = g.layers

    def two(xin, pad):
        mid = ops.requantize(ops.pointwise(xin, w1, b1, pw.input_offset), pw.requant).astype(np.int8)
        return ops.requantize(ops.depthwise(mid, w2, b2, dw.input_offset, (3, 3), (2, 2), pad), dw.requant)
    whole = two(x, dw.pad)
    bands = [two(x[b["ih0"]:b["ih0"] + b["ih"]], (b["pad_t"], 1, b["pad_b"], 1)) for b in ft["bands"]]
    np.testing.assert_array_equal(np.concatenate(bands), whole)


def test_no_estimate_for_a_depthwise_in_several_row_blocks():
    """A shared-scheme step whose depthwise runs in several row blocks is
    not priced by the model (its per-block stripe cost has no term): the
    selector keeps it apart with that reason."""
    from tessera.cost import fused as cfused
    g = dw_pw_graph(h=40, w=30, c=16, co=16)
    pair = fusion.pair_view(g, "dw", "pw")
    ft = fusion.solve_dw_pw(pair, target(12000, scheme="shared"))
    assert ft["feasible"] and len(ft["bands"]) > 1
    coefs = {"combine": "sum", "default": {"macs": 1.0}, "ops": {}, "dma": {}}
    assert cfused.group_estimate(coefs, *g.layers, g, ft, 8) is None
    assert "row blocks" in cfused.why_no_estimate(coefs, ft)


def two_bottlenecks():
    """a -> l0 -> b -> [e1 (expand to 32) -> m1 -> d1 (3x3, stride 2)] -> n1
    -> p1 -> c -> [e2 (expand to 48) -> m2 -> d2 (3x3)] -> n2 -> p2 -> z."""
    shapes = {"a": [8, 8, 4], "b": [8, 8, 4], "m1": [8, 8, 32], "n1": [4, 4, 32], "c": [4, 4, 8],
              "m2": [4, 4, 48], "n2": [4, 4, 48], "z": [4, 4, 8]}
    t = {k: Tensor(k, v) for k, v in shapes.items()}

    def pw(name, i, o):
        return Layer(name, "pointwise", [i], o, input_offset=0, weights=f"{name}_w", bias=f"{name}_b",
                     requant=rq(shapes[o][2]))

    def dw(name, i, o, s):
        return Layer(name, "depthwise", [i], o, kernel=[3, 3], stride=[s, s], pad=[1] * 4, input_offset=0,
                     weights=f"{name}_w", bias=f"{name}_b", requant=rq(shapes[o][2]))
    layers = [pw("l0", "a", "b"), pw("e1", "b", "m1"), dw("d1", "m1", "n1", 2), pw("p1", "n1", "c"),
              pw("e2", "c", "m2"), dw("d2", "m2", "n2", 1), pw("p2", "n2", "z")]
    return Graph("g", "test", t, layers, ["a"], ["z"])


def test_min_memory_fuses_only_where_the_peak_is():
    """Whole tensors live per step: 512, 2304, 2560, 640, 896, 1536, 896;
    the floors (less each step's consumed input inside its output, never the
    network's input): 512, 2048, 2048, 512, 768, 768, 768. Fusing e1+d1
    drops m1 (steps 1-2 then hold b and n1, or n1: 512): the highest floor
    falls to 768, at steps 4-6. No group lowers that; d2+p2 leaves it at
    two steps (m2 and z at step 5: 768; z alone at 6), e2+d2 at three, so
    the greedy pass takes d2+p2 next, then nothing. The pruning pass keeps
    both: with the layers apart cut in rows only at e1 and d1 (whole tensors
    above 2048), the expected peak is 896 (step 4, e2 whole) with both,
    1536 (step 5, d2 whole) without d2+p2 and 2048 without e1+d1. The other
    candidates (d1+p1, e2+d2) stay apart."""
    from tessera.planning import overlap

    g = two_bottlenecks()
    live, floors = overlap.step_floors(g)
    assert live == [512, 2304, 2560, 640, 896, 1536, 896]
    assert floors == [512, 2048, 2048, 512, 768, 768, 768]
    assert overlap.row_band_layers(g) == ["d1", "e1"]
    s, _, _ = chain_schedule(g, "min_memory", 64000)
    assert [st_["step"] for st_ in s["steps"]] == ["l0", "e1+d1", "p1", "e2", "d2+p2"]
    fused = s["steps"][1]
    assert fused["kind"] == "pw_dw" and fused["reason"].startswith("lowers the activation peak")
    apart = {c["group"]: c["why_apart"] for c in s["candidates"] if not c["chosen"]}
    assert apart == dict.fromkeys(["d1+p1", "e2+d2"], "does not lower the activation peak")


def test_min_memory_keeps_apart_a_pair_the_peak_does_not_need():
    """a (8x8x4, the network's input) -> l0 -> b -> k0 -> c -> [e1 (expand
    to 32) -> m -> d1 (stride 2)] -> n -> p1 -> z. Whole tensors live: 1280,
    2048, 3072, 2560, 576; floors 1280 (l0 reads the network's input: never
    overlapped), 1024, 2048, 2048, 512. Fusing e1+d1 lowers the highest
    floor to 1280, so the greedy pass takes it; but the plan's peak stays
    2048 either way: k0's whole tensors (not above 2048, so not cut in rows)
    and, apart, e1 and d1 cut in rows down to 2048. The pruning pass drops
    it: nothing is fused (mbv1_128's pw1+dw2, next to dw1's 262,144 B)."""
    t = {k: Tensor(k, v) for k, v in {"a": [8, 8, 4], "b": [8, 8, 16], "c": [8, 8, 16], "m": [8, 8, 32],
                                      "n": [4, 4, 32], "z": [4, 4, 4]}.items()}

    def layer(name, op, i, o, **kw):
        return Layer(name, op, [i], o, input_offset=0, weights=f"{name}_w", bias=f"{name}_b",
                     requant=rq(t[o].shape[2]), **kw)
    g = Graph("g", "test", t, [layer("l0", "pointwise", "a", "b"), layer("k0", "pointwise", "b", "c"),
                               layer("e1", "pointwise", "c", "m"),
                               layer("d1", "depthwise", "m", "n", kernel=[3, 3], stride=[2, 2], pad=[1] * 4),
                               layer("p1", "pointwise", "n", "z")], ["a"], ["z"])
    from tessera.planning import overlap
    assert overlap.step_floors(g) == ([1280, 2048, 3072, 2560, 576], [1280, 1024, 2048, 2048, 512])
    assert overlap.row_band_layers(g) == ["d1", "e1"]
    s, _, _ = chain_schedule(g, "min_memory", 64000)
    assert [st_["step"] for st_ in s["steps"]] == ["l0", "k0", "e1", "d1", "p1"]
    assert all(c["why_apart"] == "does not lower the activation peak" for c in s["candidates"])


def test_layers_scheme_reserves_what_the_cmsis_nn_fused_kernels_use():
    """kernels/cmsis_nn/fused.c keeps in dw.scratch both layers' multipliers
    and shifts (8 bytes per channel each), the depthwise filter reordered
    (word-aligned), then the CMSIS-NN functions' buffer: four int16 columns
    of the pointwise's input (arm_convolve_1x1_s8_fast's fast path) and, for
    a depthwise other than 3x3, its sign-extended filter (2 bytes a tap)."""
    for k in (3, 5):
        for c, co in ((8, 16), (7, 5)):
            for first, second, build in (("dw", "pw", lambda: dw_pw_graph(c=c, co=co, k=k, pad=k // 2)),
                                         ("pw1", "dw", lambda: chain_graph(ci=co, cm=c, k=k, pad=k // 2))):
                pair = fusion.pair_view(build(), first, second)
                ft = fusion.solve_dw_pw(pair, target(64000, cores=1, scheme="layers"))
                C, Co, Ci = pair["dw"]["out"][2], pair["pw"]["out"][2], pair["pw"]["in"][2]
                taps = k * k
                need = (8 * (C + Co) + -(-taps * C // 4) * 4
                        + max(4 * 2 * (-(-Ci // 4) * 4), 0 if k == 3 else 2 * taps * C))
                assert ft["scheme"] == "layers" and ft["l1_bytes"]["scratch"] >= need, (pair["name"], k, c, co)


def test_layers_scheme_estimate_counts_each_kernel_call():
    """A `layers` step (CMSIS-NN) calls each layer's kernel once per block:
    with hand-set coefficients pricing only the per-channel setup of a call
    (`chans`), the estimate is blocks x (depthwise channels + pointwise
    channels) for DW->PW, and blocks x the block's channels, twice, for
    PW->DW."""
    from tessera.cost import fused as cfused, model
    coefs = {"combine": "sum", "default": {k: 0.0 for k in model.COMPUTE}, "ops": {},
             "dma": {k: 0.0 for k in model.DMA}}
    coefs["default"]["chans"] = 1.0
    g = dw_pw_graph(h=12, w=10, c=8, co=16)
    ft = fusion.solve_dw_pw(fusion.pair_view(g, "dw", "pw"), target(64000, cores=1, scheme="layers"))
    assert ft["scheme"] == "layers" and (len(ft["bands"]), ft["fd"]) == (1, 12)
    dw, pw = g.layers
    assert cfused.group_estimate(coefs, dw, pw, g, ft, 1) == 8 + 16
    ft4 = dict(ft, fd=4)                            # three blocks of four rows
    assert cfused.group_estimate(coefs, dw, pw, g, ft4, 1) == 3 * (8 + 16)
    c = chain_graph(cm=12)
    ft = fusion.solve_dw_pw(fusion.pair_view(c, "pw1", "dw"), target(64000, cores=1, scheme="layers"))
    pw1, dwl = c.layers[0], c.layers[1]
    assert cfused.group_estimate(coefs, pw1, dwl, c, dict(ft, fd=5), 1) == 2 * 12   # blocks of 5, 5, 2
    assert cfused.group_estimate(coefs, pw1, dwl, c, dict(ft, fd=12), 1) == 2 * 12


def test_fitted_saving_prices_every_step_of_its_kind_and_scheme():
    """With fitted fused terms (`fused:` in the coefficients) a step is its
    layers' estimates less the saving, multi-block steps included; a step
    of another scheme falls back to the rules without them."""
    from tessera.cost import fused as cfused
    g = dw_pw_graph(h=40, w=30, c=16, co=16)
    pair = fusion.pair_view(g, "dw", "pw")
    ft = fusion.solve_dw_pw(pair, target(12000, scheme="shared"))
    blocks = sum(-(-b["oh"] // ft["fd"]) for b in ft["bands"])
    assert blocks > 1
    dw, pw = g.layers
    mid = g.tensor("m")
    coefs = {"combine": "sum", "default": {"macs": 1.0}, "ops": {}, "dma": {},
             "fused": {"dw_pw": {"scheme": "shared", "saving": {"step": 1000.0, "inter_bytes": 2.0,
                                                                 "chan_blocks": -10.0}}}}
    saving = 1000 + 2 * mid.nbytes - 10 * 16 * (blocks - 1)
    assert cfused.why_no_estimate(coefs, ft) is None
    assert cfused.group_estimate(coefs, dw, pw, g, ft, 8, apart=50000) == 50000 - saving
    # the selector fuses it exactly when the fitted saving is positive
    for step, fused_ in ((1000.0, True), (-4 * mid.nbytes, False)):
        coefs["fused"]["dw_pw"]["saving"]["step"] = step
        est = cfused.group_estimate(coefs, dw, pw, g, ft, 8, apart=50000)
        s = latency_schedule(g, costs(30000, 20000, est))
        assert (s["steps"][0]["kind"] == "dw_pw") == fused_
    ft_pc = fusion.solve_dw_pw(pair, target(64000))
    assert cfused.group_estimate(coefs, dw, pw, g, ft_pc, 8, apart=50000) is None


def test_fused_fit_recovers_the_saving_it_was_made_from():
    """Savings made from known terms (synthetic pairs of both kinds: the
    block terms shared by the kinds, a constant of each kind's own, terms
    of both signs) are fitted back within 1% of the count apart."""
    from tessera.cost import fused_fit
    from tessera.cost.fused import TERMS
    rng = np.random.default_rng(3)
    shared = {"dma": 0.9, "inter_bytes": 5.0, "stripe": -3.0, "cols": -130.0, "halo_macs": -7.0, "pw_pix": -80.0}
    step = {"dw_pw": 5000.0, "pw_dw": -20000.0}
    samples = []
    for kind in step:
        for i in range(30):
            f = {"step": 1, "dma": int(rng.integers(50000, 2000000)), "inter_bytes": int(rng.integers(2000, 200000)),
                 "stripe": int(rng.integers(0, 8)) * 4608,
                 "cols": int(rng.integers(0, 8)) * 768, "pw_pix": int(rng.integers(0, 6)) * 1024,
                 "halo_macs": int(rng.integers(0, 4)) * 30000 if kind == "pw_dw" else 0, "bands": 1}
            apart = 3 * f["dma"] + 400000
            samples.append((kind, "shared", f, apart, apart - step[kind] - sum(shared[k] * f[k] for k in shared),
                            f"g{i}"))
    fit = fused_fit.fit(samples)
    for kind in step:
        got = fit[kind]["saving"]
        assert set(got) == set(TERMS)
        for s in samples:
            if s[0] == kind:
                assert abs(sum(got[k] * s[2][k] for k in TERMS) - (s[3] - s[4])) <= 0.01 * s[3]
        assert fit[kind]["groups"] == 30 and fit[kind]["scheme"] == "shared"
    # the block terms are one coefficient for both kinds
    assert all(fit["dw_pw"]["saving"][k] == fit["pw_dw"]["saving"][k] for k in shared)


def test_block_terms_count_what_the_kernels_do_again():
    """cost.fused.block_features against the kernels' code, by hand: a
    DW->PW step in blocks of fd rows gathers the depthwise's kw-wide stripes
    of (n - 1) * sh + kh rows per block (kernels/pulp_nn/depthwise.c), so
    against the layer run whole each block after the first gathers its
    kh - sh = 2 halo rows again, per channel and column; a PW->DW step's
    bands recompute the pointwise on their depthwise's halo rows, and its
    channel blocks rerun the pointwise's pixels."""
    from tessera.cost import fused as cfused
    g = dw_pw_graph(h=12, w=10, c=8, co=16)
    tgt = target(64000, scheme="shared")
    alone = {layer.name: solve_layer(tiler_layer(layer, g), tgt) for layer in g.layers}
    assert not any(t["tiled"] for t in alone.values())        # each layer runs whole apart
    ft = fusion.solve_dw_pw(fusion.pair_view(g, "dw", "pw"), tgt)
    assert len(ft["bands"]) == 1
    dw, pw = g.layers
    for fd, blocks in ((12, 1), (4, 3), (5, 3)):
        x = cfused.block_features(dw, pw, g, dict(ft, fd=fd), alone)
        assert x["stripe"] == (blocks - 1) * 2 * 3 * 10 * 8      # halo rows x kw x columns x channels
        assert x["cols"] == (blocks - 1) * 10 * 8
        assert x["halo_macs"] == 0 and x["pw_pix"] == 0
    c = chain_graph(h=12, w=10, ci=4, cm=12)
    alone = {layer.name: solve_layer(tiler_layer(layer, c), tgt) for layer in c.layers}
    pw1, dwl = c.layers[0], c.layers[1]
    ft = fusion.solve_dw_pw(fusion.pair_view(c, "pw1", "dw"), tgt)
    two = dict(ft, fd=12, bands=[dict(ih=7, oh=6), dict(ih=7, oh=6)])   # two bands of 6 rows: 1 halo row each
    x = cfused.block_features(pw1, dwl, c, two, alone)
    assert x["halo_macs"] == 2 * 10 * 4 * 12                        # 2 rows x 10 columns x 4 in x 12 out
    assert x["pw_pix"] == 2 * 10                                    # the same two rows' pixels
    x = cfused.block_features(pw1, dwl, c, dict(two, fd=4), alone)  # three channel blocks per band
    assert x["pw_pix"] == 3 * 14 * 10 - 12 * 10
    # the DMA a step does not do: the intermediate written and read back
    # (the whole layers apart, one band fused, priced by act_bytes alone)
    ft = fusion.solve_dw_pw(fusion.pair_view(g, "dw", "pw"), tgt)
    from tessera.cost import features
    feats = {layer.name: features.layer_features(layer, g, alone_t, 2, 8)
             for layer, alone_t in zip(g.layers, [solve_layer(tiler_layer(layer, g), tgt) for layer in g.layers])}
    alone = {"tilings": {layer.name: solve_layer(tiler_layer(layer, g), tgt) for layer in g.layers},
             "features": feats}
    x = cfused.saving_features(dw, pw, g, ft, alone, {"dma": {"act_bytes": 1.0}}, 8)
    assert x["dma"] == 2 * g.tensor("m").nbytes


def test_fitted_block_terms_price_the_step_against_its_layers_apart():
    """With the current terms in `fused:`, the selector's estimate of a
    step is its layers' estimates less the saving the terms give for it
    (here a step whose blocks gather stripes again: slower fused, apart)."""
    from tessera import ir
    from tessera.fusion import costs as fcosts
    g = dw_pw_graph(h=12, w=10, c=8, co=16)
    tgt = target(64000, scheme="shared")
    tilings = {layer.name: solve_layer(tiler_layer(layer, g), tgt) for layer in g.layers}
    pair = fusion.pair_view(g, "dw", "pw")
    ft = fusion.solve_dw_pw(pair, tgt)
    apart = sum(ir.macs(layer, g) for layer in g.layers)
    mid = g.tensor("m").nbytes
    for fd, stripe_cost, fused_ in ((12, -3.0, True), (3, -300.0, False)):
        coefs = {"combine": "sum", "ops": {}, "default": {"macs": 1.0}, "dma": {"act_bytes": 1.0},
                 "fused": {"dw_pw": {"scheme": "shared", "median_error": 0.0,
                                     "saving": {"step": 0.0, "dma": 1.0, "stripe": stripe_cost}}}}
        step = dict(ft, fd=fd)
        c = fcosts.model_costs(g, tilings, {"dw+pw": (pair, step)},
                               {"coefficients": coefs, "file": "t.yaml", "dims": 2, "cores": 8,
                                "kernels": "test", "target": "t", "unit": "x"})
        blocks = -(-12 // fd)
        # apart: every layer's estimate (macs and act_bytes); the saving: the intermediate's two trips,
        # less the stripes' halo rows gathered again
        saving = 2 * mid + stripe_cost * (blocks - 1) * 2 * 3 * 10 * 8
        assert c["groups"]["dw+pw"] == round(c["layers"]["dw"] + c["layers"]["pw"] - saving)
        s = latency_schedule(g, c)
        assert (s["steps"][0]["kind"] == "dw_pw") == fused_


def test_a_saving_within_the_fits_error_is_held_apart():
    """costs["held"]: a group estimated faster, but by less than the cost
    model's own error, stays apart with that reason."""
    g = dw_pw_graph()
    c = dict(costs(700, 500, 1190), held={"dw+pw": "a saving of 0.83%, within the fit's median error"})
    s = latency_schedule(g, c)
    assert [st_["step"] for st_ in s["steps"]] == ["dw", "pw"]
    assert s["candidates"][0]["fused_estimate"] == 1190
    assert "within the fit's median error" in s["candidates"][0]["why_apart"]
    assert [st_["step"] for st_ in latency_schedule(g, costs(700, 500, 1190))["steps"]] == ["dw+pw"]


def test_model_costs_hold_a_fitted_saving_within_the_median_error():
    from tessera import ir
    from tessera.fusion import costs as fcosts
    g = dw_pw_graph()
    tgt = target(64000, scheme="shared")
    tilings = {layer.name: solve_layer(tiler_layer(layer, g), tgt) for layer in g.layers}
    pair = fusion.pair_view(g, "dw", "pw")
    fused = {"dw+pw": (pair, fusion.solve_dw_pw(pair, tgt))}
    apart = sum(ir.macs(layer, g) for layer in g.layers)     # the estimate of a macs-only model
    for step, held in ((0.005 * apart, True), (0.05 * apart, False)):
        coefs = {"combine": "sum", "ops": {}, "default": {"macs": 1.0}, "dma": {},
                 "fused": {"dw_pw": {"scheme": "shared", "median_error": 0.01, "saving": {"step": step}}}}
        c = fcosts.model_costs(g, tilings, fused, {"coefficients": coefs, "file": "test.yaml", "dims": 2,
                                                   "cores": 8, "kernels": "test", "target": "t", "unit": "x"})
        assert c["groups"]["dw+pw"] == round(apart - step)
        assert ("dw+pw" in c["held"]) == held
        # no fused sweep pair of the kind ran faster on the target: a
        # positive estimated saving is extrapolation, held apart
        coefs["fused"]["dw_pw"].update(faster=0, groups=17)
        c = fcosts.model_costs(g, tilings, fused, {"coefficients": coefs, "file": "test.yaml", "dims": 2,
                                                   "cores": 8, "kernels": "test", "target": "t", "unit": "x"})
        assert "dw+pw" in c["held"] and "0 of 17" in c["held"]["dw+pw"]


def test_model_costs_hold_a_step_in_more_bands_than_the_fit_saw():
    """A step of more bands than any fused sweep pair of its kind (the fit's
    `bands`) is beyond what the fit saw: estimated faster, held apart."""
    from tessera import ir
    from tessera.cost import fused_fit
    from tessera.fusion import costs as fcosts
    g = dw_pw_graph(h=40, w=30, c=16, co=16)
    tgt = target(12000, scheme="shared")
    tilings = {layer.name: solve_layer(tiler_layer(layer, g), tgt) for layer in g.layers}
    pair = fusion.pair_view(g, "dw", "pw")
    ft = fusion.solve_dw_pw(pair, tgt)
    n = len(ft["bands"])
    assert n > 1
    apart = sum(ir.macs(layer, g) for layer in g.layers)
    for seen, held in ((n, False), (n - 1, True)):
        coefs = {"combine": "sum", "ops": {}, "default": {"macs": 1.0}, "dma": {},
                 "fused": {"dw_pw": {"scheme": "shared", "median_error": 0.0, "bands": seen,
                                     "saving": {"step": 0.1 * apart}}}}
        c = fcosts.model_costs(g, tilings, {"dw+pw": (pair, ft)}, {"coefficients": coefs, "file": "t.yaml",
                                                                    "dims": 2, "cores": 8, "kernels": "test",
                                                                    "target": "t", "unit": "x"})
        assert ("dw+pw" in c["held"]) == held
        if held:
            assert f"runs in {n} bands" in c["held"]["dw+pw"]
    # the fit records the most bands of its samples
    f = {"step": 1, "inter_bytes": 1000, "chan_blocks": 0, "macs": 5000}
    samples = [("dw_pw", "shared", dict(f, bands=b, extra_bands=b - 1, inter_bytes=1000 * b), 9000 + b, 8000,
                f"g{b}")
               for b in (1, 3, 7, 2, 5)]
    assert fused_fit.fit(samples)["dw_pw"]["bands"] == 7


def test_a_long_group_name_gives_a_short_distinct_tiling_file():
    """Two long ONNX node names (a converted TFLite model's) joined would
    exceed a file system's 255 bytes: the fused tiling's file is a prefix
    and a digest, the same each time, different for different groups."""
    a, b = "functional_1_conv2d_" + "x" * 190, "functional_1_depthwise_" + "y" * 190
    stem = fusion.tiling_stem(f"{a}+{b}")
    assert len((stem + ".fused.json").encode()) <= 255 and stem.startswith(a[:90])
    assert stem == fusion.tiling_stem(f"{a}+{b}") != fusion.tiling_stem(f"{a}+{b}z")
    assert fusion.tiling_stem("dw1+pw1") == "dw1+pw1"
