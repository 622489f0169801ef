"""NEMO exports as DORY's users have them (issue 12): a graph written here
the way NEMO's exporter lays out its integer-deployable ONNX (float tensors
holding integers; Conv -> Mul(kappa) -> Add(lambda) -> Cast(int64) ->
Mul(m) -> Div(2**d - 1) -> Cast -> Cast -> Cast(float) -> Clip; residual
Adds of Mul-scaled operands; Gemm -> Gather -> Unsqueeze at the outputs),
with DORY-style reference files (input.txt, out_layerN.txt) written from
ONNX Runtime's evaluation of the graph, in HWC and in CHW order.

Each pattern: a Pad -> Pad chain and a zero Pad before a max pool folded
(tessera's layer N is out_layerN), requantization dividing by 2**18 - 1 and
2**24 - 1, an additive term beyond 32 bits (lambda * m = -3.6e9), a standalone
chain after the residual Add's Floor (a layer of its own), the Gather ->
Unsqueeze tail. Checked: the layers, the golden model against the
reference files (both layouts) bit for bit, then whole builds on host,
gap8 and stm32h7 (QEMU) and pulp_open (GVSoC, where present), bit-exact
against the golden model and the reference files, with the kernel library
of every layer in report.json.
"""

import json
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import scons
from tessera import golden
from tessera.model import reference
from tessera.errors import TesseraError
from tessera.frontend import import_onnx, input_names
from tessera.runners import gvsoc

rng = np.random.default_rng(12)
D18, D24 = 2 ** 18 - 1, 2 ** 24 - 1


def n(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, name=outs[0] + "_node", **kw)


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], name=name + "_node",
                            value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))


def chain(x, y, tag, kappa, lamda, m, d):
    """NEMO's batch-norm + requantization chain (as in DORY's dronet exports)."""
    nodes = [n("Mul", [f"{tag}_k", x], [f"{tag}_a"]), n("Add", [f"{tag}_a", f"{tag}_l"], [f"{tag}_b"]),
             n("Cast", [f"{tag}_b"], [f"{tag}_c"], to=7), const(f"{tag}_m", m),
             n("Mul", [f"{tag}_c", f"{tag}_m"], [f"{tag}_d"]), const(f"{tag}_q", d),
             n("Div", [f"{tag}_d", f"{tag}_q"], [f"{tag}_e"]), n("Cast", [f"{tag}_e"], [f"{tag}_f"], to=7),
             n("Cast", [f"{tag}_f"], [f"{tag}_g"], to=7), n("Cast", [f"{tag}_g"], [f"{tag}_h"], to=1),
             n("Clip", [f"{tag}_h"], [y], min=0.0, max=255.0)]
    c = len(kappa)
    inits = {f"{tag}_k": np.asarray(kappa, np.float32).reshape(1, c, 1, 1),
             f"{tag}_l": np.asarray(lamda, np.float32).reshape(1, c, 1, 1)}
    return nodes, inits


def nemo_export(path):
    """The test network; returns the ONNX tensor of each DORY layer."""
    w1 = rng.integers(-20, 21, (4, 3, 3, 3))
    # kappa * acc + lambda stays below 2**24, where float32 (ONNX Runtime) is exact
    c1, i1 = chain("c1", "r1", "q1", [3, 5, 2, 4], [-4000, 9000, 20000, 0], 262, D18)
    # channel 0: lambda * m = -0.9e6 * 4000 = -3.6e9, beyond 32 bits
    w2 = np.concatenate([np.full((1, 4, 1, 1), 5), rng.integers(-5, 6, (3, 4, 1, 1))])
    c2, i2 = chain("c2", "r2", "q2", [1000, 400, 600, 800], [-0.9e6, 30000, 0, -20000], 4000, D24)
    c3, i3 = chain("c3", "r3", "q3", [2, 3, 1, 2], [100, -100, 50, 0], 3000, D18)
    nodes = [n("Pad", ["input"], ["p1"], pads=[0, 0, 1, 0, 0, 0, 0, 1], value=0.0),
             n("Pad", ["p1"], ["p2"], pads=[0, 0, 0, 1, 0, 0, 1, 0], value=0.0),        # Pad -> Pad
             n("Conv", ["p2", "w1"], ["c1"], kernel_shape=[3, 3]), *c1,
             n("Pad", ["r1"], ["p3"], pads=[0, 0, 1, 1, 0, 0, 1, 1], value=0.0),        # before a max pool
             n("MaxPool", ["p3"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["mp", "w2"], ["c2"], kernel_shape=[1, 1]), *c2,
             n("Conv", ["r2", "w3"], ["c3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), *c3,
             const("s1", 16.0, np.float32), const("s2", 32.0, np.float32), const("dv", 64.0, np.float32),
             n("Mul", ["r3", "s1"], ["a1"]), n("Mul", ["mp", "s2"], ["a2"]),
             n("Add", ["a1", "a2"], ["sum"]), n("Div", ["sum", "dv"], ["sd"]), n("Floor", ["sd"], ["res"]),
             # the standalone chain after the Add's Floor (DORY: a layer of its own)
             n("Cast", ["res"], ["rc"], to=7), const("rm", 200), n("Mul", ["rc", "rm"], ["rmul"]),
             const("rq", 255), n("Div", ["rmul", "rq"], ["rdiv"]), n("Cast", ["rdiv"], ["rf"], to=1),
             n("Clip", ["rf"], ["rr"], min=0.0, max=255.0),
             n("Flatten", ["rr"], ["flat"]), n("Gemm", ["flat", "wf", "bf"], ["logits"], transB=1),
             const("g0", 0), const("g1", 1),
             n("Gather", ["logits", "g0"], ["o0"], axis=1), n("Gather", ["logits", "g1"], ["o1"], axis=1),
             n("Unsqueeze", ["o0"], ["out0"], axes=[1]), n("Unsqueeze", ["o1"], ["out1"], axes=[1])]
    inits = {"w1": w1, "w2": w2, "w3": rng.integers(-10, 11, (4, 4, 3, 3)),
             "wf": rng.integers(-30, 31, (2, 4 * 5 * 5)), "bf": rng.integers(-500, 500, (2,)),
             **i1, **i2, **i3}
    graph = helper.make_graph(
        nodes, "nemo_export", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 9, 9])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, 1]) for o in ("out0", "out1")],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 6
    onnx.save(model, path)
    return ["r1", "mp", "r2", "r3", "res", "rr", "logits"]


def ort_eval(path, names, x):
    import onnxruntime as ort
    model = onnx.load(path)
    for name in names:
        model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, {"input": x.astype(np.float32)})))


def write_txt(path, label, arr, order):
    """A DORY reference file: [H, W, C] header and HWC values, or [C, H, W]
    and CHW (arr is ONNX's NCHW, or [1, N] for the last layer)."""
    arr = np.asarray(arr)
    if arr.ndim == 4:
        chw = arr[0]
        arr = chw.transpose(1, 2, 0) if order == "hwc" else chw
    else:
        arr = arr.reshape(-1)
    with open(path, "w") as f:
        f.write(f"# {label} (shape {list(arr.shape)}),\\\n")
        f.writelines(f"{float(v):f},\\\n" for v in arr.reshape(-1))


def export(folder, order):
    """The network and its reference files in `order` ("hwc" or "chw")."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model_int.onnx")
    names = nemo_export(path)
    x = rng.integers(0, 256, (1, 3, 9, 9))
    ref = ort_eval(path, names, x)
    write_txt(os.path.join(folder, "input.txt"), "input", x, order)
    for i, name in enumerate(names):
        write_txt(os.path.join(folder, f"out_layer{i}.txt"), name, ref[name], order)
    return path, ref


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    # the data checked here is the seed's, whatever another module (the
    # dialect fuzzer builds this network too) drew from rng before
    global rng
    rng = np.random.default_rng(12)
    base = tmp_path_factory.mktemp("nemo_export")
    return {order: export(str(base / order), order) for order in ("hwc", "chw")}


def golden_rows(folder):
    path = os.path.join(folder, "model_int.onnx")
    ref = reference.load({"kind": "dory", "dir": folder})
    graph, weights = import_onnx(path, "nemo_export", ref.input_types(input_names(path)))
    values = golden.run(graph, weights, ref.golden_inputs(graph))
    return graph, ref.compare(graph, values)


def test_every_pattern_imports_as_dorys_layers(exports):
    path, ref = exports["hwc"]
    graph, _ = import_onnx(path, "nemo_export")
    assert [l.op for l in graph.layers] == ["conv2d", "maxpool", "pointwise", "conv2d", "add", "avgpool",
                                            "linear"]
    conv, pool, pw, _, _, requant, _ = graph.layers
    assert conv.pad == [1, 1, 1, 1] and pool.pad == [1, 1, 1, 1]          # the Pads, folded
    assert conv.requant.divisor == D18 and pw.requant.divisor == D24
    assert requant.kernel == [1, 1] and requant.requant.divisor == 255    # the standalone chain
    # the additive term beyond 32 bits moved into the bias, exactly
    assert -0.9e6 * 4000 < -2 ** 31 and all(-2 ** 31 <= a < 2 ** 31 for a in pw.requant.add)
    assert graph.outputs == ["logits"]                                   # Gather -> Unsqueeze: the tail
    # the reference values are not degenerate: every layer spreads, channel 0 of
    # the wide-add layer too
    for name in ("r1", "mp", "r2", "r3", "rr"):
        assert len(np.unique(ref[name])) > 8, name
    assert np.count_nonzero(ref["r2"][0, 0]) > 5
    assert ref["res"].max() <= 255


@pytest.mark.parametrize("order", ["hwc", "chw"])
def test_golden_matches_the_reference_files(exports, order):
    path, _ = exports[order]
    graph, rows = golden_rows(os.path.dirname(path))
    assert len(rows) == len(graph.layers) == 7
    assert all(r["equal"] for r in rows), [r for r in rows if not r["equal"]]


def test_a_layout_the_header_does_not_say_is_a_mismatch(exports, tmp_path):
    """CHW values under an [H, W, C] header differ (the header decides)."""
    src = os.path.dirname(exports["chw"][0])
    folder = str(tmp_path / "wrong")
    shutil.copytree(src, folder)
    f = os.path.join(folder, "out_layer0.txt")
    lines = open(f).read().splitlines(True)
    lines[0] = "# r1 (shape [9, 9, 4]),\\\n"        # the values stay CHW
    open(f, "w").writelines(lines)
    _, rows = golden_rows(folder)
    assert not rows[0]["equal"] and all(r["equal"] for r in rows[1:])


def test_headers_without_hash_are_copies_over_chw_values(exports, tmp_path):
    """NEMO's dscnn_test writes `name (shape [1, H, W, C]),\\` without its
    `#`, the same (layer 0's) in every file, over CHW values: read as CHW
    whatever the copied shape; HWC values under such headers differ."""
    for order, equal in (("chw", True), ("hwc", False)):
        folder = str(tmp_path / order)
        shutil.copytree(os.path.dirname(exports[order][0]), folder)
        for i in range(7):
            f = os.path.join(folder, f"out_layer{i}.txt")
            lines = open(f).read().splitlines(True)
            lines[0] = "layers.0.relu1 (shape [1, 9, 9, 4]),\\\n"
            open(f, "w").writelines(lines)
        _, rows = golden_rows(folder)
        assert len(rows) == 7
        if equal:
            assert all(r["equal"] for r in rows), rows
        else:   # the feature maps (not the 1-pixel Gemm output) differ
            assert not any(r["equal"] for r in rows[:5])


def test_an_add_and_its_chain_in_one_file(exports, tmp_path):
    """DORY's dronet_complete and TCN_T write a residual Add and the
    requantization chain after it as one file (the chain's output), where
    dronet_no_pooling (and the export above) writes two: the file count
    tells which, the shapes and values are checked as ever."""
    src = os.path.dirname(exports["hwc"][0])
    folder = str(tmp_path / "merged")
    shutil.copytree(src, folder)
    os.remove(os.path.join(folder, "out_layer4.txt"))                     # "res", the Add's output
    for i in (5, 6):
        os.rename(os.path.join(folder, f"out_layer{i}.txt"), os.path.join(folder, f"out_layer{i - 1}.txt"))
    graph, rows = golden_rows(folder)
    assert len(rows) == 6 and all(r["equal"] for r in rows), rows
    assert rows[4]["tensor"] == graph.layers[5].output and graph.layers[4].op == "add"
    os.remove(os.path.join(folder, "out_layer5.txt"))                     # one file fewer: not this network
    with pytest.raises(TesseraError, match="DORY has 5 layer outputs, tessera made 7 layers"):
        golden_rows(folder)


@pytest.mark.parametrize("header, what", [
    ("# r1 (shape [4, seven, 7]),\\", "is not a list of integers"),
    ("# r1 [4, 7, 7]", "is not `# name (shape [...]),\\`"),
    ("# r1 (shape [4, 0, 7]),\\", "has a dimension below 1"),
])
def test_malformed_header_is_one_line(exports, tmp_path, header, what):
    folder = str(tmp_path / "bad")
    shutil.copytree(os.path.dirname(exports["hwc"][0]), folder)
    f = os.path.join(folder, "out_layer0.txt")
    lines = open(f).read().splitlines(True)
    lines[0] = header + "\n"
    open(f, "w").writelines(lines)
    with pytest.raises(TesseraError) as err:
        golden_rows(folder)
    msg = str(err.value)
    assert "\n" not in msg and "out_layer0.txt:1" in msg and what in msg


def _model_yaml(folder):
    path = os.path.join(folder, "nemo_export.yaml")
    with open(path, "w") as f:
        f.write(f"description: issue 12 NEMO export\nonnx: {json.dumps(os.path.join(folder, 'model_int.onnx'))}\n"
                f"reference: {{kind: dory, dir: {json.dumps(folder)}}}\n")
    return path


TARGETS = [("host", "reference"), pytest.param("gap8", "pulp_nn", marks=pytest.mark.qemu),
           pytest.param("stm32h7", "cmsis_nn", marks=pytest.mark.qemu),
           pytest.param("pulp_open", "pulp_nn", marks=[pytest.mark.gvsoc, pytest.mark.skipif(
               gvsoc.locate() is None, reason="no gvsoc on PATH nor in TESSERA_GVSOC (docs/gvsoc.md)")])]


@pytest.mark.parametrize("target, lib", TARGETS)
def test_firmware_is_bit_exact(exports, tmp_path, target, lib):
    """The whole build: every layer equal to the golden model and to the
    reference files (CHW ones: the harder layout), and which library ran
    each layer: the PULP-NN-style and CMSIS-NN-style kernels take every
    convolution and the fully connected layer (int32 output), floor
    rounding, wide add and divisor included."""
    folder = os.path.dirname(exports["chw"][0])
    # layers apart: a fused step's inner outputs never reach L2, so they
    # could not be compared with the reference files
    res = scons(f"target={target}", f"model={_model_yaml(folder)}", "fusion=none", "-j2", out=str(tmp_path))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rep = json.load(open(os.path.join(str(tmp_path), target, "nemo_export", "report.json")))
    assert rep["verdict"] == rep["verdict_golden"] == "pass" and rep["reference"]["verdict"] == "pass"
    assert all(l["match"] and l["reference_match"] for l in rep["layers"])
    libs = {l["name"]: l["library"] for l in rep["layers"] if l["op"] in ("conv2d", "pointwise", "linear")}
    assert len(libs) == 4 and set(libs.values()) == {lib}, libs


def _refused(tmp_path, name, nodes, inits, shape_in, shape_out):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape_in)],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, shape_out)],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 6
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    return path


def test_what_32_bits_cannot_carry_is_one_line(tmp_path):
    """An additive term beyond 32 bits where no bias can take it (a residual
    Add's chain), and a multiplier beyond 32 bits: one line naming the node,
    from the command line too, never a traceback."""
    from helpers import one_error

    from tessera.errors import FrontendError

    # residual Add -> Mul(m) -> Add(-3e9 * ...) : no bias to move it into
    nodes = [const("s1", 2.0, np.float32), n("Mul", ["input", "s1"], ["a1"]),
             n("Add", ["a1", "input"], ["sum"]), n("Mul", ["sum", "m"], ["sm"]),
             n("Add", ["sm", "big"], ["sa"]), n("Floor", ["sa"], ["fl"]),
             n("Clip", ["fl"], ["out"], min=0.0, max=255.0)]
    path = _refused(tmp_path, "wide_add", nodes, {"m": [[[[3.0]]]], "big": [[[[-3.0e9]]]]}, [1, 2, 4, 4],
                    [1, 2, 4, 4])
    with pytest.raises(FrontendError) as err:
        import_onnx(path, "wide_add")
    msg = str(err.value)
    assert "\n" not in msg and "'out_node' (Clip)" in msg and "additive term -3000000000 does not fit 32 bits" in msg
    model = tmp_path / "wide_add.yaml"
    model.write_text(f"description: wide add\nonnx: {json.dumps(path)}\n")
    line = one_error(scons("target=host", f"model={model}", out=str(tmp_path / "out")))
    assert "wide_add.onnx" in line and "does not fit 32 bits" in line
    # a negative multiplier beyond 32 bits (positive ones narrow: below)
    c, i = chain("c", "out", "q", [-70000, 1], [0, 0], 70000, D18)
    path = _refused(tmp_path, "wide_mul", [n("Conv", ["input", "w"], ["c"], kernel_shape=[1, 1]), *c],
                    {"w": np.ones((2, 2, 1, 1)), **i}, [1, 2, 4, 4], [1, 2, 4, 4])
    with pytest.raises(FrontendError, match=r"'out_node' \(Clip\): requantization multiplier -4900000000 does "
                                            r"not fit 32 bits"):
        import_onnx(path, "wide_mul")


def test_padding_beyond_the_kernel_is_a_layer_dory_does_not_count(tmp_path):
    """Pad -> Pad -> Conv 2x2 whose padding (2) reaches the kernel (as in
    DORY's dronet_no_pooling): the part the convolution cannot take is a
    zero Pad layer of tessera's own, left out of DORY's numbering."""
    c, i = chain("c", "r", "q", [3, 2], [20000, 15000], 1500, D18)
    nodes = [n("Pad", ["input"], ["p1"], pads=[0, 0, 1, 1, 0, 0, 1, 1], value=0.0),
             n("Pad", ["p1"], ["p2"], pads=[0, 0, 1, 1, 0, 0, 1, 1], value=0.0),
             n("Conv", ["p2", "w"], ["c"], kernel_shape=[2, 2], strides=[2, 2]), *c]
    folder = tmp_path / "dory"
    folder.mkdir()
    path = _refused(folder, "model_int", nodes, {"w": rng.integers(-20, 21, (2, 2, 2, 2)), **i}, [1, 2, 6, 6],
                    [1, 2, 5, 5])
    x = rng.integers(0, 256, (1, 2, 6, 6))
    ref = ort_eval(path, ["r"], x)
    write_txt(str(folder / "input.txt"), "input", x, "hwc")
    write_txt(str(folder / "out_layer0.txt"), "r", ref["r"], "hwc")
    graph, rows = golden_rows(str(folder))
    assert [(l.op, l.added is not None) for l in graph.layers] == [("depthwise", True), ("conv2d", False)]
    assert graph.layers[1].pad == [1, 1, 1, 1]
    assert len(rows) == 1 and rows[0]["equal"] and len(np.unique(ref["r"])) > 8


def test_zero_pad_before_an_average_pool_keeps_dorys_numbering(tmp_path):
    """Conv -> chain -> Pad(0) -> AveragePool 2x2 -> Floor: the padded zeros
    count in the window (ONNX's AveragePool of the padded tensor); tessera's
    Pad layer is its own (Layer.added), DORY's two files are the conv and
    the pool."""
    c, i = chain("c", "r", "q", [3, 2], [20000, 15000], 1500, D18)
    nodes = [n("Conv", ["input", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), *c,
             n("Pad", ["r"], ["p"], pads=[0, 0, 1, 1, 0, 0, 1, 1], value=0.0),
             n("AveragePool", ["p"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]), n("Floor", ["ap"], ["out"])]
    folder = tmp_path / "dory"
    folder.mkdir()
    path = _refused(folder, "model_int", nodes, {"w": rng.integers(-20, 21, (2, 2, 3, 3)), **i}, [1, 2, 6, 6],
                    [1, 2, 4, 4])
    x = rng.integers(0, 256, (1, 2, 6, 6))
    ref = ort_eval(path, ["r", "out"], x)
    write_txt(str(folder / "input.txt"), "input", x, "hwc")
    write_txt(str(folder / "out_layer0.txt"), "r", ref["r"], "hwc")
    write_txt(str(folder / "out_layer1.txt"), "out", ref["out"], "chw")
    graph, rows = golden_rows(str(folder))
    assert [(l.op, l.added is not None) for l in graph.layers] == [("conv2d", False), ("depthwise", True),
                                                                  ("avgpool", False)]
    assert len(rows) == 2 and all(r["equal"] for r in rows), rows
    assert len(np.unique(ref["out"])) > 8 and ref["out"][0, :, 0, 0].max() < ref["r"].max()


def _requant_exact(acc, m, a, den, lo, hi):
    """NEMO's chain in Python integers: clamp(floor((acc * m + a) / den))."""
    return min(max((acc * m + a) // den, lo), hi)


@pytest.mark.parametrize("kappa, m, d", [([3, 5], 2 ** 36 + 1, 2 ** 40),         # dscnn: 2.8e11, by 2**d
                                         ([3, 1], 2 ** 37 + 3, D18 << 20)])      # by 2**20 (2**18 - 1)
def test_a_multiplier_beyond_32_bits_narrows_exactly(tmp_path, kappa, m, d):
    """NEMO's dscnn and proxylessnas exports multiply by more than 2**31.
    The output is a step function of the accumulator, fixed by where it
    reaches each of its 256 values: a multiplier below 2**31 with the same
    steps is the same layer. Checked against ONNX Runtime and, over every
    accumulator around the steps, against the chain's own arithmetic."""
    from tessera.frontend.nemo import narrow_multiplier

    c, i = chain("c", "r", "q", kappa, [0, 0], m, d)
    folder = tmp_path / "dory"
    folder.mkdir()
    w = rng.integers(0, 3, (2, 2, 3, 3))
    path = _refused(folder, "model_int", [n("Conv", ["input", "w"], ["c"], kernel_shape=[3, 3]), *c],
                    {"w": w, **i}, [1, 2, 6, 6], [1, 2, 4, 4])
    # inputs spread channel 0's accumulator over the output's steps (and
    # kappa * acc stays below 2**24, where ONNX Runtime's float32 is exact)
    x = rng.integers(0, max(2, int(300 * d / (kappa[0] * m) / 18)), (1, 2, 6, 6))
    ref = ort_eval(path, ["r"], x)
    write_txt(str(folder / "input.txt"), "input", x, "hwc")
    write_txt(str(folder / "out_layer0.txt"), "r", ref["r"], "hwc")
    graph, rows = golden_rows(str(folder))
    rq = graph.layers[0].requant
    assert all(0 < v < 1 << 31 for v in rq.mul) and rq.divisor is None
    assert len(rows) == 1 and rows[0]["equal"], rows
    assert len(np.unique(ref["r"])) > 4
    for ch, k in enumerate(kappa):
        mul, add, shift = (int(p[ch if len(p) > 1 else 0]) for p in (rq.mul, rq.add, rq.shift))
        step = d / (k * m)                   # accumulator values per output step
        for t in range(0, 257):
            centre = int(t * step)
            for acc in range(centre - 3, centre + 4):
                assert min(max((acc * mul + add) >> shift, 0), 255) == _requant_exact(acc, k * m, 0, d, 0, 255)
    # a multiplier whose steps cannot be drawn below 2**31 stays refused
    from types import SimpleNamespace
    wide = SimpleNamespace(mul=[-(1 << 40)], add=[0], shift=[0], rounding="floor", shape=None, divisor=None,
                           lo=0, hi=255, zero_point=0)
    narrow_multiplier(wide)
    assert wide.mul == [-(1 << 40)]
