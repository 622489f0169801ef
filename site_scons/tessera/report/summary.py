"""The network summary: per layer op, shapes, MACs, weight and activation
bytes, and the totals. Plain data first (for report.json), rendering second."""

from .. import ir
from .console import make_console


def layer_rows(graph, weights):
    rows = []
    for layer in graph.layers:
        out = graph.tensor(layer.output)
        w = weights.get(layer.weights) if layer.weights else None
        b = weights.get(layer.bias) if layer.bias else None
        rows.append({
            "name": layer.name,
            "op": layer.op,
            "in_shape": [graph.tensor(n).shape for n in layer.inputs],
            "out_shape": out.shape,
            "out_dtype": out.dtype,
            "macs": ir.macs(layer, graph),
            "params": (0 if w is None else int(w.size)) + (0 if b is None else int(b.size)),
            "weight_bytes": (0 if w is None else int(w.nbytes)) + (0 if b is None else int(b.nbytes)),
            "activation_bytes": sum(graph.tensor(n).nbytes for n in layer.inputs) + out.nbytes,
        })
    return rows


def totals(rows):
    return {
        "layers": len(rows),
        "macs": sum(r["macs"] for r in rows),
        "params": sum(r["params"] for r in rows),
        "weight_bytes": sum(r["weight_bytes"] for r in rows),
        "peak_activation_bytes": max((r["activation_bytes"] for r in rows), default=0),
    }


def _shape(s):
    return "x".join(str(d) for d in s)


def _si(n):
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return str(n)


def intake(graph):
    """What normalization decided (tessera.frontend.normalize), with the
    output's quantization when float ops were left to the application."""
    notes = dict(graph.notes or {})
    if notes.get("float_tail"):
        out = graph.tensor(graph.outputs[0])
        notes["output"] = {"tensor": out.name, "dtype": out.source_dtype, "scale": out.scale,
                           "zero_point": out.zero_point}
    return notes


def render(rows, tot, title, console=None):
    """Print the summary table with rich."""
    from rich.table import Table

    console = console or make_console()
    table = Table(title=title, show_footer=True)
    table.add_column("#", justify="right", footer="")
    table.add_column("layer", footer="total")
    table.add_column("op")
    table.add_column("input", justify="right")
    table.add_column("output", justify="right")
    table.add_column("MACs", justify="right", footer=_si(tot["macs"]))
    table.add_column("params", justify="right", footer=_si(tot["params"]))
    table.add_column("weight B", justify="right", footer=str(tot["weight_bytes"]))
    table.add_column("act. B", justify="right", footer=f"peak {tot['peak_activation_bytes']}")
    for i, r in enumerate(rows):
        table.add_row(str(i), r["name"], r["op"], " + ".join(_shape(s) for s in r["in_shape"]),
                      _shape(r["out_shape"]) + (" i32" if r["out_dtype"] == "int32" else ""),
                      str(r["macs"]), str(r["params"]), str(r["weight_bytes"]), str(r["activation_bytes"]))
    console.print(table)


def outputs(graph, golden, reference=(None, {}), k=5):
    """Each graph output's top values, as the firmware computed them (it
    equals the golden model bit for bit when the verdict passes): its type,
    shape, scale and zero point, and [[index, value, real value]] of the
    k largest (index into the output in the model's own order of its
    values; a classifier's class). `reference`: (who, {tensor: their top
    [[index, value]]}) of the runtime that checked the golden model on the
    same input: beside ours, with whether the top index and the order are
    the same and how far their values are from ours at their indices (ONNX
    Runtime requantizes in float, within 1 LSB a layer, so its values may
    drift by a few LSB through a network; the TFLite interpreter is
    exact)."""
    from ..util.top import model_values, top

    by, theirs = reference
    out = []
    for name in graph.outputs:
        t = graph.tensor(name)
        values = model_values(graph, name, golden[name]).reshape(-1)
        row = {"tensor": name, "dtype": t.source_dtype, "shape": list(t.source_shape or t.shape),
               "scale": t.scale, "zero_point": t.zero_point,
               "top": [[i, v, None if t.scale is None else round(t.scale * (v - (t.zero_point or 0)), 6)]
                       for i, v in top(values, k)]}
        if name in theirs:
            their = theirs[name]
            row["reference"] = {"by": by, "top": their,
                                "same_top": bool(their) and their[0][0] == row["top"][0][0],
                                "same_order": [i for i, _ in their] == [i for i, _, _ in row["top"]],
                                "max_lsb": max((abs(int(values[i]) - v) for i, v in their), default=0)}
        out.append(row)
    return out
