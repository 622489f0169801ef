"""Parse what a firmware test run prints (see codegen/network.py harness):

    TSR layer <i> <name> fnv=<hex> count=<n> dma=<b0>,<b1>,... [cores=<c0>,<c1>,... dmacount=<n>]
        [io=<bytes read>,<bytes written>,<reads>,<writes>]   (targets with a storage level)
    TSR dump <i> <hex bytes>          (only when asked for with dump=<i>)
    TSR output <i> <hex bytes>
    TSR total count=<n> [overlaps=<n>]
    TSR guard <i> <name> offset=<n>   (guard=1: layer i wrote a free byte of the activation arena)
    TSR done
"""

from ..errors import RunError


def parse(text, where):
    layers, outputs, dumps = [], {}, {}
    total, extra = None, {}
    done = False
    guard = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("TSR "):
            continue
        parts = line.split()
        kind = parts[1]
        if kind == "layer":
            fields = dict(p.split("=", 1) for p in parts[4:])
            layers.append({"index": int(parts[2]), "name": parts[3], "fnv": int(fields["fnv"], 16),
                           "count": int(fields["count"]),
                           "dma": [int(b) for b in fields["dma"].split(",") if b]})
            if "io" in fields:      # storage traffic: bytes read, written, transfers of each
                rb, wb, rn, wn = (int(x) for x in fields["io"].split(","))
                layers[-1]["io"] = {"read": rb, "written": wb, "reads": rn, "writes": wn}
            if "cores" in fields:   # platforms that count per core
                layers[-1]["cores"] = [int(c) for c in fields["cores"].split(",") if c]
                layers[-1]["dma_count"] = int(fields["dmacount"])
        elif kind in ("output", "dump"):
            data = bytes.fromhex(parts[3]) if len(parts) > 3 else b""
            (outputs if kind == "output" else dumps)[int(parts[2])] = data
        elif kind == "total":
            total = int(parts[2].split("=", 1)[1])
            extra = dict(p.split("=", 1) for p in parts[3:] if "=" in p)
        elif kind == "done":
            done = True
        elif kind == "guard" and guard is None:
            guard = (int(parts[2]), parts[3], parts[4].split("=", 1)[1])
    if guard is not None:
        i, name, offset = guard
        raise RunError(where, f"guard=1: layer {name} (step {i}) wrote the activation arena at offset {offset}, "
                              "which no buffer the plan keeps live at that step holds",
                       "the memory plan, or the layer's code, writes outside the planned buffers")
    if not done:
        tail = " | ".join(text.strip().splitlines()[-3:]) if text.strip() else "no output"
        raise RunError(where, f"the firmware did not finish (last lines: {tail})",
                       "see the run log; a fault or hang stops the run before `TSR done`")
    out = {"layers": layers, "outputs": outputs, "dumps": dumps, "total": total}
    if "overlaps" in extra:
        # forks whose per-core split QEMU's scheduling made approximate
        out["core_overlaps"] = int(extra["overlaps"])
    return out
