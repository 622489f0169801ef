"""The ONNX validity gate for the standard dialects (QDQ, QOperator): a
model ONNX Runtime itself refuses (opset 99, string inputs, float16
scales, a Conv with auto_pad, a DequantizeLinear axis out of range, zero
points of the wrong length) is not a network tessera should build and call
passing. Checked before lowering: the ONNX checker in full mode (types and
shapes), every quantization scale finite and positive, and ONNX Runtime
accepting the model."""

import re

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import FrontendError

# op -> the input positions that are scales
SCALE_INPUTS = {"QuantizeLinear": (1,), "DequantizeLinear": (1,), "QLinearConv": (1, 4, 6),
                "QLinearMatMul": (1, 4, 6), "QGemm": (1, 4, 7), "QLinearAdd": (1, 4, 6),
                "QLinearGlobalAveragePool": (1, 3), "QLinearAveragePool": (1, 3)}


_ORT_TYPES = {"tensor(float)": np.float32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8}


def _ort_reason(err):
    """ONNX Runtime's refusal without its C++ location and condition:
    the node it names and the sentence after `was false.`."""
    text = _first_line(err)
    node = re.search(r"Name:'([^']*)'", text)
    reason = text.split("was false.", 1)[1].strip() if "was false." in text else text.split(" : ")[-1]
    return (f"node {node.group(1)!r}: " if node else "") + reason[:200]


def _first_line(err):
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def _array(init, path):
    """An initializer's values; one whose data does not match its dims or
    type is one line."""
    try:
        return numpy_helper.to_array(init)
    except Exception as err:
        raise FrontendError(path, f"initializer {init.name!r}: unreadable ({_first_line(err)})",
                            "its data does not match its type and dims; re-export the model") from None


def _check_scale_shape(node, pos, scale, inits, path):
    """A scale and its zero point have one shape (or are both one value); a per-axis pair (more
    than one element) is 1-D with one value per channel of the quantized
    constant's axis; an activation's pair is one value (ONNX Runtime
    refuses the rest, sometimes only once it fuses QDQ into QLinear ops)."""
    zp_name = node.input[pos + 1] if pos + 1 < len(node.input) else ""
    if zp_name in inits:
        zp = _array(inits[zp_name], path)
        if zp.shape != scale.shape and not (zp.size == scale.size == 1):
            raise FrontendError(path, f"node {node.name!r} ({node.op_type}): scale {node.input[pos]!r} has shape "
                                f"{list(scale.shape)}, zero point {zp_name!r} {list(zp.shape)}",
                                "give the scale and its zero point the same shape; re-quantize the model")
    if scale.size <= 1:
        return
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    x = node.input[0] if node.op_type in ("QuantizeLinear", "DequantizeLinear") else None
    if x in inits:
        dims = list(inits[x].dims)
        n = dims[axis] if -len(dims) <= axis < len(dims) else None
        if scale.ndim == 1 and scale.size == n:
            return
    elif node.op_type in ("QLinearConv", "QLinearMatMul", "QGemm") and pos == 4 and scale.ndim == 1:
        return   # a per-channel weight scale of a QLinear op
    raise FrontendError(path, f"node {node.name!r} ({node.op_type}): scale {node.input[pos]!r} has shape "
                        f"{list(scale.shape)}, which matches no channel axis",
                        "a scale is one value, or one per channel of the quantized weights; re-quantize the model")


def check_scales(model, path):
    """Every quantization scale given as an initializer is finite and > 0
    (NaN, inf or 0 would make every requantization meaningless)."""
    inits = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        for pos in SCALE_INPUTS.get(node.op_type, ()):
            if pos >= len(node.input) or node.input[pos] not in inits:
                continue
            name = node.input[pos]
            arr = _array(inits[name], path)
            _check_scale_shape(node, pos, arr, inits, path)
            if arr.dtype.kind != "f":
                continue
            bad = ~np.isfinite(arr) | (arr <= 0)
            if bad.any():
                value = arr.reshape(-1)[np.argmax(bad.reshape(-1))]
                raise FrontendError(path, f"node {node.name!r} ({node.op_type}): scale {name!r} holds {value}",
                                    "a quantization scale must be a finite number above 0; re-quantize the model")


def check_single_producers(model, path):
    """Every tensor is made once: by one node, or given as a graph input or
    an initializer (the checker's SSA rule, also for the integer dialects,
    whose custom ops keep them from the full checker)."""
    made = {i.name: "an initializer" for i in model.graph.initializer}
    for i in model.graph.input:
        made.setdefault(i.name, "a graph input")
    for node in model.graph.node:
        for out in node.output:
            if not out:
                continue
            if out in made:
                raise FrontendError(path, f"node {node.name!r} ({node.op_type}): tensor {out!r} is also made by "
                                    f"{made[out]}", "each tensor has one producer; re-export the model")
            made[out] = f"node {node.name!r}"


def check_onnx(model, path):
    """The checker in full mode and the scales."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as err:
        raise FrontendError(path, f"ONNX checker: {_first_line(err)}", "re-export the model") from None
    check_scales(model, path)


def ort_refusal(model, path):
    """A FrontendError when ONNX Runtime refuses to load the model or to run
    it once on zeros (some refusals, a zero point of the wrong length or an
    axis out of range, only show when a node runs); None when it accepts."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 4   # its refusal is our one line; nothing of it on stderr
    # ORT's default optimizations, as users (and golden.ortcheck) run it:
    # some refusals only show once it fuses QDQ into QLinear ops
    try:
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        feeds = {}
        for inp in session.get_inputs():
            dtype = _ORT_TYPES.get(inp.type)
            if dtype is None:
                return FrontendError(path, f"input {inp.name!r} has type {inp.type}",
                                     "tessera takes float or 8-bit integer inputs")
            feeds[inp.name] = np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in inp.shape], dtype)
        run = ort.RunOptions()
        run.log_severity_level = 4
        session.run(None, feeds, run)
    except Exception as err:
        return FrontendError(path, f"ONNX Runtime refuses the model: {_ort_reason(err)}",
                             "fix or re-export the model; tessera builds only models ONNX Runtime can run")
    return None


# attribute name -> the AttributeProto types a reader of the integer dialects
# accepts: window geometry lists of ints, flags and axes ints, numeric
# scalars as a float, an int or a one-element tensor (Deeploy writes
# RequantShift's as tensors and Pad's value as an int)
_INTS = {"kernel_shape", "strides", "dilations", "pads", "axes", "perm", "shape"}
_INT = {"group", "axis", "to", "transA", "transB", "ceil_mode", "keepdims", "count_include_pad",
        "storage_order"}
_SCALAR = {"alpha", "beta", "min", "max", "div", "n_levels", "n_levels_out", "signed", "value"}
_STRING = {"mode", "auto_pad"}
_AP = onnx.AttributeProto


def check_attributes(model, path):
    """Every attribute the integer dialects' parsers read holds a value of
    the kind they read (the full checker does this for the standard
    dialects; these graphs' custom ops keep them from it)."""
    for node in model.graph.node:
        for a in node.attribute:
            where = f"node {node.name!r} ({node.op_type}): attribute {a.name!r}"
            try:
                value = onnx.helper.get_attribute_value(a)
            except Exception:
                value = None
            if value is None:
                raise FrontendError(path, f"{where} has no value of a known type", "re-export the model")
            if a.name == "value" and node.op_type == "Constant":
                continue
            want = (("INTS", a.type == _AP.INTS) if a.name in _INTS else
                    ("INT", a.type == _AP.INT) if a.name in _INT else
                    ("STRING", a.type == _AP.STRING) if a.name in _STRING else
                    ("a number", a.type in (_AP.FLOAT, _AP.INT) or a.type == _AP.TENSOR and _one_number(a.t))
                    if a.name in _SCALAR else (None, True))
            if not want[1]:
                raise FrontendError(path, f"{where} has type {_AP.AttributeType.Name(a.type)}, expected {want[0]}",
                                    "re-export the model")


def _one_number(t):
    try:
        arr = numpy_helper.to_array(t)
    except Exception:
        return False
    return arr.size == 1 and arr.dtype.kind in "biuf"


# custom ops of the integer dialects, and Deeploy's Pad (the opset-2 form,
# `pads` an attribute, under later opsets): (inputs, outputs)
_CUSTOM_ARITY = {"RequantShift": ((3, 3), (1, 1)), "Pad": ((1, 3), (1, 1))}


def check_arity(model, path):
    """Every node has as many inputs and outputs as its op takes (the ONNX
    schema of the model's opset; RequantShift three and one): the parsers
    index them. An op without a schema is left to the parser to name."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    for node in model.graph.node:
        if node.op_type in _CUSTOM_ARITY:
            (lo_in, hi_in), (lo_out, hi_out) = _CUSTOM_ARITY[node.op_type]
        else:
            try:
                schema = onnx.defs.get_schema(node.op_type, opset or onnx.defs.onnx_opset_version(), "")
            except Exception:
                continue
            lo_in, hi_in, lo_out, hi_out = schema.min_input, schema.max_input, schema.min_output, schema.max_output
        n_in = len(node.input)
        n_out = len([o for o in node.output if o])
        if not lo_in <= n_in <= hi_in or not lo_out <= n_out <= hi_out:
            raise FrontendError(path, f"node {node.name!r} ({node.op_type}): {n_in} inputs and {n_out} outputs",
                                f"{node.op_type} takes {lo_in}..{hi_in} inputs and {lo_out}..{hi_out} outputs; "
                                "re-export the model")


def check_text(model, path):
    """Every name in the graph is UTF-8 text (protobuf hands back bytes for
    a string that is not, which no later step can print or write) without
    a NUL (the weights' archive cuts a name at it)."""
    g = model.graph
    named = [("node", n.name) for n in g.node] + [("op type", n.op_type) for n in g.node]
    named += [("tensor", t) for n in g.node for t in list(n.input) + list(n.output)]
    named += [("attribute", a.name) for n in g.node for a in n.attribute]
    named += [("tensor", i.name) for i in list(g.initializer) + list(g.input) + list(g.output) + list(g.value_info)]
    for kind, name in named:
        if not isinstance(name, str):
            raise FrontendError(path, f"a {kind} name is not UTF-8 text ({bytes(name)[:40]!r})", "re-export the model")
        if "\x00" in name:   # no file, archive entry or C string can hold it
            raise FrontendError(path, f"the {kind} name {name[:60]!r} holds a NUL character", "rename it; re-export the model")


def check_initializers(model, path):
    """Every initializer and Constant value is readable: its data matches
    its type and dims (the full checker's job for the standard dialects)."""
    for init in model.graph.initializer:
        _array(init, path)
    for node in model.graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    _array(a.t, path)


# ---- the checks every ONNX dialect shares (ONNX Runtime's own rules) -------------

# below opset 7, Add/Mul/Sub broadcast only with a `broadcast` attribute
# (the legacy semantics no parser of tessera reads)
MIN_OPSET = 7
# graph input element types a dialect's parser takes (Deeploy's kernel
# tests feed int32 tensors; the standard dialects quantize float or take
# 8-bit integers)
INPUT_TYPES = {"standard": ("FLOAT", "INT8", "UINT8"), "integer": ("FLOAT", "INT8", "UINT8", "INT32")}
# the integer dialects' own operators, which no ONNX schema describes; and
# Deeploy's Pad with the opset-2 `pads` attribute under later opsets
CUSTOM_OPS = {"RequantShift", "iSoftmax", "ITAMax", "ITAPartialMax", "iLayerNorm", "iGELU", "IntegerMean"}
CUSTOM_DOMAIN = "tessera.integer"


def _ort_accepts(ir_version, opset):
    import onnxruntime as ort
    from onnx import helper
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", [x], [y]),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception:
        return False
    return True


_BOUNDS = {}


def ort_bounds():
    """(highest ir_version, highest default-domain opset) the installed ONNX
    Runtime loads, probed once per process (a newer ONNX library writes
    versions ORT does not run yet)."""
    if not _BOUNDS:
        def highest(accepts, lo, hi):   # accepts(lo) holds; the largest v <= hi with accepts(v)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if accepts(mid) else (lo, mid - 1)
            return lo
        ir = highest(lambda v: _ort_accepts(v, MIN_OPSET), 3, 64)
        _BOUNDS["v"] = ir, highest(lambda v: _ort_accepts(ir, v), MIN_OPSET, 256)
    return _BOUNDS["v"]


def check_versions(model, path):
    """ir_version and the default-domain opset within what ONNX Runtime runs
    (and the opset at least MIN_OPSET)."""
    import onnxruntime as ort
    max_ir, max_opset = ort_bounds()
    fix = f"export with ir_version 3..{max_ir} and opset {MIN_OPSET}..{max_opset} (ONNX Runtime {ort.__version__})"
    if not 3 <= model.ir_version <= max_ir:
        raise FrontendError(path, f"ir_version {model.ir_version}: ONNX Runtime runs 3..{max_ir}", fix)
    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not opsets:
        raise FrontendError(path, "no opset of the default ONNX domain", fix)
    if not MIN_OPSET <= opsets[0] <= max_opset:
        raise FrontendError(path, f"opset {opsets[0]}: tessera reads {MIN_OPSET}..{max_opset}", fix)


def check_input_types(model, path, kind):
    """Every graph input (not an initializer) is a tensor of a type the
    dialect's parser takes."""
    allowed = INPUT_TYPES[kind]
    inits = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        t = inp.type
        elem = t.tensor_type.elem_type if t.HasField("tensor_type") else None
        name = onnx.TensorProto.DataType.Name(elem) if elem in onnx.TensorProto.DataType.values() else str(elem)
        if name not in allowed:
            raise FrontendError(path, f"graph input {inp.name!r} has type {name if elem is not None else 'not a tensor'}",
                                f"tessera takes {', '.join(a.lower() for a in allowed)} inputs")


def check_pads(model, path):
    """auto_pad other than NOTSET beside explicit pads (ONNX Runtime refuses
    the pair; the integer parsers would pick one silently)."""
    for node in model.graph.node:
        a = {x.name: x for x in node.attribute}
        auto = a["auto_pad"].s.decode("utf-8", "replace") if "auto_pad" in a else "NOTSET"
        if auto not in ("NOTSET", "") and "pads" in a:
            raise FrontendError(path, f"node {node.name!r} ({node.op_type}): auto_pad {auto} and explicit pads",
                                "give either auto_pad or pads; re-export the model")


def check_typed(model, path):
    """The checker in full mode (types and strict shape inference, as ONNX
    Runtime applies them) on a copy whose custom operators sit in their own
    domain, where the checker leaves them alone: every standard node of an
    integer-dialect graph is still checked against its schema."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in copy.graph.node:
        if node.op_type in CUSTOM_OPS or (node.op_type == "Pad" and any(a.name == "pads" for a in node.attribute)):
            node.domain = CUSTOM_DOMAIN
    if not any(o.domain == CUSTOM_DOMAIN for o in copy.opset_import):
        copy.opset_import.append(onnx.helper.make_opsetid(CUSTOM_DOMAIN, 1))
    try:
        onnx.checker.check_model(copy, full_check=True)
    except Exception as err:
        raise FrontendError(path, f"ONNX checker: {_first_line(err)}", "re-export the model") from None


def check_sizes(model, path):
    """A memory bomb (a tensor, or all of them together, declared larger
    than any target's 32-bit address space: graph inputs, outputs, the
    intermediates shape inference annotated, initializers) is refused from
    the declared dims alone, before anything (ONNX Runtime's run on zeros,
    the golden model) allocates it. The sum is a bound no MCU network
    comes near (a VGG-16 at 224x224 declares about 100 MB) and catches an
    input enlarged under a network, whose own size alone may fit."""
    from ..config.target import ADDRESS_SPACE
    g = model.graph
    declared = [(i.name, list(i.dims), i.data_type) for i in g.initializer]
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            declared.append((vi.name, [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim],
                             tt.elem_type))
    total, seen = 0, set()
    for name, dims, elem in declared:
        if any(d < 0 for d in dims) or name in seen:
            continue   # the checker names a negative dimension
        seen.add(name)
        try:
            itemsize = onnx.helper.tensor_dtype_to_np_dtype(elem).itemsize
        except Exception:
            itemsize = 1
        size = int(np.prod([int(d) for d in dims], dtype=object)) * itemsize if dims else itemsize
        total += size
        if size > ADDRESS_SPACE:
            raise FrontendError(path, f"tensor {name!r} declares shape {dims} ({size} bytes), more than any "
                                f"target's {ADDRESS_SPACE >> 30} GiB address space", "check the model's shapes")
    if total > ADDRESS_SPACE:
        raise FrontendError(path, f"the model's tensors declare {total} bytes in all, more than any target's "
                            f"{ADDRESS_SPACE >> 30} GiB address space", "check the model's input shape")
