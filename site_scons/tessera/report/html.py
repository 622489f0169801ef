"""report.html: one self-contained page (inline SVG and CSS, no script, no
network) of a build's report: the verdict and the key numbers, the top
outputs, every byte of RAM and flash per level, the memory maps, a row per
step (a fused step is one row naming its layers) with its measured and
estimated count, plots with axes and values, the decisions drawn (which
pairs were fused and why, which layers run in place, what bound each tile)
and a section per step. Deterministic: the same report gives the same
bytes (no time, no path)."""

from html import escape

from ..util.units import both, nbytes
from ..config.views import COUNT_KEYS
from .console import firmware_line
from .steps import kind_of
from .timeline import html as timeline_html

CSS = """
body{font:13px/1.45 system-ui,sans-serif;margin:24px;color:#222;background:#fff;max-width:1200px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 6px;border-bottom:1px solid #ccc}
h3{font-size:13px;margin:14px 0 4px}
.pass{color:#fff;background:#2a7d2a;padding:2px 8px;border-radius:4px}
.fail{color:#fff;background:#b3261e;padding:2px 8px;border-radius:4px}
table{border-collapse:collapse;font-size:12px;margin:4px 0} td,th{border:1px solid #ddd;padding:2px 6px;text-align:right}
td.l,th.l{text-align:left} tr.bad td{background:#fde0dc} .note{color:#555;font-size:12px}
.legend span{display:inline-block;margin-right:12px} .sw{display:inline-block;width:10px;height:10px;margin-right:4px}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:6px 10px;min-width:150px}
.card b{display:block;font-size:16px} .card span{color:#555;font-size:11px}
details{border:1px solid #e3e3e3;border-radius:4px;margin:4px 0;padding:2px 8px}
summary{cursor:pointer} .fused{color:#8a4b00} .apart{color:#555}
svg text{font:10px system-ui,sans-serif} svg .axis{stroke:#888;stroke-width:1} svg .grid{stroke:#eee}
"""
COLORS = {"activation": "#4e79a7", "bounce": "#17becf", "weights": "#f28e2b", "in": "#59a14f", "out": "#e15759",
          "params": "#b07aa1", "scratch": "#9c755f", "macs": "#76b7b2", "measured": "#4e79a7",
          "estimate": "#f28e2b", "budget": "#bbb", "l1": "#59a14f"}
PART_COLORS = {"weights": "#f28e2b", "activation arena": "#4e79a7", "tile arena": "#59a14f",
               "spill arena": "#17becf", "code": "#e15759", "constants": "#ff9da7", "data": "#b07aa1",
               "bss": "#9c755f", "heap": "#bab0ac", "stack": "#edc948", "stacks": "#edc948",
               "data load image": "#d4a6c8", "alignment": "#dddddd"}
ENGINE_COLORS = ("#edc948", "#ff9da7", "#9c755f", "#bab0ac")
DECISION_COLORS = {"fused": "#f28e2b", "in place": "#59a14f", "row bands": "#76b7b2", "tiled": "#4e79a7",
                   "whole": "#bab0ac"}


def _svg(w, h, body, label):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'role="img" aria-label="{escape(label)}">{"".join(body)}</svg>')


def _n(v):
    return "" if v is None else f"{v:,}"


def nice_ticks(top, n=5):
    """Round tick values from 0 to at least `top` (about n of them)."""
    if top <= 0:
        return [0, 1]
    raw = top / n
    mag = 10 ** (len(str(int(raw))) - 1) if raw >= 1 else 1
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    step = max(1, int(step))
    ticks, t = [], 0
    while t < top + step:
        ticks.append(t)
        t += step
    return ticks


def _short(v):
    """A tick label: 1.2M, 350k, 40."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= size:
            return f"{v / size:g}{unit}"
    return f"{v:g}"


def bars_svg(title, names, series, unit, bad=None):
    """Horizontal bars, one row per name, the series side by side in the
    row; an x axis in `unit` with ticks and grid lines; each bar's value at
    its end."""
    row, left, W, right = 8 + 9 * len(series), 190, 900, 90
    vals = [v for _, _, vs in series for v in vs if v is not None]
    ticks = nice_ticks(max(vals, default=0) or 1)
    top = ticks[-1]
    plot = W - left - right
    H = row * len(names) + 36
    body = []
    for t in ticks:
        x = left + plot * t / top
        body.append(f'<line class="grid" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{H - 30}"/>'
                    f'<text x="{x:.1f}" y="{H - 18}" text-anchor="middle">{_short(t)}</text>')
    body.append(f'<line class="axis" x1="{left}" y1="{H - 30}" x2="{left + plot}" y2="{H - 30}"/>'
                f'<line class="axis" x1="{left}" y1="0" x2="{left}" y2="{H - 30}"/>'
                f'<text x="{left + plot / 2:.1f}" y="{H - 4}" text-anchor="middle">{escape(unit)}</text>')
    for i, name in enumerate(names):
        y = i * row
        if i == bad:
            body.append(f'<rect x="0" y="{y}" width="{W}" height="{row}" fill="#fde0dc"/>')
        body.append(f'<text x="{left - 4}" y="{y + row / 2 + 3:.1f}" text-anchor="end">{escape(name)}</text>')
        for k, (label, color, vs) in enumerate(series):
            v = vs[i]
            if v is None:
                continue
            w = plot * v / top
            yy = y + 4 + 9 * k
            body.append(f'<rect class="bar" x="{left}" y="{yy}" width="{w:.1f}" height="7" fill="{color}">'
                        f'<title>{escape(name)} {escape(label)}: {v:,}</title></rect>'
                        f'<text x="{left + w + 3:.1f}" y="{yy + 6.5:.1f}">{v:,}</text>')
    return _svg(W, H, body, title)


def legend(items):
    return '<div class="legend">' + "".join(
        f'<span><i class="sw" style="background:{c}"></i>{escape(t)}</span>' for t, c in items) + "</div>"


def memory_svg(level, mm, names):
    """One level's map: x the layer sequence, y the address; both axes
    ticked and named."""
    W, H, left, top, bottom = 900, 250, 70, 10, 40
    n = max(len(names), 1)
    size = max(mm["size"], 1)
    plot_h = H - top - bottom
    step = (W - left - 10) / n
    body = [f'<rect x="{left}" y="{top}" width="{W - left - 10}" height="{plot_h}" fill="#f7f7f7" stroke="#ccc"/>']
    for t in nice_ticks(size, 4):
        if t > size:
            continue
        y = top + plot_h * (1 - t / size)
        body.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{W - 10}" y2="{y:.1f}"/>'
                    f'<text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end">{t:,}</text>')
    for r in mm["rects"]:
        x = left + r["x0"] * step
        w = max((r["x1"] - r["x0"] + 1) * step - 1, 1)
        y = top + plot_h * (1 - (r["offset"] + r["bytes"]) / size)
        h = max(plot_h * r["bytes"] / size, 0.5)
        body.append(f'<rect class="buf" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                    f'fill="{COLORS[r["kind"]]}" fill-opacity="0.75" stroke="#333" stroke-width="0.3">'
                    f'<title>{escape(r["name"])}: {r["bytes"]:,} B at {r["offset"]:,}, layers {r["x0"]}..{r["x1"]}'
                    f'</title></rect>')
    body.append(f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{W - 10}" y2="{top + plot_h}"/>')
    for i in range(0, n, max(1, n // 20)):
        body.append(f'<text x="{left + (i + 0.5) * step:.1f}" y="{top + plot_h + 12}" text-anchor="middle">{i}</text>')
    body.append(f'<text x="{left + (W - left) / 2:.1f}" y="{H - 6}" text-anchor="middle">layer index</text>'
                f'<text x="12" y="{top + plot_h / 2:.1f}" transform="rotate(-90 12 {top + plot_h / 2:.1f})" '
                f'text-anchor="middle">address (B)</text>')
    return _svg(W, H, body, f"memory map of {level}")


def footprint_svg(fw):
    """Each level's used bytes as a stacked bar by part, against its size
    (an x axis in bytes)."""
    levels = fw["levels"]
    W, left, right, row = 900, 80, 20, 26
    top = nice_ticks(max(m["size"] for m in levels.values()), 5)[-1]
    plot = W - left - right
    H = row * len(levels) + 34
    body = []
    for t in nice_ticks(top, 5):
        x = left + plot * t / top
        body.append(f'<line class="grid" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{H - 30}"/>'
                    f'<text x="{x:.1f}" y="{H - 18}" text-anchor="middle">{_short(t)}</text>')
    body.append(f'<line class="axis" x1="{left}" y1="{H - 30}" x2="{left + plot}" y2="{H - 30}"/>'
                f'<text x="{left + plot / 2:.1f}" y="{H - 4}" text-anchor="middle">bytes</text>')
    for i, (name, m) in enumerate(levels.items()):
        y = i * row + 4
        body.append(f'<text x="{left - 4}" y="{y + 12}" text-anchor="end">{escape(name)}</text>'
                    f'<rect x="{left}" y="{y}" width="{plot * m["size"] / top:.1f}" height="16" fill="none" '
                    f'stroke="#999" stroke-dasharray="3 2"><title>{escape(name)}: {m["size"]:,} B</title></rect>')
        x = left
        for part, n in m["parts"].items():
            w = plot * n / top
            body.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="16" fill="{PART_COLORS.get(part, "#999")}">'
                        f'<title>{escape(name)} {escape(part)}: {n:,} B</title></rect>')
            x += w
        body.append(f'<text x="{x + 4:.1f}" y="{y + 12}">{m["used"]:,} of {m["size"]:,} B</text>')
    return _svg(W, H, body, "bytes per level")


def decisions_svg(data):
    """The layer sequence as boxes, colored by what the plan decided
    (tiled, whole, in place, row bands), chosen fused steps bracketed
    above them, candidates kept apart as dashed brackets below (hover for
    the reason)."""
    layers = data["layers"]
    n = len(layers)
    box, gap, left = 26, 4, 10
    W = left * 2 + n * (box + gap)
    H = 130
    pos = {l["name"]: left + i * (box + gap) for i, l in enumerate(layers)}
    body = []
    for i, l in enumerate(layers):
        x = pos[l["name"]]
        what = ("in place" if l.get("in_place") else "row bands" if (l.get("tile_reason") or {}).get("bound")
                == "row bands" else "tiled" if l["tiled"] else "whole")
        if l.get("step"):
            what = "fused"
        body.append(f'<rect x="{x}" y="45" width="{box}" height="30" fill="{DECISION_COLORS[what]}" '
                    f'fill-opacity="0.8"><title>{i} {escape(l["name"])} ({escape(l["op"])}): {what}'
                    f'{" in " + escape(l["step"]) if l.get("step") else ""}</title></rect>'
                    f'<text x="{x + box / 2}" y="64" text-anchor="middle" fill="#fff">{i}</text>')
    apart = 0
    for c in (data.get("fusion") or {}).get("candidates", []):
        xs = [pos[n] for n in c["layers"] if n in pos]
        if not xs:
            continue
        x0, x1 = min(xs) + 2, max(xs) + box - 2
        if c.get("chosen"):
            body.append(f'<path d="M{x0} 40 L{x0} 32 L{x1} 32 L{x1} 40" fill="none" stroke="#8a4b00" '
                        f'stroke-width="2"><title>{escape(c["group"])}: fused</title></path>')
        else:
            why = c.get("why_apart") or c.get("reason", "")
            y = 80 + 8 * (apart % 3)
            apart += 1
            body.append(f'<path d="M{x0} {y} L{x0} {y + 6} L{x1} {y + 6} L{x1} {y}" fill="none" stroke="#999" '
                        f'stroke-dasharray="3 2"><title>{escape(c["group"])}: apart: {escape(why)}</title></path>')
    body.append(f'<text x="{left}" y="20">fused steps (solid, above); candidates kept apart (dashed, below: '
                f'hover for why)</text><text x="{left}" y="120">layer index; color: what the plan decided</text>')
    # a long network scales down to the page's width rather than running off its edge
    return _svg(max(W, 600), H, body, "decisions per layer").replace(
        "<svg ", f'<svg style="width:100%;max-width:{max(W, 600)}px;height:auto" ', 1)


def _cards(data):
    tot, key = data["totals"], COUNT_KEYS.get(data["counts"]["method"])
    st = tot.get("steps", {})
    unit = data["counts"].get("unit", key)
    cards = [(f"{len(data['steps'])} steps", f"of {len(data['layers'])} layers"),
             (f"{tot['macs']:,}", "MACs"),
             (nbytes(tot["weight_bytes"]), f"weights ({tot['params']:,} parameters)"),
             (nbytes(tot["peak_activation_bytes"]), f"activation peak (tensor bound {nbytes(tot['tensor_bound_activation_bytes'])})")]
    if key and key in tot:
        cards.append((f"{st.get(key, 0):,}", f"{unit} measured in the steps (the run: {tot[key]:,})"))
    if tot.get("ms") is not None:
        cards.append((f"{tot['ms']:.3f} ms", f"the steps: {data['counts'].get('ms', '')}"))
    if st.get("estimate") is not None:
        err = f" ({100 * st['error']:+.1f}%)" if st.get("error") is not None else ""
        cards.append((f"{st['estimate']:,}", f"{unit} estimated{err}"))
    fw = data.get("firmware") or {}
    if fw.get("levels"):
        cards.append((both(fw["ram"]), "RAM (writable levels, ELF)"))
        cards.append((both(fw["flash"]), "flash (read-only levels, ELF)"))
    return '<div class="cards">' + "".join(f'<div class="card"><b>{escape(a)}</b><span>{escape(b)}</span></div>'
                                           for a, b in cards) + "</div>"


def _outputs(data):
    rows = []
    for o in data.get("outputs", []):
        ref = o.get("reference")
        head = (f'<h3>{escape(o["tensor"])}: {escape(o["dtype"])} {"x".join(map(str, o["shape"]))}, scale '
                f'{o["scale"]}, zero point {o["zero_point"]}</h3><table><tr><th>rank</th><th>index</th>'
                f'<th>value</th><th>real value</th>' + (f'<th>{escape(ref["by"])}</th>' if ref else "") + "</tr>")
        rows.append(head)
        for r, (i, v, real) in enumerate(o["top"]):
            theirs = f"<td>{ref['top'][r][0]} ({ref['top'][r][1]})</td>" if ref and r < len(ref["top"]) else ""
            rows.append(f"<tr><td>{r + 1}</td><td>{i}</td><td>{v}</td><td>{'' if real is None else real}</td>"
                        f"{theirs}</tr>")
        rows.append("</table>")
        if ref:
            rows.append(f'<p class="note">{escape(ref["by"])} on the same input: '
                        + ("the same order" if ref["same_order"] else "the same top, then another order"
                           if ref["same_top"] else "another top")
                        + (f"; its values within {ref['max_lsb']} LSB of the firmware's (ONNX Runtime requantizes in "
                           "float: within 1 LSB a layer, drifting through the network)" if ref["max_lsb"] else "")
                        + "</p>")
    if not rows:
        return ""
    return ("<h2>Outputs</h2><p class=\"note\">the firmware's outputs (bit for bit the golden model's when the "
            "verdict passes), largest first</p>" + "".join(rows))


def _memory(data, mm, names):
    out = []
    fw = data.get("firmware") or {}
    if fw.get("levels"):
        parts = sorted({p for m in fw["levels"].values() for p in m["parts"]},
                       key=lambda p: (list(PART_COLORS).index(p) if p in PART_COLORS else 99, p))
        out.append(f"<h2>RAM and flash</h2><p class=\"note\">every byte of {escape(fw['file'])} (its sections and "
                   "its link map), per memory level; reserved: what the target YAML keeps per purpose; 1 KiB = 1024 B"
                   "</p>" + legend([(p, PART_COLORS.get(p, "#999")) for p in parts]) + footprint_svg(fw))
        out.append('<table><tr><th class="l">level</th><th class="l">kind</th><th>size B</th><th>used B</th>'
                   + "".join(f"<th>{escape(p)}</th>" for p in parts) + '<th class="l">reserved</th></tr>')
        for name, m in fw["levels"].items():
            res = ", ".join(f"{k} {v:,}" for k, v in m["reserved"].items())
            out.append(f'<tr><td class="l">{escape(name)}</td><td class="l">{"RAM" if m["writable"] else "read-only"}'
                       f' ({escape(m["kind"])})</td><td>{m["size"]:,}</td><td>{m["used"]:,}</td>'
                       + "".join(f"<td>{_n(m['parts'].get(p))}</td>" for p in parts)
                       + f'<td class="l">{escape(res)}</td></tr>')
        out.append("</table>")
    if fw:
        out.append('<h3>Code and constants by owner (B)</h3><table><tr><th class="l">owner</th><th>code</th>'
                   '<th>constants</th></tr>')
        for k in sorted(set(fw["code"]) | set(fw["constants"])):
            out.append(f'<tr><td class="l">{escape(k)}</td><td>{_n(fw["code"].get(k))}</td>'
                       f'<td>{_n(fw["constants"].get(k))}</td></tr>')
        out.append('</table><p class="note">harness: the test harness and its golden input (not part of a '
                   "deployed network); runtime: start-up code, the C library, libgcc</p>")
        if fw.get("arrays"):
            out.append('<p class="note">arrays network.c declares: ' + ", ".join(
                f"{escape(s)} {a['bytes']:,} B (planned {a['planned']:,})" for s, a in fw["arrays"].items()) + "</p>")
    out.append('<h2>Memory maps</h2><p class="note">every buffer a rectangle over the layers it lives through '
               "(x: layer index, y: address); hover for names</p>")
    out.append(legend([(k, COLORS[k]) for k in ("activation", "bounce", "weights", "in", "out", "params", "scratch")]))
    for level, m in mm.items():
        mem = data["memory"].get(level, {})
        declared = (f'; the firmware declares {mem["declared"]:,} B' + (
            f" ({mem['pools']:,} B past the peak for the storage program's pools)" if "pools" in mem else
            " (the weight stream's chunk buffers past the peak)")
            if "declared" in mem else "")
        out.append(f'<h3 class="level">{escape(level)}: peak {mem.get("peak", m["size"]):,} B of '
                   f'{_n(mem.get("usable"))} usable (lower bound {_n(mem.get("lower_bound"))}, tensor bound '
                   f'{_n(mem.get("tensor_bound"))}){declared}</h3>{memory_svg(level, m, names)}')
    return "".join(out)


def _steps_table(data, key, bad_step):
    steps = data["steps"]
    unit = data["counts"].get("unit", key)
    timed = any(s.get("ms") is not None for s in steps)    # cycles at a clock; instructions have no ms
    out = ['<h2>Per step</h2><p class="note">a row per step the firmware runs: a fused step is one row naming its '
           "layers, its count the whole step's</p><table><tr><th>#</th><th class=\"l\">step</th>"
           "<th class=\"l\">kind</th><th class=\"l\">tile</th><th>L1 B</th><th>MACs</th><th>weights B</th>"
           f"<th>DMA B</th><th>{escape(unit or 'count')}</th><th>estimate</th><th>error</th>"
           + ("<th>ms</th>" if timed else "") + "<th>bit-exact</th></tr>"]
    for s in steps:
        err = f"{100 * s['error']:+.1f}%" if s.get("error") is not None else ""
        out.append(f'<tr class="{"bad" if s["step"] == bad_step else "ok"}"><td>{s["index"]}</td>'
                   f'<td class="l"><a href="#step-{escape(s["step"])}">{escape(s["step"])}</a></td>'
                   f'<td class="l">{escape(kind_of(s["ops"]))}</td><td class="l">{escape(s["tile"])}</td>'
                   f'<td>{_n(s.get("l1_bytes"))}/{_n(s.get("l1_budget"))}</td><td>{s["macs"]:,}</td>'
                   f'<td>{s["weight_bytes"]:,}</td><td>{sum(s["dma_bytes"].values()):,}</td>'
                   f'<td>{_n(s.get(key)) if key else ""}</td><td>{_n(s.get("estimate"))}</td><td>{err}</td>'
                   + (f'<td>{"" if s.get("ms") is None else s["ms"]}</td>' if timed else "")
                   + f'<td>{"yes" if s["match"] else "NO"}</td></tr>')
    tot = data["totals"].get("steps", {})
    err = "" if tot.get("error") is None else f"{100 * tot['error']:+.1f}%"
    out.append(f'<tr><td></td><td class="l"><b>total</b></td><td></td><td></td><td></td>'
               f'<td>{data["totals"]["macs"]:,}</td><td>{data["totals"]["weight_bytes"]:,}</td>'
               f'<td>{sum(data["totals"]["dma_bytes"].values()):,}</td><td>{_n(tot.get(key)) if key else ""}</td>'
               f'<td>{_n(tot.get("estimate"))}</td><td>{err}</td>'
               + (f'<td>{"" if tot.get("ms") is None else tot["ms"]}</td>' if timed else "")
               + '<td></td></tr></table>')
    return "".join(out)


def _charts(data, key, bad_index):
    steps = data["steps"]
    names = [f"{s['index']} {s['step']}" for s in steps]
    unit = data["counts"].get("unit", key)
    charts = [("MACs per step", [("MACs", COLORS["macs"], [s["macs"] for s in steps])], "MACs"),
              ("Weights per step", [("weights", COLORS["weights"], [s["weight_bytes"] for s in steps])], "bytes")]
    if key and any(key in s for s in steps):
        series = [(f"measured {unit}", COLORS["measured"], [s.get(key) for s in steps])]
        if any("estimate" in s for s in steps):
            series.append((f"estimated {unit}", COLORS["estimate"], [s.get("estimate") for s in steps]))
        charts.insert(0, (f"{unit} per step: measured and estimated", series, unit))
    engines = list(data["totals"].get("dma_bytes", {}))
    if engines:
        charts.append(("DMA bytes by engine", [(e, ENGINE_COLORS[i % 4], [s["dma_bytes"].get(e, 0) for s in steps])
                                               for i, e in enumerate(engines)], "bytes"))
    charts.append(("L1 use against the budget", [("budget", COLORS["budget"], [s.get("l1_budget") for s in steps]),
                                                 ("used", COLORS["l1"], [s.get("l1_bytes") for s in steps])], "bytes"))
    out = []
    for title, series, axis in charts:
        out.append(f'<div class="chart"><h3>{escape(title)}</h3>{legend([(s[0], s[1]) for s in series])}'
                   f'{bars_svg(title, names, series, axis, bad_index)}</div>')
    return "".join(out)


def _tile_reason(why):
    if not why:
        return ""
    if why["bound"] in ("whole layer", "whole tensors"):
        return f"{why['bound']}: {why['l1_bytes']:,} of {why['l1_budget']:,} B of L1"
    axes = "; ".join(f"{a} to {r['tile'][a]} needs {r['l1_bytes']:,} B" + (
        f" (objective {r['objective']:,})" if r["why"] == "objective" else "") for a, r in why.get("axes", {}).items())
    text = f"bound by {why['bound']} ({why['l1_bytes']:,} of {why['l1_budget']:,} B; objective {_n(why.get('objective'))})"
    if axes:
        text += f"; growing {axes}"
    ru = why.get("runner_up")
    if ru:
        t = ru["tile"]
        text += f"; runner-up {t['h']}x{t['w']}x{t['c']} (objective {ru['objective']:,}, {ru['l1_bytes']:,} B)"
    return text


def _decisions(data):
    out = ['<h2>Decisions</h2><p class="note">what the build decided per layer, drawn; hover a box or bracket</p>',
           legend(list(DECISION_COLORS.items())), decisions_svg(data)]
    fz = data.get("fusion") or {}
    if fz.get("candidates"):
        out.append(f'<h3>Fusion ({escape(fz["policy"])})</h3><table><tr><th class="l">candidate</th>'
                   '<th class="l">kind</th><th class="l">decision</th><th>estimate fused</th><th>apart</th>'
                   '<th>activation B fused</th><th>apart</th><th class="l">why</th></tr>')
        for c in fz["candidates"]:
            why = c.get("why_apart", "") if not c.get("chosen") else next(
                (g["reason"] for g in fz.get("groups", []) if g["step"] == c["group"]), "")
            out.append(f'<tr><td class="l">{escape(c["group"])}</td><td class="l">{escape(c.get("kind", ""))}</td>'
                       f'<td class="l {"fused" if c.get("chosen") else "apart"}">{"fused" if c.get("chosen") else "apart"}'
                       f'</td><td>{_n(c.get("fused_estimate"))}</td><td>{_n(c.get("unfused_estimate"))}</td>'
                       f'<td>{_n(c.get("fused_bytes"))}</td><td>{_n(c.get("unfused_bytes"))}</td>'
                       f'<td class="l">{escape(why)}</td></tr>')
        out.append("</table>")
    ip = data.get("in_place")
    if ip:
        out.append(f'<h3>Layers in place ({escape(ip["policy"])})</h3><p class="note">{escape(ip["why"])}</p>'
                   '<table><tr><th class="l">layers in place</th><th>total RAM B</th><th class="l">chosen</th></tr>')
        for o in ip["options"]:
            out.append(f'<tr><td class="l">{escape(", ".join(o["in_place"]) or "none")}</td>'
                       f'<td>{_n(o.get("ram")) or escape(o.get("fits", ""))}</td>'
                       f'<td class="l">{"yes" if o.get("chosen") else ""}</td></tr>')
        out.append("</table>")
    return "".join(out)


def _step_sections(data, key):
    layers = {l["name"]: (i, l) for i, l in enumerate(data["layers"])}
    cands = {}
    for c in (data.get("fusion") or {}).get("candidates", []):
        for n in c["layers"]:
            cands.setdefault(n, []).append(c)
    unit = data["counts"].get("unit", key)
    out = ['<h2>Each step</h2>']
    for s in data["steps"]:
        head = (f'{s["index"]} {escape(s["step"])}: {escape(kind_of(s["ops"]))}, {escape(s["tile"])}'
                + (f", {s[key]:,} {escape(unit)}" if key and s.get(key) is not None else "")
                + (f", estimate {s['estimate']:,}" if s.get("estimate") is not None else ""))
        body = [f'<details id="step-{escape(s["step"])}"><summary>{head}</summary><table><tr><th class="l">layer'
                '</th><th class="l">op</th><th class="l">output</th><th>MACs</th><th>weights B</th>'
                '<th class="l">tile</th><th>estimate apart</th><th class="l">tile: why</th>'
                '<th class="l">in place</th><th class="l">fusion</th></tr>']
        for name in s["layers"]:
            i, l = layers[name]
            tile = ("in place" if l.get("in_place") else "whole" if not l["tiled"]
                    else f"{l['tile']['h']}x{l['tile']['w']}x{l['tile']['c']}")
            fz = "; ".join(f"{c['group']}: " + ("fused" if c.get("chosen") else "apart: " + c.get("why_apart", ""))
                           for c in cands.get(name, []))
            body.append(f'<tr><td class="l">{i} {escape(name)}</td><td class="l">{escape(l["op"])}</td>'
                        f'<td class="l">{"x".join(map(str, l["out_shape"]))}</td><td>{l["macs"]:,}</td>'
                        f'<td>{l["weight_bytes"]:,}</td><td class="l">{tile}</td>'
                        f'<td>{_n(l.get("cost", {}).get("estimate"))}</td>'
                        f'<td class="l">{escape(_tile_reason(l.get("tile_reason")))}</td>'
                        f'<td class="l">{escape(l.get("in_place_reason", ""))}</td><td class="l">{escape(fz)}</td></tr>')
        body.append("</table>")
        dma = ", ".join(f"{e} {b:,} B" for e, b in s["dma_bytes"].items())
        body.append(f'<p class="note">L1 {_n(s.get("l1_bytes"))} of {_n(s.get("l1_budget"))} B; DMA {escape(dma)}; '
                    f'bit-exact: {"yes" if s["match"] else "no"}</p></details>')
        out.append("".join(body))
    return "".join(out)


def render_html(data, mm):
    layers = data["layers"]
    names = [f"{i} {l['name']}" for i, l in enumerate(layers)]
    verdict = data["verdict"]
    bad_info = data.get("first_mismatch")
    bad = bad_info["index"] if bad_info else None
    bad_step = next((s["step"] for s in data["steps"] if bad_info and bad_info["layer"] in s["layers"]), None)
    bad_index = next((k for k, s in enumerate(data["steps"]) if s["step"] == bad_step), None)
    key = COUNT_KEYS.get(data["counts"]["method"])
    out = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>tessera: {escape(data['model'])} on "
           f"{escape(data['target'])}</title><style>{CSS}</style></head><body>",
           f"<h1>{escape(data['model'])} on {escape(data['target'])} "
           f'<span id="verdict" class="{"pass" if verdict == "pass" else "fail"}">{escape(verdict.upper())}</span></h1>',
           _cards(data),
           f"<p class=\"note\">measured: {escape(data['counts']['note'])}"]
    if "cost" in data["counts"]:
        out.append(f"<br>estimate: {escape(data['counts']['cost']['estimate'])}")
    if data["counts"].get("ms"):
        out.append(f"<br>ms: {escape(data['counts']['ms'])}")
    out.append("</p>")
    if bad is not None:
        el = bad_info.get("element")
        what = (f" first differing element at (h, w, c) = {tuple(el['index'])}: got {el['got']}, "
                f"expected {el['want']}" if el else "")
        out.append(f'<p id="mismatch" class="fail">layer {bad} {escape(bad_info["layer"])} differs from the '
                   f"golden model;{escape(what)}</p>")
    out.append(_outputs(data))
    out.append(_steps_table(data, key, bad_step))
    out.append(_charts(data, key, bad_index))
    out.append(_memory(data, mm, names))
    out.append(_decisions(data))
    out.append(_step_sections(data, key))
    if data.get("out_of_core"):
        out.append(_out_of_core(data["out_of_core"]))
    out.append("</body></html>\n")
    return "".join(out)


def _out_of_core(ooc):
    """The storage level's traffic per layer and the scheduler's estimates
    (tessera.storage.ooc; docs/out_of_core.md)."""
    t = ooc["totals"]
    out = [f'<h2>Out of core: storage level {escape(ooc["level"])}</h2><p>{t["read_bytes"]:,} B read in {t["reads"]} '
           f'transfers, {t["written_bytes"]:,} B written in {t["writes"]} ({t["blocks_written"]} blocks per inference; '
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
