"""One C file for a layer computed on whole tensors (views.is_whole:
concat, resize, softmax, broadcast add/mul): every input comes to L1 in
one copy, the cores compute, the output goes back in one copy; or, when
that does not fit, the same for blocks of channels (resize) or rows
(softmax, a channel concat), one after the other. The tiler sized L1 for
exactly that (tiler._solve_whole) or stopped the build with a fit error.
The layer's tables are constants of this file: those a row-wise layer
reads for every value (views.whole_constants: a layer norm's per-channel
requantization, the softmax's exponentials) are copied into L1 first,
where the tiler counted them (the layer's params); the rest (resize and
gather indices) are read in place.
"""

import numpy as np

from .. import ir
from ..errors import FitError
from ..config.views import kernel_shapes, transpose_view, whole_constants, whole_split
from .cfmt import ROUNDING, header_comment, int_list

# TSR_SOFTMAX_* (kernels.h) of ir.SOFTMAX_MODES
SOFTMAX_MODES = {"isoftmax": 1, "itamax": 2, "itapartialmax": 3}
from .libraries import library, reference

# the whole-tensor ops whose kernel the target's library chooses (its
# row-wise and movement kernels, concatenation, resize and broadcast
# products, each taking the reference's arguments); the rest run the
# reference kernels on every library
OWN_KERNELS = ("softmax", "layernorm", "transpose", "concat", "resize", "mul")


def _shape(s):
    return "x".join(map(str, s))


def _table(ctype, name, values):
    return f"static const {ctype} {name}[{len(values)}] = {{\n{int_list(values)}\n}};"


def _requant(layer):
    rq = layer.requant
    decl = [f"static const int32_t rq_mul[1] = {{{int(rq.mul[0])}}};",
            f"static const int8_t rq_shift[1] = {{{int(rq.shift[0])}}};"]
    if any(rq.add):
        decl.append(f"static const int32_t rq_add[1] = {{{int(rq.add[0])}}};")
    body = ["tsr_requant_t rq = {0};", "rq.mul = rq_mul;", "rq.shift = rq_shift;"]
    if any(rq.add):
        body.append("rq.add = rq_add;")
    body += [f"rq.zero_point = {rq.zero_point};", f"rq.lo = {rq.lo};", f"rq.hi = {rq.hi};",
             f"rq.rounding = {ROUNDING[rq.rounding]};",
             "a.rq = &rq;"]
    return decl, body


def _args(layer, graph, prefix, ins, out):
    """(args type, file-level declarations, function-body lines)."""
    x = graph.tensor(layer.inputs[0])
    y = graph.tensor(layer.output)
    decl, body = [], []
    if layer.op in ("add", "mul"):
        a, b = (graph.tensor(n) for n in layer.inputs)
        body += [f"a.a = {ins[0]};", f"a.b = {ins[1]};", f"a.out = {out};",
                 "a.out_h = {};".format(y.shape[0]), "a.out_w = {};".format(y.shape[1]),
                 "a.out_c = {};".format(y.shape[2])]
        body += [f"a.a_h = {a.shape[0]};", f"a.a_w = {a.shape[1]};", f"a.a_c = {a.shape[2]};",
                 f"a.b_h = {b.shape[0]};", f"a.b_w = {b.shape[1]};", f"a.b_c = {b.shape[2]};",
                 f"a.in_offset[0] = {layer.in_offset[0]};", f"a.in_offset[1] = {layer.in_offset[1]};"]
        if layer.op == "add":
            body += [f"a.in_mul[0] = {layer.in_mul[0]};", f"a.in_mul[1] = {layer.in_mul[1]};"]
        d, bl = _requant(layer)
        return "tsr_binary_args_t", decl + d, body + bl
    if layer.op == "concat":
        if len(layer.inputs) > 8:
            raise FitError(f"layer {layer.name}", f"concatenation of {len(layer.inputs)} tensors",
                           "concatenate at most 8 tensors per node (TSR_MAX_CONCAT)")
        shapes = [graph.tensor(n).shape for n in layer.inputs]
        outer = int(np.prod(y.shape[:layer.axis]))
        body += [f"a.n_in = {len(layer.inputs)};", f"a.outer = {outer};", f"a.out = {out};"]
        for i, s in enumerate(shapes):
            body += [f"a.in[{i}] = {ins[i]};", f"a.inner[{i}] = {int(np.prod(s[layer.axis:]))};",
                     f"a.in_mul[{i}] = {layer.in_mul[i]};", f"a.in_offset[{i}] = {layer.in_offset[i]};"]
        d, bl = _requant(layer)
        return "tsr_concat_args_t", decl + d, body + bl
    if layer.op == "resize":
        ho, wo = y.shape[0], y.shape[1]
        decl += [_table("int32_t", "resize_rows", layer.table[:3 * ho]),
                 _table("int32_t", "resize_cols", layer.table[3 * ho:])]
        body += [f"a.in = {ins[0]};", f"a.out = {out};", f"a.in_h = {x.shape[0]};", f"a.in_w = {x.shape[1]};",
                 f"a.c = {x.shape[2]};", f"a.out_h = {ho};", f"a.out_w = {wo};", "a.rows = resize_rows;",
                 "a.cols = resize_cols;", f"a.input_offset = {layer.input_offset};", f"a.frac = {ir.RESIZE_FRAC};"]
        d, bl = _requant(layer)
        return "tsr_resize_args_t", decl + d, body + bl
    if layer.op == "softmax" and layer.mode:
        # Deeploy's integer softmaxes: their parameters, no table
        body += [f"a.in = {ins[0]};", f"a.out = {out};", f"a.pixels = {x.shape[0] * x.shape[1]};",
                 f"a.c = {x.shape[2]};", f"a.mode = {SOFTMAX_MODES[layer.mode]};"]
        body += [f"a.params[{i}] = {int(v)};" for i, v in enumerate(layer.table)]
        return "tsr_softmax_args_t", decl, body
    if layer.op == "layernorm":
        rq = layer.requant
        body += [f"a.in = {ins[0]};", f"a.out = {out};", f"a.pixels = {x.shape[0] * x.shape[1]};",
                 f"a.c = {x.shape[2]};", f"a.input_offset = {layer.input_offset};"]
        if layer.mode == "ilayernorm":
            c = x.shape[2]
            decl += [_table("int32_t", "ln_weight", layer.table[:c]), _table("int32_t", "ln_bias", layer.table[c:]),
                     "static const int32_t rq_mul[1] = {1};", f"static const int8_t rq_shift[1] = {{{int(rq.shift[0])}}};"]
            body += ["a.mode = TSR_LAYERNORM_DEEPLOY;", "a.weight = ln_weight;", "a.bias = ln_bias;",
                     "tsr_requant_t rq = {0};", "rq.mul = rq_mul;", "rq.shift = rq_shift;",
                     f"rq.lo = {rq.lo};", f"rq.hi = {rq.hi};", "a.rq = &rq;"]
            return "tsr_layernorm_args_t", decl, body
        # per-channel requantization of the normalized values (constants, read in place)
        decl += [_table("int32_t", "rq_mul", rq.mul), _table("int32_t", "rq_add", rq.add),
                 _table("int8_t", "rq_shift", rq.shift)]
        body += ["a.mode = TSR_LAYERNORM_INT;", f"a.eps = {int(layer.table[0])};",
                 "tsr_requant_t rq = {0};", "rq.mul = rq_mul;", "rq.add = rq_add;", "rq.shift = rq_shift;",
                 "rq.per_channel = 1;", f"rq.zero_point = {rq.zero_point};", f"rq.lo = {rq.lo};", f"rq.hi = {rq.hi};",
                 f"rq.rounding = {ROUNDING[rq.rounding]};", "a.rq = &rq;"]
        return "tsr_layernorm_args_t", decl, body
    if layer.op == "softmax":
        rq = layer.requant
        decl.append(_table("int32_t", "softmax_exp", layer.table))
        body += [f"a.in = {ins[0]};", f"a.out = {out};", f"a.pixels = {x.shape[0] * x.shape[1]};",
                 f"a.c = {x.shape[2]};", "a.table = softmax_exp;", f"a.mul = {int(rq.mul[0])};",
                 f"a.shift = {int(rq.shift[0])};", f"a.zero_point = {rq.zero_point};", f"a.lo = {rq.lo};",
                 f"a.hi = {rq.hi};", f"a.rounding = {ROUNDING[rq.rounding]};"]
        return "tsr_softmax_args_t", decl, body
    if layer.op == "reshape":    # DMA alone (_reshape_body)
        return None, decl, body
    if layer.op == "transpose":
        d, perm = transpose_view(layer, graph)     # x viewed as dims (ir.Layer), without axes of 1
        body += [f"a.in = {ins[0]};", f"a.out = {out};", f"a.in_h = {d[0]};", f"a.in_w = {d[1]};",
                 f"a.in_c = {d[2]};"] + [f"a.perm[{k}] = {int(p)};" for k, p in enumerate(perm)]
        return "tsr_transpose_args_t", decl, body
    if layer.op == "argmax":
        body += [f"a.in = {ins[0]};", f"a.out = (int32_t *)({out});", f"a.pixels = {x.shape[0] * x.shape[1]};",
                 f"a.c = {x.shape[2]};"]
        return "tsr_argmax_args_t", decl, body
    if layer.op == "gather":
        decl.append(_table("int32_t", "gather_index", layer.table))
        body += [f"a.in = {ins[0]};", f"a.out = {out};", f"a.in_h = {x.shape[0]};", f"a.in_w = {x.shape[1]};",
                 f"a.in_c = {x.shape[2]};", f"a.axis = {layer.axis};", f"a.n_index = {len(layer.table)};",
                 "a.index = gather_index;", f"a.fill = {layer.fill or 0};"]
        return "tsr_gather_args_t", decl, body
    raise ValueError(f"no whole-tensor code for op {layer.op}")


# the argument field each of views.whole_constants' arrays is read through
CONST_FIELDS = {"rq_mul": "rq.mul", "rq_add": "rq.add", "rq_shift": "rq.shift", "ln_weight": "a.weight",
                "ln_bias": "a.bias", "softmax_exp": "a.table"}


def _constants_in_l1(layer, L1, base):
    """Lines that copy the layer's per-value constants into L1 from `base`
    on (the job is waited on with the first input's) and point the
    arguments at the copies."""
    lines, off = [], base
    for name, ctype, n in whole_constants(layer):
        nbytes = n * (4 if ctype == "int32_t" else 1)
        lines += [f"hal_dma_start(&job, ENGINE_ACT, {L1} + {off}, {name}, {nbytes}u, 1, 0, 0, 1, 0, 0);",
                  f"{CONST_FIELDS[name]} = (const {ctype} *)({L1} + {off});"]
        off += -(-nbytes // 4) * 4
    return lines


def _split_lines(layer, graph, split):
    """Per block k of `t` rows or channels (the loop variable): the fields
    that change, and the DMA boxes of every input (to_tile 1) and of the
    output (0), as (tensor index or None for the output, box arguments)."""
    x = graph.tensor(layer.inputs[0])
    y = graph.tensor(layer.output)
    rows = lambda t: f"first, n, 0, {t.shape[1]}, 0, {t.shape[2]}"  # noqa: E731
    if layer.op == "transpose":
        # output rows [first, first + n) read input axis perm[0] over the same
        # range (of x viewed as dims: a box of that row-major view)
        x_shape, y_shape = kernel_shapes(layer, graph)
        p = transpose_view(layer, graph)[1][0]
        ranges = [f"0, {d}" for d in x_shape]
        ranges[p] = "first, n"
        return [f"a.in_{'hwc'[p]} = n;"], [", ".join(ranges)], f"first, n, 0, {y_shape[1]}, 0, {y_shape[2]}"
    if layer.op == "gather" and split == "h":
        return ["a.in_h = n;"], [rows(x)], rows(y)
    if layer.op == "argmax":
        return [f"a.pixels = n * {x.shape[1]};"], [rows(x)], rows(y)
    if split == "c":
        fields = ["a.in_c = n;"] if layer.op == "gather" else ["a.c = n;"]
        box = lambda t: f"0, {t.shape[0]}, 0, {t.shape[1]}, first, n"  # noqa: E731
    elif layer.op in ("softmax", "layernorm"):
        # blocks of pixels (kernel_shapes: the pixels as rows of one)
        return ["a.pixels = n;"], ["first, n, 0, 1, 0, " + str(x.shape[2])], f"first, n, 0, 1, 0, {y.shape[2]}"
    else:
        fields = [f"a.outer = n * {x.shape[1]};"]
        box = lambda t: f"first, n, 0, {t.shape[1]}, 0, {t.shape[2]}"  # noqa: E731
    return fields, [box(graph.tensor(n)) for n in layer.inputs], box(y)


def _concat_slices(name, layer, graph, tiling, plan_slice, L2, buf, out, decl, body, kernel):
    """A concat along H or W too large for L1 at once: each input in turn, in
    slices of t along the axis, rescaled into its place in the output."""
    axis = layer.axis
    t = tiling["tile"]["hwc"[axis]]
    y = graph.tensor(layer.output)
    lines = [f"static void compute(void *args)\n{{\n    {kernel}((const tsr_concat_args_t *)args, "
             "hal_core_id(), hal_num_cores());\n}\n", f"void {name}(void)\n{{", "    hal_dma_job_t job = {0};",
             "    tsr_concat_args_t a = {0};"]
    lines += ["    " + line for line in body if line.startswith(("tsr_requant_t", "rq.", "a.rq"))]
    lines += ["    a.n_in = 1;", f"    a.in[0] = {buf};", f"    a.out = {out};"]
    start = 0
    for i, src in enumerate(plan_slice["inputs"]):
        x = graph.tensor(layer.inputs[i])
        extent = x.shape[axis]
        box = lambda first, tensor: ", ".join(  # noqa: E731
            f"{first}, n" if k == axis else f"0, {tensor.shape[k]}" for k in range(3))
        outer, inner = int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis + 1:]))
        lines += [f"    a.in_mul[0] = {layer.in_mul[i]};", f"    a.in_offset[0] = {layer.in_offset[i]};",
                  f"    for (int32_t first = 0; first < {extent}; first += {t}) {{",
                  f"        const int32_t n = {extent} - first < {t} ? {extent} - first : {t};",
                  f"        tsr_dma_box(&job, ENGINE_ACT, {buf}, {L2} + {src}, {x.shape[1]}, {x.shape[2]}, "
                  f"{ir.DTYPES[x.dtype]}, {box('first', x)}, 1);",
                  "        hal_dma_wait(&job);",
                  f"        a.outer = {outer};", f"        a.inner[0] = n * {inner};",
                  "        hal_fork(compute, &a);",
                  f"        tsr_dma_box(&job, ENGINE_ACT, {out}, {L2} + {plan_slice['output']}, {y.shape[1]}, "
                  f"{y.shape[2]}, {ir.DTYPES[y.dtype]}, {box(f'{start} + first', y)}, 0);",
                  "        hal_dma_wait(&job);", "    }"]
        start += extent
    return lines + ["}"]


def _reshape_body(name, layer, graph, plan_slice, L2, buf, block):
    """A reshape moves bytes and computes nothing: blocks of `block` output
    rows, each the same run of bytes in the input and the output, in by DMA
    and straight out again from the same L1 buffer."""
    y = graph.tensor(layer.output)
    row = y.shape[1] * y.shape[2] * ir.DTYPES[y.dtype]
    src, dst = plan_slice["inputs"][0], plan_slice["output"]
    return [f"void {name}(void)\n{{", "    hal_dma_job_t job = {0};",
            f"    for (int32_t first = 0; first < {y.shape[0]}; first += {block}) {{",
            f"        const int32_t n = {y.shape[0]} - first < {block} ? {y.shape[0]} - first : {block};",
            f"        hal_dma_start(&job, ENGINE_ACT, {buf}, {L2} + {src} + first * {row}, (uint32_t)(n * {row}), "
            "1, 0, 0, 1, 0, 0);",
            "        hal_dma_wait(&job);",
            f"        hal_dma_start(&job, ENGINE_ACT, {L2} + {dst} + first * {row}, {buf}, (uint32_t)(n * {row}), "
            "1, 0, 0, 1, 0, 0);",
            "        hal_dma_wait(&job);", "    }", "}"]


def generate(layer, graph, tiling, plan_slice, target, model):
    prefix = target["prefix"]
    name = f"{prefix}_{layer.name}"
    if plan_slice.get("spill"):
        raise FitError(f"layer {layer.name}", f"{layer.op} reads or writes activations moved out of "
                       f"{target['act_level']}, which whole-tensor layers do not support",
                       "give the target's activation level more room")
    l1 = plan_slice["l1"]
    L1, L2 = f"{prefix}_L1", f"{prefix}_L2"
    # a concat in slices (split "k") moves one input at a time through one buffer
    ins = [f"{L1} + {l1['in'][min(i, len(l1['in']) - 1)][0]}" for i in range(len(layer.inputs))]
    out = f"{L1} + {l1['out'][0]}"
    y = graph.tensor(layer.output)
    args_type, decl, body = _args(layer, graph, prefix, ins, out)
    split = whole_split(layer) if tiling["tiled"] else ""
    block = tiling["tile"]["c"] if split == "c" else tiling["tile"]["h"]
    x_shape, y_shape = kernel_shapes(layer, graph)     # the boxes' tensor shapes (transpose: as viewed)
    extent = x_shape[2] if split == "c" else y_shape[0]
    what = {"c": f"in blocks of {block} channels", "h": f"in blocks of {block} rows"}.get(split, "on whole tensors")
    text = [header_comment([
        f"tessera: layer {layer.name} of {model}: {layer.op} "
        f"{' + '.join(_shape(graph.tensor(n).shape) for n in layer.inputs)} -> {_shape(y.shape)}",
        f"computed {what}, one after the other; {l1['total']} bytes of L1.",
    ])]
    lib = library(target["kernels"])
    own = layer.op in OWN_KERNELS
    text.append('#include <stddef.h>\n#include <stdint.h>\n\n#include "tessera/hal.h"\n#include "tessera/kernels.h"\n'
                '#include "tessera/tile.h"\n' + "".join(f'#include "{h}"\n' for h in (getattr(lib, "HEADERS", ()) if own else ())))
    text.append(f"extern int8_t {L1}[];\nextern int8_t {L2}[];\n")
    text.append(f"#define ENGINE_ACT {target['act_engine']}   /* {target['act_level']} <-> {target['tile_level']} */\n")
    text.extend(d + "\n" for d in decl)
    if layer.op == "reshape":
        text.extend(_reshape_body(name, layer, graph, plan_slice, L2, ins[0], block if split else y.shape[0]))
        return "\n".join(text) + "\n"
    kernel = lib.kernel_function(layer, graph) if own else reference.kernel_function(layer, graph)
    if split == "k":
        text.extend(_concat_slices(name, layer, graph, tiling, plan_slice, L2, ins[0], out, decl, body, kernel))
        return "\n".join(text) + "\n"
    text.append(f"static void compute(void *args)\n{{\n    {kernel}((const {args_type} *)args, "
                f"hal_core_id(), hal_num_cores());\n}}\n")
    text.append(f"void {name}(void)\n{{")
    text.append("    hal_dma_job_t job = {0};")
    text.append(f"    {args_type} a = {{0}};")
    text.extend("    " + line for line in body)
    if whole_constants(layer):
        text.extend("    " + line for line in _constants_in_l1(layer, L1, l1["params"][0]))
    if not split:
        for i, src in enumerate(plan_slice["inputs"]):
            t = graph.tensor(layer.inputs[i])
            text.append(f"    hal_dma_start(&job, ENGINE_ACT, {ins[i]}, {L2} + {src}, {t.nbytes}u, 1, 0, 0, 1, 0, 0);")
        text.append("    hal_dma_wait(&job);")
        text.append("    hal_fork(compute, &a);")
        text.append(f"    hal_dma_start(&job, ENGINE_ACT, {L2} + {plan_slice['output']}, {out}, {y.nbytes}u, "
                    "1, 0, 0, 1, 0, 0);")
        text.append("    hal_dma_wait(&job);")
    else:
        fields, in_boxes, out_box = _split_lines(layer, graph, split)
        text.append(f"    for (int32_t first = 0; first < {extent}; first += {block}) {{")
        text.append(f"        const int32_t n = {extent} - first < {block} ? {extent} - first : {block};")
        for i, src in enumerate(plan_slice["inputs"]):
            t = graph.tensor(layer.inputs[i])
            shape = x_shape if i == 0 else t.shape
            text.append(f"        tsr_dma_box(&job, ENGINE_ACT, {ins[i]}, {L2} + {src}, {shape[1]}, {shape[2]}, "
                        f"{ir.DTYPES[t.dtype]}, {in_boxes[i]}, 1);")
        text.append("        hal_dma_wait(&job);")
        text.extend("        " + f for f in fields)
        text.append("        hal_fork(compute, &a);")
        text.append(f"        tsr_dma_box(&job, ENGINE_ACT, {out}, {L2} + {plan_slice['output']}, {y_shape[1]}, "
                    f"{y_shape[2]}, {ir.DTYPES[y.dtype]}, {out_box}, 0);")
        text.append("        hal_dma_wait(&job);")
        text.append("    }")
    text.append("}")
    return "\n".join(text) + "\n"
