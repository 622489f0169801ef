"""One C file per patched step (schedule.json's kind "patch",
tessera.tiles.patches): a chain of layers run patch by patch on buffers in
the tile level, each layer on its library's own kernel (the adapter's
kernel_function, as the layer alone would call it), its intermediates never
in the activation level.

The step is its first layer's function (the others' files are empty
halves). It loads every layer's weights and parameters once (or reads them
where they live: `direct`), then walks the op table of
tiles.patches.program (kernels/include/tessera/patch.h): shifts of kept
rows, loads of the chain's input boxes, one call per layer and patch, the
output patch stored from one of two buffers (the store runs while the next
patch computes; the other buffer is waited for before it is reused).

Tile level layout, each region aligned: the program's buffers, then per
layer its weights and its parameters, then the scratch every call shares:
exactly what the patch tiler counted (tiler/patch.py).
"""

from .. import ir
from ..config.views import param_arrays, tiler_layer
from ..errors import TesseraError
from ..tiler.memory import align_up
from ..tiler.patch import step_program
from .cfmt import ROUNDING, header_comment
from .fused import _rq_lines, stream_copies
from .layer import symbol
from .libraries import library

OPS = {"shift": 0, "load": 1, "call": 2, "add": 3, "store": 4}
POOLS = ("maxpool", "avgpool")


def _row(o):
    """An op of the program as a tsr_patch_op_t initializer (patch.h)."""
    f = dict(src=0, dst=0, aux=0, h=0, w=0, ih=0, iw=0, pad=[0, 0, 0, 0], layer=0, buf=0)
    kind = o["op"]
    if kind == "shift":
        f.update(src=o["from"], dst=o["to"], aux=o["bytes"])
    elif kind == "load":
        f.update(dst=o["to"], ih=o["rows"][0], h=o["rows"][1], iw=o["cols"][0], w=o["cols"][1])
    elif kind == "call":
        f.update(src=o["in"][0], ih=o["in"][1], iw=o["in"][2], dst=o["out"][0], h=o["out"][1], w=o["out"][2],
                 pad=o["pad"], layer=o["layer"])
    elif kind == "add":
        if o["out"][1] != o["n"]:
            raise RuntimeError("patched step: an add's output rows are not dense")
        f.update(src=o["a"][0], ih=o["a"][1], aux=o["b"][0], iw=o["b"][1], dst=o["out"][0], h=o["rows"], w=o["n"],
                 layer=o["layer"])
    else:
        f.update(src=o["from"], ih=o["rows"][0], h=o["rows"][1], iw=o["cols"][0], w=o["cols"][1], buf=o["buf"])
    if max(f["h"], f["w"], f["ih"], f["iw"]) >= 1 << 15:
        raise TesseraError("patched step", f"a {kind} op with a field over 32767 ({f})", "narrower patches")
    return [f["src"], f["dst"], f["aux"], f["h"], f["w"], f["ih"], f["iw"], *f["pad"], OPS[kind], f["layer"],
            f["buf"]]


def generate(step, members, graph, slices, target, model):
    """The step's C file. step: its schedule entry (layers, patch); members:
    its IR layers; graph: a graph holding them and their tensors; slices:
    {layer: its plan slice}."""
    prefix = target["prefix"]
    first, last = members[0], members[-1]
    if any(slices[m.name].get("spill") for m in members):
        raise TesseraError(f"patched step {step['step']}", "patched steps do not read spilled activations",
                           "build with fusion=none, or give the activation level more room")
    chain, prog = step_program(graph, step)
    p = step["patch"]
    lib = library(target["kernels"])
    align = p["align"]
    direct = p["direct"]
    streams = {m.name: slices[m.name].get("wstream") for m in members}
    x, y = graph.tensor(first.inputs[0]), graph.tensor(last.output)
    x_at, y_at = slices[first.name]["inputs"][0], slices[last.name]["output"]
    L1, L2 = f"{prefix}_L1", f"{prefix}_L2"
    # the tile level: the program's buffers, each layer's constants, the scratch
    cur = prog["bytes"]
    regions, arrays = {}, []
    for m in members:
        v = tiler_layer(m, graph)
        ch = graph.tensor(m.output).shape[-1]
        at = {}
        if not direct and m.weights:
            regions[(m.name, "weights")] = cur
            arrays.append((m, "weights", "int8_t", v["w_bytes_per_cout"], ch, cur))
            cur += align_up(v["w_bytes_per_cout"] * ch, align)
        ps = param_arrays(m)
        if not direct and ps:
            base = cur
            for name, ctype, size in ps:
                at[name] = base
                arrays.append((m, name, ctype, size, ch, base))
                base += size * ch
            cur += align_up(sum(size for _, _, size in ps) * ch, align)
        regions[m.name] = at
    scratch_at = cur
    cur += align_up(p["l1_bytes"]["scratch"], align)
    if cur != p["l1_bytes"]["total"]:
        raise RuntimeError(f"patched step {step['step']}: tile level layout {cur} bytes, the patch tiler counted "
                           f"{p['l1_bytes']['total']}")
    shape = lambda s: "x".join(map(str, s))  # noqa: E731
    Ph, Pw = p["tile"]
    rows = [_row(o) for o in prog["ops"]]
    offset_t = "uint16_t" if max(max(r[:3]) for r in rows) < 1 << 16 else "int32_t"
    out = [header_comment([
        f"tessera: patched step {step['step']} of {model}: {len(members)} layers "
        f"({', '.join(m.name for m in members)})",
        f"{shape(x.shape)} -> {shape(y.shape)}, patches of {Ph}x{Pw} output pixels ({prog['patches']}), halos "
        f"{'recomputed' if p['policy'] == 'recompute' else 'kept (rows cached down each column strip)'}; "
        f"{cur} bytes of {target['tile_level']}; intermediates only there.",
    ])]
    out.append('#include <stddef.h>\n#include <stdint.h>\n\n#include "tessera/hal.h"\n#include "tessera/kernels.h"\n'
               f'#define TSR_PATCH_OFFSET {offset_t}\n#include "tessera/patch.h"\n#include "tessera/tile.h"'
               + "".join(f'\n#include "{h}"' for h in getattr(lib, "HEADERS", ())) + "\n")
    out.append(f"extern int8_t {L1}[];\nextern int8_t {L2}[];")
    for m in members:
        if streams[m.name] is None:
            if m.weights:
                out.append(f"extern const int8_t {symbol(prefix, m.name, 'weights')}[];")
            for name, ctype, _ in param_arrays(m):
                out.append(f"extern const {ctype} {symbol(prefix, m.name, name)}[];")
    if any(streams.values()):
        if direct:
            raise TesseraError(f"patched step {step['step']}", "weights streamed and read in place", "a planner bug")
        out.append(f"/* weights and parameters arrive from {target['w_level']} in chunks, through "
                   f"{target['w_stage']['level']} */\nextern tsr_wstream_t {prefix}_wstream;")
    out.append(f"\n#define NOPS {len(prog['ops'])}\n#define ENGINE_ACT {target['act_engine']}\n"
               f"#define ENGINE_W {target['w_engine']}\n")
    out.append("/* src, dst, aux | h, w, ih, iw | pad t, l, b, r | op, layer, buf */")
    out.append("static const tsr_patch_op_t ops[NOPS] = {")
    out.extend("    {" + ", ".join(map(str, r)) + "}," for r in rows)
    out.append("};\n")
    # each layer's kernel, as its own layer file calls it
    for k, m in enumerate(members):
        kernel, args_t = lib.kernel_function(m, graph=graph), lib.args_type(m, graph=graph)
        out.append(f"static void compute{k}(void *args)\n{{\n    {kernel}((const {args_t} *)args, hal_core_id(), "
                   "hal_num_cores());\n}\n")
    out.append(f"void {symbol(prefix, first.name)}(void)\n{{")
    out.append("    hal_dma_job_t io = {0}, out[2] = {{0}};" if direct else
               "    hal_dma_job_t io = {0}, w = {0}, out[2] = {{0}};")
    per_core = p["l1_bytes"]["scratch"] // target["cores"]
    # on pulp_open each layer's arguments are static (in L2, set on every
    # entry) and each call takes a copy on the stack (_call): a frame with a
    # set per layer overflowed core 0's 2 kB of L1 stack beneath the kernels'
    # frames. Elsewhere the stack holds them (static data counts against RAM
    # reservations that are tighter than the stack: stm32f4's).
    held = target.get("platform") == "pulp_open"
    splits = target.get("rq_split", {})
    args_ts = [lib.args_type(m, graph=graph) for m in members]
    for k, m in enumerate(members):
        out.append(f"    static {args_ts[k]} a{k};" if held else f"    {args_ts[k]} a{k} = {{0}};")
        lines, ref = _requant(m, k, regions[m.name], direct, prefix, splits.get(m.name, 0))
        if held and lines:
            lines = [f"static tsr_requant_t rq{k};"] + lines[1:]
        out.extend("    " + line for line in lines)
        out.extend("    " + line.replace("a.", f"a{k}.", 1)
                   for line in lib.constant_args(m, {"scratch": scratch_at}, per_core, prefix, ref, graph=graph))
        if m.op not in POOLS + ("add",):
            if m.weights:
                src = symbol(prefix, m.name, "weights") if direct else f"{L1} + {regions[(m.name, 'weights')]}"
                out.append(f"    a{k}.weights = {src};")
            if m.bias:
                src = symbol(prefix, m.name, "bias") if direct else \
                    f"(const int32_t *)({L1} + {regions[m.name]['bias']})"
                out.append(f"    a{k}.bias = {src};")
            out.append(f"    a{k}.in_c = {graph.tensor(m.inputs[0]).shape[2]};")
            out.append(f"    a{k}.out_c = {graph.tensor(m.output).shape[2]};")
        elif m.op in POOLS:
            out.append(f"    a{k}.c = {graph.tensor(m.output).shape[2]};")
    if not direct:
        out.append("    /* every layer's weights and parameters, once */")
        out.extend(_weights(members, arrays, streams, prefix))
    esize_x, esize_y = ir.DTYPES[x.dtype], ir.DTYPES[y.dtype]
    out.append("    for (int i = 0; i < NOPS; i++) {")
    out.append("        const tsr_patch_op_t *o = &ops[i];")
    out.append("        switch (o->op) {")
    out.append("        case TSR_PATCH_SHIFT:")
    out.append(f"            tsr_patch_move({L1} + o->dst, {L1} + o->src, o->aux);")
    out.append("            break;")
    out.append("        case TSR_PATCH_LOAD:")
    out.append(f"            tsr_dma_box(&io, ENGINE_ACT, {L1} + o->dst, {L2} + {x_at}, {x.shape[1]}, {x.shape[2]}, "
               f"{esize_x}, o->ih, o->h, o->iw, o->w, 0, {x.shape[2]}, 1);")
    out.append("            hal_dma_wait(&io);")
    out.append("            break;")
    out.append("        case TSR_PATCH_STORE:")
    out.append(f"            tsr_dma_box(&out[o->buf], ENGINE_ACT, {L1} + o->src, {L2} + {y_at}, {y.shape[1]}, "
               f"{y.shape[2]}, {esize_y}, o->ih, o->h, o->iw, o->w, 0, {y.shape[2]}, 0);")
    out.append("            hal_dma_wait(&out[o->buf ^ 1]);   /* the next patch writes the other buffer */")
    out.append("            break;")
    out.append("        default:")
    out.append("            switch (o->layer) {")
    for k, m in enumerate(members):
        out.append(f"            case {k}:")
        out.extend("                " + line for line in _call(k, m, L1, args_ts[k], held))
        out.append("                break;")
    out.append("            }")
    out.append("        }")
    out.append("    }")
    out.append("    hal_dma_wait(&out[0]);\n    hal_dma_wait(&out[1]);")
    out.append("}")
    return "\n".join(out) + "\n"


def _requant(m, k, where, direct, prefix, split=0):
    """(lines, reference) of layer k's requantization, its declaration
    first: per tensor as constants; per channel from its arrays in the tile level
    (`where`), or where they live (direct). split: the cut of
    codegen/libraries/pulp_nn.dw_split (0: none)."""
    if m.requant is None:
        return [], "NULL"
    per_channel = "mul" in {n for n, _, _ in param_arrays(m)}
    if not per_channel or not direct:
        return _rq_lines(m, f"rq{k}", per_channel, where, prefix, split)
    rq = m.requant
    lines = [f"tsr_requant_t rq{k} = {{0}};", f"rq{k}.per_channel = 1;"]
    for name, _, _ in param_arrays(m):
        if name in ("mul", "shift", "add"):
            lines.append(f"rq{k}.{name} = {symbol(prefix, m.name, name)};")
    lines += [f"rq{k}.zero_point = {rq.zero_point};", f"rq{k}.lo = {rq.lo};", f"rq{k}.hi = {rq.hi};",
              f"rq{k}.rounding = {ROUNDING[rq.rounding]};"]
    if rq.divisor:
        lines.append(f"rq{k}.divisor = {rq.divisor};")
    if split:
        lines.append(f"rq{k}.split = {split};   /* pulp_nn.dw_split */")
    return lines, f"&rq{k}"


def _call(k, m, L1, args_t, held):
    """One call of layer k from the op `o`; held: on a copy of its static
    arguments."""
    a = "c" if held else f"a{k}"
    if m.op == "add":
        # rows apart in a wider buffer: one call a row; else one call
        body = [f"if (o->ih == o->w && o->iw == o->w) {{",
                f"    {a}.a = {L1} + o->src;", f"    {a}.b = {L1} + o->aux;", f"    {a}.out = {L1} + o->dst;",
                f"    {a}.n = o->h * o->w;", f"    hal_fork(compute{k}, &{a});",
                "} else {",
                f"    for (int32_t r = 0; r < o->h; r++) {{",
                f"        {a}.a = {L1} + o->src + r * o->ih;", f"        {a}.b = {L1} + o->aux + r * o->iw;",
                f"        {a}.out = {L1} + o->dst + r * o->w;", f"        {a}.n = o->w;",
                f"        hal_fork(compute{k}, &{a});", "    }", "}"]
    else:
        body = [f"{a}.in = {L1} + o->src;", f"{a}.in_h = o->ih;", f"{a}.in_w = o->iw;",
                f"{a}.out = {L1} + o->dst;", f"{a}.out_h = o->h;", f"{a}.out_w = o->w;",
                f"{a}.pad_t = o->pad_t;", f"{a}.pad_l = o->pad_l;", f"{a}.pad_b = o->pad_b;",
                f"{a}.pad_r = o->pad_r;", f"hal_fork(compute{k}, &{a});"]
    if not held:
        return body
    return [f"{{   /* one layer's arguments in the frame at a time */", f"    {args_t} {a} = a{k};"] + \
        ["    " + line for line in body] + ["}"]


def _weights(members, arrays, streams, prefix):
    """Copies of every layer's constants into the tile level: from their
    arrays, or chunk by chunk from the weight stream (in the order the plan
    streams them)."""
    L1 = f"{prefix}_L1"
    out = []
    for m in members:
        mine = [a for a in arrays if a[0] is m]
        if not mine:
            continue
        stream = streams[m.name]
        if stream is None:
            for _, name, _, size, ch, at in mine:
                out.append(f"    tsr_rows_in(&w, ENGINE_W, {L1} + {at}, {symbol(prefix, m.name, name)}, {size}, 0, "
                           f"{ch});")
            continue
        out += stream_copies(mine, stream, prefix)
    out.append("    hal_dma_wait(&w);")
    return out
