"""The schedule as a picture: an inline SVG (no script) with two lanes,
the storage channel (reads, writes) and the core (computes), time left to
right. Consecutive tasks of the same lane, kind and layer merge into one
bar so a network of thousands of tiles stays a small drawing; each bar's
tooltip names the layer, the kind, the tasks and the time. Deterministic."""

from html import escape

COLORS = {"read": "#4e79a7", "write": "#e15759"}
LAYER_COLORS = ("#59a14f", "#f28e2b", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")


def _bars(problem, replay):
    tasks = replay["tasks"]
    bars = []
    for e in sorted(replay["timeline"], key=lambda e: (e["lane"], e["start"], e["op"])):
        t = tasks[e["id"]]
        key = (e["lane"], t["kind"], t["frame"], t["layer"])
        last = bars[-1] if bars else None
        if last and last["key"] == key and e["start"] - last["end"] <= (last["end"] - last["start"]) // 8:
            last["end"] = e["end"]
            last["n"] += 1
            last["busy"] += e["end"] - e["start"]
        else:
            bars.append({"key": key, "start": e["start"], "end": e["end"], "n": 1, "busy": e["end"] - e["start"]})
    return bars


def svg(problem, replay, width=900):
    """The timeline of a replayed program (replay.replay's result)."""
    end = max(replay["end"], 1)
    left, lane_h, top = 70, 22, 16
    scale = (width - left - 10) / end
    body = [f'<text x="{left}" y="11">0</text>',
            f'<text x="{width - 10}" y="11" text-anchor="end">{end / 1e6:.1f} ms</text>']
    for i, (lane, label) in enumerate((("io", "storage"), ("compute", "core"))):
        y = top + i * (lane_h + 6)
        body.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{label}</text>')
        body.append(f'<rect x="{left}" y="{y}" width="{width - left - 10}" height="{lane_h}" fill="#f7f7f7"/>')
    for b in _bars(problem, replay):
        lane, kind, frame, layer = b["key"]
        y = top + (0 if lane == "io" else lane_h + 6)
        color = COLORS.get(kind) or LAYER_COLORS[layer % len(LAYER_COLORS)]
        x = left + b["start"] * scale
        w = max((b["end"] - b["start"]) * scale, 0.5)
        name = problem["layers"][layer]["name"]
        tip = (f"{name}: {b['n']} {kind}{'s' if b['n'] > 1 else ''}{f' (frame {frame})' if frame else ''}, "
               f"{b['start'] / 1e6:.3f}-{b['end'] / 1e6:.3f} ms, busy {b['busy'] / 1e6:.3f} ms")
        body.append(f'<rect class="{lane}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{lane_h}" fill="{color}">'
                    f'<title>{escape(tip)}</title></rect>')
    h = top + 2 * (lane_h + 6) + 4
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" viewBox="0 0 {width} {h}" '
            f'role="img" aria-label="out-of-core schedule">{"".join(body)}</svg>')
