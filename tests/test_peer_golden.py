"""The peer networks (DORY and Deeploy test folders, read in place from
../shared/peer_tests): each imports, and tessera's golden model reproduces
its expected outputs bit for bit (DORY: every out_layerN; Deeploy: every
graph output). Also the model-YAML path through tessera.prepare."""

import os

import numpy as np
import pytest
import yaml

from tessera import config, golden
from tessera.model import prepare, reference
from tessera.errors import ConfigError
from tessera.frontend import import_onnx, input_names
from tessera.model.reference import ReferenceMismatch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.normpath(os.path.join(ROOT, "..", "shared", "peer_tests"))

needs_peer = pytest.mark.skipif(not os.path.isdir(PEER),
                                reason=f"peer networks not found at {PEER} (../shared/peer_tests)")



def _folders(kind):
    base = os.path.join(PEER, kind)
    if not os.path.isdir(base):
        return []
    found = []
    for d, _, files in os.walk(base):
        if any(f.endswith(".onnx") for f in files):
            found.append(os.path.relpath(d, base))
    return sorted(found)


def _onnx(folder):
    return next(os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".onnx"))


def _run(kind, rel):
    folder = os.path.join(PEER, kind, rel)
    path = _onnx(folder)
    ref = reference.load({"kind": kind, "dir": folder})
    graph, weights = import_onnx(path, "peer", ref.input_types(input_names(path)))
    values = golden.run(graph, weights, ref.golden_inputs(graph))
    return graph, weights, ref, ref.compare(graph, values)


def _describe(rows):
    return "; ".join(f"{r['name']}: {r.get('first') or r.get('error')}" for r in rows if not r["equal"])


@needs_peer
@pytest.mark.parametrize("rel", _folders("deeploy"))
def test_deeploy_network_matches_reference(rel):
    graph, _, _, rows = _run("deeploy", rel)
    assert graph.dialect == "quantlib"
    assert rows and all(r["equal"] for r in rows), _describe(rows)


@needs_peer
@pytest.mark.parametrize("rel", _folders("dory"))
def test_dory_network_matches_every_layer(rel):
    graph, _, ref, rows = _run("dory", rel)
    assert graph.dialect == "nemo"
    assert len(rows) == len(ref.layers) == len(graph.layers)
    assert all(r["equal"] for r in rows), _describe(rows)


@needs_peer
def test_peer_folders_are_all_found():
    deeploy = _folders("deeploy")
    assert sum(r.startswith("Models/") for r in deeploy) == 3
    assert sum(r.startswith("Kernels/Integer/") for r in deeploy) == 25
    assert _folders("dory") == ["Residual_connection_test_1", "dronet_2.0"]


@needs_peer
def test_dory_lowering():
    """DORY's layer numbering is tessera's layer order; the residual Add is
    floored and saturated to uint8; the last MatMul keeps its int32
    accumulators and the trailing Gather/Sigmoid are not part of the network."""
    graph, weights, _, _ = _run("dory", "dronet_2.0")
    ops = [l.op for l in graph.layers]
    assert ops[:2] == ["conv2d", "maxpool"] and ops[-1] == "linear" and ops.count("add") == 3
    assert all(l.requant.rounding == "floor" for l in graph.layers if l.requant)
    add = graph.layers[ops.index("add")]
    assert add.in_mul == [32, 32] and add.in_offset == [128, 128]
    assert (add.requant.shift, add.requant.zero_point, add.requant.lo, add.requant.hi) == ([6], -128, -128, 127)
    x = graph.tensor(graph.inputs[0])
    assert (x.source_dtype, x.shift, x.shape) == ("uint8", 128, [200, 200, 1])
    assert graph.outputs == [graph.layers[-1].output]
    out = graph.tensor(graph.outputs[0])
    assert (out.dtype, out.shape, graph.layers[-1].requant) == ("int32", [1, 1, 2], None)


@needs_peer
def test_dory_requant_is_exact_integer():
    """Where the graph's float32 evaluation of kappa * acc + lambda rounds
    across a division boundary, tessera keeps the exact integer result
    (nemo.py explains the choice; both agree on the reference inputs)."""
    from tessera.golden.ops import requantize
    graph, weights, _, _ = _run("dory", "Residual_connection_test_1")
    acc, ch = 125734, 3
    rq = graph.layers[0].requant
    full = np.zeros((1, 1, 16), np.int64)
    full[0, 0, ch] = acc
    got = int(requantize(full, rq)[0, 0, ch]) + graph.tensor(graph.layers[0].output).shift
    kappa, lamda = 2046, -1399221
    assert got == (acc * kappa + lamda) * 4 // 2 ** 24 == 60
    f32 = np.float32(kappa) * np.float32(acc) + np.float32(lamda)
    assert int(f32) * 4 // 2 ** 24 == 61


@needs_peer
def test_requantshift_rounds_half_up():
    """The README's check: RequantShift rounds half up; floor misses."""
    graph, weights, ref, rows = _run("deeploy", "Kernels/Integer/Conv/Regular_2D_RQ")
    assert all(r["equal"] for r in rows)
    graph.layers[0].requant.rounding = "floor"
    values = golden.run(graph, weights, ref.golden_inputs(graph))
    rows = ref.compare(graph, values)
    assert not rows[0]["equal"] and rows[0]["first"]["mismatches"] > 100


@needs_peer
def test_gemm_per_row_requant_and_matrix_bias():
    graph, weights, _, rows = _run("deeploy", "Kernels/Integer/GEMM/TransB_RQ")
    layer = graph.layers[0]
    assert layer.op == "pointwise" and layer.requant.shape == [1, 32, 1]
    assert weights[layer.bias].shape == (1, 32, 4)
    graph, _, _, _ = _run("deeploy", "Kernels/Integer/GEMM/Regular_RQPerColumn")
    assert graph.layers[0].requant.shape is None      # per column: per channel


@needs_peer
def test_activation_matmul_with_per_batch_requant():
    """MatMul/Regular_RQ: two activations multiplied batch by batch, its
    RequantShift per batch a Requant varying along H (the batch axis)."""
    graph, _, _, rows = _run("deeploy", "Kernels/Integer/MatMul/Regular_RQ")
    (layer,) = graph.layers
    assert layer.op == "matmul" and layer.weights is None and layer.in_offset == [0, 0]
    assert [graph.tensor(n).shape for n in layer.inputs + [layer.output]] == [[2, 32, 48], [2, 48, 64], [2, 32, 64]]
    assert layer.requant.shape == [2, 1, 1] and layer.requant.mul == [20, 58]
    assert rows[0]["equal"]


def _write_model(tmp_path, onnx_path, kind, folder, name="peer"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"description": "peer network", "onnx": onnx_path,
                                    "reference": {"kind": kind, "dir": folder}}))
    return config.load_model(str(path), name)


@needs_peer
def test_prepare_with_reference(tmp_path):
    folder = os.path.join(PEER, "dory", "Residual_connection_test_1")
    model = _write_model(tmp_path, _onnx(folder), "dory", folder, "residual")
    logs = []
    paths = prepare.prepare(model, str(tmp_path / "out"), str(tmp_path / "cache"), log=logs.append)
    verdict = yaml.safe_load(open(paths["reference"]))
    assert verdict["equal"] and verdict["kind"] == "dory" and len(verdict["compared"]) == 8
    assert PEER not in open(paths["reference"]).read()
    stored = np.load(paths["input"])
    assert stored[stored.files[0]].dtype == np.int8
    logs.clear()
    prepare.prepare(model, str(tmp_path / "out"), str(tmp_path / "cache"), log=logs.append)
    assert logs == []          # cached


@needs_peer
def test_prepare_fails_on_a_disagreeing_reference(tmp_path):
    folder = os.path.join(PEER, "deeploy", "Kernels", "Integer", "Conv", "Regular_2D_RQ")
    fake = tmp_path / "ref"
    fake.mkdir()
    with np.load(os.path.join(folder, "inputs.npz")) as z:
        np.savez(fake / "inputs.npz", **{k: z[k] for k in z.files})
    with np.load(os.path.join(folder, "outputs.npz")) as z:
        out = {k: z[k].copy() for k in z.files}
    out["arr_0"][0, 1, 2, 3] += 1
    np.savez(fake / "outputs.npz", **out)
    model = _write_model(tmp_path, _onnx(folder), "deeploy", str(fake), "rq2d")
    for _ in range(2):         # a failure is not cached
        with pytest.raises(ReferenceMismatch) as err:
            prepare.prepare(model, str(tmp_path / "out"), str(tmp_path / "cache"), log=lambda m: None)
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith("rq2d:") and "Conv1" in msg and "[0, 1, 2, 3]" in msg
    verdict = yaml.safe_load(open(tmp_path / "out" / "reference.json"))
    assert not verdict["equal"] and verdict["compared"][0]["first"]["mismatches"] == 1


@needs_peer
def test_reference_needs_onnx(tmp_path):
    path = tmp_path / "gen.yaml"
    path.write_text(yaml.safe_dump({"description": "x", "generator": {"arch": "tiny", "resolution": 16,
                                                                      "classes": 10},
                                    "reference": {"kind": "dory", "dir": PEER}}))
    with pytest.raises(ConfigError, match="onnx"):
        config.load_model(str(path), "gen")
