"""The cost model prices attention's layers (issue 27): the `rows` feature of
the row-wise ops, fit_ops (an op's own few terms beside a fitted file), and
the shipped coefficient files holding the new ops."""

import os

import numpy as np
import pytest

from helpers import ROOT
from tessera import ir
from tessera.cost import features, fit, model

NEW_OPS = ("matmul", "softmax", "layernorm", "transpose", "reshape", "lut")


def _graph(op, shape):
    layer = ir.Layer(name="l", op=op, inputs=["x"], output="y")
    tensors = {n: ir.Tensor(n, list(shape), "int8", scale=0.1, zero_point=0) for n in "xy"}
    return ir.Graph("g", "qdq", tensors, [layer], ["x"], ["y"]), layer


@pytest.mark.parametrize("op, shape, rows", [("softmax", [4, 49, 49], 196), ("layernorm", [1, 49, 64], 49),
                                             ("lut", [1, 49, 64], 0)])
def test_rows_counts_the_normalized_rows(op, shape, rows):
    g, layer = _graph(op, shape)
    if op == "layernorm":
        layer.mode, layer.table = "int", [1]
    feats = features.layer_features(layer, g, {"tiled": False}, 2, 8)
    assert feats["rows"] == rows and feats["out_elems"] == int(np.prod(shape))


def _samples(op, coef, dma, shapes):
    """Counts made from chosen coefficients (compute + DMA, as `sum` adds them)."""
    out = []
    for n_rows, width in shapes:
        f = dict.fromkeys(features.FEATURES, 0)
        f.update(out_elems=n_rows * width, in_elems=n_rows * width, rows=n_rows, tiles=1,
                 act_bytes=2 * n_rows * width, act_xfers=2)
        x = dict(f, layer=1)
        out.append((op, f, sum(coef.get(k, 0) * x.get(k, 0) for k in model.COMPUTE)
                    + sum(dma.get(k, 0) * x[k] for k in model.DMA)))
    return out


def test_fit_ops_recovers_an_ops_own_coefficients():
    dma = dict.fromkeys(model.DMA, 0.0) | {"act_bytes": 0.5, "act_xfers": 30.0}
    coefs = {"dma": dma, "combine": "sum", "ops": {}, "default": {}}
    truth = {"out_elems": 40.0, "rows": 900.0, "layer": 250.0}
    samples = _samples("layernorm", truth, dma, [(1, 64), (49, 64), (64, 32), (196, 49), (8, 128)])
    got = fit.fit_ops(samples + [("conv2d", samples[0][1], 1.0)], coefs, ["layernorm"])
    assert set(got) == {"layernorm"}
    mine = got["layernorm"]
    # every sample is one whole tile: `tiles` and `layer` are one term between them
    assert mine["tiles"] + mine["layer"] == pytest.approx(truth["layer"], rel=1e-3)
    for k in ("out_elems", "rows"):
        assert mine[k] == pytest.approx(truth[k], rel=1e-3)
    assert got["layernorm"]["macs"] == 0.0


def test_fit_ops_leaves_compute_at_zero_when_the_dma_terms_cover_every_count():
    dma = dict.fromkeys(model.DMA, 0.0) | {"act_bytes": 5.0}
    coefs = {"dma": dma, "combine": "sum", "ops": {}, "default": {}}
    samples = _samples("transpose", {"out_elems": 1.0}, dict.fromkeys(model.DMA, 0.0), [(49, 64), (4, 16)])
    got = fit.fit_ops(samples, coefs, ["transpose", "softmax"])
    assert got == {"transpose": dict.fromkeys(model.COMPUTE, 0.0)}


@pytest.mark.parametrize("path", ["kernels/pulp_nn/cost/pulp_open.yaml", "kernels/pulp_nn/cost/gap8.yaml",
                                  "kernels/cmsis_nn/cost/stm32h7.yaml", "kernels/cmsis_nn/cost/stm32f4.yaml"])
def test_shipped_files_price_attentions_layers(path):
    coefs = model.load(os.path.join(ROOT, path))
    assert set(NEW_OPS) <= set(coefs["ops"])
    assert set(coefs["fitted_on"]["ops"]["models"]) == {"torch_kws_transformer", "torch_vit_tiny"}
    # a product of activations costs more for more MACs, a softmax for more values
    f = dict.fromkeys(features.FEATURES, 0) | {"tiles": 1}
    small = model.compute_part(coefs, "matmul", f | {"macs": 1000, "split_macs": 1000, "out_elems": 100})
    big = model.compute_part(coefs, "matmul", f | {"macs": 100000, "split_macs": 100000, "out_elems": 10000})
    assert big > small > 0
    assert model.compute_part(coefs, "softmax", f | {"out_elems": 9604, "rows": 196}) > \
        model.compute_part(coefs, "softmax", f | {"out_elems": 49, "rows": 1}) > 0
