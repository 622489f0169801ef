"""One C file per layer: its tiles and the double-buffered loop nest.

Every number the loop needs is fixed here, at build time: the tile table
holds each tile's output and input ranges and padding (border tiles
included), the L1 and L2 offsets come from the memory plan. At run time the
loop only walks the table:

    load tile 0 (input and, on a new channel tile, weights) into buffer 0
    for each tile i:
        wait for tile i's input and weights
        start loading tile i+1 into the other buffers           (prefetch)
        wait until the output buffer's previous write-back has left
        compute tile i on every core                              (hal_fork)
        start writing tile i's output back to its tensor          (write-back)
    wait for the last write-backs

Tiles are ordered channel tile outermost, so weights load once per channel
tile into their own double buffer. A layer of many tiles keeps them as a
grid instead (an entry per row band, column band and channel tile; tile i
rebuilt by tsr_tile_at), whose constants grow with the sum of the bands, not
their product: mbv1_224's tables of a row per tile took 52 kB of GAP8's
110 kB L2 code reservation, its grids and tables take 6 kB.
"""

from .. import ir
from ..util.cname import c_comment
from ..errors import FitError
from ..tiler import grid as tile_grid
from ..tiler import tiles as tile_list
from ..tiles.geometry import rows_first
from ..config.views import bias_plane, is_whole, operand_as_weights, param_arrays, requant_plane, tiler_layer
from .cfmt import ROUNDING, header_comment, int_list, offsets_table, symbol
from .libraries import library
from .program import gather_dst
from . import split
from .split import stage as _stage


# sizeof(tsr_tile_t): a table row per tile (word-aligned: copied by words)
TILE_ROW_BYTES = 32
# code a layer spends to rebuild its tiles from a grid rather than index a
# table (measured on gap8's rv32imc objects: 74-94 bytes; a one-tile table
# is folded into the code by the compiler), so small layers keep a table
GRID_CODE_BYTES = 128


def use_grid(chans, rows, cols):
    """Whether a layer's tiles take fewer bytes as a grid than as a table."""
    grid = 20 + 12 * (len(rows) + len(cols)) + 8 * len(chans)
    return grid + GRID_CODE_BYTES < TILE_ROW_BYTES * len(chans) * len(rows) * len(cols)


def _tile_rows(layer_view, tiling):
    rows = []
    prev_c = None
    for t in tile_list(layer_view, tiling):
        new_w = 1 if (t["oc0"], t["oc"]) != prev_c else 0
        prev_c = (t["oc0"], t["oc"])
        rows.append([t["oh0"], t["oh"], t["ow0"], t["ow"], t["oc0"], t["oc"],
                     t["ih0"], t["ih"], t["iw0"], t["iw"], t["ic0"], t["ic"], *t["pad"], new_w])
    return rows


def grid_tables(chans, rows, cols, rows_first=False, name="grid", struct=True):
    """C lines of a layer's tile grid (tiler.grid): the per-axis tables
    and (struct) the tsr_grid_t `name` that tsr_tile_at (tessera/tile.h)
    rebuilds each tile from."""
    per_c = len(rows) * len(cols)
    if rows_first:
        order = (f"/* tile i: row band i / {len(chans) * len(cols)}, channel tile (i / {len(cols)}) % "
                 f"{len(chans)}, column band i % {len(cols)} */")
    else:
        order = (f"/* tile i: channel tile i / {per_c}, row band (i / {len(cols)}) % {len(rows)}, "
                 f"column band i % {len(cols)} */")
    out = [order,
           "/* oh0, oh, ih0, ih, pad t, b */", f"static const tsr_span_t {name}_rows[{len(rows)}] = {{"]
    out += ["    {" + ", ".join(str(v) for v in r) + "}," for r in rows]
    out += ["};", "/* ow0, ow, iw0, iw, pad l, r */", f"static const tsr_span_t {name}_cols[{len(cols)}] = {{"]
    out += ["    {" + ", ".join(str(v) for v in c) + "}," for c in cols]
    out += ["};", "/* oc0, oc, ic0, ic */", f"static const tsr_chans_t {name}_chans[{len(chans)}] = {{"]
    out += ["    {" + ", ".join(str(v) for v in c) + "}," for c in chans]
    out += ["};"]
    if struct:
        out += [f"static const tsr_grid_t {name} = {{.rows = {name}_rows, .cols = {name}_cols, "
                f".chans = {name}_chans, .nrows = {len(rows)}, .ncols = {len(cols)}, .nchans = {len(chans)}"
                + (", .rows_first = 1};" if rows_first else "};")]
    return out


def grid_first(t="next", name="grid"):
    """C lines that set tile `t` to the grid's tile 0 (each table's first
    entry: constants the compiler folds), as tsr_tile_at(t, grid, 0)."""
    return ([f"{t}.{f} = {name}_{axis}[0].{g};" for axis, pairs in _GRID_FIELDS.items() for f, g in pairs]
            + [f"{t}.new_weights = 1;"])


# tsr_tile_t's fields from each of the grid's tables (tsr_tile_at)
_GRID_FIELDS = {"rows": [("oh0", "o0"), ("oh", "o"), ("ih0", "i0"), ("ih", "i"), ("pad_t", "pad0"), ("pad_b", "pad1")],
                "cols": [("ow0", "o0"), ("ow", "o"), ("iw0", "i0"), ("iw", "i"), ("pad_l", "pad0"), ("pad_r", "pad1")],
                "chans": [("oc0", "oc0"), ("oc", "oc"), ("ic0", "ic0"), ("ic", "ic")]}


def grid_step(chans, rows, cols, rows_first=False, t="next", name="grid"):
    """C lines that turn tile `t` (tile i of the grid, at band indices ci,
    ri, wi) into tile i + 1, as tsr_tile_at would rebuild it: the indices
    advance in the grid's order and only the spans whose index changed are
    read again (PULP-open: between two forks each read of the tables costs
    core 0 about 15 cycles from L2, tsr_tile_at's divisions and general code
    about 700 a tile, docs/gvsoc.md). An axis of one band never changes."""
    def span(axis, idx):
        return [f"{t}.{f} = {name}_{axis}[{idx}].{g};" for f, g in _GRID_FIELDS[axis]]
    row, col, chan = span("rows", "ri"), span("cols", "wi"), span("chans", "ci")
    # fastest first: (index, count, its fields)
    axes = [("wi", len(cols), col)] + ([("ci", len(chans), chan), ("ri", len(rows), row)] if rows_first else
                                       [("ri", len(rows), row), ("ci", len(chans), chan)])
    axes = [a for a in axes if a[1] > 1]
    if not axes:
        return []

    def advance(k, indent):
        idx, n, fields = axes[k]
        pad = " " * indent
        if k == len(axes) - 1:       # the slowest axis: never wraps before the last tile
            return [f"{pad}{idx}++;"] + [pad + f for f in fields]
        return ([f"{pad}if (++{idx} == {n}) {{", f"{pad}    {idx} = 0;"] + advance(k + 1, indent + 4)
                + [f"{pad}}}"] + [pad + f for f in fields])
    lines = advance(0, 0)
    # weights change with the channel tile, at its first column band
    first = [f"{idx} == 0" for idx, n in (("wi", len(cols)), ("ri", 0 if rows_first else len(rows))) if n > 1]
    if rows_first and len(chans) == 1:
        first = ["0"]
    lines.append(f"{t}.new_weights = {' && '.join(first) or '1'};")
    return lines


def grid_indices(chans, rows, cols):
    """The declaration of grid_step's band indices (those of the axes of
    more than one band), or None."""
    used = [idx for idx, n in (("ci", len(chans)), ("ri", len(rows)), ("wi", len(cols))) if n > 1]
    return f"int {', '.join(i + ' = 0' for i in used)};" if used else None


def _requant_block(layer, params, per_channel_rq):
    """C declarations of the layer's requantization (per-tensor values as
    constants here; per-channel arrays come with each channel tile)."""
    rq = layer.requant
    if rq is None:
        return "", "NULL"
    lines = []
    if not per_channel_rq:
        lines.append(f"static const int32_t rq_mul[1] = {{{int(rq.mul[0])}}};")
        lines.append(f"static const int8_t rq_shift[1] = {{{int(rq.shift[0])}}};")
        if any(rq.add):
            lines.append(f"static const int32_t rq_add[1] = {{{int(rq.add[0])}}};")
    if rq.neg_mul:
        lines.append(f"static const int32_t rq_neg_mul[1] = {{{int(rq.neg_mul[0])}}};")
        lines.append(f"static const int8_t rq_neg_shift[1] = {{{int(rq.neg_shift[0])}}};")
    return "\n".join(lines) + ("\n" if lines else ""), "&rq"


def _plane_steps(plane):
    """(plane, step_h, step_w) of per-element parameters [h', w'] (kernels.h)."""
    h, w = plane
    return h * w, (w if h > 1 else 0), (1 if w > 1 else 0)


def _plane_lines(plane, struct, pointers):
    """Constant fields and per-tile pointer moves of per-element parameters:
    each array is pointed at the tile's first row and column."""
    n, sh, sw = _plane_steps(plane)
    const = [f"{struct}.plane = {n};", f"{struct}.step_h = {sh};", f"{struct}.step_w = {sw};"]
    terms = []
    if sh:
        terms.append("t->oh0" if sh == 1 else f"t->oh0 * {sh}")
    if sw:
        terms.append("t->ow0")
    per_tile = [f"{ptr} += {' + '.join(terms)};" for ptr in pointers] if terms else []
    return const, per_tile


# A channel-major tensor between a pointwise or convolution and its
# depthwise (the plan slice's chw_out / chw_in; memplan,
# pipeline/plan.chw_chosen): the kernels that store and read it so, and its
# tiles' boxes (tessera/tile.h).
def _chw_kernel(kernel, plan_slice):
    if plan_slice.get("chw_out") or plan_slice.get("chw_in"):
        assert kernel in ("pnn_pointwise", "pnn_conv2d", "pnn_depthwise"), kernel
        return kernel + "_chw"
    return kernel


def _box_in(plan_slice, loader, job, l1, l2, xt, esize):
    if plan_slice.get("chw_in"):
        return f"tsr_tile_in_chw({job}, ENGINE_ACT, {l1}, {l2}, {xt.shape[0]}, {xt.shape[1]}, t);"
    return f"{loader}({job}, ENGINE_ACT, {l1}, {l2}, {xt.shape[1]}, {xt.shape[2]}, {esize}, t);"


def _box_out(plan_slice, job, l2, l1, y, esize):
    if plan_slice.get("chw_out"):
        return f"tsr_tile_out_chw({job}, ENGINE_ACT, {l2}, {l1}, {y.shape[0]}, {y.shape[1]}, t);"
    return f"tsr_tile_out({job}, ENGINE_ACT, {l2}, {l1}, {y.shape[1]}, {y.shape[2]}, {esize}, t);"


def generate(layer, graph, tiling, plan_slice, target, model, epilogue=None):
    """C source of one layer. target: the codegen view of the target
    (prefix, engines, kernels); model: the model name (comments only).
    epilogue: (add layer, its plan slice) of fusion's add epilogue: each
    output tile, once computed, is added in L1 to the tile of the add's
    other input (loaded with the tile's inputs) by the library's add
    kernel, and only the sum goes to the add's output (`tiling` is then
    the epilogue's, with its skip buffer)."""
    if layer.op == "lstm":
        from . import recurrent
        return recurrent.generate(layer, graph, tiling, plan_slice, target, model)
    if is_whole(layer, graph):
        from . import whole
        return whole.generate(layer, graph, tiling, plan_slice, target, model)
    if plan_slice.get("direct"):
        return generate_direct(layer, graph, plan_slice, target, model)
    if tiling.get("split"):
        if epilogue is not None:
            raise FitError(f"layer {layer.name}", "a split reduction takes no add epilogue",
                           "build with fusion=none")
        return split.generate(layer, graph, tiling, plan_slice, target, model)
    lib = library(target["kernels"])
    prefix = target["prefix"]
    view = tiler_layer(layer, graph)
    x = graph.tensor(layer.inputs[0])
    y = graph.tensor(layer.output)
    out_at = plan_slice["output"]
    if epilogue is not None:
        add, add_slice = epilogue
        skip = [n for n in add.inputs if n != layer.output][0]
        skip_at = add_slice["inputs"][add.inputs.index(skip)]
        y, out_at = graph.tensor(add.output), add_slice["output"]
        if plan_slice.get("spill") or add_slice.get("spill"):
            from ..errors import TesseraError
            raise TesseraError(f"fused step {layer.name}+{add.name}", "fused steps do not yet read spilled "
                               "activations", "build with fusion=none, or give the activation level more room")
    in_esize = ir.DTYPES[x.dtype]
    out_esize = ir.DTYPES[y.dtype]
    chans, hs, ws = tile_grid(view, tiling)
    l1 = plan_slice["l1"]
    bufs = tiling["buffering"]
    params = param_arrays(layer)
    per_channel_rq = any(name in ("mul", "shift") for name, _, _ in params)
    tc_max = tiling["tile"]["c"]
    name = symbol(prefix, layer.name)
    shape = lambda s: "x".join(map(str, s))  # noqa: E731
    nt = len(chans) * len(hs) * len(ws)
    t = tiling["tile"]
    assert bufs == 2 or nt == 1, "a tiled layer is double buffered"

    out = []
    out.append(header_comment([
        f"tessera: layer {layer.name} of {model}: {layer.op} "
        f"{' + '.join(shape(graph.tensor(n).shape) for n in layer.inputs)} -> {shape(y.shape)}",
        f"{nt} tile{'s' if nt > 1 else ''} of {t['h']}x{t['w']}x{t['c']} outputs, "
        f"{bufs} buffer{'s' if bufs > 1 else ''} each; {l1['total']} bytes of L1.",
    ] + ([f"add epilogue: {add.name} ({' + '.join(add.inputs)} -> {add.output}) on each output tile in L1; "
          f"{layer.output} never leaves L1."] if epilogue is not None else [])))
    out.append('#include <stddef.h>\n#include <stdint.h>\n\n#include "tessera/hal.h"\n#include "tessera/kernels.h"\n'
               '#include "tessera/tile.h"' + "".join(f'\n#include "{h}"' for h in getattr(lib, "HEADERS", ()))
               + "\n")
    out.append(f"extern int8_t {prefix}_L1[];\nextern int8_t {prefix}_L2[];")
    spill = plan_slice.get("spill", {})
    # out of core: the layer's tiles are steps of the scheduler's program
    # (tessera/program.h); a layer touching the card runs them from its pools.
    # Activations moved to a level that is not the card (GAP8's L3 beside a
    # card) are not the program's: such a layer keeps its own spill copies.
    prog = target.get("layer_index") if "storage" in target else None
    on_card = bool(spill) and "window" in target.get("spill", {})
    # constants on the card outside the in-order stream (a layer walked row
    # band first): its channel tiles' rows read from the card's window
    card_w = plan_slice.get("card_weights")
    streamed = "wstream" in plan_slice or card_w is not None
    card = prog is not None and (on_card or streamed)
    if card and spill and not on_card:
        raise FitError(f"layer {layer.name}", f"its weights stream from the card and its activations moved to "
                       f"{target['spill']['level']}: the program's tile loop reads and writes only the card",
                       f"give {target['act_level']} room for its activations or the weight level room for "
                       f"its weights")
    if prog is not None:
        out.append('#include "tessera/program.h"')
    if spill and "window" in target["spill"]:
        out.append(f"/* activations swapped out of {target['act_level']} to the storage level "
                   f"{target['spill']['level']}: offsets on the card, through the HAL's storage driver */\n"
                   f"#define {prefix}_{target['spill']['level']} ((int8_t *)0x{target['spill']['window']:08x}u)")
    elif spill:
        out.append(f"extern int8_t {prefix}_{target['spill']['level']}[];   /* activations moved out of "
                   f"{target['act_level']} */")
    if layer.weights and not streamed:
        out.append(f"extern const int8_t {symbol(prefix, layer.name, 'weights')}[];")
    for pname, ctype, _ in params if not streamed else ():
        out.append(f"extern const {ctype} {symbol(prefix, layer.name, pname)}[];")
    out.append("")
    out.append(f"#define NTILES {nt}")
    out.append(f"#define ENGINE_ACT {target['act_engine']}   /* {target['act_level']} <-> {target['tile_level']} */")
    if spill:
        out.append(f"#define ENGINE_SPILL {target['spill']['engine']}   /* {target['spill']['level']} <-> "
                   f"{target['act_level']} */")
    if layer.weights or params:
        # streamed weights reach the tiles from their staging level (the activation level)
        w_from = _stage(target) if "wstream" in plan_slice else \
            target["storage"]["level"] if card_w is not None else target["w_level"]
        w_engine = target["act_engine"] if "wstream" in plan_slice else target["w_engine"]
        out.append(f"#define ENGINE_W {w_engine}     /* {w_from} -> {target['tile_level']} */")
    out.append("")
    grid = use_grid(chans, hs, ws)
    # PULP-open walks a grid from tile to tile (grid_first, grid_step): the
    # tsr_grid_t only for tsr_tile_at's other callers
    walk = (grid and bufs > 1 and target.get("platform") == "pulp_open"
            and not any(spill.get(f"in{i}", {}).get("slot") for i in range(len(l1["in"]))))
    if grid:
        out.extend(grid_tables(chans, hs, ws, rows_first(tiling), struct=not walk or card))
    else:
        out.append("/* oh0, oh, ow0, ow, oc0, oc | ih0, ih, iw0, iw, ic0, ic | pad t, l, b, r | new weights */")
        out.append("static const tsr_tile_t tiles[NTILES] = {")
        out.extend("    {" + ", ".join(str(v) for v in r) + "}," for r in _tile_rows(view, tiling))
        out.append("};")
    out.append("")

    # L1 regions (offsets into the tile arena), per buffer
    for i, in_offs in enumerate(l1["in"]):
        out += offsets_table(f"l1_in{i}", in_offs, target, bufs)
    out += offsets_table("l1_out", l1["out"], target, bufs)
    if layer.weights or operand_as_weights(layer, graph):
        out += offsets_table("l1_w", l1["weights"], target, bufs)
    if params:
        out += offsets_table("l1_p", l1["params"], target, bufs)
    if epilogue is not None:
        out += offsets_table("l1_skip", l1["skip"], target, bufs, f"   /* {c_comment(skip)}'s tile */")
    out.append("")

    rq_decl, rq_ref = _requant_block(layer, params, per_channel_rq)
    if rq_decl:
        out.append(rq_decl)

    kernel = _chw_kernel(lib.kernel_function(layer, graph=graph), plan_slice)
    args_type = lib.args_type(layer, graph=graph)
    out.append(f"static void compute(void *args)\n{{\n    {kernel}((const {args_type} *)args, "
               f"hal_core_id(), hal_num_cores());\n}}\n")
    if epilogue is not None:
        out.extend(_epilogue_decls(add, graph, lib))

    # weights streamed through a staging level arrive in chunks of
    # `chunk_c` channels (memplan's weight stream); else straight from their arrays
    stream = plan_slice.get("wstream")
    if stream is not None:
        source = target["storage"]["level"] if "storage" in target else target["w_level"]
        out.append(f"/* weights and parameters arrive from {source} in chunks of {stream['chunk_c']} "
                   f"channels, through {_stage(target)} */")
        out.append(f"extern tsr_wstream_t {prefix}_wstream;")
        out.append("static const int8_t *chunk;\n")

    def rows_source(array):
        if card_w is not None:
            return f"(const int8_t *)TSR_STORAGE_WINDOW + {card_w[array]}", "t->oc0"
        if stream is None:
            return symbol(prefix, layer.name, array), "t->oc0"
        at = stream["layout"][array]
        return f"chunk{f' + {at}' if at else ''}", f"t->oc0 % {stream['chunk_c']}"

    # the loader: one tile's input boxes, plus weights/params on a new channel tile
    loader = getattr(lib, "input_loader", lambda layer, graph: "tsr_tile_in")(layer, graph=graph)
    # inputs in the spill level with a two-slot bounce buffer (memplan): tile
    # t's box is read into slot t % 2 two tiles ahead, while earlier tiles compute
    fetched = [(i, spill[f"in{i}"]) for i in range(len(l1["in"])) if spill.get(f"in{i}", {}).get("slot")]
    if fetched:
        out.append(f"/* Start reading tile t's boxes of the inputs in {target['spill']['level']} into bounce "
                   f"slot s. */")
        out.append("static hal_dma_job_t fetched[2];\n")
        out.append("static void fetch(const tsr_tile_t *t, int s)\n{")
        for i, moved in fetched:
            xt = graph.tensor(layer.inputs[i])
            out.append(f"    tsr_tile_in(&fetched[s], ENGINE_SPILL, {prefix}_L2 + {moved['bounce']} + s * "
                       f"{moved['slot']}, {prefix}_{target['spill']['level']} + {moved['at']}, {xt.shape[1]}, "
                       f"{xt.shape[2]}, {in_esize}, t);")
        out.append("}\n")
    banded = [i for i in range(len(l1["in"])) if spill.get(f"in{i}", {}).get("band")]
    for i in banded:
        out.append(f"static int band{i}_h0, band{i}_h;   /* the rows of input {i} in its band buffer */")
    if banded:
        out.append("")
    out.append("/* Start the copies that bring tile t into L1 buffer b (weights into wb). */")
    out.append("static void load(const tsr_tile_t *t, int b, int wb, hal_dma_job_t *in, hal_dma_job_t *w)\n{")
    for i, src in enumerate(plan_slice["inputs"][:len(l1["in"])]):
        xt = graph.tensor(layer.inputs[i])
        moved = spill.get(f"in{i}")
        if moved is None:
            out.append("    " + _box_in(plan_slice, loader, "&in[b]", f"{prefix}_L1 + l1_in{i}(b)",
                                        f"{prefix}_L2 + {src}", xt, in_esize))
            continue
        if moved.get("band"):
            # a storage-level tile of the input: the rows of the tile's row
            # band, every channel, read once per band; the tiles cut their
            # boxes from it (docs/out_of_core.md)
            row = xt.shape[1] * xt.shape[2] * in_esize
            out.append(f"    {{   /* input {i} lives in {target['spill']['level']}: its row band, every channel, "
                       f"read once */\n        tsr_tile_t box = *t;\n"
                       f"        if (t->ih0 != band{i}_h0 || t->ih != band{i}_h) {{\n"
                       f"            hal_dma_job_t io = {{0}};\n"
                       f"            band{i}_h0 = t->ih0;\n            band{i}_h = t->ih;\n"
                       f"            hal_dma_start(&io, ENGINE_SPILL, {prefix}_L2 + {moved['bounce']}, "
                       f"{prefix}_{target['spill']['level']} + {moved['at']} + t->ih0 * {row}, "
                       f"(uint32_t)t->ih * {row}u, 1, 0, 0, 1, 0, 0);\n"
                       f"            hal_dma_wait(&io);\n        }}\n        box.ih0 = 0;\n"
                       f"        {loader}(&in[b], ENGINE_ACT, {prefix}_L1 + l1_in{i}(b), {prefix}_L2 + "
                       f"{moved['bounce']}, {xt.shape[1]}, {xt.shape[2]}, {in_esize}, &box);\n    }}")
            continue
        if moved.get("slot"):
            # its box is in bounce slot b (fetch), or on its way
            out.append(f"    {{   /* input {i} lives in {target['spill']['level']}: read ahead into a bounce slot */\n"
                       f"        tsr_tile_t box = *t;\n        hal_dma_wait(&fetched[b]);\n"
                       f"        box.ih0 = 0;\n        box.iw0 = 0;\n        box.ic0 = 0;\n"
                       f"        {loader}(&in[b], ENGINE_ACT, {prefix}_L1 + l1_in{i}(b), {prefix}_L2 + "
                       f"{moved['bounce']} + b * {moved['slot']}, t->iw, t->ic, {in_esize}, &box);\n    }}")
            continue
        # the box comes from the spill level into a compact bounce buffer, then
        # on to L1 as from a tensor of the box's own size
        out.append(f"    {{   /* input {i} lives in {target['spill']['level']}: through a bounce buffer */\n"
                   f"        hal_dma_job_t io = {{0}};\n        tsr_tile_t box = *t;\n"
                   f"        tsr_tile_in(&io, ENGINE_SPILL, {prefix}_L2 + {moved['bounce']}, "
                   f"{prefix}_{target['spill']['level']} + {moved['at']}, {xt.shape[1]}, {xt.shape[2]}, "
                   f"{in_esize}, t);\n        hal_dma_wait(&io);\n"
                   f"        box.ih0 = 0;\n        box.iw0 = 0;\n        box.ic0 = 0;\n"
                   f"        {loader}(&in[b], ENGINE_ACT, {prefix}_L1 + l1_in{i}(b), {prefix}_L2 + {moved['bounce']}, "
                   f"t->iw, t->ic, {in_esize}, &box);\n    }}")
    if epilogue is not None:
        # the add's other input: the box of the output tile, beside the inputs
        st = graph.tensor(skip)
        out.append(f"    tsr_dma_box(&in[b], ENGINE_ACT, {prefix}_L1 + l1_skip(b), {prefix}_L2 + {skip_at}, "
                   f"{st.shape[1]}, {st.shape[2]}, {ir.DTYPES[st.dtype]}, t->oh0, t->oh, t->ow0, t->ow, t->oc0, "
                   f"t->oc, 1);")
    if operand_as_weights(layer, graph):
        # the right operand's column block of every batch (a [1, 1, C]
        # vector's channel block), from its tensor in the activation level,
        # with the input (the same engine)
        bt = graph.tensor(layer.inputs[1])
        if "in1" in spill:
            raise FitError(f"layer {layer.name}", f"its right operand {layer.inputs[1]!r} was moved out of "
                           f"{target['act_level']}, which a {layer.op} does not read from",
                           f"give {target['act_level']} room for the network's activations")
        # (a trans_b operand [Bb, N, K]: rows oc0.. of every batch)
        box = (f"0, {bt.shape[0]}, t->oc0, t->oc, 0, {bt.shape[2]}" if layer.trans_b else
               f"0, {bt.shape[0]}, 0, {bt.shape[1]}, t->oc0, t->oc")
        out.append(f"    if (t->new_weights)\n        tsr_dma_box(&in[b], ENGINE_ACT, {prefix}_L1 + l1_w(wb), "
                   f"{prefix}_L2 + {plan_slice['inputs'][1]}, {bt.shape[1]}, {bt.shape[2]}, {ir.DTYPES[bt.dtype]}, "
                   f"{box}, 1);")
    if layer.weights or params:
        out.append("    if (t->new_weights) {")
        if stream is not None:
            out.append(f"        if (t->oc0 % {stream['chunk_c']} == 0)\n"
                       f"            chunk = tsr_wstream_next(&{prefix}_wstream);")
        if layer.weights:
            src, first = rows_source("weights")
            out.append(f"        tsr_rows_in(&w[wb], ENGINE_W, {prefix}_L1 + l1_w(wb), "
                       f"{src}, {view['w_bytes_per_cout']}, {first}, t->oc);")
        pos = 0
        for pname, ctype, size in params:
            src, first = rows_source(pname)
            out.append(f"        tsr_rows_in(&w[wb], ENGINE_W, {prefix}_L1 + l1_p(wb) + {pos}, "
                       f"{src}, {size}, {first}, t->oc);")
            pos += size * tc_max
        out.append("    }")
    elif not operand_as_weights(layer, graph):
        out.append("    (void)wb;\n    (void)w;")
    else:
        out.append("    (void)w;")
    out.append("}\n")

    # the layer function
    out.append(f"void {name}(void)\n{{")
    out.append(f"    hal_dma_job_t in[{bufs}] = {{{{0}}}}, w[{bufs}] = {{{{0}}}}, out[{bufs}] = {{{{0}}}};")
    # on PULP-open the first tile's copies start before the argument structs
    # are cleared and filled (about 500-600 cycles of core 0, cold code): the
    # DMA runs under them instead of after them
    early = (target.get("platform") == "pulp_open" and not fetched and not banded)
    early_at = len(out)
    out.append(f"    {args_type} a = {{0}};")
    if layer.requant is not None:
        rq = layer.requant
        if per_channel_rq:
            out.append("    tsr_requant_t rq = {0};")
            out.append("    rq.per_channel = 1;")
        else:
            out.append("    tsr_requant_t rq = {0};")
            out.append("    rq.mul = rq_mul;\n    rq.shift = rq_shift;")
            if any(rq.add):
                out.append("    rq.add = rq_add;")
        out.append(f"    rq.zero_point = {rq.zero_point};\n    rq.lo = {rq.lo};\n    rq.hi = {rq.hi};\n"
                   f"    rq.rounding = {ROUNDING[rq.rounding]};")
        if rq.divisor:
            out.append(f"    rq.divisor = {rq.divisor};")
        if rq.neg_mul:
            out.append("    rq.neg_mul = rq_neg_mul;\n    rq.neg_shift = rq_neg_shift;")
        if rq.add_shift:
            out.append(f"    rq.add_shift = {rq.add_shift};")
        if target.get("rq_split", {}).get(layer.name):
            out.append(f"    rq.split = {target['rq_split'][layer.name]};   /* pulp_nn.dw_split */")
    # parameters per element (Requant.shape, a bias matrix): planes per channel
    rq_plane, b_plane = requant_plane(layer), bias_plane(layer)
    plane_tile = []
    if rq_plane:
        const, plane_tile = _plane_lines(rq_plane, "rq.elem", ["rq.mul", "rq.shift"] + (
            ["rq.add"] if any(layer.requant.add) else []))
        out.extend("    " + line for line in const)
    if b_plane:
        const, tile = _plane_lines(b_plane, "a.bias_elem", ["a.bias"])
        out.extend("    " + line for line in const)
        plane_tile += tile
    out.append("    int wb = 0;")
    if epilogue is not None:
        out.extend("    " + line for line in _epilogue_args(add, layer, graph, lib, l1, prefix))
    if grid:
        out.append("    tsr_tile_t cur, next" + (", ahead;" if fetched else ";"))
        if walk and grid_indices(chans, hs, ws):
            out.append("    " + grid_indices(chans, hs, ws) + "   /* next's bands (grid_step) */")
    scratch_per_core = tiling["l1_bytes"]["scratch"] // target["cores"]
    out.extend("    " + line for line in lib.constant_args(layer, l1, scratch_per_core, prefix, rq_ref, graph=graph))
    out.append("")
    if card:
        out.extend(_program_loop(layer, graph, plan_slice, target, lib, params, per_channel_rq, tc_max, l1, bufs,
                                 prog, view, plane_tile, grid))
    for i in banded:
        out.append(f"    band{i}_h0 = -1;\n    band{i}_h = 0;")
    if fetched and grid:
        out.append("    tsr_tile_at(&ahead, &grid, 0);\n    fetch(&ahead, 0);\n    if (NTILES > 1) {\n"
                   "        tsr_tile_at(&ahead, &grid, 1);\n        fetch(&ahead, 1);\n    }")
    elif fetched:
        out.append("    fetch(&tiles[0], 0);\n    if (NTILES > 1)\n        fetch(&tiles[1], 1);")
    # a table of several tiles: each row copied to the stack before use (the
    # table is read-only data in the code's level; on PULP-open each field
    # read from L2 takes about 15 cycles, a copied row a few words')
    copied = not grid and bufs > 1
    # on PULP-open even a copied row's 8 words cost core 0 about 120 cycles
    # between two forks: the row after the next one comes by DMA instead,
    # with the next tile's input (on its job, waited with it)
    ahead = copied and target.get("platform") == "pulp_open"
    if grid:
        first = (grid_first() if walk else ["tsr_tile_at(&next, &grid, 0);"]) + ["load(&next, 0, 0, in, w);"]
    elif ahead:
        first = ["load(&next, 0, 0, in, w);", "if (NTILES > 1)",
                 "    tsr_dma_run(&in[0], ENGINE_ACT, &ahead, &tiles[1], sizeof(tsr_tile_t));"]
    elif copied:
        first = ["load(&next, 0, 0, in, w);"]
    else:
        first = ["load(&tiles[0], 0, 0, in, w);"]
    decl = ("    tsr_tile_t cur, next = tiles[0], ahead;   /* ahead: tile i + 1's row, by DMA */" if ahead else
            "    tsr_tile_t cur, next = tiles[0];" if copied else None)
    if early:
        # (a layer of the out-of-core program loads its tiles in that loop)
        if grid:
            k = next(k for k in range(len(out) - 1, early_at - 1, -1) if out[k].startswith("    tsr_tile_t cur"))
            out.pop(k)
            if walk and grid_indices(chans, hs, ws):
                out.pop(k)
            decl = "    tsr_tile_t cur, next" + (", ahead;" if fetched else ";")
            if walk and grid_indices(chans, hs, ws):
                decl += "\n    " + grid_indices(chans, hs, ws) + "   /* next's bands (grid_step) */"
        guard = ["if (!tsr_program.n_ops) {"] + ["    " + line for line in first] + ["}"] if card else first
        out[early_at:early_at] = ([decl] if decl else []) + ["    " + line for line in guard]
    else:
        if decl:
            out.append(decl)
        out.extend("    " + line for line in first)
    out.append("    for (int i = 0; i < NTILES; i++) {")
    out.append("        const tsr_tile_t *t = &cur;\n        cur = next;" if grid or copied else
               "        const tsr_tile_t *t = &tiles[i];")
    if bufs > 1:
        out.append("        const int b = i % 2;")
        out.append("        if (i > 0 && t->new_weights)\n            wb ^= 1;")
    else:
        out.append("        const int b = 0;")
    if prog is not None and not card:
        out.append(f"        tsr_prog_compute({prog}, (uint32_t)i);   /* the program's ops before this tile */")
    out.append("        hal_dma_wait(&in[b]);")
    out.append("        hal_dma_wait(&w[wb]);")
    if bufs > 1:
        if grid:
            out.append("        if (i + 1 < NTILES) {")
            if walk:
                out.extend("            " + line for line in grid_step(chans, hs, ws, rows_first(tiling)))
            else:
                out.append("            tsr_tile_at(&next, &grid, i + 1);")
            out.append(f"            load(&next, (i + 1) % {bufs}, next.new_weights ? wb ^ 1 : wb, in, w);")
            out.append("        }")
        else:
            out.append("        if (i + 1 < NTILES) {")
            out.append("            next = ahead;" if ahead else "            next = tiles[i + 1];")
            out.append(f"            load(&next, (i + 1) % {bufs}, next.new_weights ? wb ^ 1 : wb, in, w);")
            if ahead:
                out.append(f"            if (i + 2 < NTILES)\n                tsr_dma_run(&in[(i + 1) % {bufs}], "
                           "ENGINE_ACT, &ahead, &tiles[i + 2], sizeof(tsr_tile_t));")
            out.append("        }")
        # slot i % 2 is free: tile i's box reached L1 (waited above)
        if fetched and grid:
            out.append("        if (i + 2 < NTILES) {\n            tsr_tile_at(&ahead, &grid, i + 2);\n"
                       "            fetch(&ahead, i % 2);\n        }")
        elif fetched:
            out.append("        if (i + 2 < NTILES)\n            fetch(&tiles[i + 2], i % 2);")
    out.append("        hal_dma_wait(&out[b]);")
    out.extend("        " + line for line in lib.tile_args(layer, params, tc_max, prefix, per_channel_rq, graph=graph))
    out.extend("        " + line for line in plane_tile)
    out.append("        hal_fork(compute, &a);")
    if epilogue is not None:
        out.append(f"        e.{'a' if add.inputs[0] == layer.output else 'b'} = {prefix}_L1 + l1_out(b);\n"
                   f"        e.{'b' if add.inputs[0] == layer.output else 'a'} = {prefix}_L1 + l1_skip(b);\n"
                   f"        e.out = {prefix}_L1 + l1_out(b);\n        e.n = t->oh * t->ow * t->oc;\n"
                   f"        hal_fork(compute_add, &e);   /* in place: the sum over the output tile */")
    moved = spill.get("out")
    if moved is not None and moved.get("band") and (rows_first(tiling) or tiling["tile"]["c"] >= y.shape[2]):
        # a storage-level tile: the band of the tile's rows, every channel,
        # gathered in SRAM from all its tiles (walked row band first) and
        # written to the card once, after its last tile (docs/out_of_core.md)
        row = y.shape[1] * y.shape[2] * out_esize
        last = "next.oh0 != t->oh0" if grid else "tiles[i + 1].oh0 != t->oh0"
        out.append(f"        {{\n            hal_dma_job_t io = {{0}};\n            tsr_tile_t box = *t;\n"
                   f"            box.oh0 = 0;\n"
                   f"            tsr_tile_out(&io, ENGINE_ACT, {prefix}_L2 + {moved['bounce']}, "
                   f"{prefix}_L1 + l1_out(b), {y.shape[1]}, {y.shape[2]}, {out_esize}, &box);\n"
                   f"            hal_dma_wait(&io);\n"
                   f"            if (i + 1 == NTILES || {last}) {{\n"
                   f"                int8_t *band = {prefix}_{target['spill']['level']} + {moved['at']} + "
                   f"t->oh0 * {row};\n"
                   f"                hal_dma_start(&out[b], ENGINE_SPILL, band, {prefix}_L2 + {moved['bounce']}, "
                   f"(uint32_t)t->oh * {row}u, 1, 0, 0, 1, 0, 0);\n"
                   f"                hal_dma_wait(&out[b]);\n            }}\n        }}")
    elif moved is not None and moved.get("band"):
        # a channel slice on the card: through a band of its rows, every
        # channel (read, the slice put in, written back; docs/out_of_core.md)
        row = y.shape[1] * y.shape[2] * out_esize
        out.append(f"        {{\n            hal_dma_job_t io = {{0}};\n            tsr_tile_t box = *t;\n"
                   f"            int8_t *band = {prefix}_{target['spill']['level']} + {moved['at']} + t->oh0 * {row};\n"
                   f"            uint32_t n = (uint32_t)t->oh * {row}u;\n"
                   f"            hal_dma_start(&io, ENGINE_SPILL, {prefix}_L2 + {moved['bounce']}, band, n, 1, 0, 0, 1, 0, 0);\n"
                   f"            hal_dma_wait(&io);\n            box.oh0 = 0;\n"
                   f"            tsr_tile_out(&io, ENGINE_ACT, {prefix}_L2 + {moved['bounce']}, {prefix}_L1 + l1_out(b), "
                   f"{y.shape[1]}, {y.shape[2]}, {out_esize}, &box);\n            hal_dma_wait(&io);\n"
                   f"            hal_dma_start(&out[b], ENGINE_SPILL, band, {prefix}_L2 + {moved['bounce']}, n, 1, 0, 0, 1, 0, 0);\n"
                   f"            hal_dma_wait(&out[b]);\n        }}")
    elif moved is None:
        out.append("        " + _box_out(plan_slice, "&out[b]", f"{prefix}_L2 + {out_at}", f"{prefix}_L1 + l1_out(b)",
                                             y, out_esize))
    elif moved.get("slot"):
        # through bounce slot b, its write-back to the spill level left running
        # while the next tile computes (waited before tile i + 2 reuses the slot)
        out.append(f"        {{\n            hal_dma_job_t io = {{0}};\n            tsr_tile_t box = *t;\n"
                   f"            int8_t *slot = {prefix}_L2 + {moved['bounce']} + b * {moved['slot']};\n"
                   f"            box.oh0 = 0;\n            box.ow0 = 0;\n            box.oc0 = 0;\n"
                   f"            tsr_tile_out(&io, ENGINE_ACT, slot, {prefix}_L1 + l1_out(b), "
                   f"t->ow, t->oc, {out_esize}, &box);\n            hal_dma_wait(&io);\n"
                   f"            tsr_tile_out(&out[b], ENGINE_SPILL, {prefix}_{target['spill']['level']} + {moved['at']}, "
                   f"slot, {y.shape[1]}, {y.shape[2]}, {out_esize}, t);\n        }}")
    else:
        # through a bounce buffer to the spill level, at once: the next tile reuses it
        out.append(f"        {{\n            hal_dma_job_t io = {{0}};\n            tsr_tile_t box = *t;\n"
                   f"            box.oh0 = 0;\n            box.ow0 = 0;\n            box.oc0 = 0;\n"
                   f"            tsr_tile_out(&io, ENGINE_ACT, {prefix}_L2 + {moved['bounce']}, {prefix}_L1 + l1_out(b), "
                   f"t->ow, t->oc, {out_esize}, &box);\n            hal_dma_wait(&io);\n"
                   f"            tsr_tile_out(&out[b], ENGINE_SPILL, {prefix}_{target['spill']['level']} + {moved['at']}, "
                   f"{prefix}_L2 + {moved['bounce']}, {y.shape[1]}, {y.shape[2]}, {out_esize}, t);\n"
                   f"            hal_dma_wait(&out[b]);\n        }}")
    out.append("    }")
    for b in range(bufs):
        out.append(f"    hal_dma_wait(&out[{b}]);")
    out.append("}")
    text = "\n".join(line for line in out if line is not None)
    return text.replace("\n\n\n", "\n\n") + "\n"


def _epilogue_decls(add, graph, lib):
    """The add epilogue's constants (per tensor: the engine requires it)
    and the function its fork runs: the library's own add kernel."""
    rq = add.requant
    lines = [f"static const int32_t erq_mul[1] = {{{int(rq.mul[0])}}};",
             f"static const int8_t erq_shift[1] = {{{int(rq.shift[0])}}};"]
    if any(rq.add):
        lines.append(f"static const int32_t erq_add[1] = {{{int(rq.add[0])}}};")
    lines.append(f"static void compute_add(void *args)\n{{\n    {lib.kernel_function(add, graph=graph)}"
                 f"((const {lib.args_type(add, graph=graph)} *)args, hal_core_id(), hal_num_cores());\n}}\n")
    return lines


def _epilogue_args(add, layer, graph, lib, l1, prefix):
    """The epilogue's argument struct `e` and requantization `erq`, as the
    add's own layer file sets them (the library adapter's constant fields)."""
    lines = [f"{lib.args_type(add, graph=graph)} e = {{0}};"]
    lines += [line.replace("rq.", "erq.").replace("rq_", "erq_")
              for line in _requant_lines(add, False)]
    lines[1:1] = ["tsr_requant_t erq = {0};"]
    lines = [ln for ln in lines if ln != "tsr_requant_t rq = {0};"]
    lines += [line.replace("a.", "e.", 1) for line in lib.constant_args(add, l1, 0, prefix, "&erq", graph=graph)]
    return lines


def _requant_lines(layer, per_channel_rq):
    """The layer function's requantization struct (per-tensor values from
    _requant_block's constants)."""
    rq = layer.requant
    lines = ["tsr_requant_t rq = {0};"]
    if per_channel_rq:
        lines.append("rq.per_channel = 1;")
    else:
        lines.append("rq.mul = rq_mul;\nrq.shift = rq_shift;")
        if any(rq.add):
            lines.append("rq.add = rq_add;")
    lines.append(f"rq.zero_point = {rq.zero_point};\nrq.lo = {rq.lo};\nrq.hi = {rq.hi};\n"
                 f"rq.rounding = {ROUNDING[rq.rounding]};")
    if rq.divisor:
        lines.append(f"rq.divisor = {rq.divisor};")
    if rq.neg_mul:
        lines.append("rq.neg_mul = rq_neg_mul;\nrq.neg_shift = rq_neg_shift;")
    if rq.add_shift:
        lines.append(f"rq.add_shift = {rq.add_shift};")
    return "\n".join(lines).split("\n")


def generate_direct(layer, graph, plan_slice, target, model):
    """A layer run in place (tessera.planning.inplace): one kernel call on the whole
    tensors in the activation level, weights and parameters read where they
    are (flash), only the kernel's scratch in the tile level. The memory
    plan lets the output overlap the input as far as the kernel's loop
    order allows (checked by hazard.py's replay of that order)."""
    from ..planning import inplace as direct

    lib = library(target["kernels"])
    prefix = target["prefix"]
    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    l1 = plan_slice["l1"]
    params = param_arrays(layer)
    per_channel_rq = any(name in ("mul", "shift") for name, _, _ in params)
    kernel = lib.kernel_function(layer, graph=graph)
    assert direct.KINDS.get(kernel, "apart") == plan_slice["direct"].replace("_rows", ""), (layer.name, kernel)
    args_type = lib.args_type(layer, graph=graph)
    shape = lambda s: "x".join(map(str, s))  # noqa: E731
    out = [header_comment([
        f"tessera: layer {layer.name} of {model}: {layer.op} {shape(x.shape)} -> {shape(y.shape)}",
        f"in place: {kernel} reads and writes the activation buffers; {l1['total']} bytes of scratch in "
        f"{target['tile_level']}.",
    ])]
    out.append('#include <stddef.h>\n#include <stdint.h>\n\n#include "tessera/hal.h"\n#include "tessera/kernels.h"'
               + "".join(f'\n#include "{h}"' for h in getattr(lib, "HEADERS", ())) + "\n")
    out.append(f"extern int8_t {prefix}_L1[];\nextern int8_t {prefix}_L2[];")
    if layer.weights:
        out.append(f"extern const int8_t {symbol(prefix, layer.name, 'weights')}[];")
    for pname, ctype, _ in params:
        out.append(f"extern const {ctype} {symbol(prefix, layer.name, pname)}[];")
    out.append("")
    rq_decl, rq_ref = _requant_block(layer, params, per_channel_rq)
    if rq_decl:
        out.append(rq_decl)
    out.append(f"static void compute(void *args)\n{{\n    {kernel}((const {args_type} *)args, "
               f"hal_core_id(), hal_num_cores());\n}}\n")
    H, W, C = x.shape
    Ho, Wo, Co = y.shape
    pt, pl, pb, pr = layer.pad
    body = [f"{args_type} a = {{0}};"] + (_requant_lines(layer, per_channel_rq) if layer.requant else [])
    body += lib.constant_args(layer, l1, l1["scratch_bytes"], prefix, rq_ref, graph=graph)
    src, dst = [f"{prefix}_L2 + {o}" for o in plan_slice["inputs"]], f"{prefix}_L2 + {plan_slice['output']}"
    if layer.op == "add":
        body += [f"a.a = {src[0]};", f"a.b = {src[1]};", f"a.out = {dst};", f"a.n = {Ho * Wo * Co};"]
    elif layer.op in ("maxpool", "avgpool"):
        body += [f"a.in = {src[0]};", f"a.in_h = {H};", f"a.in_w = {W};", f"a.c = {C};", f"a.out = {dst};",
                 f"a.out_h = {Ho};", f"a.out_w = {Wo};"]
    else:
        body += [f"a.in = {src[0]};", f"a.in_h = {H};", f"a.in_w = {W};", f"a.in_c = {C};",
                 f"a.weights = {symbol(prefix, layer.name, 'weights')};"]
        if any(p == "bias" for p, _, _ in params):
            body.append(f"a.bias = {symbol(prefix, layer.name, 'bias')};")
        body += [f"a.out = {dst};", f"a.out_h = {Ho};", f"a.out_w = {Wo};", f"a.out_c = {Co};"]
    if layer.op != "add":
        body += [f"a.pad_t = {pt};", f"a.pad_l = {pl};", f"a.pad_b = {pb};", f"a.pad_r = {pr};"]
    if per_channel_rq:
        body.append(f"rq.mul = {symbol(prefix, layer.name, 'mul')};")
        if any(p == "add" for p, _, _ in params):
            body.append(f"rq.add = {symbol(prefix, layer.name, 'add')};")
        body.append(f"rq.shift = {symbol(prefix, layer.name, 'shift')};")
    bands = direct.bands(layer, graph, plan_slice["direct"]) if layer.op == "depthwise" else []
    if len(bands) > 1:
        # one call per band of output rows (direct.bands: the order the plan's overlap assumes)
        out.append("/* oh0, oh, ih0, ih, pad_t, pad_b */")
        out.append(f"static const int16_t bands[{len(bands)}][6] = {{")
        out.extend(f"    {{{b['oh0']}, {b['oh']}, {b['ih0']}, {b['ih']}, {b['pad_t']}, {b['pad_b']}}}," for b in bands)
        out.append("};\n")
        body += [f"for (int i = 0; i < {len(bands)}; i++) {{",
                 f"    a.in = {src[0]} + bands[i][2] * {W * C};", "    a.in_h = bands[i][3];",
                 f"    a.out = {dst} + bands[i][0] * {Wo * Co};", "    a.out_h = bands[i][1];",
                 "    a.pad_t = bands[i][4];", "    a.pad_b = bands[i][5];", "    hal_fork(compute, &a);", "}"]
    else:
        body.append("hal_fork(compute, &a);")
    out.append(f"void {symbol(prefix, layer.name)}(void)\n{{")
    out.extend("    " + line for line in body)
    out.append("}")
    text = "\n".join(out)
    return text.replace("\n\n\n", "\n\n") + "\n"


def _program_loop(layer, graph, plan_slice, target, lib, params, per_channel_rq, tc_max, l1, bufs, prog, view,
                  plane_tile, grid):
    """The tile loop of a layer touching the card when the firmware runs the
    scheduler's program: each tile waits for the program to reach its
    COMPUTE (the reads it needs have landed in the pools), takes its boxes
    and weights from the pools, and leaves its output in the out pool for
    the program's WRITEs. Copies to and from L1 are synchronous here. A
    layer of many tiles rebuilds tile i from its grid (tsr_tile_at). The
    program reads an input band of every channel once for the band's
    tiles, each cutting its box from the in pool (tsr_prog_ref), and a
    band of the output is gathered from its tiles in one out pool buffer
    the program writes once; a layer rewriting a band per channel tile
    keeps the in-order firmware (storage/firmware.py)."""
    prefix = target["prefix"]
    spill = plan_slice.get("spill", {})
    y = graph.tensor(layer.output)
    out_esize = ir.DTYPES[y.dtype]
    in_esize = ir.DTYPES[graph.tensor(layer.inputs[0]).dtype]
    # constants on the card come through the program's reads (streamed or not in order)
    stream = plan_slice.get("wstream") or plan_slice.get("card_weights")
    out = ["    if (tsr_program.n_ops) {   /* the out-of-core program (tessera/program.h) */",
           "        for (int i = 0; i < NTILES; i++) {",
           "            tsr_tile_at(&cur, &grid, i);\n            const tsr_tile_t *t = &cur;" if grid else
           "            const tsr_tile_t *t = &tiles[i];",
           f"            const int b = {'i % 2' if bufs > 1 else '0'};",
           f"            const tsr_op_t *c = tsr_prog_compute({prog}, (uint32_t)i);",
           "            int8_t *dst[TSR_KINDS] = {0};",
           "            hal_dma_job_t job = {0};"]
    if bufs > 1:
        out.append("            if (i > 0 && t->new_weights)\n                wb ^= 1;")
    for i in range(len(l1["in"])):
        if f"in{i}" in spill and not spill[f"in{i}"].get("band"):
            out.append(f"            dst[{i}] = {prefix}_L1 + l1_in{i}(b);")
    if stream is not None:
        out += gather_dst(prefix, bool(layer.weights), params, tc_max, "wb", " " * 12)
    out.append("            tsr_prog_gather(c, dst, t->new_weights, ENGINE_ACT);")
    loader = getattr(lib, "input_loader", lambda layer, graph: "tsr_tile_in")(layer, graph=graph)
    for i, src in enumerate(plan_slice["inputs"][:len(l1["in"])]):
        xt = graph.tensor(layer.inputs[i])
        if spill.get(f"in{i}", {}).get("band"):
            # the band of the tile's rows, every channel, read once for the
            # band's tiles: the tile's box cut from it in the in pool
            out.append(f"            {{\n                tsr_tile_t box = *t;\n                box.ih0 = 0;\n"
                       f"                {loader}(&job, ENGINE_ACT, {prefix}_L1 + l1_in{i}(b), "
                       f"(int8_t *)tsr_prog_ref(c, {i}), {xt.shape[1]}, {xt.shape[2]}, {in_esize}, &box);\n"
                       f"                hal_dma_wait(&job);\n            }}")
            continue
        if f"in{i}" in spill:
            continue
        out.append("            " + _box_in(plan_slice, "tsr_tile_in", "&job", f"{prefix}_L1 + l1_in{i}(b)",
                                                f"{prefix}_L2 + {src}", xt, in_esize))
    if operand_as_weights(layer, graph):
        raise FitError(f"layer {layer.name}", "a layer with a right operand touches the card",
                       "give the activation level room for it")
    if stream is None and (layer.weights or params):
        out.append("            if (t->new_weights) {")
        if layer.weights:
            out.append(f"                tsr_rows_in(&job, ENGINE_W, {prefix}_L1 + l1_w(wb), "
                       f"{symbol(prefix, layer.name, 'weights')}, {view['w_bytes_per_cout']}, t->oc0, t->oc);")
        pos = 0
        for pname, ctype, size in params:
            out.append(f"                tsr_rows_in(&job, ENGINE_W, {prefix}_L1 + l1_p(wb) + {pos}, "
                       f"{symbol(prefix, layer.name, pname)}, {size}, t->oc0, t->oc);")
            pos += size * tc_max
        out.append("            }")
    out.append("            hal_dma_wait(&job);")
    out.extend("            " + line for line in lib.tile_args(layer, params, tc_max, prefix, per_channel_rq,
                                                                graph=graph))
    out.extend("            " + line for line in plane_tile)
    out.append("            hal_fork(compute, &a);")
    if spill.get("out", {}).get("band"):
        # the band's one buffer in the out pool (every channel of the band's
        # rows), filled by its tiles, written by the program after its last
        out.append(f"            {{\n                tsr_tile_t box = *t;\n                box.oh0 = 0;\n"
                   f"                tsr_tile_out(&job, ENGINE_ACT, tsr_program.pool[TSR_POOL_OUT] + c->c, "
                   f"{prefix}_L1 + l1_out(b), {y.shape[1]}, {y.shape[2]}, {out_esize}, &box);\n            }}")
    elif "out" in spill:
        out.append(f"            {{\n                tsr_tile_t box = *t;\n"
                   f"                box.oh0 = 0;\n                box.ow0 = 0;\n                box.oc0 = 0;\n"
                   f"                tsr_tile_out(&job, ENGINE_ACT, tsr_program.pool[TSR_POOL_OUT] + c->c, "
                   f"{prefix}_L1 + l1_out(b), t->ow, t->oc, {out_esize}, &box);\n            }}")
    else:
        out.append("            " + _box_out(plan_slice, "&job", f"{prefix}_L2 + {plan_slice['output']}",
                                                 f"{prefix}_L1 + l1_out(b)", y, out_esize))
    out.append("            hal_dma_wait(&job);")
    out.append("        }\n        return;\n    }")
    return out
