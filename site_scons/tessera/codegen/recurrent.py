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
from .cfmt import header_comment
from .layer import symbol
from .libraries import library, reference


def kernels(lib):
    """(step, projection) kernel functions of a kernel library."""
    return getattr(lib, "RECURRENT", reference.RECURRENT)


def _args(layer, w, scratch):
    """Constant fields of tsr_lstm_args_t (w: the constants' L1 pointer
    expression, scratch: the states')."""
    rnn = layer.rnn
    gates, lay = rnn["gates"], rnn["layout"]
    m, s = rnn["mul"], rnn["shift"]
    nc, no = rnn["n_cell"], rnn["n_output"]
    align = lambda n: -(-n // 4) * 4   # noqa: E731
    lines = [f"a.n_input = {rnn['n_input']};", f"a.n_cell = {nc};", f"a.n_output = {no};",
             f"a.cifg = {1 if gates == 'fgo' else 0};",
             f"a.w_in = {w} + {lay['w_input'][0]};", f"a.w_rec = {w} + {lay['w_recurrent'][0]};",
             f"a.b_in = (const int32_t *)({w} + {lay['b_input'][0]});",
             f"a.b_rec = (const int32_t *)({w} + {lay['b_recurrent'][0]});"]
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
        lines.append(f"a.w_peep = (const int16_t *)({w} + {lay['w_peephole'][0]});")
    lines += [f"a.hidden_mul = {m['hidden']};", f"a.hidden_shift = {s['hidden']};",
              f"a.hidden_zp = {rnn['hidden_zp']};", f"a.state_zp = {rnn['state_zp']};",
              f"a.cell_exp = {rnn['cell_exp']};", f"a.cell_clip = {rnn['cell_clip']};",
              f"a.c = (int16_t *)({scratch});",
              f"a.pre = (int16_t *)({scratch} + {align(2 * nc) + align(no)});"]
    if rnn.get("projection"):
        lines += [f"a.w_proj = {w} + {lay['w_projection'][0]};",
                  f"a.b_proj = (const int32_t *)({w} + {lay['b_projection'][0]});",
                  f"a.proj_mul = {m['projection']};", f"a.proj_shift = {s['projection']};",
                  f"a.proj_clip = {rnn['proj_clip']};",
                  f"a.hid = {scratch} + {align(2 * nc) + align(no) + align(2 * len(gates) * nc)};"]
    return lines


def generate(layer, graph, tiling, plan_slice, target, model):
    prefix = target["prefix"]
    lib = library(target["kernels"])
    step, project = kernels(lib)
    rnn = layer.rnn
    if plan_slice.get("spill"):
        raise FitError(f"layer {layer.name}", f"a recurrent layer reads or writes activations moved out of "
                       f"{target['act_level']}, which it does not support",
                       "give the target's activation level more room")
    x, y = graph.tensor(layer.inputs[0]), graph.tensor(layer.output)
    l1 = plan_slice["l1"]
    L1, L2 = f"{prefix}_L1", f"{prefix}_L2"
    steps, no, nc = rnn["steps"], rnn["n_output"], rnn["n_cell"]
    stream = plan_slice.get("wstream")
    align = lambda n: -(-n // 4) * 4   # noqa: E731
    text = [header_comment([
        f"tessera: layer {layer.name} of {model}: {rnn['cell']} over {steps} steps, "
        f"{rnn['n_input']} -> {nc} cells -> {no} outputs ({rnn['gates']} gates"
        f"{', peephole ' + rnn['peephole'] if rnn.get('peephole') else ''}"
        f"{', projection' if rnn.get('projection') else ''})",
        f"sequences, {rnn['bytes']} bytes of constants and the states in L1 ({l1['total']} bytes); "
        f"the time loop forks {step} on the cores once per step.",
    ])]
    text.append('#include <stddef.h>\n#include <stdint.h>\n\n#include "tessera/hal.h"\n#include "tessera/kernels.h"\n'
                '#include "tessera/tile.h"' + "".join(f'\n#include "{h}"' for h in getattr(lib, "HEADERS", ()))
                + "\n")
    text.append(f"extern int8_t {L1}[];\nextern int8_t {L2}[];")
    text.append(f"#define ENGINE_ACT {target['act_engine']}   /* {target['act_level']} <-> {target['tile_level']} */")
    if stream is None:
        text.append(f"#define ENGINE_W {target['w_engine']}     /* {target['w_level']} -> {target['tile_level']} */")
        text.append(f"extern const int8_t {symbol(prefix, layer.name, 'weights')}[];\n")
    else:
        text.append(f"/* the constants arrive in {target['act_level']} as one chunk of the weight stream */")
        text.append(f"extern tsr_wstream_t {prefix}_wstream;\n")
    text.append(f"static void step(void *args)\n{{\n    {step}((const tsr_lstm_args_t *)args, "
                f"hal_core_id(), hal_num_cores());\n}}\n")
    if rnn.get("projection"):
        text.append(f"static void project(void *args)\n{{\n    {project}((const tsr_lstm_args_t *)args, "
                    f"hal_core_id(), hal_num_cores());\n}}\n")
    xs, ys = f"{L1} + {l1['in'][0][0]}", f"{L1} + {l1['out'][0]}"
    w, scratch = f"{L1} + {l1['weights'][0]}", f"{L1} + {l1['scratch']}"
    h0 = f"{scratch} + {align(2 * nc)}"
    body = ["hal_dma_job_t job = {0};", "tsr_lstm_args_t a = {0};",
            f"int8_t *h0 = {h0};", "int16_t *c;",
            f"hal_dma_start(&job, ENGINE_ACT, {xs}, {L2} + {plan_slice['inputs'][0]}, {x.nbytes}u, 1, 0, 0, 1, 0, 0);"]
    if stream is None:
        body.append(f"hal_dma_start(&job, ENGINE_W, {w}, {symbol(prefix, layer.name, 'weights')}, {rnn['bytes']}u, "
                    "1, 0, 0, 1, 0, 0);")
    else:
        body.append(f"hal_dma_start(&job, ENGINE_ACT, {w}, tsr_wstream_next(&{prefix}_wstream), {rnn['bytes']}u, "
                    "1, 0, 0, 1, 0, 0);")
    body += _args(layer, w, scratch)
    body += ["c = a.c;",
             f"for (int32_t j = 0; j < {nc}; j++)\n        c[j] = 0;",
             f"for (int32_t j = 0; j < {no}; j++)\n        h0[j] = {rnn['state_zp']};",
             "hal_dma_wait(&job);",
             f"for (int32_t t = 0; t < {steps}; t++) {{",
             f"    a.x = {xs} + t * {rnn['n_input']};",
             f"    a.h_prev = t ? {ys} + (t - 1) * {no} : h0;",
             f"    a.h_next = {ys} + t * {no};",
             "    hal_fork(step, &a);"]
    if rnn.get("projection"):
        body.append("    hal_fork(project, &a);")
    body += ["}",
             f"hal_dma_start(&job, ENGINE_ACT, {L2} + {plan_slice['output']}, {ys}, {y.nbytes}u, 1, 0, 0, 1, 0, 0);",
             "hal_dma_wait(&job);"]
    text.append(f"void {symbol(prefix, layer.name)}(void)\n{{")
    text.extend("    " + line for line in body)
    text.append("}")
    return "\n".join(text) + "\n"
