"""Reference data from other toolchains, and the check of tessera's golden
model against it.

    ref = load({"kind": "dory" | "deeploy", "dir": folder})
    types = ref.input_types(onnx_input_names)       # for import_onnx
    inputs = ref.golden_inputs(graph)               # for tessera.golden.run
    rows = ref.compare(graph, values)               # one row per compared tensor
    check(name, ref, rows)                          # raises on the first difference

DORY (input.txt, out_layerN.txt, HWC, or CHW when the header says
[C, H, W]): every layer is compared element by element. DORY
numbers its fused layers in graph order (a Conv/Gemm/MatMul with its
batch-norm, requantization and preceding Pad; a pool; a residual Add);
tessera's NEMO frontend makes exactly one layer of each, in the same
order, so out_layerN is tessera's layer N (some DORY versions write a
residual Add and the requantization chain after it as one file: then
fewer files, each such pair compared at the chain's output). The files' shapes are checked
against the layers' so a different numbering cannot pass unnoticed.

Deeploy (inputs.npz, outputs.npz, NCHW as in the ONNX graph): the graph
outputs are compared. Entries follow the graph's input and output order,
named after the tensors or arr_0, arr_1, ...; extra input entries repeat
initializers and are ignored.

Values are compared in the reference's own terms (source values: uint8 as
0..255) and a difference is reported at its index in the reference's
layout.
"""

import os

import numpy as np

from ...errors import TesseraError
from ...frontend.layout import from_hwc, to_hwc
from . import dory

KINDS = ("dory", "deeploy")
RANGES = {"int8": (-128, 127), "uint8": (0, 255)}


class ReferenceMismatch(TesseraError):
    """tessera's golden model disagrees with a peer toolchain's outputs."""


def load(cfg):
    kind, folder = cfg["kind"], cfg["dir"]
    if kind == "dory":
        ref = DoryReference(folder)
    elif kind == "deeploy":
        ref = DeeployReference(folder)
    else:
        raise TesseraError(folder, f"reference kind {kind!r}", f"use one of {', '.join(KINDS)}")
    # every file the steps read (and whose digest keys them) is there
    for path in ref.files():
        if not os.path.isfile(path):
            raise TesseraError(path, "file not found", f"a {kind} reference folder holds "
                               + ("input.txt and out_layerN.txt" if kind == "dory" else "inputs.npz and outputs.npz"))
    return ref


def _dtype_for(values, prefer):
    """8-bit dtype holding the values, `prefer` first; else int32."""
    lo, hi = int(values.min(initial=0)), int(values.max(initial=0))
    order = [prefer] + [d for d in ("int8", "uint8") if d != prefer]
    for d in order:
        if RANGES[d][0] <= lo and hi <= RANGES[d][1]:
            return d
    return "int32"


def _first_difference(got, expected):
    diff = np.flatnonzero(got.reshape(-1) != expected.reshape(-1))
    if not diff.size:
        return None
    i = int(diff[0])
    return {"index": [int(v) for v in np.unravel_index(i, expected.shape)],
            "got": int(got.reshape(-1)[i]), "expected": int(expected.reshape(-1)[i]),
            "mismatches": int(diff.size)}


def _row(name, tensor, got, expected, layer=None):
    row = {"name": name, "tensor": tensor, "elements": int(expected.size)}
    if layer is not None:
        row["layer"] = layer
    if got.shape != expected.shape:
        row.update(equal=False, error=f"shape {list(got.shape)}, reference {list(expected.shape)}")
        return row
    first = _first_difference(got, expected)
    row["equal"] = first is None
    if first is not None:
        row["first"] = first
    return row


def _stored(values, t, path):
    """Reference (source) input values -> the stored array golden.run takes."""
    lo, hi = RANGES.get(t.source_dtype, (-(1 << 31), (1 << 31) - 1))
    if values.size and (values.min() < lo or values.max() > hi):
        raise TesseraError(path, f"input {t.name!r} spans [{values.min()}, {values.max()}], "
                           f"outside the network's {t.source_dtype} input")
    return (values - t.shift).astype(np.int8 if t.dtype == "int8" else np.int32)


def _source(values, tensor):
    """Stored values -> source values (uint8 stored shifted by -128)."""
    return np.asarray(values).astype(np.int64) + tensor.shift


class DoryReference:
    kind = "dory"

    def __init__(self, folder):
        self.folder = folder
        self.input_path = os.path.join(folder, "input.txt")
        self.layers = dory.layer_files(folder)

    def files(self):
        return [self.input_path] + [p for _, p in self.layers]

    def _input(self):
        return dory.read_txt(self.input_path)[2]

    def input_types(self, names):
        if len(names) != 1:
            raise TesseraError(self.folder, f"a DORY reference has one input.txt, the graph {len(names)} inputs")
        return {names[0]: _dtype_for(self._input(), "uint8")}

    def golden_inputs(self, graph):
        name = graph.inputs[0]
        t = graph.tensor(name)
        _, shape, values = dory.read_txt(self.input_path)
        if values.size != t.size:
            raise TesseraError(self.input_path, f"{values.size} values, the network's input has {t.size}")
        hwc = dory.as_hwc(values, shape, t.shape) if shape is None or len(shape) > 1 else None
        return {name: _stored(values.reshape(t.shape) if hwc is None else hwc, t, self.input_path)}

    def _expected(self, path, t):
        """(label, expected source values as [H, W, C], None) or (label,
        None, why not) of one out_layerN file."""
        label, shape, values = dory.read_txt(path)
        if shape is not None and len(shape) == 3 and dory.layout(shape, t.shape) is None:
            return label, None, f"DORY's shape {shape}, tessera's {t.shape}"
        if values.size != t.size:
            return label, None, f"{values.size} values, tessera's output has {t.size}"
        hwc = dory.as_hwc(values, shape, t.shape) if shape is None or len(shape) == 3 else None
        return label, (values.reshape(t.shape) if hwc is None else hwc), None

    @staticmethod
    def _counted(graph):
        """The layers DORY counts (not those tessera added, Layer.added)."""
        return [layer for layer in graph.layers if not layer.added]

    def _numbered(self, graph):
        """The layers out_layer0, 1, ... hold. DORY's versions differ on a
        residual Add followed by a requantization chain of its own (tessera:
        an add then a 1x1 average pool): dronet_no_pooling writes both,
        dronet_complete and TCN_T one file, the chain's output. The file
        count tells which; anything else is a different network."""
        layers = self._counted(graph)
        if len(self.layers) == len(layers):
            return layers
        merged = {i for i in range(len(layers) - 1)
                  if layers[i].op == "add" and layers[i + 1].op == "avgpool" and layers[i + 1].kernel == [1, 1]
                  and layers[i + 1].inputs[0] == layers[i].output}
        if merged and len(self.layers) == len(layers) - len(merged):
            return [layer for i, layer in enumerate(layers) if i not in merged]
        raise ReferenceMismatch(self.folder, f"DORY has {len(self.layers)} layer outputs, tessera made "
                                f"{len(layers)} layers", "is this the reference of this network?")

    def compare(self, graph, values):
        layers = self._numbered(graph)
        rows = []
        for (n, path), layer in zip(self.layers, layers):
            t = graph.tensor(layer.output)
            label, expected, error = self._expected(path, t)
            name = f"out_layer{n} ({label})"
            if error is not None:
                rows.append({"name": name, "tensor": layer.output, "layer": layer.name,
                             "elements": int(t.size), "equal": False, "error": error})
                continue
            got = _source(values[layer.output], t).reshape(t.shape)
            rows.append(_row(name, layer.output, got, expected, layer.name))   # index [h, w, c]
        return rows


    def layer_values(self, graph):
        """Per out_layerN file, in layer order: (file's row name, tessera
        layer, expected stored values shaped like the layer's output or None,
        why not). For checking a firmware run, whose outputs are bytes."""
        layers = self._numbered(graph)
        out = []
        for (n, path), layer in zip(self.layers, layers):
            t = graph.tensor(layer.output)
            label, expected, error = self._expected(path, t)
            name = f"out_layer{n} ({label})"
            out.append((name, layer, None if expected is None else expected - t.shift, error))
        return out


class DeeployReference:
    kind = "deeploy"

    def __init__(self, folder):
        self.folder = folder
        self.input_path = os.path.join(folder, "inputs.npz")
        self.output_path = os.path.join(folder, "outputs.npz")

    def files(self):
        return [self.input_path, self.output_path]

    @staticmethod
    def _entries(path, names, what):
        """{graph tensor: array} matching npz entries by name, else by position."""
        entries = _read_npz(path)
        by_name = dict(entries)
        out = {}
        for i, name in enumerate(names):
            if name in by_name:
                out[name] = by_name[name]
            elif f"arr_{i}" in by_name:
                out[name] = by_name[f"arr_{i}"]
            elif i < len(entries) and not any(n in by_name for n in names):
                out[name] = entries[i][1]
            else:
                raise TesseraError(path, f"no entry for {what} {name!r} (entries: {list(by_name)[:6]})",
                                   "one entry per graph " + what + ", named after it or arr_0, arr_1, ...")
        for name, arr in out.items():
            _check_integers(path, name, arr)
        return {k: v.astype(np.int64) for k, v in out.items()}

    def input_types(self, names):
        arrays = self._entries(self.input_path, names, "input")
        return {n: _dtype_for(a, "int8") for n, a in arrays.items()}

    def golden_inputs(self, graph):
        arrays = self._entries(self.input_path, graph.inputs, "input")
        out = {}
        for name, arr in arrays.items():
            t = graph.tensor(name)
            if arr.size != t.size:
                raise TesseraError(self.input_path, f"input {name!r} has {arr.size} values, the network {t.size}")
            out[name] = _stored(to_hwc(arr, t.source_layout or "chw", t.shape), t, self.input_path)
        return out

    def compare(self, graph, values):
        arrays = self._entries(self.output_path, graph.outputs, "output")
        rows = []
        for name in graph.outputs:
            t = graph.tensor(name)
            expected = arrays[name]
            if expected.size != t.size:
                rows.append({"name": name, "tensor": name, "elements": int(expected.size), "equal": False,
                             "error": f"{expected.size} values, tessera's output has {t.size}"})
                continue
            got = from_hwc(_source(values[name], t), t.source_layout or "chw", expected.shape)
            rows.append(_row(name, name, got, expected, _producer(graph, name)))
        return rows


def _read_npz(path):
    """[(entry, array)] of an .npz archive; anything else (a missing file,
    text, a single .npy, a damaged zip, pickled objects) is one line."""
    fix = "Deeploy's inputs.npz/outputs.npz are numpy.savez archives of integer arrays"
    try:
        z = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise TesseraError(path, "file not found", fix) from None
    except Exception as err:
        raise TesseraError(path, f"not a NumPy .npz archive ({_first_line(err)})", fix) from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise TesseraError(path, "a single .npy array, not an .npz archive", fix)
    with z:
        try:
            return [(k, np.asarray(z[k])) for k in z.files]
        except Exception as err:
            raise TesseraError(path, f"unreadable entry ({_first_line(err)})", fix) from None


def _first_line(err):
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:160]


def _check_integers(path, name, arr):
    """Reference values are integers of at most 32 bits (the widest tensor
    a network has): no text, complex, NaN, inf or fractions."""
    if arr.dtype.kind not in "biuf":
        raise TesseraError(path, f"entry for {name!r} has dtype {arr.dtype}", "save integer arrays")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            raise TesseraError(path, f"entry for {name!r} holds {arr.reshape(-1)[np.argmax(bad.reshape(-1))]}, "
                               "not an integer", "save integer arrays")
    if arr.size and (arr.min() < -(1 << 31) or arr.max() >= 1 << 32):
        raise TesseraError(path, f"entry for {name!r} spans [{arr.min()}, {arr.max()}], beyond 32 bits")


def _producer(graph, tensor):
    for layer in graph.layers:
        if layer.output == tensor:
            return layer.name
    return None


def verdict(name, ref, rows):
    """The small JSON written next to golden.npz (no absolute paths)."""
    return {"network": name, "kind": ref.kind, "reference": os.path.basename(os.path.normpath(ref.folder)),
            "equal": all(r["equal"] for r in rows), "compared": rows}


def check(name, ref, rows):
    """Raise a one-line ReferenceMismatch naming the first differing tensor."""
    for r in rows:
        if r["equal"]:
            continue
        what = r.get("error")
        if what is None:
            f = r["first"]
            what = (f"element {f['index']} is {f['got']}, expected {f['expected']} "
                    f"({f['mismatches']} of {r['elements']} differ)")
        layer = f" (tessera layer {r['layer']})" if r.get("layer") else ""
        raise ReferenceMismatch(name, f"golden model disagrees with the {ref.kind} reference at "
                                f"{r['name']}{layer}: {what}", f"reference files in {ref.folder}")
