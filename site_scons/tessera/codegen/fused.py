"""One C file per fused step (the selector's schedule.json), DW->PW or
PW->DW: the first layer's input in row bands (the depthwise's input rows,
halo included), double-buffered, the fused kernel on every core, the second
layer's output bands back. Weights and parameters of both layers load once;
the intermediate exists only in L1.

Kernels: the library adapter's FUSED[kind] (else the reference tsr_dw_pw /
tsr_pw_dw, per_core: one fork per band); with FUSED_SCHEME[kind] ==
"shared" (PULP-NN) per block of fd rows (DW->PW) or fd channels (PW->DW) the adapter's
FUSED_PARTS: the block's arguments, a fork of the library's depthwise, a
fork of its pointwise.

The step is generated as the first layer's function (it runs first in the
layer table); the second's function is then empty, and the first layer's
output has no place in L2.

L1 layout, in this order, each region aligned: input bands, output bands
(one per buffer), first layer's weights and parameters, second layer's,
intermediate, depthwise stripes: exactly what the fused tiler counted.
"""

from .. import ir
from ..util.cname import c_comment
from ..errors import TesseraError
from ..tiler.memory import align_up
from ..config.views import param_arrays, tiler_layer
from .cfmt import ROUNDING, header_comment, offsets_table
from .layer import symbol
from .libraries import input_offset, library


def layout(ft, align):
    """Offsets of the fused step's L1 regions (total == the tiler's); with
    an add epilogue, the add's other input's bands after the output's."""
    b = ft["l1_bytes"]
    cur = 0
    out = {}

    def take(key, n):
        nonlocal cur
        out[key] = cur
        cur += align_up(n, align)
    for i in range(ft["buffering"]):
        take(f"in{i}", b["in"])
    for i in range(ft["buffering"]):
        take(f"out{i}", b["out"])
    if "skip" in b:
        for i in range(ft["buffering"]):
            take(f"skip{i}", b["skip"])
    return out, cur


def _rq_lines(layer, var, per_channel, params_at, prefix, split=0):
    rq = layer.requant
    if rq is None:
        return [], "NULL"
    L1 = f"{prefix}_L1"
    lines = [f"tsr_requant_t {var} = {{0}};"]
    if per_channel:
        lines.append(f"{var}.per_channel = 1;")
        lines.append(f"{var}.mul = (const int32_t *)({L1} + {params_at['mul']});")
        lines.append(f"{var}.shift = (const int8_t *)({L1} + {params_at['shift']});")
        if "add" in params_at:
            lines.append(f"{var}.add = (const int32_t *)({L1} + {params_at['add']});")
    else:
        lines.append(f"static const int32_t {var}_mul[1] = {{{int(rq.mul[0])}}};")
        lines.append(f"static const int8_t {var}_shift[1] = {{{int(rq.shift[0])}}};")
        lines.append(f"{var}.mul = {var}_mul;\n    {var}.shift = {var}_shift;")
        if any(rq.add):
            lines.append(f"static const int32_t {var}_add[1] = {{{int(rq.add[0])}}};")
            lines.append(f"{var}.add = {var}_add;")
    lines.append(f"{var}.zero_point = {rq.zero_point};\n    {var}.lo = {rq.lo};\n    {var}.hi = {rq.hi};\n"
                 f"    {var}.rounding = {ROUNDING[rq.rounding]};")
    if rq.divisor:
        lines.append(f"{var}.divisor = {rq.divisor};")
    if split:
        lines.append(f"{var}.split = {split};   /* pulp_nn.dw_split */")
    return lines, f"&{var}"


def generate(first, second, graph, ft, first_slice, second_slice, target, model, epilogue=None):
    """The fused step's C file; ft["kind"]: dw_pw (first the depthwise) or
    pw_dw (first the pointwise), or dw_pw_add with epilogue = (the add, its
    plan slice): each output band, once computed, is added in L1 to the band
    of the add's other input (loaded with the input band) by the library's
    add kernel, and only the sum goes to the add's output."""
    prefix = target["prefix"]
    kind = ft.get("kind", "dw_pw")
    if kind in ("dw_pw_add", "pw_dw_add"):
        kind = kind[:-len("_add")]
    dw, pw = (first, second) if kind == "dw_pw" else (second, first)
    if first_slice.get("spill") or second_slice.get("spill"):
        raise TesseraError(f"fused step {first.name}+{second.name}", "fused steps do not yet read spilled "
                           "activations", "build with fusion=none, or give the activation level more room")
    streams = {first.name: first_slice.get("wstream"), second.name: second_slice.get("wstream")}
    x, m, y = graph.tensor(first.inputs[0]), graph.tensor(first.output), graph.tensor(second.output)
    out_at = second_slice["output"]
    if epilogue is not None:
        add, add_slice = epilogue
        if add_slice.get("spill"):
            raise TesseraError(f"fused step {ft['group']}", "fused steps do not yet read spilled activations",
                               "build with fusion=none, or give the activation level more room")
        skip = [n for n in add.inputs if n != second.output][0]
        add_first = add.inputs[0] == second.output      # the pointwise's output is the add's first input
        skip_at = add_slice["inputs"][add.inputs.index(skip)]
        y, out_at = graph.tensor(add.output), add_slice["output"]
    _, W, C = x.shape
    Ho, Wo, Co = y.shape
    nb, bufs = len(ft["bands"]), ft["buffering"]
    align = ft["align"]
    offs, cur = layout(ft, align)
    L1, L2 = f"{prefix}_L1", f"{prefix}_L2"
    regions = {}

    def take(key, n):
        nonlocal cur
        regions[key] = cur
        cur += align_up(n, align)
    arrays = []   # (layer, array name, ctype, bytes per channel, channels, L1 offset)
    params_at = {}
    for layer in (first, second):
        ch = graph.tensor(layer.output).shape[-1]
        v = tiler_layer(layer, graph)
        take(f"{layer.name}_w", v["w_bytes_per_cout"] * ch)
        arrays.append((layer, "weights", "int8_t", v["w_bytes_per_cout"], ch, regions[f"{layer.name}_w"]))
        ps = param_arrays(layer)
        take(f"{layer.name}_p", sum(size for _, _, size in ps) * ch)
        at, mine = regions[f"{layer.name}_p"], {}
        for name, ctype, size in ps:
            arrays.append((layer, name, ctype, size, ch, at))
            mine[name] = at
            at += size * ch
        params_at[layer.name] = mine
    take("mid", ft["l1_bytes"]["intermediate"])
    take("stripe", ft["l1_bytes"]["scratch"])
    if cur != ft["l1_bytes"]["total"]:
        raise RuntimeError(f"fused step {first.name}+{second.name}: L1 layout {cur} bytes, the tiler counted "
                           f"{ft['l1_bytes']['total']}")

    # PW->DW row-wise (the shifted buffer) has its own kernels
    variant = "pw_dw_rows" if ft.get("layout") == "rows" else kind
    out = [header_comment([
        f"tessera: fused step {first.name}+{second.name} of {model}: "
        + {"dw_pw": "depthwise -> pointwise, row-wise", "pw_dw": "pointwise -> depthwise, channel-wise",
           "pw_dw_rows": "pointwise -> depthwise, row-wise (shifted buffer)"}[variant],
        f"{'x'.join(map(str, x.shape))} -> ({'x'.join(map(str, m.shape))} in L1 only) -> {'x'.join(map(str, y.shape))}",
        f"{nb} band{'s' if nb > 1 else ''} of {ft['band_h']} output rows, fd {ft['fd']} "
        f"{'channels' if variant == 'pw_dw' else 'rows'} per block, "
        f"{bufs} buffer{'s' if bufs > 1 else ''}; {cur} bytes of L1.",
    ] + ([f"add epilogue: {add.name} ({' + '.join(add.inputs)} -> {add.output}) on each output band in L1; "
          f"{second.output} never leaves L1."] if epilogue is not None else []))]
    lib = library(target["kernels"])
    if hasattr(lib, "fused_kernel"):
        kernel = lib.fused_kernel(variant, dw, pw, graph)
    else:
        kernel = getattr(lib, "FUSED", {}).get(variant, f"tsr_{variant}")
    args_t = f"tsr_{kind}_args_t"
    out.append('#include <stddef.h>\n#include <stdint.h>\n\n#include "tessera/hal.h"\n#include "tessera/kernels.h"\n'
               '#include "tessera/tile.h"' + "".join(f'\n#include "{h}"' for h in getattr(lib, "HEADERS", ())) + "\n")
    out.append(f"extern int8_t {L1}[];\nextern int8_t {L2}[];")
    for layer, name, ctype, _, _, _ in arrays:
        if streams[layer.name] is None:
            out.append(f"extern const {ctype} {symbol(prefix, layer.name, name)}[];")
    if any(streams.values()):
        out.append(f"/* weights and parameters arrive from {target['w_level']} in chunks, through "
                   f"{target['w_stage']['level']} */\nextern tsr_wstream_t {prefix}_wstream;")
    out.append(f"\n#define NBANDS {nb}\n#define ENGINE_ACT {target['act_engine']}\n#define ENGINE_W {target['w_engine']}\n")
    out.append("/* oh0, oh, ow0, ow, oc0, oc | ih0, ih, iw0, iw, ic0, ic | pad t, l, b, r | new weights */")
    out.append("static const tsr_tile_t bands[NBANDS] = {")
    for i, b in enumerate(ft["bands"]):
        row = [b["oh0"], b["oh"], 0, Wo, 0, Co, b["ih0"], b["ih"], 0, W, 0, C,
               b["pad_t"], dw.pad[1], b["pad_b"], dw.pad[3], 1 if i == 0 else 0]
        out.append("    {" + ", ".join(map(str, row)) + "},")
    out.append("};\n")
    out += offsets_table("l1_in", [offs[f"in{i}"] for i in range(bufs)], target, bufs)
    out += offsets_table("l1_out", [offs[f"out{i}"] for i in range(bufs)], target, bufs) + [""]
    if epilogue is not None:
        from .layer import _epilogue_args, _epilogue_decls
        out += offsets_table("l1_skip", [offs[f"skip{i}"] for i in range(bufs)], target, bufs,
                             f"   /* {c_comment(skip)}'s band */") + [""]
        out.extend(_epilogue_decls(add, graph, library(target["kernels"])))
    shared = ft.get("scheme") == "shared"
    if shared:
        # the block's arguments, the first layer's kernel, the second's, where
        # the two forks' arguments live (and, PW->DW, the block's requantization)
        block, k1, k2, parts = lib.FUSED_PARTS[variant][:4]
        names = ("dw_part", "pw_part") if kind == "dw_pw" else ("pw_part", "dw_part")
        for part, k in zip(names, (k1, k2)):
            out.append(f"static void {part}(void *args)\n{{\n    {k}((const tsr_conv_args_t *)args, hal_core_id(), "
                       "hal_num_cores());\n}\n")
    else:
        out.append(f"static void compute(void *args)\n{{\n    {kernel}((const {args_t} *)args, hal_core_id(), "
                   "hal_num_cores());\n}\n")
    out.append(f"void {symbol(prefix, first.name)}(void)\n{{")
    out.append(f"    hal_dma_job_t in[{bufs}] = {{{{0}}}}, out[{bufs}] = {{{{0}}}}, w = {{0}}"
               + (", w2 = {0};" if shared and not any(streams.values()) else ";"))
    # on PULP-open the first band's input is asked for first: its copy runs
    # under the argument set-up and the weights' commands (core 0, cold code)
    early_at = len(out) if target.get("platform") == "pulp_open" else None
    out.append(f"    {args_t} a = {{0}};")
    if epilogue is not None:
        out.extend("    " + line for line in _epilogue_args(add, second, graph, library(target["kernels"]), {}, prefix))
    if shared:
        # the two forks' arguments on this core's stack: L1 on PULP-open, where every core reads
        # the fields per channel and per row (in the data level, L2, a
        # static pair made both forks of dscnn_kws's dw1+pw1 7% to 12%
        # slower on GVSoC); core 0 has two stack shares there, room for them
        out.append("    tsr_conv_args_t parts[2], *d = &parts[0], *p = &parts[1];")
        if kind == "pw_dw" and variant == kind:
            # the blocks' requantization records, which the kernels read
            # per channel
            out.append("    tsr_requant_t blk_rq[2];")
    refs = {}
    for layer, var in ((dw, "rq_dw"), (pw, "rq_pw")):
        per_channel = "mul" in params_at[layer.name]
        lines, refs[layer.name] = _rq_lines(layer, var, per_channel, params_at[layer.name], prefix,
                                            target.get("rq_split", {}).get(layer.name, 0))
        out.extend("    " + line for line in lines)
    out.append("    /* both layers' weights and parameters, once */")
    # shared scheme, no stream: the second layer's weights are asked for
    # after the first band's input and waited for only before its first
    # fork, so they land while the first layer computes (GVSoC's DMA runs
    # beside the cores: on dscnn_kws's dw1+pw1, 3.6 k cycles waited before)
    late = shared and not any(streams.values())
    later = []
    for layer in (first, second):
        mine = [a for a in arrays if a[0] is layer]
        stream = streams[layer.name]
        if stream is None:
            job, dst = ("w2", later) if late and layer is second else ("w", out)
            for _, name, ctype, size, ch, at in mine:
                dst.append(f"    tsr_rows_in(&{job}, ENGINE_W, {L1} + {at}, {symbol(prefix, layer.name, name)}, "
                           f"{size}, 0, {ch});")
            continue
        out += stream_copies(mine, stream, prefix)
    kh, kw = dw.kernel
    sh, sw = dw.stride
    if kind == "dw_pw":
        out += [f"    a.dw.in_w = {W};", f"    a.dw.in_c = {C};", f"    a.dw.out_w = {Wo};", f"    a.dw.out_c = {C};",
                f"    a.pw.in_c = {C};", f"    a.pw.out_w = {Wo};", f"    a.pw.out_c = {Co};"]
    else:
        out += [f"    a.pw.in_w = {W};", f"    a.pw.in_c = {C};", f"    a.pw.out_w = {W};", f"    a.pw.out_c = {Co};",
                f"    a.dw.in_w = {W};", f"    a.dw.in_c = {Co};", f"    a.dw.out_w = {Wo};", f"    a.dw.out_c = {Co};"]
    if ft["l1_bytes"]["scratch"]:
        out += [f"    a.dw.scratch = {L1} + {regions['stripe']};",
                f"    a.dw.scratch_bytes = {ft['l1_bytes']['scratch'] // target['cores']};"]
    out += [f"    a.dw.kh = {kh};", f"    a.dw.kw = {kw};", f"    a.dw.sh = {sh};", f"    a.dw.sw = {sw};",
            f"    a.dw.pad_l = {dw.pad[1]};", f"    a.dw.pad_r = {dw.pad[3]};",
            f"    a.dw.input_offset = {dw.input_offset};", f"    a.dw.rq = {refs[dw.name]};",
            f"    a.dw.weights = {L1} + {regions[dw.name + '_w']};",
            "    a.pw.kh = 1;", "    a.pw.kw = 1;", "    a.pw.sh = 1;", "    a.pw.sw = 1;",
            f"    a.pw.input_offset = {input_offset(lib, pw, graph)};", f"    a.pw.rq = {refs[pw.name]};",
            f"    a.pw.weights = {L1} + {regions[pw.name + '_w']};",
            f"    a.buf = {L1} + {regions['mid']};", f"    a.fd = {ft['fd']};"]
    for layer, part in ((dw, "dw"), (pw, "pw")):
        if "bias" in params_at[layer.name]:
            out.append(f"    a.{part}.bias = (const int32_t *)({L1} + {params_at[layer.name]['bias']});")
    esize_in, esize_out = ir.DTYPES[x.dtype], ir.DTYPES[y.dtype]
    first_in = (f"    tsr_tile_in(&in[0], ENGINE_ACT, {L1} + l1_in(0), {L2} + {first_slice['inputs'][0]}, {W}, {C}, "
                f"{esize_in}, &bands[0]);")
    if early_at is None:
        out.append(first_in)
    else:
        out.insert(early_at, first_in)

    def skip_in(b, band):
        # the add's other input: the output band's rows, every column and channel
        return (f"tsr_dma_box(&in[{b}], ENGINE_ACT, {L1} + l1_skip({b}), {L2} + {skip_at}, {Wo}, {Co}, "
                f"{ir.DTYPES[graph.tensor(skip).dtype]}, {band}.oh0, {band}.oh, 0, {Wo}, 0, {Co}, 1);")
    if epilogue is not None:
        out.append("    " + skip_in(0, "bands[0]"))
    out += later
    out.append("    hal_dma_wait(&w);")
    out.append("    for (int i = 0; i < NBANDS; i++) {")
    out.append("        const tsr_tile_t *t = &bands[i];")
    out.append(f"        const int b = i % {bufs};")
    out.append("        hal_dma_wait(&in[b]);")
    if bufs > 1:
        out.append("        if (i + 1 < NBANDS)")
        out.append(("            {\n    " if epilogue is not None else "")
                   + f"            tsr_tile_in(&in[(i + 1) % {bufs}], ENGINE_ACT, {L1} + l1_in((i + 1) % {bufs}), "
                   f"{L2} + {first_slice['inputs'][0]}, {W}, {C}, {esize_in}, &bands[i + 1]);")
        if epilogue is not None:
            out.append("                " + skip_in(f"(i + 1) % {bufs}", "bands[i + 1]") + "\n            }")
    out.append("        hal_dma_wait(&out[b]);")
    if kind == "dw_pw":
        out += [f"        a.dw.in = {L1} + l1_in(b);", "        a.dw.in_h = t->ih;", "        a.dw.out_h = t->oh;",
                "        a.dw.pad_t = t->pad_t;", "        a.dw.pad_b = t->pad_b;",
                f"        a.pw.out = {L1} + l1_out(b);", "        a.pw.out_h = t->oh;", "        a.pw.in_h = t->oh;",
                "        a.pw.in_w = t->ow;"]
    else:
        out += [f"        a.pw.in = {L1} + l1_in(b);", "        a.pw.in_h = t->ih;", "        a.pw.out_h = t->ih;",
                "        a.dw.in_h = t->ih;", "        a.dw.out_h = t->oh;",
                "        a.dw.pad_t = t->pad_t;", "        a.dw.pad_b = t->pad_b;",
                f"        a.dw.out = {L1} + l1_out(b);"]
    if not shared:
        loop = ["        hal_fork(compute, &a);"]
    elif kind == "dw_pw" or variant == "pw_dw_rows":
        # blocks of fd output rows (PW->DW row-wise: the block's plan shifts
        # the kept rows first, on this core, before the forks)
        first, second = ("d", "p") if kind == "dw_pw" else ("p", "d")
        loop = ["        for (int32_t y = 0, n; y < t->oh; y += n) {",
                f"            n = t->oh - y < {ft['fd']} ? t->oh - y : {ft['fd']};",
                f"            {block}(&a, y, n, {'d, p' if kind == 'dw_pw' else 'p, d'});",
                f"            hal_fork({names[0]}, {first});",
                *(["            hal_dma_wait(&w2);"] if late else []),
                f"            hal_fork({names[1]}, {second});",
                "        }"]
    else:
        loop = [f"        for (int32_t c = 0, n; c < {Co}; c += n) {{",
                f"            n = {Co} - c < {ft['fd']} ? {Co} - c : {ft['fd']};",
                f"            {block}(&a, c, n, p, d, blk_rq);",
                "            hal_fork(pw_part, p);",
                *(["            hal_dma_wait(&w2);"] if late else []),
                "            hal_fork(dw_part, d);",
                "        }"]
    if epilogue is not None:
        mine, other = ("a", "b") if add_first else ("b", "a")
        loop += [f"        e.{mine} = {L1} + l1_out(b);", f"        e.{other} = {L1} + l1_skip(b);",
                 f"        e.out = {L1} + l1_out(b);", f"        e.n = t->oh * {Wo * Co};",
                 "        hal_fork(compute_add, &e);   /* in place: the sum over the output band */"]
    out += [*loop,
            f"        tsr_tile_out(&out[b], ENGINE_ACT, {L2} + {out_at}, {L1} + l1_out(b), {Wo}, {Co}, "
            f"{esize_out}, t);",
            "    }"]
    for i in range(bufs):
        out.append(f"    hal_dma_wait(&out[{i}]);")
    out.append("}")
    return "\n".join(out) + "\n"


def stream_copies(arrays, stream, prefix):
    """C lines copying a layer's constants (`arrays`: (layer, name, ctype,
    bytes per channel, channels, L1 offset)) from the weight stream into the
    tile level: its chunks in turn, each copied out before the next is asked
    for (its buffer is where the one after that lands)."""
    L1 = f"{prefix}_L1"
    ch, step = arrays[0][4], stream["chunk_c"]
    out = ["    {\n        const int8_t *chunk;"]
    for c0 in range(0, ch, step):
        n = min(step, ch - c0)
        out.append(f"        chunk = tsr_wstream_next(&{prefix}_wstream);")
        for _, name, _, size, _, at in arrays:
            src = f"chunk + {stream['layout'][name]}" if stream["layout"][name] else "chunk"
            out.append(f"        tsr_rows_in(&w, ENGINE_W, {L1} + {at + c0 * size}, {src}, {size}, 0, {n});")
        out.append("        hal_dma_wait(&w);")
    out.append("    }")
    return out


def stub(layer, group, model, prefix):
    """The pointwise of a fused pair: its work is done in the group's step."""
    return (header_comment([f"tessera: layer {layer.name} of {model}: computed in the fused step {group}"])
            + f"\nvoid {symbol(prefix, layer.name)}(void)\n{{\n}}\n")
