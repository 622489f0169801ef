"""Fitting the coefficients: least squares on relative error (each layer's
row divided by its measured count, so a 5000-instruction layer weighs as
much as a 5-million one), coefficients kept non-negative (a cost never
shrinks when a layer does more) by refitting without the columns that came
out negative until none does (an active-set method: the data are a few
hundred rows by a few dozen columns).

Samples are (op, features, measured count). Every op seen gets its own
compute coefficients; `default` (for ops the fit never saw) is the fit of
all layers with one shared set. The dma coefficients are shared by all ops.
"""

import numpy as np

from .model import COMPUTE, DMA, _num, yaml_dma


def _nnls(A, b):
    active = np.ones(A.shape[1], dtype=bool)
    while True:
        x = np.zeros(A.shape[1])
        if active.any():
            x[active] = np.linalg.lstsq(A[:, active], b, rcond=None)[0]
        neg = active & (x < 0)
        if not neg.any():
            return x
        active &= ~neg


def _design(samples, ops):
    cols = [(op, k) for op in ops for k in COMPUTE] + [("dma", k) for k in DMA]
    index = {c: i for i, c in enumerate(cols)}
    A = np.zeros((len(samples), len(cols)))
    b = np.ones(len(samples))
    for r, (op, feats, measured) in enumerate(samples):
        x = _row(feats)
        key = op if op in ops else "default"
        for k in COMPUTE:
            A[r, index[(key, k)]] = x[k] / measured
        for k in DMA:
            A[r, index[("dma", k)]] = x[k] / measured
    return cols, A, b


def fit_dma(samples):
    """The dma coefficients alone, fitted on [(features, count of the DMA
    copies)]: where the runner measures the copies apart (QEMU's gap8 HAL,
    the firmware's `cores` run), they need not be told from the compute in
    one count. (In one count they cannot be, on untiled layers: there
    act_bytes is in_elems + out_elems.)"""
    samples = [(f, m) for f, m in samples if m > 0]
    A = np.array([[_row(f)[k] / m for k in DMA] for f, m in samples])
    x = _nnls(A, np.ones(len(samples)))
    return {k: _num(v) for k, v in zip(DMA, x)}


def fit(samples, combine="sum", ridge=0.3, dma=None):
    """{ops, default, dma} fitted on samples [(op, features, measured)].

    Two stages, because some ops have a single layer in the data: first one
    shared model of every layer (compute and DMA); then, with the DMA
    coefficients kept, each op's compute coefficients as multipliers of
    the shared ones, pulled towards 1 (ridge): an op with many layers
    gets its own, an op with one layer mostly a rescaled shared model.
    `dma` (fit_dma's) fixes the dma coefficients: both stages then fit the
    compute on what the DMA leaves of each count."""
    samples = [s for s in samples if s[2] > 0]
    if dma is None:
        cols, A, b = _design([("default", f, m) for _, f, m in samples], ["default"])
        x = _nnls(A, b)
        base = {k: v for (g, k), v in zip(cols, x) if g == "default"}
        dma = {k: v for (g, k), v in zip(cols, x) if g == "dma"}
    else:
        A = np.array([[_row(f)[k] / m for k in COMPUTE] for _, f, m in samples])
        b = np.array([1.0 - sum(dma[k] * _row(f)[k] for k in DMA) / m for _, f, m in samples])
        base = dict(zip(COMPUTE, _nnls(A, b)))
    out = {"ops": {}, "dma": {k: _num(v) for k, v in dma.items()}, "default": {k: _num(v) for k, v in base.items()}}
    for op in sorted({s[0] for s in samples}):
        mine = [(f, m) for o, f, m in samples if o == op]
        A = np.array([[_row(f)[k] * base[k] / m for k in COMPUTE] for f, m in mine])
        b = np.array([1.0 - sum(dma[k] * _row(f)[k] for k in DMA) / m for f, m in mine])
        # the ridge rows: each multiplier towards 1
        A = np.vstack([A, np.sqrt(ridge) * np.eye(len(COMPUTE))])
        b = np.concatenate([b, np.sqrt(ridge) * np.ones(len(COMPUTE))])
        mult = _nnls(A, b)
        out["ops"][op] = {k: _num(base[k] * w) for k, w in zip(COMPUTE, mult)}
    out["combine"] = combine
    return out


def _row(feats):
    """The features with `layer` (1) and 0 for what an older report lacks."""
    return dict(dict.fromkeys(COMPUTE + DMA, 0), **feats, layer=1)


def fit_op(samples, coefs):
    """One op's compute coefficients on its own samples [(features,
    measured)], the DMA part priced by the file's coefficients (`combine`
    sum: less the DMA; overlap: less the first transfer nothing hides), in
    plain non-negative least squares on relative error: the recurrent
    sweeps give the op enough layers of its own."""
    dma = coefs["dma"]
    rows, b = [], []
    for f, m in samples:
        d = sum(dma[k] * _row(f)[k] for k in DMA)
        rest = m - (d / max(f.get("tiles", 1), 1) if coefs.get("combine") == "overlap" else d)
        rows.append([_row(f)[k] / m for k in COMPUTE])
        b.append(rest / m)
    x = _nnls(np.array(rows), np.array(b))
    return {k: _num(v) for k, v in zip(COMPUTE, x)}


def fit_overlap(samples, target):
    """Coefficients for `combine: overlap` (wall-clock cycles, DMA engines
    beside the cores): the DMA terms from the target YAML; the compute ones
    fitted on the layers whose compute hides their transfers, each measured
    count less the first tile's load (the part nothing hides). A layer whose
    transfers take longer than its measured count leaves compute unknown:
    it is left out of the fit."""
    dma = yaml_dma(target)
    zero = dict.fromkeys(DMA, 0.0)
    compute = []
    for op, f, m in samples:
        d = sum(dma[k] * f.get(k, 0) for k in DMA)
        rest = m - d / max(f["tiles"], 1)
        if rest > 1.05 * d:    # clearly compute-bound (a margin for the rounding of counts)
            compute.append((op, dict(f, **zero), rest))
    out = fit(compute, combine="overlap")
    out["dma"] = dma
    return out


# The compute terms an op's own fit uses when it is fitted apart from the
# sweeps (fit_ops): the few a handful of layers can pin down. A product of
# two activations is priced like a pointwise layer (its MACs and their core
# split, outputs, tiles); the row-wise ops per value and per row; the data
# movements and tables per value.
OP_TERMS = {
    "matmul": ("macs", "split_macs", "out_elems", "tiles", "layer"),
    "softmax": ("out_elems", "rows", "tiles", "layer"),
    "layernorm": ("out_elems", "rows", "tiles", "layer"),
    # pulp_nn's depthwise on many cores (fitted on the sweeps, --ops
    # depthwise): the busiest core's MACs, gathered bytes (halo included),
    # plane rows and channel set-ups, the outputs outside the 2x2 blocks,
    # and each tile's DMA programming, fork and instruction refills
    "depthwise": ("split_macs", "gathered", "plane_rows", "core_chans", "pair_outs", "tiles", "layer"),
}
OTHER_TERMS = ("out_elems", "in_elems", "tiles", "layer")


def fit_ops(samples, coefs, ops):
    """The compute coefficients of `ops` alone, from samples [(op, features,
    measured)], beside a fitted file's `coefs` (whose dma terms and other ops
    stay): each op on its own terms (OP_TERMS), least squares on relative
    error, non-negative. What the DMA costs is taken off each count first:
    all of it where the file adds DMA to compute (`sum`, and whole-tensor
    layers, which load, compute and store in turn), else the first tile's
    load, on layers whose compute hides their transfers (fit_overlap).
    Returns {op: coefficients} for the ops with samples (all 0 for an op
    whose every count the DMA terms already exceed, under `sum`)."""
    dma = coefs["dma"]
    overlap = coefs.get("combine", "sum") == "overlap"
    out = {}
    for op in ops:
        terms = OP_TERMS.get(op, OTHER_TERMS)
        rows, counts, seen = [], [], 0
        for o, f, m in samples:
            if o != op or m <= 0:
                continue
            seen += 1
            x = _row(f)
            d = sum(dma.get(k, 0.0) * x[k] for k in DMA)
            rest = m - d / max(x["tiles"], 1) if overlap and x["tiles"] > 1 else m - d
            if overlap and x["tiles"] > 1 and rest <= 1.05 * d:
                continue        # DMA-bound: the count says nothing of the compute
            if rest > 0:
                rows.append([x[k] for k in terms])
                counts.append(rest)
        if not rows:
            if seen and not overlap:
                # every count is below what the file's DMA terms give its copies (a whole-tensor
                # copy on a core, priced at the tiled sweeps' per-byte rate): the DMA terms alone
                out[op] = {k: 0.0 for k in COMPUTE}
            continue
        A = np.array(rows, dtype=float) / np.array(counts)[:, None]
        x = _nnls(A, np.ones(len(rows)))
        out[op] = {k: _num(dict(zip(terms, x)).get(k, 0.0)) for k in COMPUTE}
    return out
