"""The cost model's estimate of a patched step (tessera.tiles.patches): a
chain of layers run patch by patch on buffers in the tile level.

Each layer runs its library's own kernel once per call the step makes, so
its compute is the layer's op coefficients on the features of those calls
(features._per_tile per call: the MACs of the rows and columns it computes,
halos recomputed included, its per-call and per-channel setup); the step's
DMA is its own: the chain's input boxes in, the output patches out, the
weights once (none when they are read where they live), and the kept rows
shifted up (a copy in the tile level, priced as activation bytes). No term
is fitted on patched steps: the estimate ranks a step's tiles and policies
and compares it with the layers apart, and the build measures it.

Without coefficients (the host) `proxy` stands in: the MACs the step
computes and its calls (what MCUNetV2 and StreamNet report).
"""

from . import model
from .features import FEATURES, _plain_macs, _per_tile, _split


def _macs(layer, chain, h, w):
    co = chain["tensors"][layer["output"]]["shape"][2]
    ci = chain["tensors"][layer["inputs"][0]]["shape"][2]
    kh, kw = layer["kernel"]
    op = layer["op"]
    if op in ("conv2d",):
        return h * w * co * kh * kw * ci
    if op == "pointwise":
        return h * w * co * ci
    if op in ("depthwise", "maxpool", "avgpool"):
        return h * w * co * kh * kw
    return h * w * co


def features(chain, calls, summary, cores=1, direct=False):
    """Per layer its features over its calls ([(out rows, out cols, in rows,
    in cols)], tiles.patches.calls), the step's DMA on the first layer's."""
    out = []
    for k, layer in enumerate(chain["layers"]):
        f = dict.fromkeys(FEATURES, 0)
        co = chain["tensors"][layer["output"]]["shape"][2]
        ci = chain["tensors"][layer["inputs"][0]]["shape"][2]
        view = layer["view"]
        for h, w, ih, iw in calls[k]:
            macs = _macs(layer, chain, h, w)
            f["macs"] += macs
            f["split_macs"] += round(macs * _split(layer["op"], h, w, co, cores)[0])
            f["out_elems"] += h * w * co
            f["in_elems"] += len(layer["inputs"]) * ih * iw * ci
            f["tiles"] += 1
            _per_tile(f, layer["op"], view, (h, w, co), view["out"], macs, cores, in_hw=(ih, iw))
        f["plain_macs"] = _plain_macs(layer["op"], f["macs"], layer.get("input_offset", 0), ci)
        if not direct:
            wb = (view["w_bytes_per_cout"] + view["param_bytes_per_cout"]) * co
            f["w_bytes"] = wb
            f["w_xfers"] = (1 + (1 if view["param_bytes_per_cout"] else 0)) if wb else 0
        out.append(f)
    first = out[0]
    first["act_bytes"] = summary["loaded"] + summary["stored"] + summary["shifted"]
    first["act_xfers"] = summary["transfers"]
    return out


def estimate(coefs, chain, feats):
    """The step's count: every layer's compute on its calls plus the step's
    DMA (summed: the copies and shifts run on the cores under QEMU)."""
    total = 0.0
    for layer, f in zip(chain["layers"], feats):
        total += model.compute_part(coefs, layer["op"], f) + model.dma_part(coefs, f)
    return int(round(total))


def proxy(feats):
    """(MACs, calls) of the step: the order without a cost model."""
    return sum(f["macs"] for f in feats), sum(f["tiles"] for f in feats)
