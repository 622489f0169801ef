"""Compare two builds: per layer, what changed between report A and report B
(tile shape, tiles, L1 bytes, DMA bytes per engine, measured and estimated
counts), and per memory level the peak. Prints a table and writes an HTML
diff (self-contained, like report.html).

    tessera diff A B [--html diff.html]          (tessera.cli.diff)

A and B: report.json files, or build directories holding one
(generated/<target>/<model>). Layers are matched by name; a layer only one
side has is shown with the other side empty. Exit status 0 (a diff is not
an error); a missing or unreadable report is a one-line error, status 2.
"""

import json
import os
from html import escape

from ..errors import TesseraError

COUNT_KEYS = ("instructions", "cycles", "host_ns")


def load(arg):
    path = os.path.join(arg, "report.json") if os.path.isdir(arg) else arg
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise TesseraError(path, f"cannot read a report.json ({e.__class__.__name__})",
                           "pass a report.json or a build directory (generated/<target>/<model>)") from None
    return path, data


def tile_of(layer):
    if not layer.get("tiled"):
        return "whole"
    t = layer["tile"]
    return f"{t['h']}x{t['w']}x{t['c']}"


def metrics(layer, engines):
    """{column: value} of one layer (None where the report lacks it)."""
    out = {"tile": tile_of(layer), "tiles": layer.get("n_tiles"), "L1 bytes": layer.get("l1_bytes")}
    for e in engines:
        out[f"DMA {e}"] = layer.get("dma_bytes", {}).get(e)
    for k in COUNT_KEYS:
        if k in layer:
            out[k] = layer[k]
    if "estimate" in layer.get("cost", {}):
        out["estimate"] = layer["cost"]["estimate"]
    return out


def diff(a, b):
    """(columns, rows, memory rows): rows are (name, {column: (a, b)})."""
    engines = sorted(set(a["totals"].get("dma_bytes", {})) | set(b["totals"].get("dma_bytes", {})))
    la = {l["name"]: l for l in a["layers"]}
    lb = {l["name"]: l for l in b["layers"]}
    names = [l["name"] for l in a["layers"]] + [l["name"] for l in b["layers"] if l["name"] not in la]
    rows, columns = [], []
    for name in names:
        ma = metrics(la[name], engines) if name in la else {}
        mb = metrics(lb[name], engines) if name in lb else {}
        for k in list(ma) + list(mb):
            if k not in columns:
                columns.append(k)
        rows.append((name, {k: (ma.get(k), mb.get(k)) for k in columns}))
    rows = [(n, {k: cells.get(k, (None, None)) for k in columns}) for n, cells in rows]
    memory = []
    for level in sorted(set(a.get("memory", {})) | set(b.get("memory", {}))):
        pa = a.get("memory", {}).get(level, {}).get("peak")
        pb = b.get("memory", {}).get(level, {}).get("peak")
        memory.append((level, pa, pb))
    return columns, rows, memory


def cell(pair):
    """'a', or 'a -> b (+d)' when it changed."""
    x, y = pair
    if x == y:
        return "" if x is None else str(x)
    if isinstance(x, int) and isinstance(y, int):
        d = y - x
        rel = f", {100 * d / x:+.0f}%" if x else ""
        return f"{x} -> {y} ({d:+d}{rel})"
    return f"{'-' if x is None else x} -> {'-' if y is None else y}"


def title(data):
    return f"{data['model']} on {data['target']} ({data['verdict']})"


def print_table(pa, a, pb, b, columns, rows, memory, console=None):
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=max(160, 24 + 22 * len(columns)))
    table = Table(title=f"A: {pa}  {title(a)}\nB: {pb}  {title(b)}")
    table.add_column("layer")
    for c in columns:
        table.add_column(c, justify="right")
    changed = 0
    for name, cells in rows:
        moved = any(x != y for x, y in cells.values())
        changed += moved
        style = "bold" if moved else "dim"
        table.add_row(name, *(cell(cells[c]) for c in columns), style=style)
    console.print(table)
    for level, x, y in memory:
        console.print(f"{level} peak: {cell((x, y))}")
    console.print(f"{changed} of {len(rows)} layers differ")


def write_html(path, pa, a, pb, b, columns, rows, memory):
    css = ("body{font:13px system-ui,sans-serif;margin:24px} table{border-collapse:collapse;font-size:12px}"
           "td,th{border:1px solid #ddd;padding:2px 6px;text-align:right} td.l{text-align:left}"
           "td.up{background:#fde0dc} td.down{background:#dcf2dc} td.ch{background:#fff3c4}"
           "tr.same td{color:#888}")
    out = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>tessera diff</title><style>{css}</style>"
           f"</head><body><h1>tessera report diff</h1><p>A: {escape(pa)}: {escape(title(a))}<br>"
           f"B: {escape(pb)}: {escape(title(b))}</p><p>red: B larger, green: B smaller, yellow: changed</p>"
           "<table><tr><th>layer</th>" + "".join(f"<th>{escape(c)}</th>" for c in columns) + "</tr>"]
    for name, cells in rows:
        moved = any(x != y for x, y in cells.values())
        tds = []
        for c in columns:
            x, y = cells[c]
            cls = ""
            if x != y:
                cls = ("up" if y > x else "down") if isinstance(x, int) and isinstance(y, int) else "ch"
            tds.append(f'<td class="{cls}">{escape(cell((x, y)))}</td>')
        out.append(f'<tr class="{"changed" if moved else "same"}"><td class="l">{escape(name)}</td>{"".join(tds)}</tr>')
    out.append("</table><h2>memory peaks</h2><table><tr><th>level</th><th>A</th><th>B</th><th>change</th></tr>")
    for level, x, y in memory:
        out.append(f'<tr><td class="l">{escape(level)}</td><td>{x}</td><td>{y}</td><td>{escape(cell((x, y)))}</td></tr>')
    out.append("</table></body></html>\n")
    with open(path, "w") as f:
        f.write("".join(out))



def compare(path_a, path_b, html="report_diff.html", console=None):
    """Print the diff of two builds' reports and write it as HTML."""
    pa, a = load(path_a)
    pb, b = load(path_b)
    columns, rows, memory = diff(a, b)
    print_table(pa, a, pb, b, columns, rows, memory, console)
    write_html(html, pa, a, pb, b, columns, rows, memory)
    return html
