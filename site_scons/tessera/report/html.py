"""report.html: one self-contained page (inline SVG and CSS, no script, no
network) of a build's report: the verdict, the memory map of each level
across the layer sequence, per-layer bars (MACs, measured and estimated
counts, DMA bytes by engine, L1 use against the budget), tile shapes, and a
failed layer highlighted with its first differing element. Deterministic:
the same report gives the same bytes."""

from html import escape

from .build import COUNT_KEYS, firmware_line
from .timeline import html as timeline_html

CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 6px;border-bottom:1px solid #ccc}
.pass{color:#fff;background:#2a7d2a;padding:2px 8px;border-radius:4px}
.fail{color:#fff;background:#b3261e;padding:2px 8px;border-radius:4px}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ddd;padding:2px 6px;text-align:right}
td.l,th.l{text-align:left} tr.bad td{background:#fde0dc} .note{color:#555;font-size:12px}
.legend span{display:inline-block;margin-right:12px} .sw{display:inline-block;width:10px;height:10px;margin-right:4px}
svg text{font:10px system-ui,sans-serif}
"""
COLORS = {"activation": "#4e79a7", "bounce": "#17becf", "weights": "#f28e2b", "in": "#59a14f", "out": "#e15759",
          "params": "#b07aa1", "scratch": "#9c755f", "macs": "#76b7b2", "measured": "#4e79a7",
          "estimate": "#f28e2b", "budget": "#bbb", "l1": "#59a14f"}
ENGINE_COLORS = ("#edc948", "#ff9da7", "#9c755f", "#bab0ac")


def _svg(w, h, body, label):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'role="img" aria-label="{escape(label)}">{"".join(body)}</svg>')


def memory_svg(level, mm, names):
    """One level's map: x the layer sequence, y the address."""
    W, H, left, top = 900, 240, 50, 10
    n = max(len(names), 1)
    size = max(mm["size"], 1)
    step = (W - left - 10) / n
    body = [f'<rect x="{left}" y="{top}" width="{W - left - 10}" height="{H - top - 30}" fill="#f7f7f7" stroke="#ccc"/>']
    for r in mm["rects"]:
        x = left + r["x0"] * step
        w = max((r["x1"] - r["x0"] + 1) * step - 1, 1)
        y = top + (H - top - 30) * (1 - (r["offset"] + r["bytes"]) / size)
        h = max((H - top - 30) * r["bytes"] / size, 0.5)
        body.append(f'<rect class="buf" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                    f'fill="{COLORS[r["kind"]]}" fill-opacity="0.75" stroke="#333" stroke-width="0.3">'
                    f'<title>{escape(r["name"])}: {r["bytes"]} B at {r["offset"]}, layers {r["x0"]}..{r["x1"]}'
                    f'</title></rect>')
    body.append(f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{size}</text>')
    body.append(f'<text x="{left - 4}" y="{H - 22}" text-anchor="end">0</text>')
    for i in range(0, n, max(1, n // 20)):
        body.append(f'<text x="{left + (i + 0.5) * step:.1f}" y="{H - 10}" text-anchor="middle">{i}</text>')
    return _svg(W, H, body, f"memory map of {level}")


def bars_svg(title, names, series, bad=None):
    """Horizontal bars, one row per layer; series: [(label, color, values)]
    drawn side by side in the row (each scaled to the largest value)."""
    row, left, W = 6 + 6 * len(series), 170, 560
    top = max((v for _, _, vals in series for v in vals if v is not None), default=0) or 1
    body = []
    for i, name in enumerate(names):
        y = i * row
        if i == bad:
            body.append(f'<rect x="0" y="{y}" width="{W}" height="{row}" fill="#fde0dc"/>')
        body.append(f'<text x="{left - 4}" y="{y + row - 4}" text-anchor="end">{escape(name)}</text>')
        for k, (label, color, vals) in enumerate(series):
            v = vals[i] or 0
            body.append(f'<rect class="bar" x="{left}" y="{y + 2 + 6 * k}" width="{(W - left - 10) * v / top:.1f}" '
                        f'height="5" fill="{color}"><title>{escape(name)} {escape(label)}: {v}</title></rect>')
    return _svg(W, row * len(names) + 4, body, title)


def legend(items):
    return '<div class="legend">' + "".join(
        f'<span><i class="sw" style="background:{c}"></i>{escape(t)}</span>' for t, c in items) + "</div>"


def render_html(data, mm):
    layers = data["layers"]
    names = [f"{i} {l['name']}" for i, l in enumerate(layers)]
    verdict = data["verdict"]
    bad_info = data.get("first_mismatch")
    bad = bad_info["index"] if bad_info else None
    out = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>tessera: {escape(data['model'])} on "
           f"{escape(data['target'])}</title><style>{CSS}</style></head><body>",
           f"<h1>{escape(data['model'])} on {escape(data['target'])} "
           f'<span id="verdict" class="{"pass" if verdict == "pass" else "fail"}">{escape(verdict.upper())}</span></h1>']
    tot = data["totals"]
    line = f"{len(layers)} layers, {tot['macs']} MACs, {tot['params']} parameters"
    key = COUNT_KEYS.get(data["counts"]["method"])
    if key and key in tot:
        line += f"; {tot[key]} {key} measured"
    cost = tot.get("cost")
    if cost and "estimate" in cost:
        line += f"; {cost['estimate']} estimated"
        if cost.get("error") is not None:
            line += f" ({100 * cost['error']:+.1f}% of the layers' measured sum)"
    out.append(f"<p>{escape(line)}</p><p class=\"note\">measured: {escape(data['counts']['note'])}")
    if "cost" in data["counts"]:
        out.append(f"<br>estimate: {escape(data['counts']['cost']['estimate'])}")
    out.append("</p>")
    if bad is not None:
        el = bad_info.get("element")
        what = (f" first differing element at (h, w, c) = {tuple(el['index'])}: got {el['got']}, "
                f"expected {el['want']}" if el else "")
        out.append(f'<p id="mismatch" class="fail">layer {bad} {escape(bad_info["layer"])} differs from the '
                   f"golden model;{escape(what)}</p>")
    out.append('<h2>Memory map</h2><p class="note">every buffer a rectangle over the layers it lives through '
               "(x: layer index, y: address); hover for names</p>")
    out.append(legend([(k, COLORS[k]) for k in ("activation", "bounce", "weights", "in", "out", "params", "scratch")]))
    for level, m in mm.items():
        mem = data["memory"].get(level, {})
        declared = (f'; the firmware declares {mem["declared"]} B' + (
            f" ({mem['pools']} B past the peak for the storage program's pools)" if "pools" in mem else "")
            if "declared" in mem else "")
        out.append(f'<h3 class="level">{escape(level)}: peak {mem.get("peak", m["size"])} B of '
                   f'{mem.get("usable", "?")} usable{declared}</h3>{memory_svg(level, m, names)}')
    out.append("<h2>Per layer</h2>")
    charts = [("MACs", [("MACs", COLORS["macs"], [l["macs"] for l in layers])])]
    if key:
        series = [(f"measured {key}", COLORS["measured"], [l.get(key) for l in layers])]
        if any("estimate" in l.get("cost", {}) for l in layers):
            series.append((f"estimated {key}", COLORS["estimate"], [l["cost"].get("estimate") for l in layers]))
        charts.append((f"{key}: measured and estimated", series))
    engines = list(tot.get("dma_bytes", {}))
    if engines:
        charts.append(("DMA bytes by engine", [(e, ENGINE_COLORS[i % 4], [l["dma_bytes"].get(e, 0) for l in layers])
                                               for i, e in enumerate(engines)]))
    charts.append(("L1 use against the budget", [("budget", COLORS["budget"], [l["l1_budget"] for l in layers]),
                                                 ("used", COLORS["l1"], [l["l1_bytes"] for l in layers])]))
    for title, series in charts:
        out.append(f'<div class="chart"><h3>{escape(title)}</h3>'
                   f'{legend([(s[0], s[1]) for s in series])}{bars_svg(title, names, series, bad)}</div>')
    out.append('<h2>Tiles</h2><table><tr><th>#</th><th class="l">layer</th><th class="l">op</th><th>output</th>'
               "<th>tile h x w x c</th><th>tiles</th><th>L1 bytes</th><th>measured</th><th>estimate</th>"
               "<th>error</th><th>bit-exact</th></tr>")
    for i, l in enumerate(layers):
        tile = ("in place" if l.get("in_place") else "whole" if not l["tiled"]
                else f"{l['tile']['h']}x{l['tile']['w']}x{l['tile']['c']}")
        c = l.get("cost", {})
        err = f"{100 * c['error']:+.1f}%" if c.get("error") is not None else ""
        out.append(f'<tr class="{"bad" if not l["match"] else "ok"}"><td>{i}</td><td class="l">{escape(l["name"])}'
                   f'</td><td class="l">{escape(l["op"])}</td><td>{"x".join(map(str, l["out_shape"]))}</td>'
                   f"<td>{tile}</td><td>{l['n_tiles']}</td><td>{l['l1_bytes']}/{l['l1_budget']}</td>"
                   f"<td>{l.get(key, '') if key else ''}</td><td>{c.get('estimate', '')}</td><td>{err}</td>"
                   f"<td>{'yes' if l['match'] else 'NO'}</td></tr>")
    out.append("</table>")
    if data.get("out_of_core"):
        out.append(_out_of_core(data["out_of_core"]))
    out.append("</body></html>\n")
    return "".join(out)


def _out_of_core(ooc):
    """The storage level's traffic per layer and the scheduler's estimates
    (tessera.storage.ooc; docs/out_of_core.md)."""
    t = ooc["totals"]
    out = [f'<h2>Out of core: storage level {escape(ooc["level"])}</h2><p>{t["read_bytes"]} B read in {t["reads"]} '
           f'transfers, {t["written_bytes"]} B written in {t["writes"]} ({t["blocks_written"]} blocks per inference; '
           f'wear-out after {t["inferences_to_wear_out"] or "no"} inferences); {t["io_bound_layers"]} IO-bound layers; '
           f'compute {t["compute_ms"]} ms, IO {t["io_ms"]} ms, in order {t["in_order_ms"]} ms</p>']
    fw = ooc.get("firmware")
    if fw:
        out.append(f'<p>firmware: {escape(firmware_line(fw))}</p>')
    if fw and fw["program"] != "in order":
        out.append(timeline_html(fw, "the program the firmware ran"))
    s = ooc.get("schedule")
    if s and "skipped" in s:
        out.append(f'<p class="note">not scheduled: {escape(s["skipped"])}</p>')
    elif s:
        out.append(f'<p>scheduled ({escape(s["program"])}): {s["latency_ms"]} ms per frame, '
                   f'{s["latency_vs_unlimited"]}x the {s["unlimited_ms"]} ms of unlimited SRAM; {s["frames"]} frames '
                   f'pipelined: {s["pipelined_ms_per_frame"]} ms per frame ({s["throughput_fps"]} frames/s, unlimited '
                   f'{s["unlimited_fps"]})</p>')
        if not (fw and fw.get("timeline")):
            out.append(timeline_html(s))
    out.append(f'<p class="note">compute: {escape(ooc["compute"])}; IO: the level\'s latency and bandwidths '
               "(target YAML)</p>")
    out.append('<table><tr><th class="l">layer</th><th>read B</th><th>reads</th><th>written B</th><th>writes</th>'
               "<th>compute ms</th><th>IO ms</th><th>N</th><th>bound</th></tr>")
    for l in ooc["layers"]:
        if not (l["reads"] or l["writes"]):
            continue
        out.append(f'<tr class="ok"><td class="l">{escape(l["name"])}</td><td>{l["read_bytes"]}</td><td>{l["reads"]}'
                   f'</td><td>{l["written_bytes"]}</td><td>{l["writes"]}</td><td>{l["compute_ms"]}</td>'
                   f'<td>{l["io_ms"]}</td><td>{l.get("intensity", "")}</td><td>{l.get("bound", "")}</td></tr>')
    out.append("</table>")
    return "".join(out)
