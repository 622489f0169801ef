"""The build's summary on the console: one place that decides how tables
are printed, how wide, and in which units (bytes, "B"; KiB = 1024 B where
said).

The step table fits 100 columns (a pipe or log gets 100; a terminal its
own width, and more columns from 140 on); every row is a step (a fused
step is one row naming its layers), its count the step's."""

from ..config.views import COUNT_KEYS
from ..util.units import both, nbytes

NARROW = 100      # a pipe or a log
WIDE = 140        # from here on the table shows every column
ABBREV = {"conv2d": "conv", "depthwise": "dw", "pointwise": "pw", "linear": "fc", "maxpool": "maxpool",
          "avgpool": "avgpool", "softmax": "softmax", "matmul": "matmul", "concat": "concat"}


def make_console():
    """A rich Console: the terminal's width, or 100 columns in a pipe or
    log (rich would take 80 there; COLUMNS overrides both)."""
    import os

    from rich.console import Console

    console = Console()
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console = Console(width=NARROW)
    return console


def kind_text(ops):
    return "+".join(ABBREV.get(op, op) for op in ops)


def short_tile(text):
    """A fused step's "3 bands of 11 rows, ..." as "3 bands" (report.html has the rest)."""
    return text.split(" of ")[0] if " band" in text else text


def _n(v):
    return "" if v is None else f"{v:,}"


def _err(e):
    return "" if e is None else f"{100 * e:+.1f}%"


def step_table(data, width):
    from rich import box
    from rich.table import Table

    key = COUNT_KEYS.get(data["counts"]["method"])
    wide = width >= WIDE
    steps = data["steps"]
    estimated = any("estimate" in s for s in steps)
    timed = any("ms" in s for s in steps)
    unit = data["counts"].get("unit", key)
    table = Table(title=f"{data['model']} on {data['target']}: {data['verdict'].upper()} "
                        f"({len(steps)} steps of {len(data['layers'])} layers)",
                  box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("step", overflow="ellipsis", max_width=18 if not wide else 34, no_wrap=True)
    table.add_column("kind", overflow="ellipsis", max_width=10 if not wide else 20, no_wrap=True)
    table.add_column("MACs", justify="right")
    table.add_column("tile", justify="right", no_wrap=True)
    if wide:
        table.add_column("L1 B", justify="right")
        table.add_column("weights B", justify="right")
        table.add_column("DMA B", justify="right")
    if key:
        table.add_column(unit, justify="right")
    if estimated:
        if wide:
            table.add_column("estimate", justify="right")
        table.add_column("est. err", justify="right")
    if timed:
        table.add_column("ms", justify="right")
    table.add_column("ok")
    for s in steps:
        cells = [str(s["index"]), s["step"], kind_text(s["ops"]), _n(s["macs"]),
                 s["tile"] if wide else short_tile(s["tile"])]
        if wide:
            cells += [_n(s.get("l1_bytes")), _n(s["weight_bytes"]), _n(sum(s["dma_bytes"].values()))]
        if key:
            cells.append(_n(s.get(key)))
        if estimated:
            if wide:
                cells.append(_n(s.get("estimate")))
            cells.append(_err(s.get("error")))
        if timed:
            cells.append("" if s.get("ms") is None else f"{s['ms']:.3f}")
        cells.append("yes" if s["match"] else "[red]NO[/red]")
        table.add_row(*cells)
    return table


def memory_lines(data):
    """Per level what the linked firmware takes (report.json's firmware),
    then RAM and flash; without memory regions (host), the plan's arenas
    and the code."""
    fw = data.get("firmware")
    lines = []
    if fw and fw.get("levels"):
        for name, m in fw["levels"].items():
            parts = " + ".join(f"{p} {nbytes(n)}" for p, n in m["parts"].items())
            res = ", ".join(f"{k} {nbytes(v)}" for k, v in m["reserved"].items())
            lines.append(f"{name} ({'RAM' if m['writable'] else 'read-only'}, {nbytes(m['size'])}): "
                         f"{nbytes(m['used'])} used = {parts or 'nothing'}" + (f"; reserved: {res}" if res else ""))
        ram = [n for n, m in fw["levels"].items() if m["writable"] and m["used"]]
        rom = [n for n, m in fw["levels"].items() if not m["writable"] and m["used"]]
        harness = fw["code"].get("harness", 0) + fw["constants"].get("harness", 0)
        lines.append(f"RAM {both(fw['ram'])} ({' + '.join(ram) or 'none'}), flash {both(fw['flash'])} "
                     f"({' + '.join(rom) or 'no read-only level'}), of which the test harness and its input "
                     f"{nbytes(harness)}; 1 KiB = 1024 B; counted in {fw['file']} and its link map")
    else:
        mem = data["memory"]
        ram = {level: m["ram"] for level, m in mem.items() if "ram" in m}
        if ram:
            lines.append("RAM as planned: " + " + ".join(f"{level} {nbytes(n)} ({mem[level]['holds']})"
                                                         for level, n in ram.items())
                         + f" = {both(sum(ram.values()))} (arenas network.c declares plus reserved bytes)")
        if fw:
            lines.append("code: " + ", ".join(f"{k} {nbytes(v)}" for k, v in fw["code"].items())
                         + f"; constants: " + ", ".join(f"{k} {nbytes(v)}" for k, v in fw["constants"].items())
                         + f" ({fw['file']}'s link map)")
    return lines


def plan_table(data):
    from rich import box
    from rich.table import Table

    mem = Table(title="memory plan (bytes)", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    for col in ("level", "holds", "peak", "lower bound", "tensor bound", "usable", "size"):
        mem.add_column(col, justify="right" if col not in ("level", "holds") else "left")
    for level, m in data["memory"].items():
        mem.add_row(level, m["holds"], _n(m["peak"]), _n(m["lower_bound"]), _n(m.get("tensor_bound")),
                    _n(m["usable"]), _n(m["size"]))
    return mem


def total_line(data):
    tot = data["totals"]
    key = COUNT_KEYS.get(data["counts"]["method"])
    line = f"total: {tot['macs']:,} MACs, {tot['params']:,} parameters ({nbytes(tot['weight_bytes'])} of weights)"
    st = tot.get("steps", {})
    if key and key in tot:
        unit = data["counts"].get("unit", key)
        line += f"; {st.get(key, 0):,} {unit} in its {st.get('count', 0)} steps"
        if tot.get("ms") is not None:
            line += f" ({tot['ms']:.3f} ms at {data['counts']['clock_hz'] / 1e6:g} MHz)" \
                if data["counts"].get("clock_hz") else f" ({tot['ms']:.3f} ms)"
        line += f", {tot[key]:,} for the whole run with the harness between them ({data['counts']['note']})"
    if st.get("estimate") is not None:
        line += f"; cost model estimate {st['estimate']:,}"
        if st.get("error") is not None:
            line += f" ({100 * st['error']:+.1f}% of the steps' measured sum)"
    ws = tot.get("weights_streamed")
    if ws:
        line += (f"; {nbytes(ws['bytes'])} of weights streamed from {ws['from']} through {ws['through']} "
                 f"in {ws['chunks']} chunks")
    sp = tot.get("spill_traffic")
    if sp:
        line += (f"; activations moved to {sp['level']}: {nbytes(sp['read_bytes'])} read and "
                 f"{nbytes(sp['written_bytes'])} written by {sp['layers']} layers "
                 f"({sp['asynchronous_layers']} double-buffered)")
    line += (f"; activation peak {nbytes(tot['peak_activation_bytes'])} (tensor bound "
             f"{nbytes(tot['tensor_bound_activation_bytes'])})")
    return line


def output_lines(data):
    out = []
    for o in data.get("outputs", []):
        top = ", ".join(f"{i}: {v}" + ("" if r is None else f" ({r:g})") for i, v, r in o["top"])
        line = f"output {o['tensor']} ({o['dtype']} {'x'.join(map(str, o['shape']))}), top {len(o['top'])}: {top}"
        ref = o.get("reference")
        if ref:
            line += f"; {ref['by']}: " + ", ".join(f"{i}: {v}" for i, v in ref["top"]) + " (" + (
                "the same order" if ref["same_order"] else "the same top, then another order"
                if ref["same_top"] else "[red]another top[/red]") + (
                f"; its values within {ref['max_lsb']} LSB of the firmware's" if ref["max_lsb"] else "") + ")"
        out.append(line)
    return out


def render(data, console=None):
    """Print the build's summary."""
    console = console or make_console()
    console.print(step_table(data, console.width))
    console.print(plan_table(data))
    for line in memory_lines(data) + [total_line(data)] + output_lines(data):
        console.print(line)
    ooc = data.get("out_of_core")
    if ooc:
        t = ooc["totals"]
        text = (f"out of core ({ooc['level']}): {nbytes(t['read_bytes'])} read in {t['reads']} transfers, "
                f"{nbytes(t['written_bytes'])} written in {t['writes']}; {t['io_bound_layers']} IO-bound layers; "
                f"compute {t['compute_ms']} ms, IO {t['io_ms']} ms")
        s = ooc.get("schedule")
        if s and "skipped" in s:
            text += f"; not scheduled: {s['skipped']}"
        elif s:
            text += (f"; scheduled {s['latency_ms']} ms per frame = {s['latency_vs_unlimited']}x unlimited SRAM, "
                     f"{s['throughput_fps']} frames/s over {s['frames']} (unlimited {s['unlimited_fps']})")
        console.print(text)
        if ooc.get("firmware"):
            console.print(f"firmware: {firmware_line(ooc['firmware'])}")
    if "kernels" in data:
        console.print(f"kernels: {data['kernels']['library']}, {data['kernels']['path']} code path")
    ref = data.get("reference")
    if ref is not None:
        bad = [r for r in ref["compared"] if not r.get("equal", True)]
        text = (f"{ref['kind']} reference {ref['reference']}: {ref['verdict'].upper()} "
                f"({len(ref['compared']) - len(bad)} of {len(ref['compared'])} equal; {ref['compared_by']})")
        console.print(text if not bad else f"[red]{text}[/red]")


def firmware_line(fw):
    """Which program the out-of-core firmware runs, in one line (the console
    and report.html)."""
    if fw["program"] == "in order":
        return f"the in-order program ({fw['why']})"
    return (f"the scheduler's program {fw['program']} ({fw['ops']['ops']} ops), estimated {fw['estimate_ms']} ms "
            f"per frame = {fw['estimate_vs_unlimited']}x unlimited SRAM; in order {fw['in_order_ms']} ms")
