"""The golden model of a .tflite network against the TFLite interpreter.

The interpreter (ai-edge-litert, pinned in requirements.txt) runs the model
on the golden input with experimental_preserve_all_tensors, so every
intermediate tensor can be read, and with TFLite's reference kernels
(OpResolverType.BUILTIN_REF). Why those: they are the integer recipes
TFLite Micro runs on microcontrollers; the interpreter's default
optimized kernels and its XNNPACK delegate round some convolutions
differently from them (measured: they disagree with each other on the
MLPerf Tiny ResNet-8 and autoencoder), so "the interpreter" has to name
its kernels to be a fixed reference.

Every IR tensor is named t<index> after its TFLite tensor (frontend.tflite),
so each one is compared, element for element, with the interpreter's:
equal means 0 LSB of difference.
"""

import re

import numpy as np

from ..errors import TesseraError

RESOLVER = "BUILTIN_REF"


class TfliteMismatch(TesseraError):
    """The golden model disagrees with the TFLite interpreter."""


def _interpreter(path):
    try:
        import ai_edge_litert
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        raise TesseraError(path, "the TFLite interpreter (ai-edge-litert) is not installed",
                           "run ./scons (it installs requirements.txt)") from None
    from .tflite_repair import repair

    interp = Interpreter(model_content=repair(path)[0], experimental_preserve_all_tensors=True,
                         experimental_op_resolver_type=getattr(OpResolverType, RESOLVER))
    interp.allocate_tensors()
    version = getattr(ai_edge_litert, "__version__", None)
    if version is None:
        from importlib.metadata import version as _v
        version = _v("ai-edge-litert")
    return interp, f"ai-edge-litert {version}"


def _feed(interp, graph, inputs, path):
    """Set every interpreter input from the golden input: an int8 input is
    the IR tensor t<index>; a float input (quantized by the model's first
    QUANTIZE) gets the real values that quantize back to the golden int8."""
    ops = {}
    for op in interp._get_ops_details():
        for t in op["inputs"]:
            ops.setdefault(int(t), []).append(op)
    for d in interp.get_input_details():
        idx = int(d["index"])
        name = f"t{idx}"
        if name in graph.tensors:
            # stored values (a uint8 input less 128) back to the model's own
            value = np.asarray(inputs[name]).astype(np.int64) + graph.tensor(name).shift
            interp.set_tensor(idx, value.astype(d["dtype"]).reshape(d["shape"]))
            continue
        quant = [op for op in ops.get(idx, []) if op["op_name"] == "QUANTIZE"]
        if len(quant) != 1 or f"t{int(quant[0]['outputs'][0])}" not in graph.tensors:
            raise TesseraError(path, f"interpreter input {idx} ({d['name']}) has no golden tensor")
        t = graph.tensor(f"t{int(quant[0]['outputs'][0])}")
        q = np.asarray(inputs[t.name]).astype(np.float32) + t.shift
        real = (q - np.float32(t.zero_point)) * np.float32(t.scale)
        interp.set_tensor(idx, real.astype(np.float32).reshape(d["shape"]))


def compare(path, graph, values, inputs, weights=None):
    """Run the interpreter; return the verdict dict (interpreter, kernels,
    equal, tensors compared, and the first differing tensor if any). With
    the weights, also every tensor inside recognised unrolled recurrences."""
    interp, which = _interpreter(path)
    _feed(interp, graph, inputs, path)
    interp.invoke()
    names = {int(d["index"]): d["name"] for d in interp.get_tensor_details()}
    order = list(graph.inputs) + [layer.output for layer in graph.layers]
    inner = _recurrent_tensors(graph, values, weights) if weights is not None else {}
    order += sorted(inner, key=lambda n: int(n[1:]))
    rows, first = [], None
    for name in order:
        if not re.fullmatch(r"t\d+", name):
            continue   # a tensor of tessera's own (a pooled source before data movement)
        idx = int(name[1:])
        ref = np.asarray(interp.get_tensor(idx)).reshape(-1).astype(np.int64)
        got = (inner[name] if name in inner
               else np.asarray(values[name]).reshape(-1).astype(np.int64) + graph.tensor(name).shift)
        equal = ref.shape == got.shape and bool(np.array_equal(ref, got))
        row = {"tensor": name, "tflite_name": names.get(idx, ""), "elements": int(ref.size), "equal": equal}
        if not equal and ref.shape == got.shape:
            bad = np.nonzero(ref != got)[0]
            row["first"] = {"index": int(bad[0]), "golden": int(got[bad[0]]), "tflite": int(ref[bad[0]]),
                            "mismatches": int(bad.size), "max_lsb": int(np.abs(ref - got).max())}
        rows.append(row)
        if not equal and first is None:
            first = row
    from ..util.top import top

    outputs = [{"tensor": name, "top": top(interp.get_tensor(int(name[1:])))} for name in graph.outputs]
    return {"interpreter": which, "kernels": RESOLVER, "equal": first is None,
            "tensors": len(rows), "compared": rows, "outputs": outputs}


def _recurrent_tensors(graph, values, weights):
    """{t<index>: values} of every step's every op inside the recognised
    unrolled recurrences (frontend.tflite_unrolled): the golden model's
    trace of the layer, each result the TFLite tensor it stands for."""
    from .recurrent import ops_cell, unpack

    out = {}
    for layer in graph.layers:
        rnn = layer.rnn or {}
        if rnn.get("cell") != "ops" or not all("tensors" in op for op in rnn["body"]):
            continue
        trace = {}
        x = np.asarray(values[layer.inputs[0]]).reshape(rnn["steps"], rnn["n_input"])
        ops_cell(x, rnn, unpack(rnn, weights[layer.weights]), trace)
        for (k, t), v in trace.items():
            idx = rnn["body"][k]["tensors"][t]
            if idx >= 0:
                out[f"t{idx}"] = np.asarray(v, dtype=np.int64).reshape(-1)
    return out


def check(model_name, path, result):
    """One line naming the first tensor that differs."""
    for row in result["compared"]:
        if row["equal"]:
            continue
        f = row.get("first")
        what = (f"element {f['index']} is {f['golden']}, the interpreter's {f['tflite']} "
                f"({f['mismatches']} of {row['elements']} differ)") if f else "shapes differ"
        raise TfliteMismatch(model_name, f"golden model disagrees with the TFLite interpreter "
                             f"({result['interpreter']}, {result['kernels']} kernels) at tensor "
                             f"{row['tensor'][1:]} '{row['tflite_name']}': {what}",
                             f"a bug in tessera's TFLite import: report it with {path}")
