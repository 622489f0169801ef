"""The bad-input corpus (tests/bad_input_cases.py) through the entry
functions SConstruct's build uses when it reads a target and a model
(config.load_target/load_model, prepare.prepare, the platform and kernel
library checks, the weight fit check): every case must raise a
TesseraError whose message is one bounded line naming the file and the
key, node or value, and must leave no preparation stamp a later build
would trust. test_bad_input.py runs a subset through the real command line."""

import copy
import os

import onnx
import pytest
import yaml

from bad_input_cases import (DEEPLOY_CASES, DORY_CASES, INPUT_SHAPE_CASES, RAW_MODEL_CASES, ONNX_BYTES_CASES,
                             ONNX_CASES, RAW_TARGET_CASES, TARGET_CASES, TFLITE_BASE, TFLITE_BYTES_CASES,
                             TFLITE_CASES, TFLITE_FILE_CASES)
from helpers import MODEL_CACHE, ROOT
from tessera.util import canon
from tessera import config
from tessera.planning import memplan
from tessera.model import prepare
from tessera.config import views
from tessera.errors import FitError, TesseraError

MAX_LINE = 600


def read_time(tpath, mpath, outdir):
    """What a build does before its first SCons step (TesseraNetwork)."""
    target = config.load_target(str(tpath), "t")
    model = config.load_model(str(mpath), "m")
    views.kernel_library(target["kernels"])
    paths = prepare.prepare(model, str(outdir), MODEL_CACHE, log=lambda line: None)
    from tessera.ir import Graph
    graph = Graph.from_json(canon.read_json(paths["graph"]))
    try:
        memplan.check_weights(graph, views.memory_target(target), "")
    except FitError as err:   # as TesseraNetwork says it: the model on the target
        raise FitError(f"{model['name']} on {target['path']}: {err.where}", err.what, err.fix) from None
    return paths


def expect_error(tpath, mpath, outdir, path, words, model_ok=False):
    """model_ok: the model is valid (a target case), so its preparation may
    stand; otherwise nothing of the golden step may be stamped."""
    with pytest.raises(TesseraError) as info:
        read_time(tpath, mpath, outdir)
    line = f"tessera: error: {info.value}"
    assert "\n" not in line and len(line) <= MAX_LINE, line[:2000]
    assert str(path) in line, line
    for w in words:
        assert w in line, (w, line)
    stamp = os.path.join(str(outdir), ".prepare.json")
    if os.path.exists(stamp) and not model_ok:
        assert "golden" not in canon.read_json(stamp), "a failed preparation left a stamp"
    return line


@pytest.fixture(scope="module")
def host_target():
    with open(os.path.join(ROOT, "targets", "host.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def tiny_onnx():
    model = config.load_model(os.path.join(ROOT, "models", "tiny.yaml"), "tiny")
    return prepare.model_onnx(model, MODEL_CACHE, log=lambda line: None)


def _tiny_model_yaml(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(open(os.path.join(ROOT, "models", "tiny.yaml"), encoding="utf-8").read())
    return path


def _onnx_model_yaml(tmp_path, onnx_name="net.onnx", extra=""):
    path = tmp_path / "m.yaml"
    path.write_text(f"description: corpus case\nonnx: {onnx_name}\n{extra}")
    return path


@pytest.mark.parametrize("case", TARGET_CASES, ids=[c[0] for c in TARGET_CASES])
def test_target_yaml(tmp_path, host_target, case):
    _, edit, words = case
    tpath = tmp_path / "t.yaml"
    tpath.write_text(yaml.safe_dump(edit(copy.deepcopy(host_target))))
    expect_error(tpath, _tiny_model_yaml(tmp_path), tmp_path / "out", tpath, words, model_ok=True)


@pytest.mark.parametrize("case", RAW_TARGET_CASES, ids=[c[0] for c in RAW_TARGET_CASES])
def test_target_yaml_text(tmp_path, case):
    _, text, words = case
    tpath = tmp_path / "t.yaml"
    tpath.write_bytes(text.encode("utf-8"))
    expect_error(tpath, _tiny_model_yaml(tmp_path), tmp_path / "out", tpath, words, model_ok=True)


@pytest.mark.parametrize("case", RAW_MODEL_CASES, ids=[c[0] for c in RAW_MODEL_CASES])
def test_model_yaml_text(tmp_path, tiny_onnx, case):
    _, text, words = case
    (tmp_path / "net.onnx").write_bytes(open(tiny_onnx, "rb").read())
    mpath = tmp_path / "m.yaml"
    mpath.write_bytes(text.encode("utf-8"))
    expect_error(os.path.join(ROOT, "targets", "host.yaml"), mpath, tmp_path / "out", mpath, words)


@pytest.mark.parametrize("case", INPUT_SHAPE_CASES, ids=[c[0] for c in INPUT_SHAPE_CASES])
def test_input_shape_against_the_onnx(tmp_path, tiny_onnx, case):
    _, text, words = case
    net = tmp_path / "net.onnx"
    net.write_bytes(open(tiny_onnx, "rb").read())
    mpath = tmp_path / "m.yaml"
    mpath.write_text(text)
    expect_error(os.path.join(ROOT, "targets", "host.yaml"), mpath, tmp_path / "out", net, words + ["input_shape"])


@pytest.mark.parametrize("case", ONNX_CASES, ids=[c[0] for c in ONNX_CASES])
def test_onnx(tmp_path, tiny_onnx, case):
    _, edit, words = case
    m = edit(onnx.load(tiny_onnx))
    net = tmp_path / "net.onnx"
    net.write_bytes(m.SerializeToString())
    expect_error(os.path.join(ROOT, "targets", "host.yaml"), _onnx_model_yaml(tmp_path), tmp_path / "out",
                 net, words)


@pytest.mark.parametrize("with_reference", [False, True])
@pytest.mark.parametrize("case", ONNX_BYTES_CASES, ids=[c[0] for c in ONNX_BYTES_CASES])
def test_onnx_bytes(tmp_path, case, with_reference):
    _, data, words = case
    net = tmp_path / "net.onnx"
    net.write_bytes(data)
    extra = ""
    if with_reference:
        (tmp_path / "ref").mkdir()
        (tmp_path / "ref" / "input.txt").write_text("# input (shape [1, 3, 16, 16]),\n" + "1,\n" * 768)
        extra = "reference: {kind: dory, dir: ref}\n"
    expect_error(os.path.join(ROOT, "targets", "host.yaml"), _onnx_model_yaml(tmp_path, extra=extra),
                 tmp_path / "out", net, words)


@pytest.mark.parametrize("case", DORY_CASES, ids=[c[0] for c in DORY_CASES])
def test_dory_reference(tmp_path, tiny_onnx, case):
    _, files, words = case
    (tmp_path / "net.onnx").write_bytes(open(tiny_onnx, "rb").read())
    ref = tmp_path / "ref"
    ref.mkdir()
    for name, text in files.items():
        (ref / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    mpath = _onnx_model_yaml(tmp_path, extra="reference: {kind: dory, dir: ref}\n")
    expect_error(os.path.join(ROOT, "targets", "host.yaml"), mpath, tmp_path / "out", ref, words)


def test_a_yaml_merge_key_is_accepted(tmp_path):
    """`<<: *base` is valid YAML: the merged keys count, and a key written
    beside it overrides the merged one (not a duplicate)."""
    text = open(os.path.join(ROOT, "targets", "host.yaml"), encoding="utf-8").read()
    text = text.replace("  L1:\n    size: 64000\n    kind: scratchpad\n",
                        "  L1: &l1\n    size: 64000\n    kind: scratchpad\n")
    text = text.replace("  L2:\n    size: 512000\n    kind: sram\n    note: GAP8's L2 as DORY uses it\n",
                        "  L2:\n    <<: *l1\n    size: 512000\n    kind: sram\n")
    tpath = tmp_path / "t.yaml"
    tpath.write_text(text)
    target = config.load_target(str(tpath), "t")
    assert target["memory"]["L2"]["size"] == 512000 and target["memory"]["L2"]["kind"] == "sram"
    assert target["memory"]["L2"]["note"] == "GAP8's usable cluster L1 as DORY uses it"   # merged from L1


def _quantlib_graph(path, div=4.0, levels=256.0, two_producers=False):
    """Conv -> RequantShift, a QuantLib/Deeploy integer graph."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Conv", ["input", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("RequantShift", ["c", "mul", "add"], ["out"], name="rqs", domain="PACTOps",
                              div=div, n_levels=levels, signed=1.0)]
    if two_producers:
        nodes.append(helper.make_node("Relu", ["c"], ["out"], name="twice"))
    inits = {"w": np.ones((2, 2, 1, 1)), "mul": np.array([3.0, 5.0]).reshape(2, 1, 1),
             "add": np.zeros((2, 1, 1))}
    graph = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11), helper.make_opsetid("PACTOps", 1)])
    model.ir_version = 6
    onnx.save(model, str(path))


QUANTLIB_CASES = [("div-nan", dict(div=float("nan")), ["rqs", "div=nan"]),
                  ("div-inf", dict(div=float("inf")), ["rqs", "div=inf"]),
                  ("levels-nan", dict(levels=float("nan")), ["rqs", "n_levels=nan"]),
                  ("levels-huge", dict(levels=1e30), ["rqs", "n_levels"]),
                  ("two-producers", dict(two_producers=True), ["twice", "'out'"])]


@pytest.mark.parametrize("case", QUANTLIB_CASES, ids=[c[0] for c in QUANTLIB_CASES])
def test_quantlib_onnx(tmp_path, case):
    from tessera.frontend import import_onnx

    _, kw, words = case
    net = tmp_path / "net.onnx"
    _quantlib_graph(net, **kw)
    with pytest.raises(TesseraError) as info:
        import_onnx(str(net), "q", {"input": "int8"})
    line = str(info.value)
    assert "\n" not in line and str(net) in line, line
    for w in words:
        assert w in line, (w, line)


# ---- TFLite ------------------------------------------------------------------------

TFLITE_DATA = os.path.join(ROOT, "tests", "data", "tflite")


def _tflite_case(tmp_path, data, words, extra=""):
    net = tmp_path / "net.tflite"
    net.write_bytes(data)
    mpath = tmp_path / "m.yaml"
    mpath.write_text("description: corpus case\ntflite: net.tflite\n" + extra)
    expect_error(os.path.join(ROOT, "targets", "host.yaml"), mpath, tmp_path / "out", net, words)


def _tflite_base():
    with open(os.path.join(TFLITE_DATA, TFLITE_BASE + ".tflite"), "rb") as f:
        return f.read()


@pytest.mark.parametrize("case", TFLITE_CASES, ids=[c[0] for c in TFLITE_CASES])
def test_tflite(tmp_path, case):
    from tflite_edit import Flatbuffer
    _, edit, words = case
    _tflite_case(tmp_path, edit(Flatbuffer(_tflite_base())).bytes(), words)


@pytest.mark.parametrize("case", TFLITE_BYTES_CASES, ids=[c[0] for c in TFLITE_BYTES_CASES])
def test_tflite_bytes(tmp_path, case):
    _, make, words = case
    _tflite_case(tmp_path, make(_tflite_base()), words)


@pytest.mark.parametrize("case", TFLITE_FILE_CASES, ids=[c[0] for c in TFLITE_FILE_CASES])
def test_tflite_file(tmp_path, case):
    case_id, name, words = case
    extra = "drop_final_softmax: true\n" if case_id.startswith("drop-softmax") else ""
    with open(os.path.join(TFLITE_DATA, name + ".tflite"), "rb") as f:
        _tflite_case(tmp_path, f.read(), words, extra)


def test_tflite_base_is_valid(tmp_path):
    """The corpus edits a model tessera takes: each case fails for its edit."""
    net = tmp_path / "net.tflite"
    net.write_bytes(_tflite_base())
    mpath = tmp_path / "m.yaml"
    mpath.write_text("description: corpus base\ntflite: net.tflite\n")
    read_time(os.path.join(ROOT, "targets", "host.yaml"), mpath, tmp_path / "out")


# ---- Deeploy references --------------------------------------------------------------

def _deeploy_folder():
    """{file: bytes} of a valid Deeploy folder for _quantlib_graph: a seeded
    int8 input and the output computed here from Deeploy's RequantShift
    formula (../shared/peer_tests/README.md), not by tessera: 1x1 conv of
    all-ones weights (c = x0 + x1), mul [3, 5], add 0, div 4, 256 levels
    signed: clamp(floor((c * mul + div / 2) / div), -128, 127)."""
    import numpy as np
    from bad_input_cases import _npz
    x = np.random.default_rng(7).integers(-128, 128, size=(1, 2, 4, 4))
    c = x[:, 0:1] + x[:, 1:2]
    y = np.clip(np.floor((c * np.array([3, 5]).reshape(1, 2, 1, 1) + 2) / 4), -128, 127).astype(np.int64)
    good = {"input": x, "out": y}
    return {"inputs.npz": _npz(input=x), "outputs.npz": _npz(out=y)}, good


def _deeploy_case(tmp_path, files):
    _quantlib_graph(tmp_path / "net.onnx")
    ref = tmp_path / "ref"
    ref.mkdir()
    for name, data in files.items():
        if data is not None:
            (ref / name).write_bytes(data)
    mpath = _onnx_model_yaml(tmp_path, extra="reference: {kind: deeploy, dir: ref}\n")
    return ref, mpath


def test_deeploy_base_is_valid(tmp_path):
    files, _ = _deeploy_folder()
    ref, mpath = _deeploy_case(tmp_path, files)
    paths = read_time(os.path.join(ROOT, "targets", "host.yaml"), mpath, tmp_path / "out")
    assert canon.read_json(paths["reference"])["equal"] is True


@pytest.mark.parametrize("case", DEEPLOY_CASES, ids=[c[0] for c in DEEPLOY_CASES])
def test_deeploy_reference(tmp_path, case):
    _, edit, words = case
    files, good = _deeploy_folder()
    ref, mpath = _deeploy_case(tmp_path, edit(files, good))
    expect_error(os.path.join(ROOT, "targets", "host.yaml"), mpath, tmp_path / "out", ref, words)


def test_a_node_name_that_is_not_utf8_is_one_line(tmp_path):
    """The ONNX checker lets a node name that is not UTF-8 through (seen by
    the ONNX fuzzer: a byte flip in a Gemm's name reached the C-name code as
    bytes); the import stops with one line naming the file."""
    import glob

    import onnx

    from tessera import frontend
    from tessera.errors import TesseraError

    model = onnx.load(sorted(glob.glob(os.path.join(os.path.dirname(__file__), "corpus", "*.onnx")))[0])
    model.graph.node[0].name = "ZZMARKZZ"
    data = model.SerializeToString().replace(b"ZZMARKZZ", b"\xe6cZMARKZ")
    path = tmp_path / "bad_name.onnx"
    path.write_bytes(data)
    with pytest.raises(TesseraError) as err:
        frontend.import_onnx(str(path), "bad_name")
    assert "not UTF-8" in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)
