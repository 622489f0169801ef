"""One validity gate for every ONNX dialect (frontend.gate): the mutants of
a DORY graph that issue 35 found built and passing although ONNX Runtime
refuses to load them, and the same mutations of a Deeploy (QuantLib)
graph, whose custom operators keep ONNX Runtime from running it at all.
Each is refused with one line naming the file and the thing, through the
entry point a build runs (prepare.prepare)."""

import glob
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import MODEL_CACHE, ROOT
from tessera import config
from tessera.errors import TesseraError
from tessera.frontend import gate
from tessera.model import prepare

DORY = os.path.normpath(os.path.join(ROOT, "..", "shared", "peer_tests", "dory", "Residual_connection_test_1"))


def _input_type(t):
    def edit(m):
        m.graph.input[0].type.tensor_type.elem_type = t
    return edit


def _opset(v):
    def edit(m):
        next(o for o in m.opset_import if o.domain in ("", "ai.onnx")).version = v
    return edit


def _ir(m):
    m.ir_version = 99


def _retype(op):
    """The first initializer `op` reads retyped to int64: the node binds two types."""
    def edit(m):
        inits = {i.name: i for i in m.graph.initializer}
        node = next(n for n in m.graph.node if n.op_type == op and any(i in inits for i in n.input))
        init = inits[next(i for i in node.input if i in inits)]
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.int64), init.name))
    return edit


def _clip_to_relu(m):
    node = next(n for n in m.graph.node if n.op_type == "Clip")
    node.op_type = "Relu"
    while len(node.input) < 3:
        node.input.append(node.input[0])


def _auto_pad(m):
    node = next(n for n in m.graph.node if n.op_type == "Conv")
    if not any(a.name == "pads" for a in node.attribute):
        node.attribute.append(helper.make_attribute("pads", [0, 0, 0, 0]))
    node.attribute.append(helper.make_attribute("auto_pad", "SAME_UPPER"))


# (id, edit, words of the line); the 10 DORY mutations of the issue
MUTATIONS = [("input-string", _input_type(TensorProto.STRING), ["input", "STRING"]),
             ("input-int32", _input_type(TensorProto.INT32), ["int32"]),
             ("input-float16", _input_type(TensorProto.FLOAT16), ["input", "FLOAT16"]),
             ("input-double", _input_type(TensorProto.DOUBLE), ["input", "DOUBLE"]),
             ("opset-1", _opset(1), ["opset 1"]),
             ("opset-99", _opset(99), ["opset 99"]),
             ("ir-version-99", _ir, ["ir_version 99"]),
             ("mul-binds-two-types", _retype("Mul"), ["Mul", "type"]),
             ("relu-with-three-inputs", _clip_to_relu, ["Relu", "3 inputs"]),
             ("auto-pad-and-pads", _auto_pad, ["auto_pad SAME_UPPER", "pads"])]


def _refused(folder, model_text, words):
    (folder / "m.yaml").write_text(model_text)
    with pytest.raises(TesseraError) as info:
        model = config.load_model(str(folder / "m.yaml"), "m")
        prepare.prepare(model, str(folder / "out"), MODEL_CACHE, log=lambda line: None)
    line = str(info.value)
    assert "\n" not in line and str(folder / "net.onnx") in line, line
    for w in words:
        assert w in line, (w, line)


@pytest.mark.skipif(not os.path.isdir(DORY), reason="../shared/peer_tests not present")
@pytest.mark.parametrize("case", MUTATIONS, ids=[c[0] for c in MUTATIONS])
def test_a_dory_graph_onnx_runtime_refuses_is_refused(tmp_path, case):
    _, edit, words = case
    shutil.copytree(DORY, tmp_path / "ref", ignore=shutil.ignore_patterns("*.onnx"))
    m = onnx.load(os.path.join(DORY, "model_int.onnx"))
    edit(m)
    onnx.save(m, str(tmp_path / "net.onnx"))
    _refused(tmp_path, "description: x\nonnx: net.onnx\nreference: {kind: dory, dir: ref}\n", words)


# the Deeploy graph has a Conv, no Mul/Clip: its two-types case retypes the
# Conv's weights; the Clip case does not apply
DEEPLOY_MUTATIONS = [c for c in MUTATIONS if c[0] not in ("mul-binds-two-types", "relu-with-three-inputs",
                                                          "input-int32")]
DEEPLOY_MUTATIONS.append(("conv-binds-two-types", _retype("Conv"), ["Conv", "type"]))


@pytest.mark.parametrize("case", DEEPLOY_MUTATIONS, ids=[c[0] for c in DEEPLOY_MUTATIONS])
def test_a_deeploy_graph_with_the_same_fault_is_refused(tmp_path, case):
    import test_bad_input_corpus as corpus
    _, edit, words = case
    corpus._quantlib_graph(tmp_path / "net.onnx")
    m = onnx.load(str(tmp_path / "net.onnx"))
    edit(m)
    onnx.save(m, str(tmp_path / "net.onnx"))
    (tmp_path / "ref").mkdir()
    for name, data in corpus._deeploy_folder()[0].items():
        (tmp_path / "ref" / name).write_bytes(data)
    _refused(tmp_path, "description: x\nonnx: net.onnx\nreference: {kind: deeploy, dir: ref}\n", words)


def test_the_version_bounds_are_what_onnx_runtime_loads():
    """The probed bounds are ONNX Runtime's: it loads the highest and refuses one past it."""
    max_ir, max_opset = gate.ort_bounds()
    assert gate._ort_accepts(max_ir, max_opset)
    assert not gate._ort_accepts(max_ir + 1, gate.MIN_OPSET)
    assert not gate._ort_accepts(max_ir, max_opset + 1)


@pytest.mark.skipif(not os.path.isdir(DORY), reason="../shared/peer_tests not present")
def test_every_peer_graph_passes_the_gate():
    """The gate refuses none of the peers' own graphs (DORY and Deeploy)."""
    peers = sorted(glob.glob(os.path.join(os.path.dirname(DORY), "..", "**", "*.onnx"), recursive=True))
    assert len(peers) >= 20
    for path in peers:
        g = onnx.load(path)
        gate.check_versions(g, path)
        gate.check_input_types(g, path, "integer")
        gate.check_pads(g, path)
        gate.check_typed(g, path)


def _tiny_onnx():
    model = config.load_model(os.path.join(ROOT, "models", "tiny.yaml"), "tiny")
    return prepare.model_onnx(model, MODEL_CACHE, log=lambda line: None)


def _huge_input(m):   # 3 x 2^15 x 2^15 floats: 12 GiB declared, no data
    for d, v in zip(m.graph.input[0].type.tensor_type.shape.dim[1:], (3, 1 << 15, 1 << 15)):
        d.dim_value = v


def _huge_initializer(m):   # 2^40 weights declared, no data
    init = m.graph.initializer[0]
    del init.dims[:]
    init.dims.extend([1 << 20, 1 << 20])
    init.ClearField("raw_data")


# the initializer's data no longer fills it: the checker says so first
@pytest.mark.parametrize("edit, words", [(_huge_input, "address space"), (_huge_initializer, "too small")])
def test_a_memory_bomb_is_refused_before_anything_is_allocated(tmp_path, edit, words):
    """A declared size past any target's address space is one line, and the
    import's peak allocation stays small (ONNX Runtime's run on zeros would
    have asked for the whole input)."""
    import tracemalloc
    from tessera.frontend import import_onnx
    m = onnx.load(_tiny_onnx())
    edit(m)
    path = str(tmp_path / "bomb.onnx")
    onnx.save(m, path)
    tracemalloc.start()
    try:
        with pytest.raises(TesseraError) as info:
            import_onnx(path, "bomb")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    line = str(info.value)
    assert "\n" not in line and path in line and words in line, line
    assert peak < 64 << 20, peak


def test_external_data_present_is_read_and_followed_missing_is_one_line(tmp_path):
    """A model whose weights live in a file beside it (what models past 2 GB
    use) imports; changing that file re-imports (its digest is part of the
    import's key, and CMake's dependencies list it); a missing or short file
    is one line naming it."""
    from tessera.ir import Graph
    from tessera.util import canon
    m = onnx.load(_tiny_onnx())
    onnx.save(m, str(tmp_path / "net.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="net.data", size_threshold=0)
    (tmp_path / "m.yaml").write_text("description: x\nonnx: net.onnx\n")
    model = config.load_model(str(tmp_path / "m.yaml"), "m")
    assert str(tmp_path / "net.data") in prepare.source_files(model)
    paths = prepare.prepare(model, str(tmp_path / "out"), MODEL_CACHE, log=lambda line: None)
    first = canon.file_digest(paths["weights"])
    assert Graph.from_json(canon.read_json(paths["graph"])).layers
    # every weight byte negated (same length, a different network): imported again
    data = bytearray((tmp_path / "net.data").read_bytes())
    w = next(i for i in onnx.load(_tiny_onnx()).graph.initializer if i.name.endswith("weight_quantized"))
    start = data.find(w.raw_data)
    data[start:start + len(w.raw_data)] = bytes((256 - b) % 256 for b in w.raw_data)
    (tmp_path / "net.data").write_bytes(bytes(data))
    paths = prepare.prepare(model, str(tmp_path / "out"), MODEL_CACHE, log=lambda line: None)
    assert canon.file_digest(paths["weights"]) != first
    for damage, words in ((lambda p: p.write_bytes(p.read_bytes()[:100]), "exceeds"), (os.remove, "net.data")):
        damage(tmp_path / "net.data")
        _refused(tmp_path, "description: x\nonnx: net.onnx\n", ["external data", words])


def test_a_tensor_name_with_a_nul_is_one_line(tmp_path):
    """The fuzzer's renamed graph input `..._Output /\\x00`: the weights'
    and inputs' .npz archives cut the name at the NUL, and the ONNX Runtime
    comparison looked it up by its whole name (KeyError)."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import fuzz
    m = onnx.load(_tiny_onnx())
    old = next(n.output[0] for n in m.graph.node if n.op_type == "QuantizeLinear")
    fuzz._rename_everywhere(m, old, old + " /\x00")
    onnx.save(m, str(tmp_path / "net.onnx"))
    _refused(tmp_path, "description: x\nonnx: net.onnx\n", ["NUL", old])


def test_a_bias_too_wide_for_the_requantization_is_one_line(tmp_path):
    """The fuzzer's bias zero point set to -2^31 on one channel: the bias
    no longer fits beside the requantization (a ValueError in
    builder.wide_bias), now one line naming the layer."""
    m = onnx.load(_tiny_onnx())
    init = next(i for i in m.graph.initializer if i.name == "conv0.bias_quantized_zero_point")
    zp = numpy_helper.to_array(init).copy()
    zp[3] = -2 ** 31
    init.CopyFrom(numpy_helper.from_array(zp, init.name))
    onnx.save(m, str(tmp_path / "net.onnx"))
    (tmp_path / "m.yaml").write_text("description: x\nonnx: net.onnx\n")
    with pytest.raises(TesseraError) as info:
        prepare.prepare(config.load_model(str(tmp_path / "m.yaml"), "m"), str(tmp_path / "out"), MODEL_CACHE,
                        log=lambda line: None)
    line = str(info.value)
    assert "\n" not in line and "conv0" in line and "bias" in line and str(tmp_path / "net.onnx") in line, line


@pytest.mark.skipif(not os.path.isdir(DORY), reason="../shared/peer_tests not present")
def test_parameters_under_a_huge_activation_are_not_materialized(tmp_path):
    """The fuzzer's Deeploy Add graph with its input enlarged to
    [1, 16384, 16384] (custom operators: shape inference cannot carry the
    size on to sum it): each RequantShift's per-channel parameters were
    broadcast to the whole activation as int64 (2 GiB each; a 6-minute
    import). They are compressed as views now: the import ends in its one
    line with a small peak."""
    import tracemalloc
    from tessera.frontend import import_onnx
    m = onnx.load(os.path.join(os.path.dirname(DORY), "..", "deeploy", "Kernels", "Integer", "Add", "Regular_RQ",
                               "network.onnx"))
    for d in m.graph.input[0].type.tensor_type.shape.dim[1:]:
        d.dim_value = 1 << 14
    path = str(tmp_path / "net.onnx")
    onnx.save(m, path)
    tracemalloc.start()
    try:
        with pytest.raises(TesseraError) as info:
            import_onnx(path, "x", {i.name: "int8" for i in m.graph.input})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "\n" not in str(info.value) and path in str(info.value)
    assert peak < 64 << 20, peak


def test_a_tflite_memory_bomb_is_refused_before_the_interpreter_runs_it(tmp_path):
    """A .tflite whose input is enlarged to 16384x16384 (the rest of the
    network as converted): the interpreter's run on zeros took past 5
    minutes in the gate's child. Its computed sizes are refused before the
    run, in one line, quickly: the child's peak stays small."""
    import resource
    from tflite_edit import Flatbuffer
    from tessera.frontend.tflite_gate import interpreter_refusal
    with open(os.path.join(ROOT, "tests", "data", "tflite", "residual.tflite"), "rb") as f:
        fb = Flatbuffer(f.read())
    for k in (1, 2):
        fb.shape_dim(fb.sg.Inputs(0), k, 1 << 14)
    path = tmp_path / "bomb.tflite"
    path.write_bytes(fb.bytes())
    err, structural = interpreter_refusal(str(path))
    assert err is not None and not structural
    assert "\n" not in str(err) and str(path) in str(err) and "address space" in str(err), err
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 1 << 20   # kB: under 1 GiB


@pytest.mark.skipif(not os.path.isdir(DORY), reason="../shared/peer_tests not present")
def test_a_conv_after_a_custom_op_with_pads_of_the_wrong_length_is_one_line(tmp_path):
    """The issue's IndexError in geometry.py, again from the fuzzer: Deeploy's
    miniMobileNet with a Conv's pads given 3 values. The Conv reads a
    RequantShift output, whose shape ONNX's inference does not know, so
    the checker never reaches the pads; the parser names them."""
    folder = os.path.join(os.path.dirname(DORY), "..", "deeploy", "Models", "miniMobileNet")
    m = onnx.load(os.path.join(folder, "network.onnx"))
    made_by_rqs = {o for n in m.graph.node if n.op_type == "RequantShift" for o in n.output}
    conv = next(n for n in m.graph.node if n.op_type == "Conv" and n.input[0] in made_by_rqs)
    for a in conv.attribute:
        if a.name == "pads":
            del a.ints[:]
            a.ints.extend([1, 1, 0])
    onnx.save(m, str(tmp_path / "net.onnx"))
    shutil.copytree(folder, tmp_path / "ref", ignore=shutil.ignore_patterns("*.onnx"))
    _refused(tmp_path, "description: x\nonnx: net.onnx\nreference: {kind: deeploy, dir: ref}\n",
             [conv.name, "pads [1, 1, 0]", "4 values"])
