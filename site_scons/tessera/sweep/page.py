"""pareto.html: a sweep on one self-contained page (inline SVG and CSS, no
script, no network): per model latency against RAM, every point grey, the
Pareto front red; the smallest memories for the latency; the failed
points with their errors; the whole table."""

import html as _html

from .results import latency

W, H, PAD = 560, 320, 56
COLORS = ("#c62828", "#1565c0", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f")


def _e(x):
    return _html.escape(str(x))


def _num(v):
    if isinstance(v, float) and v.is_integer():
        v = int(v)      # a --latency of 180000000 reads "180,000,000", not "1.8e+08"
    return "" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:.4g}" if isinstance(v, float) else str(v)


def _ticks(lo, hi, n=5):
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def _label(row, spec):
    return ", ".join(f"{a['key']}={row[a['key']]}" for a in spec["axes"])


def _chart(model, rows, front, spec, color):
    ok = [r for r in rows if r["status"] == "ok" and latency(r) is not None and r["ram_total"] is not None]
    if not ok:
        return f"<p>{_e(model)}: no point with both a latency and a RAM total.</p>"
    xs = [r["ram_total"] / 1024 for r in ok]
    ys = [latency(r) / 1e6 for r in ok]
    x0, x1 = min(xs) * 0.95, max(xs) * 1.05 or 1
    y0, y1 = min(ys) * 0.95, max(ys) * 1.05 or 1
    if x1 - x0 < 1e-9:
        x0, x1 = x0 - 1, x1 + 1
    if y1 - y0 < 1e-9:
        y0, y1 = y0 - 1, y1 + 1
    sx = lambda x: PAD + (x - x0) / (x1 - x0) * (W - PAD - 16)   # noqa: E731
    sy = lambda y: H - PAD + 16 - (y - y0) / (y1 - y0) * (H - PAD - 8)   # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + 10}" role="img" '
             f'aria-label="{_e(model)}: latency against RAM">',
             f'<rect x="{PAD}" y="8" width="{W - PAD - 16}" height="{H - PAD + 8}" fill="#fafafa" stroke="#999"/>']
    for t in _ticks(x0, x1):
        parts.append(f'<text x="{sx(t):.1f}" y="{H - PAD + 34}" font-size="11" text-anchor="middle">{t:.0f}</text>')
    for t in _ticks(y0, y1):
        parts.append(f'<text x="{PAD - 6}" y="{sy(t) + 4:.1f}" font-size="11" text-anchor="end">{t:.3g}</text>')
    unit = ok[0]["count"] or "count"
    parts.append(f'<text x="{(W + PAD) / 2}" y="{H + 6}" font-size="12" text-anchor="middle">on-chip RAM (kB: what '
                 f'the levels hold at run time, with reservations)</text>')
    parts.append(f'<text x="14" y="{H / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {H / 2})">'
                 f'{_e(unit)} (millions)</text>')
    if len(front) > 1:
        pts = " ".join(f"{sx(r['ram_total'] / 1024):.1f},{sy(latency(r) / 1e6):.1f}" for r in front)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
    on_front = {_label(r, spec) for r in front}
    for r in ok:
        x, y = sx(r["ram_total"] / 1024), sy(latency(r) / 1e6)
        fill = color if _label(r, spec) in on_front else "#9e9e9e"
        size = 5 if _label(r, spec) in on_front else 3.5
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{size}" fill="{fill}"><title>{_e(_label(r, spec))}: '
                     f'{_num(latency(r))} {_e(unit)}{"" if r["latency"] is not None else " (estimate)"}, RAM {_num(r["ram_total"])} B</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def _table(rows, columns):
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr class='{}'>{}</tr>".format(
        "bad" if r.get("status") != "ok" else "", "".join(f"<td>{_e(_num(r.get(c)))}</td>" for c in columns))
        for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def html(spec, rows, front, small):
    models = list(dict.fromkeys(r["model"] for r in rows))
    ok = sum(1 for r in rows if r["status"] == "ok")
    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
           f"<title>tessera sweep {_e(spec['name'])}</title><style>",
           "body{font-family:sans-serif;margin:24px;color:#222} h2{margin-top:28px}"
           " table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ccc;padding:2px 6px;"
           "text-align:right} th{background:#eee} tr.bad td{background:#fdecea}"
           " .charts{display:flex;flex-wrap:wrap;gap:16px} .chart{border:1px solid #ddd;padding:8px}"
           " .note{color:#555;font-size:13px}",
           "</style></head><body>",
           f"<h1>tessera sweep: {_e(spec['name'])}</h1>",
           f"<p>{len(rows)} points ({ok} built and checked, {len(rows) - ok} failed): "
           f"{_e(', '.join(models))} on {_e(', '.join(t['name'] for t in spec['targets']))}; axes "
           f"{_e(', '.join(a['key'] + ' ' + str(a['values']) for a in spec['axes']))}.</p>",
           "<p class='note'>Each chart: latency against on-chip RAM (what the levels hold at run time, with the "
           "target's reserved bytes; external memories apart); in colour: the Pareto front (no other point is smaller and faster); grey: the others. "
           "Hover a point for its configuration.</p><div class='charts'>"]
    for i, model in enumerate(models):
        mine = [r for r in rows if r["model"] == model]
        out.append(f"<div class='chart'><h3>{_e(model)}</h3>"
                   f"{_chart(model, mine, front.get(model, []), spec, COLORS[i % len(COLORS)])}</div>")
    out.append("</div><h2>Pareto front</h2>")
    cols = ["model"] + [a["key"] for a in spec["axes"]] + ["latency", "ram_total"]
    out.append(_table([r for m in models for r in front.get(m, [])], cols))
    if small is not None:
        out.append(f"<h2>Smallest memory for at most {_num(small['latency'])} {_e(rows[0].get('count') or '')}"
                   f"</h2><p class='note'>smallest by {_e(small['measure'])}</p><ul>")
        for model, ans in small["models"].items():
            text = "no point reaches it" if ans is None else (
                ", ".join(f"{k}={v}" for k, v in ans["config"].items()) + f": {_num(ans['latency'])}")
            out.append(f"<li>{_e(model)}: {_e(text)}</li>")
        both = small.get("all")
        out.append("<li><b>all models</b>: " + _e("no configuration reaches it for every model" if both is None else
                   ", ".join(f"{k}={v}" for k, v in both["config"].items())) + "</li></ul>")
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        out.append("<h2>Failed points</h2>")
        out.append(_table(failed, ["model"] + [a["key"] for a in spec["axes"]] + ["error"]))
    out.append("<h2>Every point</h2>")
    out.append(_table(rows, list(rows[0]) if rows else []))
    out.append("</body></html>\n")
    return "".join(out)
