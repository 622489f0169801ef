"""One C file for a recurrent layer (IR op lstm): the time loop outermost.

The input sequence, the layer's constants (one packed array,
golden.recurrent.pack) and its states come into L1 once; then every time
step is one fork of the library's step kernel over the cores (each core
its share of the cells), plus one of the projection kernel when the layer
has a projection. The hidden state of step t is written straight into the
output sequence's row t in L1 and read back from there by step t + 1 (the
first step reads the initial state, h = zero point); the int16 cell state
is updated in place, each core only its own cells. The output sequence goes
back to the activation level at the end. The tiler sized L1 for exactly
that (tiler._solve_whole with the layer's resident bytes) or stopped the
build with a fit error.

On a target whose weights reach the tiles through a staging level (GAP8:
L3 -> L2 -> L1), the constants arrive in L2 as the layer's one chunk of the
weight stream (memplan), and are copied to L1 from there.
"""

from ..errors import FitError
from ..util.cname import c_comment
from .cfmt import header_comment, symbol
from .libraries import library, reference




def kernels(lib):
    """(step, projection) kernel functions of a kernel library."""
    return getattr(lib, "RECURRENT", reference.RECURRENT)


def _args(layer, at, scratch):
    """Constant fields of tsr_lstm_args_t (at(role): an array's L1 pointer
    expression, scratch: the states')."""
    rnn = layer.rnn
    gates = rnn["gates"]
    m, s = rnn["mul"], rnn["shift"]
    nc, no = rnn["n_cell"], rnn["n_output"]
    align = lambda n: -(-n // 4) * 4   # noqa: E731
    lines = [f"a.n_input = {rnn['n_input']};", f"a.n_cell = {nc};", f"a.n_output = {no};",
             f"a.cifg = {1 if gates == 'fgo' else 0};",
             f"a.w_in = {at('w_input')};", f"a.w_rec = {at('w_recurrent')};",
             f"a.b_in = (const int32_t *)({at('b_input')});",
             f"a.b_rec = (const int32_t *)({at('b_recurrent')});"]
    peep = rnn.get("peephole") or ""
    for k, g in enumerate(gates):
        lines += [f"a.mul_in[{k}] = {m['input'][k]};", f"a.shift_in[{k}] = {s['input'][k]};",
                  f"a.mul_rec[{k}] = {m['recurrent'][k]};", f"a.shift_rec[{k}] = {s['recurrent'][k]};"]
        if g in peep:
            j = peep.index(g)
            lines += [f"a.peep[{k}] = {j};", f"a.mul_peep[{k}] = {m['peephole'][j]};",
                      f"a.shift_peep[{k}] = {s['peephole'][j]};"]
        else:
            lines.append(f"a.peep[{k}] = -1;")
    if peep:
        lines.append(f"a.w_peep = (const int16_t *)({at('w_peephole')});")
    lines += [f"a.hidden_mul = {m['hidden']};", f"a.hidden_shift = {s['hidden']};",
              f"a.hidden_zp = {rnn['hidden_zp']};", f"a.state_zp = {rnn['state_zp']};",
              f"a.cell_exp = {rnn['cell_exp']};", f"a.cell_clip = {rnn['cell_clip']};",
              f"a.c = (int16_t *)({scratch});",
              f"a.pre = (int16_t *)({scratch} + {align(2 * nc) + align(no)});"]
    if rnn.get("projection"):
        lines += [f"a.w_proj = {at('w_projection')};",
                  f"a.b_proj = (const int32_t *)({at('b_projection')});",
                  f"a.proj_mul = {m['projection']};", f"a.proj_shift = {s['projection']};",
                  f"a.proj_clip = {rnn['proj_clip']};",
                  f"a.hid = {scratch} + {align(2 * nc) + align(no) + align(2 * len(gates) * nc)};"]
    return lines


def _head(comment, lib, target, weights_symbol, staged):
    """The file's comment, includes, the arenas, the DMA engines and where
    the constants come from."""
    text = [header_comment(comment)]
    text.append('#include <stddef.h>\n#include <stdint.h>\n\n#include "tessera/hal.h"\n#include "tessera/kernels.h"\n'
                '#include "tessera/tile.h"' + "".join(f'\n#include "{h}"' for h in getattr(lib, "HEADERS", ()))
                + "\n")
    prefix = target["prefix"]
    text.append(f"extern int8_t {prefix}_L1[];\nextern int8_t {prefix}_L2[];")
    text.append(f"#define ENGINE_ACT {target['act_engine']}   /* {target['act_level']} <-> {target['tile_level']} */")
    if not staged:
        text.append(f"#define ENGINE_W {target['w_engine']}     /* {target['w_level']} -> {target['tile_level']} */")
        text.append("#define ENGINE_CW ENGINE_W   /* the constants' engine */")
        text.append(f"extern const int8_t {weights_symbol}[];\n")
    else:
        text.append(f"/* the constants arrive in {target['act_level']} as one chunk of the weight stream */")
        text.append("#define ENGINE_CW ENGINE_ACT   /* the constants' engine */")
        text.append(f"extern tsr_wstream_t {prefix}_wstream;\n")
    return text


def _source(prefix, layer, staged):
    """Where the constants come from: their array, or their chunk in the staging level."""
    return f"tsr_wstream_next(&{prefix}_wstream)" if staged else symbol(prefix, layer.name, "weights")


ESIZE = {"int32": 4, "int16": 2}


def _constants(rnn, w, streamed, bufs_bytes=0):
    """(role -> L1 pointer expression, the DMA lines that bring the
    constants in from `src`, the two block buffers' expressions): all of
    them in the blob's own layout, or (streamed roles) the rest packed and
    two buffers of bufs_bytes after them."""
    lay = rnn["layout"]
    align = lambda n: -(-n // 4) * 4   # noqa: E731
    if not streamed:
        return (lambda role: f"{w} + {lay[role][0]}"), [
            f"hal_dma_start(&job, ENGINE_CW, {w}, src, {rnn['bytes']}u, 1, 0, 0, 1, 0, 0);"], []
    place, at, lines = {}, 0, []
    for role, (off, count, dtype) in sorted(lay.items(), key=lambda kv: kv[1][0]):
        if role not in streamed:
            place[role] = at
            size = count * ESIZE.get(dtype, 1)
            lines.append(f"hal_dma_start(&job, ENGINE_CW, {w} + {at}, src + {off}, {size}u, 1, 0, 0, 1, 0, 0);")
            at += align(size)
    # a streamed array has no place of its own: the block loop points at its buffer
    return ((lambda role: f"{w} + {place[role]}" if role in place else "NULL"), lines,
            [f"{w} + {at}", f"{w} + {at + bufs_bytes}"])


def _block_loader(rnn, gates, block, rec_cols):
    """A C function that starts loading block bb of cells (every gate's rows
    of its cells, input then recurrent matrix) into buf."""
    lay, nc, F = rnn["layout"], rnn["n_cell"], rnn["n_input"]
    return (f"static void load_block(int32_t bb, const int8_t *src, int8_t *buf, hal_dma_job_t *job)\n{{\n"
            f"    int32_t c0 = bb * {block}, n = {nc} - c0 < {block} ? {nc} - c0 : {block};\n"
            f"    hal_dma_start(job, ENGINE_CW, buf, src + {lay['w_input'][0]} + c0 * {F}, (uint32_t)(n * {F}), "
            f"{gates}, {nc * F}, {block * F}, 1, 0, 0);\n"
            f"    hal_dma_start(job, ENGINE_CW, buf + {gates * block * F}, src + {lay['w_recurrent'][0]} + c0 * "
            f"{rec_cols}, (uint32_t)(n * {rec_cols}), {gates}, {nc * rec_cols}, {block * rec_cols}, 1, 0, 0);\n}}\n")


def _block_loop(rnn, gates, block, bufs, fork, step_lines, after):
    """The time loop over blocks of cells (left open: _finish closes it):
    block b + 1 (the next step's first after the last) loads into the other
    buffer while the cores compute block b."""
    nc, F, T = rnn["n_cell"], rnn["n_input"], rnn["steps"]
    nb = -(-nc // block)
    return (["load_block(0, src, " + bufs[0] + ", &wj[0]);",
             f"for (int32_t t = 0, blk = 0; t < {T}; t++) {{"] + ["    " + line for line in step_lines] +
            [f"    for (int32_t bb = 0; bb < {nb}; bb++, blk++) {{",
             f"        int8_t *buf = blk & 1 ? {bufs[1]} : {bufs[0]};",
             "        hal_dma_wait(&wj[blk & 1]);",
             f"        if (t < {T - 1} || bb < {nb - 1})",
             f"            load_block((bb + 1) % {nb}, src, blk & 1 ? {bufs[0]} : {bufs[1]}, &wj[(blk + 1) & 1]);",
             "        a.w_in = buf;", f"        a.w_rec = buf + {gates * block * F};",
             f"        a.w_rows = {block};", f"        a.w_first = a.cell0 = bb * {block};",
             f"        a.cell1 = a.cell0 + {block} < {nc} ? a.cell0 + {block} : {nc};",
             f"        hal_fork({fork}, &a);", "    }"] + ["    " + line for line in after])


def _finish(text, body, layer, plan_slice, prefix, ys, y):
    """The output sequence back to the activation level; the function."""
    body += ["}",
             f"hal_dma_start(&job, ENGINE_ACT, {prefix}_L2 + {plan_slice['output']}, {ys}, {y.nbytes}u, "
             "1, 0, 0, 1, 0, 0);",
             "hal_dma_wait(&job);"]
    text.append(f"void {symbol(prefix, layer.name)}(void)\n{{")
    text.extend("    " + line for line in body)
    text.append("}")
    return "\n".join(text) + "\n"


def generate(layer, graph, tiling, plan_slice, target, model):
    if plan_slice.get("spill"):
        raise FitError(f"layer {layer.name}", "a recurrent layer reads or writes activations moved out of "
                       f"{target['act_level']}, which it does not support",
                       "give the target's activation level more room")
    if layer.rnn["cell"] in ("onnx_lstm", "onnx_gru"):
        return generate_onnx(layer, graph, tiling, plan_slice, target, model)
    if layer.rnn["cell"] == "ops":
        return generate_ops(layer, graph, tiling, plan_slice, target, model)
    prefix = target["prefix"]
    lib = library(target["kernels"])
    step, project = kernels(lib)
    rnn = layer.rnn
    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    l1 = plan_slice["l1"]
    L1, L2 = f"{prefix}_L1", f"{prefix}_L2"
    steps, no, nc, F = rnn["steps"], rnn["n_output"], rnn["n_cell"], rnn["n_input"]
    staged = plan_slice.get("wstream") is not None
    stream = tiling.get("stream")
    align = lambda n: -(-n // 4) * 4   # noqa: E731
    how = (f"the gate matrices stream through L1 {stream['cells']} cells at a time" if stream
           else "the constants resident")
    text = _head([
        f"tessera: layer {layer.name} of {model}: {rnn['cell']} over {steps} steps, "
        f"{F} -> {nc} cells -> {no} outputs ({rnn['gates']} gates"
        f"{', peephole ' + rnn['peephole'] if rnn.get('peephole') else ''}"
        f"{', projection' if rnn.get('projection') else ''})",
        f"sequences, {rnn['bytes']} bytes of constants ({how}) and the states in L1 ({l1['total']} bytes); "
        f"the time loop forks {step} on the cores once per step{' and block' if stream else ''}.",
    ], lib, target, symbol(prefix, layer.name, "weights"), staged)
    text.append(f"static void step(void *args)\n{{\n    {step}((const tsr_lstm_args_t *)args, "
                f"hal_core_id(), hal_num_cores());\n}}\n")
    if rnn.get("projection"):
        text.append(f"static void project(void *args)\n{{\n    {project}((const tsr_lstm_args_t *)args, "
                    f"hal_core_id(), hal_num_cores());\n}}\n")
    xs, ys = f"{L1} + {l1['in'][0][0]}", f"{L1} + {l1['out'][0]}"
    w, scratch = f"{L1} + {l1['weights'][0]}", f"{L1} + {l1['scratch']}"
    h0 = f"{scratch} + {align(2 * nc)}"
    at, loads, bufs = _constants(rnn, w, ("w_input", "w_recurrent") if stream else (),
                                 stream["buffer"] if stream else 0)
    if stream:
        text.append(_block_loader(rnn, len(rnn["gates"]), stream["cells"], no))
    body = ["hal_dma_job_t job = {0};"] + (["hal_dma_job_t wj[2] = {{0}, {0}};"] if stream else []) + [
            "tsr_lstm_args_t a = {0};", f"const int8_t *src = {_source(prefix, layer, staged)};",
            f"int8_t *h0 = {h0};", "int16_t *c;",
            f"hal_dma_start(&job, ENGINE_ACT, {xs}, {L2} + {plan_slice['inputs'][0]}, {x.nbytes}u, 1, 0, 0, 1, 0, 0);"]
    body += loads + _args(layer, at, scratch)
    body += ["c = a.c;",
             f"for (int32_t j = 0; j < {nc}; j++)\n        c[j] = 0;",
             f"for (int32_t j = 0; j < {no}; j++)\n        h0[j] = {rnn['state_zp']};",
             "hal_dma_wait(&job);"]
    step_lines = [f"a.x = {xs} + t * {F};", f"a.h_prev = t ? {ys} + (t - 1) * {no} : h0;",
                  f"a.h_next = {ys} + t * {no};"]
    after = (["a.cell0 = a.cell1 = 0;", "hal_fork(project, &a);"] if rnn.get("projection") else [])
    if stream:
        body += _block_loop(rnn, len(rnn["gates"]), stream["cells"], bufs, "step", step_lines, after)
    else:
        body += [f"for (int32_t t = 0; t < {steps}; t++) {{"] + ["    " + line for line in step_lines] + \
            ["    hal_fork(step, &a);"] + ["    " + line for line in after]
    return _finish(text, body, layer, plan_slice, prefix, ys, y)


# ---- cells of plain ops (golden.recurrent.ops_cell) -------------------------
#
# Per step, every body op is one fork of the library's kernel for that op
# on whole vectors (linear: the rows over the cores; add, mul, lut: the
# elements), with that step's parameters from a table of this file; the
# states are vectors of their own, refreshed from the body's results after
# the step. Views (a SPLIT's outputs) are pointers into their vector.

# per-step parameter fields of each body op, in table order
PARAMS = {"linear": ("input_offset", "mul", "shift", "zp", "lo", "hi"),
          "add": ("off0", "off1", "mul0", "mul1", "sh0", "sh1", "mul", "shift", "zp", "lo", "hi"),
          "mul": ("off0", "off1", "mul", "shift", "zp", "lo", "hi"),
          "lut": ("table",)}


def _row(op, p):
    if op["op"] == "lut":
        return [p["table"]]
    rq = p["rq"]
    if op["op"] == "linear":
        return [p["input_offset"]] + rq
    if op["op"] == "mul":
        return list(p["in_offset"]) + rq
    return list(p["in_offset"]) + list(p["in_mul"]) + list(p.get("in_shift") or (0, 0)) + rq


def _body_kernel(op, lib, graph):
    """The library's kernel for a body op when every step's parameters are
    within what it computes exactly, else the reference kernel."""
    from .. import ir

    if op["op"] != "linear":
        return reference.KERNELS[op["op"]]
    chosen = set()
    for p in op["steps"]:
        mul, shift, zp, lo, hi = p["rq"]
        probe = ir.Layer(name="body", op="linear", inputs=[], output="", input_offset=p["input_offset"],
                         requant=ir.Requant(mul=[mul], add=[0], shift=[shift], rounding=op["rounding"],
                                            zero_point=zp, lo=lo, hi=hi))
        chosen.add(lib.kernel_function(probe, graph))
    return chosen.pop() if len(chosen) == 1 else reference.KERNELS["linear"]


def generate_ops(layer, graph, tiling, plan_slice, target, model):
    from .cfmt import int_list

    prefix = target["prefix"]
    lib = library(target["kernels"])
    rnn = layer.rnn
    l1 = plan_slice["l1"]
    L1, L2 = f"{prefix}_L1", f"{prefix}_L2"
    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    T, F = rnn["steps"], rnn["n_input"]
    align = lambda n: -(-n // 4) * 4   # noqa: E731
    xs, ys = f"{L1} + {l1['in'][0][0]}", f"{L1} + {l1['out'][0]}"
    w = f"{L1} + {l1['weights'][0]}"
    # the vectors: states, then every body op's result, in the scratch region
    at, vec = l1["scratch"], {}
    for s in rnn["states"]:
        vec[s["name"]] = at
        at += align(s["size"])
    for op in rnn["body"]:
        vec[op["out"]] = at
        at += align(op["n"])
    lay = rnn["layout"]
    # the constants in L1: all of them, or (tiling "stream") all but the
    # streamed matrices, packed, then two buffers of `rows` rows of those
    stream = tiling.get("stream")
    streamed = {rnn["body"][k]["weights"] for k in stream["ops"]} if stream else set()
    esize = {"int32": 4, "int16": 2}
    place, at_w = {}, 0
    for role, (off, count, dtype) in sorted(lay.items(), key=lambda kv: kv[1][0]):
        if role not in streamed:
            place[role] = at_w
            at_w += align(count * esize.get(dtype, 1))
    bufs = [at_w, at_w + stream["buffer"]] if stream else []
    wsrc = symbol(prefix, layer.name, "weights") if plan_slice.get("wstream") is None else "wsrc"

    def ref(r):
        if r is None:
            return "NULL"
        if "const" in r:
            return f"{w} + {place[r['const']]}"
        base = "xt" if r["v"] == "x" else f"{L1} + {vec[r['v']]}"
        return f"{base} + {r['at']}" if r.get("at") else base

    fns = [_body_kernel(op, lib, graph) for op in rnn["body"]]
    text = _head([
        f"tessera: layer {layer.name} of {model}: a recurrence of {len(rnn['body'])} ops per step over {T} steps "
        f"(an unrolled {layer.source[0] if layer.source else 'loop'}), {F} -> {rnn['n_output']}",
        f"sequence, {rnn['bytes']} bytes of constants, the states and the ops' vectors in L1 ({l1['total']} bytes); "
        "each op one fork per step.",
    ], lib, target, symbol(prefix, layer.name, "weights"), plan_slice.get("wstream") is not None)
    if rnn.get("tables"):
        flat = [v for table in rnn["tables"] for v in table]
        text.append(f"static const int8_t tables[{len(flat)}] = {{\n{int_list(flat)}\n}};")
    for k, op in enumerate(rnn["body"]):
        rows = [_row(op, p) for p in op["steps"]]
        width = len(PARAMS[op["op"]])
        text.append(f"/* op {k}: {op['op']} ({', '.join(PARAMS[op['op']])} per step) */")
        text.append(f"static const int32_t p{k}[{T * width}] = {{\n{int_list([v for r in rows for v in r], per_line=width * 2)}\n}};")
    args = {"linear": "tsr_conv_args_t", "add": "tsr_add_args_t", "mul": "tsr_binary_args_t", "lut": "tsr_lut_args_t"}
    for k, op in enumerate(rnn["body"]):
        text.append(f"static void k{k}(void *args)\n{{\n    {fns[k]}((const {args[op['op']]} *)args, "
                    "hal_core_id(), hal_num_cores());\n}")
    staged = plan_slice.get("wstream") is not None
    engine_w = "ENGINE_ACT" if staged else "ENGINE_W"
    body = ["hal_dma_job_t job = {0};"] + (["hal_dma_job_t wj[2] = {{0}, {0}};"] if streamed else []) + [
            "tsr_requant_t rq = {0};", "int32_t mul;", "int8_t shift;",
            f"hal_dma_start(&job, ENGINE_ACT, {xs}, {L2} + {plan_slice['inputs'][0]}, {x.nbytes}u, 1, 0, 0, 1, 0, 0);"]
    if staged:
        body.insert(0, f"const int8_t *wsrc = tsr_wstream_next(&{prefix}_wstream);")
    if not streamed:
        body.append(f"hal_dma_start(&job, {engine_w}, {w}, {wsrc}, {rnn['bytes']}u, 1, 0, 0, 1, 0, 0);")
    else:
        for role, (off, count, dtype) in sorted(lay.items(), key=lambda kv: kv[1][0]):
            if role in place:
                body.append(f"hal_dma_start(&job, {engine_w}, {w} + {place[role]}, {wsrc} + {off}, "
                            f"{count * esize.get(dtype, 1)}u, 1, 0, 0, 1, 0, 0);")
    for s in rnn["states"]:
        body.append(f"for (int32_t j = 0; j < {s['size']}; j++)\n        {L1}[{vec[s['name']]} + j] = {s['init']};")
    body += ["hal_dma_wait(&job);", "rq.mul = &mul;", "rq.shift = &shift;", "rq.rounding = TSR_ROUND_HALF_UP;",
             f"for (int32_t t = 0; t < {T}; t++) {{", f"    const int8_t *xt = {xs} + t * {F};"]
    rounding = {"half_up": "TSR_ROUND_HALF_UP", "tflite": "TSR_ROUND_TFLITE", "floor": "TSR_ROUND_FLOOR"}
    for k, op in enumerate(rnn["body"]):
        out = f"{L1} + {vec[op['out']]}"
        n = op["n"]
        lines = [f"/* op {k}: {op['op']} -> {c_comment(op['out'])} */", "{",
                 f"    const int32_t *q = p{k} + t * {len(PARAMS[op['op']])};"]
        if op["op"] == "lut":
            lines += ["    tsr_lut_args_t a = {0};", f"    a.in = {ref(op['in'][0])};", f"    a.out = {out};",
                      f"    a.pixels = {n};", "    a.c = 1;", "    a.table = tables + q[0] * 256;"]
        else:
            fields = PARAMS[op["op"]]
            i = {f: j for j, f in enumerate(fields)}
            lines += [f"    mul = q[{i['mul']}];", f"    shift = (int8_t)q[{i['shift']}];",
                      f"    rq.zero_point = q[{i['zp']}];", f"    rq.lo = q[{i['lo']}];", f"    rq.hi = q[{i['hi']}];",
                      f"    rq.rounding = {rounding[op['rounding']]};"]
            if op["op"] == "linear":
                nin = lay[op["weights"]][1] // n
                lines += ["    tsr_conv_args_t a = {0};", f"    a.in = {ref(op['in'][0])};", "    a.in_h = 1;",
                          "    a.in_w = 1;", f"    a.in_c = {nin};",
                          f"    a.weights = {w} + {place.get(op['weights'], 0)};",
                          f"    a.bias = {'(const int32_t *)(' + w + ' + ' + str(place[op['bias']]) + ')' if op.get('bias') else 'NULL'};",
                          f"    a.out = {out};", "    a.out_h = 1;", "    a.out_w = 1;", f"    a.out_c = {n};",
                          "    a.kh = a.kw = a.sh = a.sw = 1;", f"    a.input_offset = q[{i['input_offset']}];",
                          "    a.rq = &rq;"]
            elif op["op"] == "add":
                lines += ["    tsr_add_args_t a = {0};", f"    a.a = {ref(op['in'][0])};", f"    a.b = {ref(op['in'][1])};",
                          f"    a.out = {out};", f"    a.n = {n};",
                          "    a.in_offset[0] = q[0]; a.in_offset[1] = q[1];",
                          "    a.in_mul[0] = q[2]; a.in_mul[1] = q[3];", "    a.in_shift[0] = q[4]; a.in_shift[1] = q[5];",
                          "    a.rq = &rq;"]
            else:
                lines += ["    tsr_binary_args_t a = {0};", f"    a.a = {ref(op['in'][0])};", f"    a.b = {ref(op['in'][1])};",
                          f"    a.out = {out};", f"    a.out_h = a.a_h = a.b_h = {n};", "    a.out_w = a.a_w = a.b_w = 1;",
                          "    a.out_c = a.a_c = a.b_c = 1;", "    a.in_offset[0] = q[0]; a.in_offset[1] = q[1];",
                          "    a.rq = &rq;"]
        if op["op"] == "linear" and op["weights"] in streamed:
            # rows [r0, r0 + R) of the matrix land in buffer c % 2 while the cores
            # compute the block before it
            R, src = stream["rows"], f"{wsrc} + {lay[op['weights']][0]}"
            bias = "a.bias" if op.get("bias") else None
            lines += [f"    const int32_t *b0 = a.bias;" if bias else "",
                      f"    hal_dma_start(&wj[0], {engine_w}, {w} + {bufs[0]}, {src}, {min(R, n) * nin}u, 1, 0, 0, 1, 0, 0);",
                      f"    for (int32_t r0 = 0, c = 0; r0 < {n}; r0 += {R}, c++) {{",
                      f"        int8_t *buf = {w} + (c & 1 ? {bufs[1]} : {bufs[0]});",
                      "        hal_dma_wait(&wj[c & 1]);",
                      f"        if (r0 + {R} < {n})",
                      f"            hal_dma_start(&wj[(c + 1) & 1], {engine_w}, {w} + (c & 1 ? {bufs[0]} : {bufs[1]}), "
                      f"{src} + (r0 + {R}) * {nin}, (uint32_t)(({n} - r0 - {R} < {R} ? {n} - r0 - {R} : {R}) * {nin}), "
                      "1, 0, 0, 1, 0, 0);",
                      "        a.weights = buf;",
                      f"        a.out = {out} + r0;",
                      f"        a.out_c = {n} - r0 < {R} ? {n} - r0 : {R};"]
            if bias:
                lines.append("        a.bias = b0 + r0;")
            lines += [f"        hal_fork(k{k}, &a);", "    }", "}"]
        else:
            lines += [f"    hal_fork(k{k}, &a);", "}"]
        body += ["    " + line for line in lines if line]
    n_out = rnn["n_output"]
    emit = f"{L1} + {vec[rnn['emit']]}"
    if rnn.get("sequence", True):
        body.append(f"    for (int32_t j = 0; j < {n_out}; j++)\n        ({ys})[t * {n_out} + j] = ({emit})[j];")
    else:
        body.append(f"    if (t == {T - 1})\n        for (int32_t j = 0; j < {n_out}; j++)\n"
                    f"            ({ys})[j] = ({emit})[j];")
    for s in rnn["states"]:
        src = f"{L1} + {vec[rnn['next'][s['name']]]}"
        body.append(f"    for (int32_t j = 0; j < {s['size']}; j++)\n        {L1}[{vec[s['name']]} + j] = ({src})[j];")
    return _finish(text, body, layer, plan_slice, prefix, ys, y)


# ---- ONNX's LSTM and GRU (golden.recurrent.onnx_cell) -----------------------

def generate_onnx(layer, graph, tiling, plan_slice, target, model):
    """The sequence and the constants in L1 (or, tiling "stream", the gate
    matrices a block of cells at a time), the hidden state in two int16
    buffers that swap every step, the int32 cell state in place; one fork
    of the library's ONNX step per step (and block), the output quantized by
    the last step (by every one for a sequence)."""
    prefix = target["prefix"]
    lib = library(target["kernels"])
    rnn = layer.rnn
    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    l1 = plan_slice["l1"]
    L1, L2 = f"{prefix}_L1", f"{prefix}_L2"
    T, F, H = rnn["steps"], rnn["n_input"], rnn["n_cell"]
    gates = 4 if rnn["cell"] == "onnx_lstm" else 3
    staged = plan_slice.get("wstream") is not None
    stream = tiling.get("stream")
    align = lambda n: -(-n // 4) * 4   # noqa: E731
    xs, ys = f"{L1} + {l1['in'][0][0]}", f"{L1} + {l1['out'][0]}"
    w, scratch = f"{L1} + {l1['weights'][0]}", f"{L1} + {l1['scratch']}"
    m, s = rnn["mul"], rnn["shift"]
    step = getattr(lib, "ONNX_RECURRENT", reference.ONNX_RECURRENT)
    how = (f"the gate matrices stream through L1 {stream['cells']} cells at a time" if stream
           else "the constants resident")
    text = _head([
        f"tessera: layer {layer.name} of {model}: ONNX's {rnn['cell'][5:].upper()} over {T} steps, "
        f"{F} -> {H} (as ONNX Runtime runs it in float: the states in fixed point)",
        f"sequence, {rnn['bytes']} bytes of constants ({how}) and the states in L1 ({l1['total']} bytes); "
        f"the time loop forks {step} on the cores once per step{' and block' if stream else ''}.",
    ], lib, target, symbol(prefix, layer.name, "weights"), staged)
    text.append(f"static void step(void *args)\n{{\n    {step}((const tsr_onnx_rnn_args_t *)args, "
                "hal_core_id(), hal_num_cores());\n}\n")
    at, loads, bufs = _constants(rnn, w, ("w_input", "w_recurrent") if stream else (),
                                 stream["buffer"] if stream else 0)
    if stream:
        text.append(_block_loader(rnn, gates, stream["cells"], H))
    body = ["hal_dma_job_t job = {0};"] + (["hal_dma_job_t wj[2] = {{0}, {0}};"] if stream else []) + [
            "tsr_onnx_rnn_args_t a = {0};", f"const int8_t *src = {_source(prefix, layer, staged)};",
            f"int16_t *h = (int16_t *)({scratch});",
            f"int32_t *c = (int32_t *)({scratch} + {2 * align(2 * H)});",
            f"hal_dma_start(&job, ENGINE_ACT, {xs}, {L2} + {plan_slice['inputs'][0]}, {x.nbytes}u, 1, 0, 0, 1, 0, 0);"]
    body += loads + [
            f"a.w_in = {at('w_input')};", f"a.w_rec = {at('w_recurrent')};",
            f"a.b_in = (const int32_t *)({at('b_input')});",
            f"a.b_rec = (const int32_t *)({at('b_recurrent')});",
            f"a.w_sums = (const int32_t *)({at('w_sums')});",
            f"a.n_input = {F};", f"a.n_cell = {H};", f"a.gru = {int(rnn['cell'] == 'onnx_gru')};",
            f"a.zp_x = {rnn['zp']['x']};", f"a.zp_w = {rnn['zp']['w']};", f"a.zp_r = {rnn['zp']['r']};",
            f"a.zp_y = {rnn['y_zp']};", f"a.mul_x = {m['x']};", f"a.shift_x = {s['x']};",
            f"a.mul_h = {m['h']};", f"a.shift_h = {s['h']};", f"a.mul_y = {m['y']};", f"a.shift_y = {s['y']};",
            "a.c = c;",
            f"for (int32_t j = 0; j < {2 * H}; j++)\n        h[j] = 0;",
            f"for (int32_t j = 0; j < {H}; j++)\n        c[j] = 0;",
            "hal_dma_wait(&job);"]
    step_lines = [f"a.x = {xs} + t * {F};", f"a.h_prev = h + (t & 1) * {H};",
                  f"a.h_next = h + ((t + 1) & 1) * {H};",
                  (f"a.y = {ys} + t * {H};" if rnn.get("sequence", True) else f"a.y = t == {T - 1} ? {ys} : NULL;")]
    if stream:
        body += _block_loop(rnn, gates, stream["cells"], bufs, "step", step_lines, [])
    else:
        body += [f"for (int32_t t = 0; t < {T}; t++) {{"] + ["    " + line for line in step_lines] + \
            ["    hal_fork(step, &a);"]
    return _finish(text, body, layer, plan_slice, prefix, ys, y)
