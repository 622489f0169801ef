"""The schedule as a picture: an inline SVG (no script) with two lanes,
the storage channel (reads, writes) and the core (computes), time left to
right. Consecutive tasks of the same lane, kind and layer merge into one
bar so a network of thousands of tiles stays a small drawing; each bar's
tooltip names the layer, the kind, the tasks and the time. Deterministic."""

from html import escape

COLORS = {"read": "#4e79a7", "write": "#e15759"}
LAYER_COLORS = ("#59a14f", "#f28e2b", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")


def bars(problem, replay):
    """The timeline as report.json keeps it: [lane, kind, layer name, frame,
    start ns, end ns, tasks, busy ns], consecutive tasks merged."""
    tasks = replay["tasks"]
    out = []
    for e in sorted(replay["timeline"], key=lambda e: (e["lane"], e["start"], e["op"])):
        t = tasks[e["id"]]
        name = problem["layers"][t["layer"]]["name"]
        last = out[-1] if out else None
        if (last and last[:4] == [e["lane"], t["kind"], name, t["frame"]]
                and e["start"] - last[5] <= (last[5] - last[4]) // 8):
            last[5] = e["end"]
            last[6] += 1
            last[7] += e["end"] - e["start"]
        else:
            out.append([e["lane"], t["kind"], name, t["frame"], e["start"], e["end"], 1, e["end"] - e["start"]])
    return out


def svg(problem, replay, width=900):
    """The timeline of a replayed program (replay.replay's result)."""
    return svg_from_bars(bars(problem, replay), replay["end"], width)


def svg_from_bars(bars, end, width=900):
    """The drawing of bars() over [0, end] ns."""
    end = max(end, 1)
    left, lane_h, top = 70, 22, 16
    scale = (width - left - 10) / end
    body = [f'<text x="{left}" y="11">0</text>',
            f'<text x="{width - 10}" y="11" text-anchor="end">{end / 1e6:.1f} ms</text>']
    for i, label in enumerate(("storage", "core")):
        y = top + i * (lane_h + 6)
        body.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{label}</text>')
        body.append(f'<rect x="{left}" y="{y}" width="{width - left - 10}" height="{lane_h}" fill="#f7f7f7"/>')
    names = {}
    for lane, kind, name, frame, start, stop, n, busy in bars:
        y = top + (0 if lane == "io" else lane_h + 6)
        color = COLORS.get(kind) or LAYER_COLORS[names.setdefault(name, len(names)) % len(LAYER_COLORS)]
        x = left + start * scale
        w = max((stop - start) * scale, 0.5)
        tip = (f"{name}: {n} {kind}{'s' if n > 1 else ''}{f' (frame {frame})' if frame else ''}, "
               f"{start / 1e6:.3f}-{stop / 1e6:.3f} ms, busy {busy / 1e6:.3f} ms")
        body.append(f'<rect class="{lane}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{lane_h}" fill="{color}">'
                    f'<title>{escape(tip)}</title></rect>')
    h = top + 2 * (lane_h + 6) + 4
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" viewBox="0 0 {width} {h}" '
            f'role="img" aria-label="out-of-core schedule">{"".join(body)}</svg>')
