"""Every bundled model through the frontend and the golden model, compared
with ONNX Runtime running the same quantized ONNX: every layer within one
LSB (each layer fed ONNX Runtime's own inputs; see tessera.golden.ortcheck)."""

import os

import pytest

from helpers import MODEL_CACHE, ROOT
from tessera import config, golden
from tessera.model import prepare
from tessera.frontend import import_onnx
from tessera.golden.ortcheck import compare

MODELS = [m for m in config.available("model", ROOT)]


@pytest.mark.parametrize("name", MODELS)
def test_golden_model_agrees_with_onnx_runtime(name):
    model = config.load_model(os.path.join(ROOT, "models", name + ".yaml"), name)
    path = prepare.model_onnx(model, MODEL_CACHE, log=lambda m: None)
    graph, weights = import_onnx(path, name)
    rows = compare(path, graph, weights, prepare.golden_inputs(model, graph))
    worst = max(rows, key=lambda r: r["max_diff"])
    assert worst["max_diff"] <= 1, worst
    # and not trivially: the network computes something (outputs vary)
    values = golden.run(graph, weights, prepare.golden_inputs(model, graph))
    out = values[graph.outputs[0]]
    assert out.max() > out.min()
