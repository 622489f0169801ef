"""tessera.zoo: the generated models are valid, reproducible and meaningful."""

import os
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from tessera.errors import ConfigError
from tessera.zoo import ARCHITECTURES, build_float_model, build_model, model_stats, random_inputs

# Small configurations of every architecture: a quantized build of each takes
# well under two seconds.
SMALL = {
    "mobilenet_v1": {"arch": "mobilenet_v1", "width": 0.25, "resolution": 96, "classes": 100},
    "mobilenet_v2": {"arch": "mobilenet_v2", "width": 0.35, "resolution": 96, "classes": 100},
    "dscnn": {"arch": "dscnn"},
    "tiny": {"arch": "tiny"},
    "vgg16": {"arch": "vgg16", "width": 0.125, "resolution": 32, "classes": 100},
    "alexnet": {"arch": "alexnet", "width": 0.125, "resolution": 32, "classes": 100},
}


def session(model):
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def cosine(a, b):
    a, b = np.ravel(a), np.ravel(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Quantized builds of SMALL, each once per test session: arch -> path."""
    out = tmp_path_factory.mktemp("zoo")
    paths = {}
    for arch, gen in SMALL.items():
        paths[arch] = str(out / f"{arch}.onnx")
        build_model(gen, {}, paths[arch])
    return paths


def test_architectures_listed():
    assert set(ARCHITECTURES) == {"mobilenet_v1", "mobilenet_v2", "dscnn", "tiny", "vgg16", "alexnet"}
    assert set(SMALL) == set(ARCHITECTURES)


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_builds_checks_and_runs(built, arch):
    model = onnx.load(built[arch])
    onnx.checker.check_model(model, full_check=True)
    sess = session(built[arch])
    (inp,) = sess.get_inputs()
    (out,) = sess.get_outputs()
    gen = SMALL[arch]
    classes = gen.get("classes", {"dscnn": 12, "tiny": 10}.get(arch))
    expected_in = {"dscnn": [1, 1, 49, 10], "tiny": [1, 3, 16, 16], "vgg16": [1, 3, 32, 32],
                   "alexnet": [1, 3, 32, 32]}.get(arch, [1, 3, 96, 96])
    assert inp.name == "input" and inp.shape == expected_in and inp.type == "tensor(float)"
    assert out.name == "output" and out.shape == [1, classes] and out.type == "tensor(float)"
    (y,) = sess.run(None, {"input": random_inputs(expected_in, 1, 7)[0]})
    assert y.shape == (1, classes) and np.all(np.isfinite(y)) and np.ptp(y) > 0


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_qdq_structure(built, arch):
    """What the frontend will see (documented in tessera.zoo's docstring)."""
    model = onnx.load(built[arch])
    ops = [n.op_type for n in model.graph.node]
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops
    # ORT folds Relu/Clip into the preceding output's quantization range.
    assert "Relu" not in ops and "Clip" not in ops
    assert {o.version for o in model.opset_import if o.domain in ("", "ai.onnx")} == {13}
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    for node in model.graph.node:
        if node.op_type in ("Conv", "Gemm"):
            wdq = producer[node.input[1]]
            assert wdq.op_type == "DequantizeLinear"
            w, scale, zp = (inits[i] for i in wdq.input)
            assert w.dtype == np.int8 and zp.dtype == np.int8 and not zp.any()
            assert scale.shape == (w.shape[0],)  # per output channel...
            assert {a.name: a.i for a in wdq.attribute}.get("axis", 1) == 0  # ...on axis 0
            assert np.abs(w).max() <= 127  # symmetric
            bdq = producer[node.input[2]]
            assert inits[bdq.input[0]].dtype == np.int32
        if node.op_type in ("Conv", "Gemm", "Add", "GlobalAveragePool", "MaxPool"):
            # every input activation comes out of a DequantizeLinear, every
            # output goes into a QuantizeLinear
            assert producer[node.input[0]].op_type == "DequantizeLinear"
            consumers = [n for n in model.graph.node if node.output[0] in n.input]
            assert [n.op_type for n in consumers] == ["QuantizeLinear"]
            assert inits[consumers[0].input[2]].dtype == np.int8


def test_per_channel_off(tmp_path):
    path = str(tmp_path / "t.onnx")
    build_model({"arch": "tiny"}, {"per_channel": False}, path)
    model = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert inits["conv0.weight_scale"].shape == ()


def test_same_arguments_same_bytes(tmp_path):
    gen = {"arch": "tiny", "seed": 3, "classes": 5}
    quant = {"calibration_samples": 4, "seed": 9}
    a, b = str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")
    build_model(gen, quant, a)
    build_model(dict(gen), dict(quant), b)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read()
    # ...and the seeds matter
    c = str(tmp_path / "c.onnx")
    build_model(dict(gen, seed=4), quant, c)
    with open(a, "rb") as fa, open(c, "rb") as fc:
        assert fa.read() != fc.read()


def test_provenance_and_no_leftovers(tmp_path, monkeypatch):
    """Producer fields are ours; the temporary directories are removed."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    out = tmp_path / "out"
    build_model({"arch": "tiny"}, {}, str(out / "m.onnx"))
    assert os.listdir(scratch) == []
    assert os.listdir(out) == ["m.onnx"]
    model = onnx.load(str(out / "m.onnx"))
    assert model.producer_name == "tessera.zoo"
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["tessera.zoo.generator"].startswith('{"arch":"tiny"')
    assert "tessera.zoo.quantization" in meta


def test_quantized_follows_float(built):
    """Quantization is meaningful: QDQ logits track the float logits.

    The float model is regenerated from the same generator dict. Besides
    the plain cosine, the cosine of the *differences* between two inputs'
    logits is checked: the part of the output that depends on the input must
    survive quantization, not just a constant offset.
    """
    for arch in ("tiny", "dscnn", "mobilenet_v1"):
        fs = session(build_float_model(SMALL[arch]))
        qs = session(built[arch])
        xs = random_inputs(fs.get_inputs()[0].shape, 3, 1234)
        f = [fs.run(None, {"input": x})[0] for x in xs]
        q = [qs.run(None, {"input": x})[0] for x in xs]
        for fi, qi in zip(f, q):
            assert cosine(fi, qi) > 0.9, arch
        assert cosine(f[0] - f[1], q[0] - q[1]) > 0.9, arch
        assert cosine(f[1] - f[2], q[1] - q[2]) > 0.9, arch


def test_deep_network_survives_quantization(tmp_path):
    """A 28-layer MobileNet too (random ReLU networks are easily chaotic)."""
    gen = {"arch": "mobilenet_v1", "width": 0.25, "resolution": 128, "classes": 100}
    path = str(tmp_path / "m.onnx")
    build_model(gen, {}, path)
    fs, qs = session(build_float_model(gen)), session(path)
    x0, x1 = random_inputs([1, 3, 128, 128], 2, 99)
    f0, f1 = (fs.run(None, {"input": x})[0] for x in (x0, x1))
    q0, q1 = (qs.run(None, {"input": x})[0] for x in (x0, x1))
    assert cosine(f0, q0) > 0.9
    assert cosine(f0 - f1, q0 - q1) > 0.9


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_activations_healthy(arch):
    """No activation collapses to zero or saturates on in-distribution inputs."""
    _, health = build_float_model(SMALL[arch], with_health=True)
    assert health
    for h in health:
        assert h["dead_channels"] == 0, h
        assert h["zero_fraction"] < 0.5, h
        assert h["clipped_fraction"] < 0.01, h
        assert 0.05 < h["std"] < 10, h


def test_mobilenet_v1_size():
    """DORY's Table 4: MobileNetV1 1.0/128 has ~4.2 M parameters, ~186 M MACs.

    Counted on the float model (the QDQ graph gives the same numbers, see
    test_stats_float_equals_qdq): quantizing this one takes seconds more.
    """
    stats = model_stats(build_float_model({"arch": "mobilenet_v1", "width": 1.0, "resolution": 128, "classes": 1000}))
    assert abs(stats["macs"] - 186e6) / 186e6 < 0.01, stats
    assert abs(stats["params"] - 4.2e6) / 4.2e6 < 0.02, stats


def test_mobilenet_v2_size():
    """MobileNetV2 1.0 has ~3.5 M parameters; 300 M MACs at 224, so ~98 M at 128."""
    stats = model_stats(build_float_model({"arch": "mobilenet_v2", "resolution": 128}))
    assert abs(stats["params"] - 3.5e6) / 3.5e6 < 0.02, stats
    assert abs(stats["macs"] - 300e6 * (128 / 224) ** 2) / 98e6 < 0.03, stats


def test_dscnn_stats_exact(built):
    """DS-CNN small, counted by hand: 10x4 s2 conv to a 25x5x64 map, 4 DS
    blocks, 64->12 classifier."""
    positions = 25 * 5
    params = (40 * 64 + 64) + 4 * ((9 * 64 + 64) + (64 * 64 + 64)) + (64 * 12 + 12)
    macs = positions * 64 * 40 + 4 * positions * (64 * 9 + 64 * 64) + 64 * 12
    assert model_stats(built["dscnn"]) == {"params": params, "macs": macs}


def test_stats_float_equals_qdq(built):
    for arch in ("tiny", "mobilenet_v2"):
        assert model_stats(built[arch]) == model_stats(build_float_model(SMALL[arch]))


def test_dscnn_padding_is_tf_same():
    model = build_float_model({"arch": "dscnn"})
    conv0 = next(n for n in model.graph.node if n.name == "conv0")
    attrs = {a.name: list(a.ints) for a in conv0.attribute if a.ints}
    assert attrs["pads"] == [4, 1, 5, 1] and attrs["kernel_shape"] == [10, 4] and attrs["strides"] == [2, 2]


def test_resolution_forms():
    a = build_float_model({"arch": "tiny", "resolution": 24})
    b = build_float_model({"arch": "tiny", "resolution": [24, 24]})
    assert a.SerializeToString() == b.SerializeToString()
    c = build_float_model({"arch": "mobilenet_v1", "width": 0.25, "resolution": [64, 48], "channels": 1, "classes": 7})
    dims = [d.dim_value for d in c.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, 1, 64, 48]
    assert [d.dim_value for d in c.graph.output[0].type.tensor_type.shape.dim] == [1, 7]


@pytest.mark.parametrize(
    "generator, quantization, where",
    [
        ({"arch": "resnet50"}, {}, "generator.arch"),
        ({}, {}, "generator.arch"),
        ({"arch": "tiny", "depth": 3}, {}, "generator.depth"),
        ({"arch": "tiny", "width": 0}, {}, "generator.width"),
        ({"arch": "tiny", "width": True}, {}, "generator.width"),
        ({"arch": "tiny", "resolution": [16]}, {}, "generator.resolution"),
        ({"arch": "tiny", "resolution": 2}, {}, "generator.resolution"),
        ({"arch": "tiny", "classes": 2.5}, {}, "generator.classes"),
        ({"arch": "tiny", "seed": -1}, {}, "generator.seed"),
        ("tiny", {}, "generator"),
        ({"arch": "tiny"}, {"samples": 3}, "quantization.samples"),
        ({"arch": "tiny"}, {"calibration_samples": 0}, "quantization.calibration_samples"),
        ({"arch": "tiny"}, {"per_channel": "yes"}, "quantization.per_channel"),
    ],
)
def test_config_errors(tmp_path, generator, quantization, where):
    out = tmp_path / "m.onnx"
    with pytest.raises(ConfigError) as err:
        build_model(generator, quantization, str(out))
    assert err.value.where == where
    assert "\n" not in str(err.value)
    assert not out.exists()
