"""Compare two builds: per step, what changed between report A and report B
(tile, tiles, L1 bytes, DMA bytes per engine, measured and estimated
counts), and per memory level the peak, and the firmware's RAM and flash.
Prints a table and writes an HTML diff (self-contained, like report.html).

    tessera diff A B [--html diff.html]          (tessera.cli.diff)

A and B: report.json files, or build directories holding one
(generated/<target>/<model>). Steps are matched by their layers: a step
both builds ran is one row; where the builds grouped layers differently (a
pair fused in one build and apart in the other) the row covers the layers
of both groupings, names each side's steps and compares their sums, and
says which side fused them. Exit status 0 (a diff is not an error); a
missing or unreadable report is a one-line error, status 2.
"""

import json
import os
from html import escape

from ..errors import TesseraError
from .steps import count_key, steps


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
    if layer.get("in_place"):
        return "in place"
    if not layer.get("tiled"):
        return "whole"
    t = layer["tile"]
    return f"{t['h']}x{t['w']}x{t['c']}"


def groups(a, b):
    """[(A's steps, B's steps)] covering the layers in A's order: the
    smallest runs of layers that both builds split into whole steps."""
    sa, sb = steps(a), steps(b)
    of_a = {n: i for i, s in enumerate(sa) for n in s["layers"]}
    of_b = {n: i for i, s in enumerate(sb) for n in s["layers"]}
    order = [l["name"] for l in a["layers"]] + [l["name"] for l in b["layers"] if l["name"] not in of_a]
    out, seen = [], set()
    for name in order:
        if name in seen:
            continue
        mine_a, mine_b, todo = set(), set(), [name]
        while todo:          # close over both groupings
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            for side, of, rows in ((mine_a, of_a, sa), (mine_b, of_b, sb)):
                if n in of and of[n] not in side:
                    side.add(of[n])
                    todo += rows[of[n]]["layers"]
        out.append(([sa[i] for i in sorted(mine_a)], [sb[i] for i in sorted(mine_b)]))
    return out


def metrics(rows, report, engines):
    """{column: value} of a run of steps of one report (None where it lacks it)."""
    if not rows:
        return {}
    layers = {l["name"]: l for l in report["layers"]}
    key = count_key(report)
    one = rows[0] if len(rows) == 1 else None
    if one is not None and "tile" in one:
        tile = one["tile"]
    elif one is not None and len(one["layers"]) == 1:
        tile = tile_of(layers[one["layers"][0]])
    else:
        tile = f"{len(rows)} steps"
    out = {"tile": tile,
           "tiles": sum(r["n_tiles"] for r in rows) if all("n_tiles" in r for r in rows) else None,
           "L1 bytes": max(r["l1_bytes"] for r in rows) if all(r.get("l1_bytes") for r in rows) else None}
    names = [n for r in rows for n in r["layers"]]
    for e in engines:
        got = [layers[n].get("dma_bytes", {}).get(e) for n in names]
        out[f"DMA {e}"] = sum(got) if None not in got else None
    if key:
        got = [r.get(key) for r in rows]
        out[key] = sum(got) if None not in got else None
    est = [r.get("estimate", layers[r["layers"][0]].get("cost", {}).get("estimate") if len(r["layers"]) == 1
                 else None) for r in rows]
    out["estimate"] = sum(est) if est and None not in est else None
    return out


def label(rows):
    return ", ".join(r["step"] for r in rows) or "-"


def diff(a, b):
    """(columns, rows, memory rows): rows are (name, fusion, {column: (a, b)})
    where fusion says how the two builds grouped the row's layers."""
    engines = sorted(set(a["totals"].get("dma_bytes", {})) | set(b["totals"].get("dma_bytes", {})))
    rows, columns = [], []
    for ra, rb in groups(a, b):
        ma, mb = metrics(ra, a, engines), metrics(rb, b, engines)
        for k in list(ma) + list(mb):
            if k not in columns:
                columns.append(k)
        fa, fb = any(len(r["layers"]) > 1 for r in ra), any(len(r["layers"]) > 1 for r in rb)
        same = [r["layers"] for r in ra] == [r["layers"] for r in rb]
        fusion = ("" if same else "fused in A, apart in B" if fa and not fb else "fused in B, apart in A"
                  if fb and not fa else "grouped differently")
        name = label(ra) if same or not rb else label(rb) if not ra else f"{label(ra)} | {label(rb)}"
        rows.append((name, fusion, {k: (ma.get(k), mb.get(k)) for k in columns}))
    rows = [(n, f, {k: cells.get(k, (None, None)) for k in columns}) for n, f, cells in rows]
    memory = []
    for level in sorted(set(a.get("memory", {})) | set(b.get("memory", {}))):
        pa = a.get("memory", {}).get(level, {}).get("peak")
        pb = b.get("memory", {}).get(level, {}).get("peak")
        memory.append((f"{level} peak", pa, pb))
    for what in ("ram", "flash"):
        x, y = (r.get("firmware", {}).get(what) for r in (a, b))
        if x is not None or y is not None:
            memory.append((f"firmware {'RAM' if what == 'ram' else 'flash'}", x, y))
    key_a, key_b = count_key(a), count_key(b)
    if key_a and key_a == key_b:
        # the steps' sum is the network's; the run's total also spans the harness between the steps
        memory.append((f"steps' {key_a}", *(sum(s.get(key_a) or 0 for s in steps(r)) for r in (a, b))))
        memory.append((f"run {key_a}", a["totals"].get(key_a), b["totals"].get(key_b)))
    return columns, rows, memory


def cell(pair):
    """'a', or 'a -> b (+d, +p%)' when it changed; numbers with separators."""
    x, y = pair
    if x == y:
        return "" if x is None else f"{x:,}" if isinstance(x, int) else str(x)
    if isinstance(x, int) and isinstance(y, int):
        d = y - x
        rel = f", {100 * d / x:+.1f}%" if x else ""
        return f"{x:,} -> {y:,} ({d:+,d}{rel})"
    return f"{'-' if x is None else x} -> {'-' if y is None else y}"


def title(data):
    return f"{data['model']} on {data['target']} ({data['verdict']})"


def print_table(pa, a, pb, b, columns, rows, memory, console=None):
    from rich.console import Console
    from rich.table import Table

    if console is None:
        # at least 160 columns, and a wider terminal (or COLUMNS) all of its width
        console = Console(width=max(160, 24 + 22 * len(columns), Console().width))
    table = Table(title=f"A: {pa}  {title(a)}\nB: {pb}  {title(b)}")
    table.add_column("step")
    table.add_column("fusion")
    for c in columns:
        table.add_column(c, justify="right")
    changed = regrouped = 0
    for name, fusion, cells in rows:
        regrouped += bool(fusion)
        moved = bool(fusion) or any(x != y for x, y in cells.values())
        changed += moved
        style = "bold" if moved else "dim"
        table.add_row(name, fusion, *(cell(cells[c]) for c in columns), style=style)
    console.print(table)
    for what, x, y in memory:
        console.print(f"{what}: {cell((x, y))}")
    console.print(f"{changed} of {len(rows)} steps differ, {regrouped} of them grouped differently (fused in one "
                  "build only)")


def write_html(path, pa, a, pb, b, columns, rows, memory):
    css = ("body{font:13px system-ui,sans-serif;margin:24px} table{border-collapse:collapse;font-size:12px}"
           "td,th{border:1px solid #ddd;padding:2px 6px;text-align:right} td.l{text-align:left}"
           "td.up{background:#fde0dc} td.down{background:#dcf2dc} td.ch{background:#fff3c4}"
           "tr.same td{color:#888}")
    out = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>tessera diff</title><style>{css}</style>"
           f"</head><body><h1>tessera report diff</h1><p>A: {escape(pa)}: {escape(title(a))}<br>"
           f"B: {escape(pb)}: {escape(title(b))}</p><p>red: B larger, green: B smaller, yellow: changed</p>"
           "<table><tr><th>step</th><th>fusion</th>" + "".join(f"<th>{escape(c)}</th>" for c in columns) + "</tr>"]
    for name, fusion, cells in rows:
        moved = bool(fusion) or any(x != y for x, y in cells.values())
        tds = []
        for c in columns:
            x, y = cells[c]
            cls = ""
            if x != y:
                cls = ("up" if y > x else "down") if isinstance(x, int) and isinstance(y, int) else "ch"
            tds.append(f'<td class="{cls}">{escape(cell((x, y)))}</td>')
        out.append(f'<tr class="{"changed" if moved else "same"}"><td class="l">{escape(name)}</td>'
                   f'<td class="l">{escape(fusion)}</td>{"".join(tds)}</tr>')
    out.append("</table><h2>memory and totals</h2><table><tr><th>what</th><th>A</th><th>B</th><th>change</th></tr>")
    for what, x, y in memory:
        out.append(f'<tr><td class="l">{escape(what)}</td><td>{x}</td><td>{y}</td><td>{escape(cell((x, y)))}</td></tr>')
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
