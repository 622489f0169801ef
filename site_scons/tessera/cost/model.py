"""The coefficients file and the estimate.

kernels/<library>/cost/<target>.yaml (written by tools/fit_cost_model.py):

    counts: qemu-instructions      what the estimate predicts (the runner's count)
    combine: sum | overlap         how compute and DMA add up (below)
    ops: {<op>: {macs, split_macs, out_elems, in_elems, tiles, im2col, taps, wsum, plain_macs, row_chans,
                 tail_macs, chans, rows, gathered, plane_rows, core_chans, pair_outs, layer}}
    default: {...}                 compute of an op the fit saw no layer of
    dma: {act_bytes, act_xfers, w_bytes, w_xfers, stream_bytes, stream_xfers}   per byte / transfer

A layer's compute is the op's coefficients times the layer's features
(features.py) plus `layer` (a constant per layer: call, fork, barrier).
combine `sum`: the runner counts DMA copies as work (QEMU: a core does the
copy), so the estimate is compute + the dma terms. combine `overlap`:
engines move data while the cores compute (double buffering, GVSoC), so
per tile the slower of the two counts, plus the first tile's load that
nothing hides: max(compute, dma) + dma / tiles; with single buffering
compute + dma. The core split is inside the fitted compute coefficients:
they are fitted on the runner's own count, which for QEMU sums the cores'
instructions and for GVSoC is the cluster's wall-clock cycles.
"""

import os

import yaml

from .features import FEATURES, OPTIONAL

COMPUTE = ("macs", "split_macs", "out_elems", "in_elems", "tiles", "im2col", "taps", "wsum", "plain_macs",
           "row_chans", "tail_macs", "chans", "rows", "gathered", "plane_rows", "core_chans", "pair_outs", "layer")
DMA = ("act_bytes", "act_xfers", "w_bytes", "w_xfers", "stream_bytes", "stream_xfers")


def path(root, library, target):
    return os.path.join(root, "kernels", library, "cost", f"{target}.yaml")


def source(root, target):
    """(coefficients file, why this one) for a loaded target config: the file
    its `cost_model:` names; else its own (kernels/<library>/cost/<name>.yaml);
    else, so that a copy of a target under another name (gap8 with L1 48000)
    still has estimates, the first (by name) of the library's files fitted
    for a target with the same cores: platform, core count, compiler flags,
    ISA extensions and runner, which fix the compute coefficients. The file
    may not exist (no fit yet): load gives None."""
    lib = target["kernels"]
    if target.get("cost_model"):
        return path(root, lib, target["cost_model"]), f"cost_model: {target['cost_model']}"
    own = path(root, lib, target["name"])
    if os.path.exists(own):
        return own, "fitted on this target"
    folder = os.path.dirname(own)
    for f in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        other = os.path.join(root, "targets", f)
        if f.endswith(".yaml") and os.path.exists(other) and _same_cores(_target(other), target):
            return os.path.join(folder, f), f"the same cores as {f[:-5]}"
    return own, None


def _target(file):
    from ..config import load_target

    return load_target(file, os.path.basename(file)[:-5])


def _same_cores(a, b):
    key = lambda t: (t["platform"], t["cores"], t["toolchain"]["cflags"], t["toolchain"]["isa"],  # noqa: E731
                     t["runner"]["kind"], t["runner"]["counts"])
    return key(a) == key(b)


def _num(v):
    return float(f"{v:.6g}")


def yaml_dma(target):
    """The dma coefficients of the target YAML's engine into the tile level:
    cycles per byte (1 / bandwidth) and per transfer (setup), for the
    activations' engine and the weights' one."""
    from ..config import views

    place = target["place"]

    def engine(src):
        i = views.dma_engine(target, src, place["tiles"])
        return target["dma"][i] if i is not None else {"bandwidth": 0, "setup": 0}
    act, w = engine(place["activations"]), engine(place["weights"])
    # streamed weights: from the weight level into the activation level
    i = views.dma_engine(target, place["weights"], place["activations"])
    st = target["dma"][i] if i is not None and place["weights"] != place["activations"] else \
        {"bandwidth": 0, "setup": 0}
    per_byte = lambda e: 1.0 / e["bandwidth"] if e["bandwidth"] else 0.0  # noqa: E731
    return {"act_bytes": _num(per_byte(act)), "act_xfers": float(act["setup"]),
            "w_bytes": _num(per_byte(w)), "w_xfers": float(w["setup"]),
            "stream_bytes": _num(per_byte(st)), "stream_xfers": float(st["setup"])}


def for_target(coefs, target):
    """The coefficients as this target uses them: with `combine: overlap`
    (DMA engines beside the cores) the DMA terms always come from the
    target's own YAML (bandwidth, setup), borrowed coefficients included;
    with `sum` (QEMU: the HAL's copy loop, the same code whatever the YAML
    says) they stay the fitted ones."""
    if coefs is None or coefs.get("combine", "sum") != "overlap":
        return coefs
    return dict(coefs, dma=yaml_dma(target))


def load(file):
    """The coefficients, or None when the file does not exist (no fit yet)."""
    if not os.path.exists(file):
        return None
    with open(file) as f:
        return yaml.safe_load(f)


def compute_part(coefs, op, feats):
    c = coefs["ops"].get(op, coefs["default"])
    x = dict(dict.fromkeys(COMPUTE, 0), **feats, layer=1)    # features a report of an older version lacks: 0
    # a split tiling's partial sums stored and reloaded: the fit's own price
    # where its sweeps had split layers, else an output element's (its
    # requantization and store, the same few loads and stores)
    acc = c.get("acc_elems", c.get("out_elems", 0.0)) * feats.get("acc_elems", 0)
    return sum(c.get(k, 0.0) * x[k] for k in COMPUTE) + acc


def dma_part(coefs, feats):
    return sum(coefs["dma"].get(k, 0.0) * feats.get(k, 0) for k in DMA)


def estimate(coefs, op, feats, buffering=2):
    """The layer's estimated count (rounded to an integer)."""
    comp = compute_part(coefs, op, feats)
    dma = dma_part(coefs, feats)
    if coefs.get("combine", "sum") == "sum" or buffering < 2:
        total = comp + dma
    else:
        total = max(comp, dma) + dma / max(feats["tiles"], 1)
    return int(round(total))


assert set(DMA) | set(COMPUTE) - {"layer"} == set(FEATURES) | set(OPTIONAL)
