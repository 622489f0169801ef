"""Loading an ONNX file for lowering: checker, shape inference, and small
accessors every dialect parser uses (initializers, attributes, shapes,
consumers)."""

import os

import onnx
from onnx import numpy_helper, shape_inference

from ..errors import FrontendError


class OnnxGraph:
    """An ONNX model with the lookups the dialect parsers need."""

    def __init__(self, model, path):
        self.model = model
        self.path = path
        self.graph = model.graph
        self.opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
        self.inits = {i.name: i for i in self.graph.initializer}
        self._arrays = {}
        self.consts = {}          # outputs of Constant nodes
        for node in self.graph.node:
            if node.op_type == "Constant":
                for attr in node.attribute:
                    if attr.name == "value":
                        self.consts[node.output[0]] = numpy_helper.to_array(attr.t)
        self.producer = {}
        self.consumers = {}
        for node in self.graph.node:
            for out in node.output:
                self.producer[out] = node
            for inp in node.input:
                if inp:
                    self.consumers.setdefault(inp, []).append(node)
        self.shapes = {}
        self.dtypes = {}
        for vi in list(self.graph.value_info) + list(self.graph.input) + list(self.graph.output):
            dims = vi.type.tensor_type.shape.dim
            self.dtypes[vi.name] = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type).name \
                if vi.type.tensor_type.elem_type else None
            if vi.type.tensor_type.HasField("shape"):
                self.shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
        self.input_names = [i.name for i in self.graph.input if i.name not in self.inits]
        self.output_names = [o.name for o in self.graph.output]

    def where(self, node):
        """How an error message names a node."""
        return f"{self.path}: node {node.name or '(unnamed)'!r} ({node.op_type})"

    def is_const(self, name):
        return name in self.inits or name in self.consts

    def array(self, name):
        """Value of an initializer or Constant output, as a NumPy array."""
        if name in self.consts:
            return self.consts[name]
        if name not in self._arrays:
            self._arrays[name] = numpy_helper.to_array(self.inits[name])
        return self._arrays[name]

    def shape(self, name):
        if name in self.inits or name in self.consts:
            return list(self.array(name).shape)
        shape = self.shapes.get(name)
        if shape is None or any(d is None for d in shape):
            raise FrontendError(self.path, f"tensor {name!r} has no static shape after shape inference",
                                "export the model with fixed input shapes (batch 1)")
        return shape


VIEW_OPS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity")


def input_quantizers(g, name):
    """(QuantizeLinear nodes, view nodes passed) for a float graph input:
    ONNX Runtime may put a Flatten before the input's QuantizeLinear."""
    qs, views = [], []
    users = g.consumers.get(name, [])
    for u in users:
        if u.op_type == "QuantizeLinear":
            qs.append(u)
        elif u.op_type in VIEW_OPS:
            views.append(u)
            more_q, more_v = input_quantizers(g, u.output[0])
            qs += more_q
            views += more_v
        else:
            raise FrontendError(g.where(u), f"graph input {name!r} reaches it unquantized",
                                "the input must feed QuantizeLinear nodes")
    if not qs:
        raise FrontendError(g.path, f"graph input {name!r} is not quantized",
                            "the input must feed QuantizeLinear nodes")
    return qs, views


def attrs(node):
    """A node's attributes as plain Python values."""
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def read_model(path, load_external_data=True):
    """The ModelProto in an ONNX file; a missing, unreadable or empty file
    (or missing external data) is one line."""
    try:
        model = onnx.load(path, load_external_data=load_external_data)
    except FileNotFoundError:
        raise FrontendError(path, "file not found") from None
    except onnx.checker.ValidationError as err:
        # the tensors kept beside the model (external data) are missing
        first = (str(err).strip().splitlines() or ["invalid"])[0]
        raise FrontendError(path, f"external data: {first}",
                            "keep the model's external-data files beside it, or save it with the weights inside") from None
    except ValueError as err:
        # the graph parsed; an external-data file is shorter than a tensor it holds
        first = (str(err).strip().splitlines() or ["invalid"])[0]
        if "external data" not in first.lower():
            raise FrontendError(path, f"not a readable ONNX model ({first[:200]})",
                                "check that the file is an .onnx export and not truncated") from None
        raise FrontendError(path, f"external data: {first}",
                            "keep the model's external-data files beside it, whole, as the export wrote them") from None
    except Exception as err:  # protobuf's DecodeError and friends
        raise FrontendError(path, f"not a readable ONNX model ({type(err).__name__})",
                            "check that the file is an .onnx export and not truncated") from None
    if not model.graph.node and not model.opset_import:
        raise FrontendError(path, "not a readable ONNX model (empty: no graph, no opset)",
                            "check that the file is an .onnx export and not truncated")
    return model


def _stale(err):
    """Whether a checker or shape-inference error is a stored shape that
    disagrees with the inferred one (a stale value_info annotation)."""
    return "existing shape differ" in str(err) or "existing shape and inferred shape" in str(err).lower()


def load(path):
    """Read, check and shape-infer an ONNX file; errors are one line. Stale
    shape annotations of intermediate tensors (value_info that disagrees
    with what the nodes compute) are dropped, as ONNX Runtime ignores
    them: the graph's `stale_value_info` counts them."""
    model = read_model(path)
    stale = 0
    for _ in range(2):
        try:
            onnx.checker.check_model(model)
            shape_inference.infer_shapes(model, strict_mode=True)
            break
        except Exception as err:   # checked below, one line each
            sizes = [d.dim_value for vi in model.graph.input for d in vi.type.tensor_type.shape.dim
                     if d.HasField("dim_value")]
            # only where the graph itself is sound (an input of 0 values is the input's fault)
            if not _stale(err) or not model.graph.value_info or any(v <= 0 for v in sizes):
                break
            stale = len(model.graph.value_info)
            del model.graph.value_info[:]
    try:
        onnx.checker.check_model(model)
    except UnicodeError:
        raise FrontendError(path, "a name or string in the graph is not UTF-8 text",
                            "re-export the model") from None
    except onnx.checker.ValidationError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "invalid"
        # custom ops (RequantShift) are not known to the checker; they are
        # validated by their dialect parser instead
        if "No Op registered" not in str(err) and "not a registered" not in str(err):
            raise FrontendError(path, f"ONNX checker: {first}", "re-export the model") from None
    try:
        model = shape_inference.infer_shapes(model)
    except Exception as err:
        first = str(err).strip().splitlines()[0]
        raise FrontendError(path, f"shape inference failed: {first}",
                            "export with static shapes") from None
    g = checked_graph(model, path)
    g.stale_value_info = stale
    return g


def checked_graph(model, path):
    """OnnxGraph of `model`, every constant read once: a tensor whose type is
    not one ONNX defines, or whose data does not fill its declared type and
    shape, is one line (the checker passes some of these in the integer
    dialects' graphs of custom operators)."""
    try:
        g = OnnxGraph(model, path)
    except (KeyError, TypeError, ValueError) as err:
        raise FrontendError(path, f"a tensor's type or data is not valid ONNX ({err})",
                            "re-export the model") from None
    for name in g.inits:
        try:
            g.array(name)
        except (KeyError, TypeError, ValueError) as err:
            raise FrontendError(path, f"initializer {name!r}: its data does not match its type and shape ({err})",
                                "re-export the model") from None
    return g


def external_files(path):
    """The external-data files the ONNX file at `path` keeps its tensors in
    (absolute, sorted; none for a model with its weights inside): the
    import reads them, so they belong to what a build depends on."""
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:
        return []   # the import names what is wrong with the file
    tensors = list(model.graph.initializer)
    tensors += [a.t for n in model.graph.node for a in n.attribute if a.type == onnx.AttributeProto.TENSOR]
    folder = os.path.dirname(os.path.abspath(path))
    found = set()
    for t in tensors:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            location = {e.key: e.value for e in t.external_data}.get("location")
            if location:
                found.add(os.path.normpath(os.path.join(folder, location)))
    return sorted(found)
