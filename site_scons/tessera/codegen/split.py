"""One C file for a layer whose reduction the tiler split (tessera.tiler:
one output's input channels and weights do not fit the tile level).

Each output tile runs as steps, one per chunk of input channels: the
chunk's input box and its weights [oc][kh][kw][kc] (cut from the weight
array by a 3D copy: the array is [out_c][window][in_c]) come into L1, the
reference library's tsr_split_step adds their products into the tile's
int32 accumulators (the first chunk starting from the bias), and the last
chunk requantizes them into the output tile, which is written back. The
sums are the unsplit kernels' in another order, so the output is
bit-exact with them and the golden model.

    for each tile: its parameters (per channel tile)
        for each chunk k:
            wait for chunk k's input box and weights
            start loading chunk k + 1 (the next tile's first) into the other buffers
            compute chunk k into the accumulators (the last: the output tile)
        start writing the output tile back
"""

from .. import ir
from ..errors import TesseraError
from ..tiles.geometry import chunks, tiles, w_per_k
from ..config.views import bias_plane, param_arrays, requant_plane, tiler_layer
from .cfmt import ROUNDING, header_comment, immediate_offsets
from .program import gather_dst
from .libraries import input_offset, library, split_kernel


def stage(target):
    """The level streamed weights pass through: GAP8's L2 (w_stage), or the
    activation level for weights on a storage level."""
    return target["w_stage"]["level"] if "w_stage" in target else target["act_level"]


def generate(layer, graph, tiling, plan_slice, target, model):
    """C source of a split layer (`tiling["split"]`); the arguments as
    codegen.layer.generate's."""
    where = f"layer {layer.name}"
    for what, why in ((plan_slice.get("spill"), "activations moved to another level"),
                      (requant_plane(layer) or bias_plane(layer), "parameters per output element")):
        if what:
            raise TesseraError(where, f"its reduction is split into chunks (it does not fit "
                               f"{target['tile_level']} whole), which does not yet support {why}",
                               f"give {target['tile_level']} room for one output's reduction")
    lib = library(target["kernels"])
    ref = library("reference")
    prefix = target["prefix"]
    L1, L2 = f"{prefix}_L1", f"{prefix}_L2"
    view = tiler_layer(layer, graph)
    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    H, W, C = x.shape
    _, Wo, Co = y.shape
    in_esize, out_esize = ir.DTYPES[x.dtype], ir.DTYPES[y.dtype]
    l1, bufs = plan_slice["l1"], tiling["buffering"]
    params = param_arrays(layer)
    per_channel_rq = any(name in ("mul", "shift") for name, _, _ in params)
    tc_max = tiling["tile"]["c"]
    kc, nk = tiling["split"]["k"], tiling["split"]["n"]
    if len(l1["weights"]) < bufs:
        raise TesseraError(where, "a split reduction needs a weight buffer per step buffer",
                           "give the tile level room for one output's reduction")
    window = w_per_k(view)
    tl = list(tiles(view, tiling))
    assert [c[1] for c in chunks(view, tiling)][:-1] == [kc] * (nk - 1)
    name = f"{prefix}_{layer.name}"
    t = tiling["tile"]

    out = [header_comment([
        f"tessera: layer {layer.name} of {model}: {layer.op} {'x'.join(map(str, x.shape))} -> "
        f"{'x'.join(map(str, y.shape))}",
        f"{len(tl)} tile{'s' if len(tl) > 1 else ''} of {t['h']}x{t['w']}x{t['c']} outputs, the reduction split "
        f"in {nk} chunks of {kc} input channels (int32 sums in L1); {l1['total']} bytes of L1.",
    ]), '#include <stddef.h>\n#include <stdint.h>\n\n#include "tessera/hal.h"\n#include "tessera/kernels.h"\n'
        '#include "tessera/tile.h"' + "".join(f'\n#include "{h}"' for h in getattr(lib, "HEADERS", ())) + "\n",
        f"extern int8_t {L1}[];\nextern int8_t {L2}[];"]
    # out of core: the program's computes are this layer's tiles, or, with
    # its constants on the card, its steps (tessera.storage.firmware)
    prog = target.get("layer_index") if "storage" in target else None
    on_card = prog is not None and layer.name in target["storage"]["layers"]
    if prog is not None:
        out[-1] += '\n#include "tessera/program.h"'
    # streamed weights reach the tiles from their staging level
    stream = plan_slice.get("wstream")
    if on_card:
        out[-1] += "\n#include <stdio.h>\n#include <stdlib.h>"
    elif stream is None:
        out.append(f"extern const int8_t {name}_weights[];")
        out += [f"extern const {ctype} {name}_{pname}[];" for pname, ctype, _ in params]
    w_from = stage(target) if stream is not None else target["w_level"]
    w_engine = target["act_engine"] if stream is not None else target["w_engine"]
    out += ["", f"#define NTILES {len(tl)}", f"#define NCHUNKS {nk}", f"#define KC {kc}   /* input channels a chunk */",
            f"#define ENGINE_ACT {target['act_engine']}   /* {target['act_level']} <-> {target['tile_level']} */",
            f"#define ENGINE_W {w_engine}     /* {w_from} -> {target['tile_level']} */", "",
            "/* oh0, oh, ow0, ow, oc0, oc | ih0, ih, iw0, iw, ic0, ic | pad t, l, b, r | new weights */",
            "static const tsr_tile_t tiles[NTILES] = {"]
    prev_c = None
    for s in tl:
        new_w = 1 if (s["oc0"], s["oc"]) != prev_c else 0
        prev_c = (s["oc0"], s["oc"])
        row = [s["oh0"], s["oh"], s["ow0"], s["ow"], s["oc0"], s["oc"], s["ih0"], s["ih"], s["iw0"], s["iw"],
               s["ic0"], s["ic"], *s["pad"], new_w]
        out.append("    {" + ", ".join(map(str, row)) + "},")
    out += ["};", ""]
    out.append(f"static const uint32_t l1_in0[{bufs}] = {{{', '.join(map(str, l1['in'][0]))}}};")
    for key, cname in (("out", "l1_out"), ("weights", "l1_w"), ("params", "l1_p")):
        vals = (l1[key] * bufs)[:bufs]      # one weight buffer: both steps' parity use it
        out.append(f"static const uint32_t {cname}[{bufs}] = {{{', '.join(map(str, vals))}}};")
    out.append(f"#define L1_ACC {l1['acc']}   /* the output tile's int32 sums */")
    out.append("")
    rq = layer.requant
    if rq is not None and not per_channel_rq:
        out.append(f"static const int32_t rq_mul[1] = {{{int(rq.mul[0])}}};")
        out.append(f"static const int8_t rq_shift[1] = {{{int(rq.shift[0])}}};")
        if any(rq.add):
            out.append(f"static const int32_t rq_add[1] = {{{int(rq.add[0])}}};")
    # the library's own split step where it has one (its adapter's split_kernel)
    kernel = split_kernel(lib, layer, graph)
    out.append(f"static void compute(void *args)\n{{\n    {kernel}((const tsr_split_args_t *)args, hal_core_id(), "
               "hal_num_cores());\n}\n")

    if on_card:
        out += _program_steps(layer, graph, plan_slice, target, ref, params, tc_max, per_channel_rq, rq, lib,
                              prog, (W, C, in_esize, Wo, Co, out_esize))
        return immediate_offsets("\n".join(out) + "\n", target)

    # chunk k of tile t: its input box, its weights (a [oc][window][kc] block)
    # weights streamed through a staging level arrive in chunks of whole
    # channel tiles (memplan's weight stream); else straight from their arrays
    if stream is not None:
        source = target["storage"]["level"] if "storage" in target else target["w_level"]
        out.append(f"/* weights and parameters arrive from {source} in chunks of {stream['chunk_c']} channels, "
                   f"through {stage(target)} */")
        out.append(f"extern tsr_wstream_t {prefix}_wstream;")
        out.append("static const int8_t *chunk;\n")

    def source(array):
        if stream is None:
            return f"{name}_{array}", "t->oc0"
        at = stream["layout"][array]
        return f"chunk{f' + {at}' if at else ''}", f"t->oc0 % {stream['chunk_c']}"

    out.append("/* Start the copies that bring chunk k of tile t into L1 buffer b. */")
    out.append("static void load(const tsr_tile_t *t, int k, int b, hal_dma_job_t *in, hal_dma_job_t *w)\n{")
    out.append("    const int32_t k0 = k * KC, kc = k + 1 < NCHUNKS ? KC : " + str(C) + " - k0;")
    if stream is not None:
        # a tile's first step on a new chunk of the stream takes it (loaded
        # while the previous tile's last step computes: its weights are in L1)
        out.append(f"    if (k == 0 && t->new_weights && t->oc0 % {stream['chunk_c']} == 0)\n"
                   f"        chunk = tsr_wstream_next(&{prefix}_wstream);")
    out.append(f"    tsr_dma_box(&in[b], ENGINE_ACT, {L1} + l1_in0[b], {L2} + {plan_slice['inputs'][0]}, {W}, {C}, "
               f"{in_esize}, t->ih0, t->ih, t->iw0, t->iw, k0, kc, 1);")
    src, first = source("weights")
    out.append(f"    tsr_dma_box(&w[b], ENGINE_W, {L1} + l1_w[b], (int8_t *){src}, {window}, {C}, 1, "
               f"{first}, t->oc, 0, {window}, k0, kc, 1);")
    out.append("}\n")

    out.append(f"void {name}(void)\n{{")
    out.append(f"    hal_dma_job_t in[{bufs}] = {{{{0}}}}, w[{bufs}] = {{{{0}}}}, io = {{0}}, wb_job = {{0}};")
    out += _args(layer, graph, l1, target, ref, rq, per_channel_rq, lib)
    out.append("    (void)io;")
    out.append("    load(&tiles[0], 0, 0, in, w);")
    out.append("    for (int i = 0, n = 0; i < NTILES; i++) {")
    out.append("        const tsr_tile_t *t = &tiles[i];")
    if prog is not None:
        out.append(f"        tsr_prog_compute({prog}, (uint32_t)i);   /* the program's ops before this tile */")
    if params:
        # the tile's channels' parameters (its bias and requantization)
        out.append("        if (t->new_weights) {")
        pos = 0
        for pname, _, size in params:
            src, first = source(pname)
            out.append(f"            tsr_rows_in(&wb_job, ENGINE_W, {L1} + l1_p[0] + {pos}, {src}, {size}, "
                       f"{first}, t->oc);")
            pos += size * tc_max
        out.append("            hal_dma_wait(&wb_job);\n        }")
    out.append("        for (int k = 0; k < NCHUNKS; k++, n++) {")
    out.append(f"            const int b = n % {bufs};")
    out.append("            hal_dma_wait(&in[b]);\n            hal_dma_wait(&w[b]);")
    if bufs > 1:
        out.append("            if (k + 1 < NCHUNKS)\n                load(t, k + 1, b ^ 1, in, w);\n"
                   "            else if (i + 1 < NTILES)\n                load(&tiles[i + 1], 0, b ^ 1, in, w);")
    out.extend("            " + line for line in ref.tile_args(layer, params, tc_max, prefix, per_channel_rq,
                                                                graph=graph))
    out.append("            a.in_c = k + 1 < NCHUNKS ? KC : " + str(C) + " - k * KC;")
    out.append(f"            a.weights = {L1} + l1_w[b];")
    out.append(f"            a.out = {L1} + l1_out[0];")
    if layer.op == "linear":
        out.append("            a.out_h = 1;\n            a.out_w = 1;")
    out.append("            s.first = k == 0;\n            s.last = k + 1 == NCHUNKS;")
    out.append("            hal_fork(compute, &s);")
    if bufs == 1:
        out.append("            if (k + 1 < NCHUNKS)\n                load(t, k + 1, 0, in, w);\n"
                   "            else if (i + 1 < NTILES)\n                load(&tiles[i + 1], 0, 0, in, w);")
    out.append("        }")
    out.append(f"        tsr_tile_out(&io, ENGINE_ACT, {L2} + {plan_slice['output']}, {L1} + l1_out[0], {Wo}, {Co}, "
               f"{out_esize}, t);")
    out.append("        hal_dma_wait(&io);   /* the next tile's last chunk writes the same buffer */")
    out.append("    }")
    out.append("}")
    return immediate_offsets("\n".join(out) + "\n", target)


def _args(layer, graph, l1, target, ref, rq, per_channel_rq, lib):
    """The step kernel's constant arguments (the conv args, the requantization, the accumulators)."""
    prefix = target["prefix"]
    H, W, _ = graph.tensor(layer.inputs[0]).shape
    out = ["    tsr_conv_args_t a = {0};\n    tsr_split_args_t s = {0};"]
    if rq is not None:
        out.append("    tsr_requant_t rq = {0};")
        if per_channel_rq:
            out.append("    rq.per_channel = 1;")
        else:
            out.append("    rq.mul = rq_mul;\n    rq.shift = rq_shift;" + ("\n    rq.add = rq_add;" if any(rq.add) else ""))
        out.append(f"    rq.zero_point = {rq.zero_point};\n    rq.lo = {rq.lo};\n    rq.hi = {rq.hi};\n"
                   f"    rq.rounding = {ROUNDING[rq.rounding]};")
        if rq.divisor:
            out.append(f"    rq.divisor = {rq.divisor};")
    out.append("    const int wb = 0;   /* parameters: one buffer, loaded per channel tile */")
    out.extend("    " + line for line in ref.constant_args(layer, l1, 0, prefix, "&rq" if rq else "NULL", graph=graph))
    if layer.op == "linear":
        # the window is the whole input (weights [oc][h][w][kc]); one output pixel
        out.append(f"    a.kh = {H};\n    a.kw = {W};\n    a.sh = 1;\n    a.sw = 1;")
    out.append(f"    a.input_offset = {input_offset(lib, layer, graph)};")
    out.append(f"    s.conv = &a;\n    s.acc = (int32_t *)({prefix}_L1 + L1_ACC);")
    return out


def _program_steps(layer, graph, plan_slice, target, ref, params, tc_max, per_channel_rq, rq, lib, prog, dims):
    """The layer's function when its constants are on the card: a step of
    the out-of-core program per (tile, chunk). The program has read the
    step's weights [oc][window][kc] (and, on a tile's first chunk, its
    channels' parameter rows) into the w pool, laid out on the card in step
    order (tessera.tiles.geometry.split_blocks); the step copies them and
    its input box into L1, adds the chunk into the accumulators, and the
    last chunk's output tile goes back to its tensor. The in-order firmware
    has no stream for such a layer: the build keeps the program
    (tessera.storage.firmware.build)."""
    prefix = target["prefix"]
    L1, L2 = f"{prefix}_L1", f"{prefix}_L2"
    W, C, in_esize, Wo, Co, out_esize = dims
    name = f"{prefix}_{layer.name}"
    out = [f"void {name}(void)\n{{", "    hal_dma_job_t job = {0};"]
    out += _args(layer, graph, plan_slice["l1"], target, ref, rq, per_channel_rq, lib)
    out.append("    if (!tsr_program.n_ops) {   /* unreachable: the build keeps the program for this layer */")
    out.append(f'        fprintf(stderr, "tessera: layer {layer.name} streams its weights only through the '
               f'out-of-core program\\n");\n        exit(4);\n    }}')
    out.append("    for (int i = 0, n = 0; i < NTILES; i++) {")
    out.append("        const tsr_tile_t *t = &tiles[i];")
    out.append("        for (int k = 0; k < NCHUNKS; k++, n++) {")
    out.append("            const int b = 0;")
    out.append(f"            const int32_t k0 = k * KC, kc = k + 1 < NCHUNKS ? KC : {C} - k0;")
    out.append(f"            const tsr_op_t *c = tsr_prog_compute({prog}, (uint32_t)n);")
    out.append("            int8_t *dst[TSR_KINDS] = {0};")
    # (a tile's first step brings its channels' parameter rows: no ref on the others)
    out += gather_dst(prefix, True, params, tc_max, 0, " " * 12)
    out.append("            tsr_prog_gather(c, dst, 1, ENGINE_ACT);")
    out.append(f"            tsr_dma_box(&job, ENGINE_ACT, {L1} + l1_in0[0], {L2} + {plan_slice['inputs'][0]}, {W}, "
               f"{C}, {in_esize}, t->ih0, t->ih, t->iw0, t->iw, k0, kc, 1);")
    out.append("            hal_dma_wait(&job);")
    out.extend("            " + line for line in ref.tile_args(layer, params, tc_max, prefix, per_channel_rq,
                                                                graph=graph))
    out.append("            a.in_c = kc;")
    out.append(f"            a.out = {L1} + l1_out[0];")
    if layer.op == "linear":
        out.append("            a.out_h = 1;\n            a.out_w = 1;")
    out.append("            s.first = k == 0;\n            s.last = k + 1 == NCHUNKS;")
    out.append("            hal_fork(compute, &s);")
    out.append("        }")
    out.append(f"        tsr_tile_out(&job, ENGINE_ACT, {L2} + {plan_slice['output']}, {L1} + l1_out[0], {Wo}, {Co}, "
               f"{out_esize}, t);")
    out.append("        hal_dma_wait(&job);")
    out.append("    }")
    out.append("}")
    return out
