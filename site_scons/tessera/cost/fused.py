"""The cost model's estimate of a fused DW->PW step (the fusion selector's
min_latency reads it next to the layers' own estimates).

A fused step that runs the library's own depthwise and pointwise kernels
(the `shared` scheme, fusion/tiler.py: per block of rows, the depthwise
split over channels as alone, then the pointwise split over pixels) does
each layer's arithmetic with that layer's kernel, so its compute is each
layer's op coefficients on the layer's features over the fused bands; its
DMA is the step's own: the depthwise's input bands in, the pointwise's
output bands out (the intermediate never moves), both layers' weights once.
A step whose depthwise runs in more than one row block (several bands, or
fd below the band) is not priced either: the depthwise alone splits
channels and gathers each whole column once, fused it gathers every column
again per block, at a per-column cost no fitted term covers (measured on
gap8, mbv1_025_224: such groups +1.9% to +13.2%, while every single-block
group of mbv1_025_128 ran 1.5% to 2.9% faster). A `per_core` fused kernel is another kernel (the reference tsr_dw_pw): the
coefficients fitted on the library's layers say nothing about it, so there
is no estimate (None) unless the coefficients file has an op named for the
step's kind (`dw_pw`, `pw_dw`: fitted on fused steps), which then prices the
whole step's compute. A PW->DW step on the shared scheme (PULP-NN: blocks of
channels, the library's pointwise then its depthwise) is priced as its two
layers over the bands, the pointwise on the band's input rows (its halo
recomputed); the reference library's PW->DW steps run tsr_pw_dw
(per_core).

The `layers` scheme (CMSIS-NN, one core: kernels/cmsis_nn/fused.c) also
runs the library's own layer kernels, one block after the other, so it is
priced like `shared`, blocks included: its depthwise gathers no stripes
(a block only re-reads its halo rows) and its per-channel constants are
built once per band. Its PW->DW copy of the depthwise's output block into
the band (fd below the channel count) has no term.

Where the coefficients file has `fused: {dw_pw|pw_dw: {scheme, saving}}`
(tools/fit_cost_model.py, from the fused sweeps: cost/fused_sweeps.py,
fused_fit.py), every step of that kind and scheme is priced as its layers'
own estimates minus the fitted saving (SAVING below), multi-block and
per_core steps included; the rules above are the fallback without it
(the `layers` scheme's row-wise PW->DW, a reference kernel, never has it).
"""

from .. import ir
from ..config import views
from . import model
from ..tiles import geometry
from .features import FEATURES, _balance, _per_tile


def _part(layer, graph, bands, units_of, cores, rows="oh"):
    y = graph.tensor(layer.output)
    macs = ir.macs(layer, graph)
    # rows: "ih" for a PW->DW step's pointwise (it computes the band's halo rows too)
    split = sum(macs * b[rows] / y.shape[0] * _balance(units_of(b), cores) for b in bands)
    return dict(dict.fromkeys(FEATURES, 0), macs=macs, split_macs=round(split), out_elems=y.size,
                in_elems=sum(graph.tensor(n).size for n in layer.inputs), tiles=len(bands))


def _calls(ff, sf, first, second, graph, ft, fv, sv):
    """The `layers` scheme calls each layer's kernel once per block: the
    per-tile features (per-channel setup, channels outside groups of four)
    of every call, as features.layer_features counts a layer's tiles
    (without them a step of many small bands was priced below its layers
    apart and ran +17% on stm32f4's 16 kB L1)."""
    fd = ft["fd"]
    mid, out = graph.tensor(first.output), graph.tensor(second.output)
    for b in ft["bands"]:
        if ft["kind"] == "dw_pw":
            _, Wo, C = mid.shape
            for y in range(0, b["oh"], fd):
                n = min(fd, b["oh"] - y)
                _per_tile(ff, first.op, fv, (n, Wo, C), mid.shape, ff["macs"] * n / mid.shape[0])
                _per_tile(sf, second.op, sv, (n, Wo, out.shape[2]), out.shape, sf["macs"] * n / out.shape[0])
        else:
            _, W, C = mid.shape
            for c0 in range(0, C, fd):
                n = min(fd, C - c0)
                _per_tile(ff, first.op, fv, (b["ih"], W, n), mid.shape,
                          ff["macs"] * b["ih"] * n / (mid.shape[0] * C))
                _per_tile(sf, second.op, sv, (b["oh"], out.shape[1], n), out.shape,
                          sf["macs"] * b["oh"] * n / (out.shape[0] * C))


def group_features(first, second, graph, ft, cores):
    """(first's features, second's features, the step's DMA features) of a
    fused step (DW->PW or PW->DW)."""
    bands = ft["bands"]
    shared = ft.get("scheme") in ("shared", "layers")
    C = graph.tensor(first.output).shape[-1]
    Wo = graph.tensor(second.output).shape[1]

    pw_dw = ft.get("kind") == "pw_dw"

    def units(layer):
        if not shared:
            return (lambda b: C) if pw_dw else (lambda b: b["oh"])
        if layer.op == "depthwise":
            return lambda b: C
        # the pointwise split over its pixels: PW->DW, the band's input rows
        return (lambda b: b["ih"] * x.shape[1]) if pw_dw else (lambda b: b["oh"] * Wo)
    x = graph.tensor(first.inputs[0])
    # a PW->DW band's pointwise computes the depthwise's input rows, halo included
    ff = _part(first, graph, bands, units(first), cores, "ih" if pw_dw else "oh")
    sf = _part(second, graph, bands, units(second), cores)
    fv, sv = views.tiler_layer(first, graph), views.tiler_layer(second, graph)
    if ft.get("scheme") == "layers":
        _calls(ff, sf, first, second, graph, ft, fv, sv)
    out = graph.tensor(second.output)
    act = sum(b["ih"] * x.shape[1] * x.shape[2] * fv["in_bytes"] + b["oh"] * Wo * out.shape[2] * sv["out_bytes"]
              for b in bands)
    w_bytes = ((fv["w_bytes_per_cout"] + fv["param_bytes_per_cout"]) * C
               + (sv["w_bytes_per_cout"] + sv["param_bytes_per_cout"]) * out.shape[2])
    # as features.layer_features counts a layer's: one transfer untiled, else
    # weights and parameters apart
    w_xfers = sum((1 if v["w_bytes_per_cout"] or v["param_bytes_per_cout"] else 0) if not ft["tiled"] else
                  (1 if v["w_bytes_per_cout"] else 0) + (1 if v["param_bytes_per_cout"] else 0) for v in (fv, sv))
    dma = dict(dict.fromkeys(FEATURES, 0), act_bytes=act, act_xfers=2 * len(bands), w_bytes=w_bytes,
               w_xfers=w_xfers, tiles=len(bands))
    return ff, sf, dma


# what fusing saves against the layers apart (their estimates minus the
# fused step's count), fitted per target on the fused sweeps
# (cost/fused_fit.py), each term from the kernels' code (shared and layers
# schemes: the step runs the layers' own kernels, once per block):
# - step: a constant (one step, call and fork fewer or more);
# - dma: the DMA the step does not do, priced by the target's own fitted
#   DMA terms: its layers' DMA apart (the intermediate written out and read
#   back) minus the step's (its bands re-read their halo rows);
# - inter_bytes: the intermediate's bytes, for what the DMA coefficients
#   do not price of its two trips (stm32h7's layer fit prices activation
#   bytes at 0, its copies' cost sits in the layers' per-element terms;
#   with it the stm32h7 fit's median error fell from 0.10% to 0.03%);
# - stripe: bytes of the depthwise's kw-wide vertical stripes gathered
#   (kernels/pulp_nn/depthwise.c: per channel and output column, rows
#   (oh - 1) * sh + kh) over the step's blocks, minus over the layer's own
#   tiles: a block of fd rows gathers its kh - sh halo rows again;
# - cols: the depthwise's per channel and column set-ups, the same way;
# - halo_macs: the pointwise MACs a PW->DW step's bands recompute (each
#   band's pointwise computes its depthwise's halo input rows);
# - pw_pix: the pointwise's output pixels over the step's blocks minus over
#   its own tiles (a channel block of a PW->DW step reruns the pointwise's
#   per-pixel loop over the band for fd channels).
# Negative coefficients: fusing costs that much more. Chosen on gap8 by
# fitting the sweeps and checking the held-out networks' pairs: with the
# DMA term alone the pairs of one block matched to 0.02% of their count,
# the block terms cover the rest (fusion.md, "The model's fit").
TERMS = ("step", "dma", "inter_bytes", "stripe", "cols", "halo_macs", "pw_pix")
# the terms of session 4's fits (per channel of every extra row block, the
# intermediate's bytes, per MAC) and pulp_open's (extra_bands: bands after
# the first, each band's DMA set-up, forks and a PW->DW step's halo rows
# again; on pulp_open a one-band step runs 1-3% faster than its layers,
# one of several 1-2 row bands up to 34% slower; with it that fit's median
# error went from 3.5% to 1.8% DW->PW, 5.7% to 4.1% PW->DW): a
# coefficients file with them is priced by them (saving() uses the file's
# own terms; a file without extra_bands prices it at 0)
SAVING = ("step", "inter_bytes", "chan_blocks", "macs", "extra_bands")
# the DMA features the `dma` term compares (the weight stream's are not a
# layer's estimate in the selector)
DMA_TERMS = ("act_bytes", "act_xfers", "w_bytes", "w_xfers")


def _blocks(ft):
    """How many blocks the step runs in: a channel-wise PW->DW step (fd
    channels per block) bands x channel blocks, else its row blocks."""
    if ft.get("kind") == "pw_dw" and "channels" in ft and ft.get("layout") != "rows":
        return len(ft["bands"]) * -(-ft["channels"] // ft["fd"])
    return sum(-(-b["oh"] // ft["fd"]) for b in ft["bands"])


def block_tiles(first, second, graph, ft):
    """[(first's tile, second's tile)], each (rows, columns, channels) of
    output, one per block as the step runs them: DW->PW (and row-wise
    PW->DW) blocks of fd output rows, all channels; channel-wise PW->DW
    blocks of fd channels over the band (the pointwise over the band's
    input rows, halo included)."""
    mid, out = graph.tensor(first.output), graph.tensor(second.output)
    fd = max(ft["fd"], 1)
    res = []
    for b in ft["bands"]:
        if ft.get("kind") == "pw_dw" and ft.get("layout") != "rows":
            for c0 in range(0, mid.shape[2], fd):
                n = min(fd, mid.shape[2] - c0)
                res.append(((b["ih"], mid.shape[1], n), (b["oh"], out.shape[1], n)))
            continue
        for y in range(0, b["oh"], fd):
            n = min(fd, b["oh"] - y)
            # row-wise PW->DW: each input row's pointwise once per band (the shifted buffer keeps the rest)
            rows = n if ft.get("kind") != "pw_dw" else max(1, round(b["ih"] * n / b["oh"]))
            res.append(((rows, mid.shape[1], mid.shape[2]), (n, out.shape[1], out.shape[2])))
    return res


def _own_tiles(layer, graph, tiling):
    """The layer's tiles apart, (rows, columns, channels) of output."""
    view = views.tiler_layer(layer, graph)
    y = graph.tensor(layer.output)
    if not tiling["tiled"] or view.get("whole"):
        return [tuple(y.shape)]
    return [(t["oh"], t["ow"], t["oc"]) for t in geometry.tiles(view, tiling)]


def block_features(first, second, graph, ft, tilings):
    """stripe, cols, halo_macs, pw_pix (see TERMS) of a fused step against
    its layers' own tilings (`tilings`: layer name -> tiling apart)."""
    dw = first if first.op == "depthwise" else second
    pw = second if dw is first else first
    i_dw = 0 if dw is first else 1
    view = views.tiler_layer(dw, graph)
    kh, kw = view["kernel"]
    sh = view["stride"][0]

    def gathered(tiles):
        return sum(c * w * kw * ((h - 1) * sh + kh) for h, w, c in tiles), sum(c * w for _, w, c in tiles)
    blocks = block_tiles(first, second, graph, ft)
    g_fused, c_fused = gathered([t[i_dw] for t in blocks])
    g_alone, c_alone = gathered(_own_tiles(dw, graph, tilings[dw.name]))
    pw_pix = (sum(h * w for h, w, _ in (t[1 - i_dw] for t in blocks))
              - sum(h * w for h, w, _ in _own_tiles(pw, graph, tilings[pw.name])))
    mid = graph.tensor(first.output)
    halo = 0
    if ft.get("kind") == "pw_dw":
        halo = round(ir.macs(first, graph) * (sum(b["ih"] for b in ft["bands"]) - mid.shape[0]) / mid.shape[0])
    return {"stripe": g_fused - g_alone, "cols": c_fused - c_alone, "halo_macs": halo, "pw_pix": pw_pix}


def saving_features(first, second, graph, ft, alone=None, coefs=None, cores=1):
    """The saving terms of a fused step (TERMS and the older SAVING). The
    block terms and `dma` need `alone`: {"tilings": layer name -> tiling
    apart, "features": layer name -> features apart} and the coefficients'
    DMA terms (coefs); without them only the older terms."""
    dw = first if first.op == "depthwise" else second
    C = graph.tensor(dw.inputs[0]).shape[2]
    extra = _blocks(ft) - 1
    # bands: not a saving term, the range the fit saw (fusion/costs.py)
    x = {"step": 1, "inter_bytes": graph.tensor(first.output).nbytes, "chan_blocks": C * extra,
         "macs": ir.macs(first, graph) + ir.macs(second, graph), "extra_bands": len(ft["bands"]) - 1,
         "bands": len(ft["bands"])}
    if alone is not None and coefs is not None:
        _, _, dma = group_features(first, second, graph, ft, cores)
        feats = alone["features"]
        x["dma"] = sum(coefs["dma"].get(k, 0.0) * (feats[first.name].get(k, 0) + feats[second.name].get(k, 0)
                                                     - dma[k]) for k in DMA_TERMS)
        x.update(block_features(first, second, graph, ft, alone["tilings"]))
    return x


def fitted(coefs, ft):
    """The fitted saving terms for this step's kind and scheme, or None."""
    f = (coefs or {}).get("fused", {}).get(ft.get("kind", "dw_pw"))
    return f if f and f.get("scheme") == ft.get("scheme", "per_core") else None


def saving(coefs, first, second, graph, ft, alone=None, cores=1):
    """The count fusing this step saves (negative: fused is slower), by the
    file's own fitted terms; None without fitted terms for its kind and
    scheme, or when they need the layers apart (`alone`, see
    saving_features) and there are none."""
    f = fitted(coefs, ft)
    if f is None:
        return None
    x = saving_features(first, second, graph, ft, alone, coefs, cores)
    if any(k not in x for k in f["saving"]):
        return None
    return sum(v * x[k] for k, v in f["saving"].items())


def reference_rows(ft):
    """A row-wise PW->DW step of the `layers` scheme (CMSIS-NN's
    tsr_cmsis_pw_dw_rows, or the reference tsr_pw_dw_rows for layers with
    tessera's other arithmetic): the library's PW->DW fit is of channel-wise
    steps, whose blocks cost something else (each re-reads the band's input;
    a row block shifts the buffer and calls both kernels on a few rows), so
    neither its estimate nor that fit takes it."""
    return ft.get("scheme") == "layers" and ft.get("layout") == "rows"


def why_no_estimate(coefs, ft):
    """None when group_estimate prices this fused step, else why not."""
    kind = ft.get("kind", "dw_pw")
    if reference_rows(ft):
        return ("the row-wise PW->DW step on this library has no fitted saving (the fused fit's PW->DW "
                "sweep steps are channel-wise), so the cost model does not price it")
    if fitted(coefs, ft) is not None:
        return None
    if ft.get("scheme") == "layers":
        return None
    if ft.get("scheme") == "shared" and kind == "pw_dw":
        blocks = _blocks(ft)
        if blocks > 1:
            return (f"the step runs in {blocks} blocks (bands x channel or row blocks): each recomputes the pointwise's "
                    f"halo rows or forks twice and refills every core's depthwise plane border, costs the model "
                    f"has no term for (measured on gap8, mbv1_025_224: such groups +3% to +12%); "
                    f"fusion_cost=measured decides such groups")
        return None
    if ft.get("scheme") == "shared":
        blocks = sum(-(-b["oh"] // ft["fd"]) for b in ft["bands"])
        if blocks > 1:
            return (f"the depthwise runs in {blocks} row blocks: each gathers its stripes and requantization "
                    f"constants again, a cost the model has no term for (measured on gap8: up to +13% per "
                    f"group); fusion_cost=measured decides such groups")
        return None
    if kind not in coefs.get("ops", {}):
        return (f"the fused kernel (tsr_{kind}, per_core) is not the layers' kernels and the cost model fits "
                f"no op {kind}")
    return None


def group_parts(coefs, first, second, graph, ft, cores):
    """(compute, the step's DMA features) of a fused step the model prices."""
    ff, sf, dma = group_features(first, second, graph, ft, cores)
    kind = ft.get("kind", "dw_pw")
    if ft.get("scheme") in ("shared", "layers"):
        comp = model.compute_part(coefs, first.op, ff) + model.compute_part(coefs, second.op, sf)
    else:
        both = {k: ff[k] + sf[k] for k in FEATURES}
        both["tiles"] = ff["tiles"]
        comp = model.compute_part(coefs, kind, both)
    return comp, dma


def group_estimate(coefs, first, second, graph, ft, cores, apart=None, alone=None):
    """The fused step's estimated count, or None when the model cannot
    price it (why_no_estimate says why; see the module docstring). With
    fitted saving terms for the step's kind (coefficients' `fused:`) and
    `apart` (the two layers' own estimates, summed), the estimate is apart
    minus the fitted saving: the fusion decision then rests on the saving
    alone, not on the layer model's error (`alone`: the layers' tilings and
    features apart, which the current terms compare the step with; see
    saving_features)."""
    if why_no_estimate(coefs, ft) is not None:
        return None
    if apart is not None and fitted(coefs, ft) is not None:
        s = saving(coefs, first, second, graph, ft, alone, cores)
        # terms that compare the step with its layers apart, without them: no estimate
        return None if s is None else int(round(apart - s))
    comp, dma = group_parts(coefs, first, second, graph, ft, cores)
    d = model.dma_part(coefs, dma)
    if coefs.get("combine", "sum") == "sum" or ft["buffering"] < 2:
        return int(round(comp + d))
    return int(round(max(comp, d) + d / max(dma["tiles"], 1)))
