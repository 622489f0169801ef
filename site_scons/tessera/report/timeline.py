"""report.html's drawing of the out-of-core schedule: the storage channel
and the core over one frame (tessera.storage.timeline), from report.json's
out_of_core.schedule.timeline (bars) and latency. Empty when the build has
no schedule."""

from html import escape

from ..storage.timeline import COLORS, svg_from_bars


def html(schedule, what="the scheduler's estimate"):
    if not schedule or not schedule.get("timeline"):
        return ""
    end = max(b[5] for b in schedule["timeline"])
    legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{escape(k)}</span>' for k, c in COLORS.items())
    return (f'<h3>Schedule: one frame, storage channel and core ({escape(what)})</h3><div class="legend">{legend}'
            f'<span>computes: one color per layer (hover a bar)</span></div>{svg_from_bars(schedule["timeline"], end)}')
