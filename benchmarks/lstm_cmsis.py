#!/usr/bin/env python3
"""The recurrent step on a Cortex-M (not a test): QEMU instructions of
tessera's LSTM step kernel (kernels/cmsis_nn/recurrent.c, TFLite's integer
arithmetic) against ARM CMSIS-NN's arm_lstm_unidirectional_s8 (TFLite
Micro's), both in the same firmware and QEMU run, on the same layer: the
LSTM of a model built by tessera first (`cmsis_nn=<checkout>`, the rest of
the network on ARM's kernels, every layer bit-exact), with its weights,
its golden input sequence and its golden output.

    .venv/bin/python benchmarks/lstm_cmsis.py --cmsis-nn <ARM CMSIS-NN checkout>
                                              [--target stm32h7] [--model examples/lstm/trained_lstm.yaml]

Counts are QEMU instructions (-icount shift=0, the board's timer steps by
40) of the kernel calls only: tessera's step forked once per time step as
the generated code does, ARM's one call over the sequence (its scratch
buffers given). ARM's LSTM has no peephole, projection or CIFG and rounds
its gates' activations its own way (TFLite Micro's 16-bit LUT forms), so
the line also says how many of its outputs differ from the TFLite
interpreter's (the golden model's), and by how much.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from cortexm_kernels import build  # noqa: E402


def c_array(ctype, name, values):
    values = np.asarray(values).reshape(-1)
    body = ", ".join(str(int(v)) for v in values)
    return f"static const {ctype} {name}[{max(values.size, 1)}] __attribute__((aligned(4))) = {{{body}}};"


def exponent(ir_shift):
    """TFLite's / CMSIS-NN's shift (the exponent) of an IR shift."""
    return 31 - int(ir_shift)


def harness(layer, blob, x, want):
    from tessera.frontend.tflite import quantize_multiplier
    from tessera.golden.recurrent import unpack

    rnn = layer["rnn"]
    if rnn["gates"] != "ifgo" or rnn.get("peephole") or rnn.get("projection"):
        sys.exit("ARM's arm_lstm_unidirectional_s8 has no CIFG, peephole or projection: pick another LSTM")
    arrays = unpack(rnn, blob)
    T, F, nc, no = rnn["steps"], rnn["n_input"], rnn["n_cell"], rnn["n_output"]
    m, s = rnn["mul"], rnn["shift"]
    lay = rnn["layout"]
    fc_mul, fc_shift = quantize_multiplier(2.0 ** -15)
    ic_mul, ic_shift = quantize_multiplier(2.0 ** (-30 - rnn["cell_exp"]))
    src = ['#include <stdio.h>\n#include <string.h>\n#include "arm_nnfunctions.h"\n'
           '#include "tessera/cmsis_nn.h"\n#include "tessera/hal.h"\n',
           c_array("int8_t", "blob", blob), c_array("int8_t", "x", x), c_array("int8_t", "want", want),
           f"static int8_t out_t[{T * no}], out_a[{T * no}], h0[{no}];",
           f"static int16_t cell_t[{nc}], cell_a[{nc}], pre[{4 * nc}], temp1[{nc}], temp2[{nc}];",
           "static void gate(cmsis_nn_lstm_gate *g, int k, arm_nn_activation_type act)\n{",
           f"    g->input_weights = blob + {lay['w_input'][0]} + k * {nc * F};",
           f"    g->input_effective_bias = (const int32_t *)(blob + {lay['b_input'][0]}) + k * {nc};",
           f"    g->hidden_weights = blob + {lay['w_recurrent'][0]} + k * {nc * no};",
           f"    g->hidden_effective_bias = (const int32_t *)(blob + {lay['b_recurrent'][0]}) + k * {nc};",
           "    g->bias = NULL;\n    g->activation_type = act;\n}",
           "int main(void)\n{", "    hal_init();", "    tsr_lstm_args_t a;", "    memset(&a, 0, sizeof a);",
           f"    a.n_input = {F}; a.n_cell = {nc}; a.n_output = {no};",
           f"    a.w_in = blob + {lay['w_input'][0]}; a.w_rec = blob + {lay['w_recurrent'][0]};",
           f"    a.b_in = (const int32_t *)(blob + {lay['b_input'][0]});",
           f"    a.b_rec = (const int32_t *)(blob + {lay['b_recurrent'][0]});",
           f"    a.hidden_mul = {m['hidden']}; a.hidden_shift = {s['hidden']}; a.hidden_zp = {rnn['hidden_zp']};",
           f"    a.state_zp = {rnn['state_zp']}; a.cell_exp = {rnn['cell_exp']}; a.cell_clip = {rnn['cell_clip']};",
           "    a.c = cell_t; a.pre = pre;"]
    for k in range(4):
        src.append(f"    a.mul_in[{k}] = {m['input'][k]}; a.shift_in[{k}] = {s['input'][k]}; "
                   f"a.mul_rec[{k}] = {m['recurrent'][k]}; a.shift_rec[{k}] = {s['recurrent'][k]}; a.peep[{k}] = -1;")
    src += [f"    for (int j = 0; j < {no}; j++) h0[j] = {rnn['state_zp']};",
            "    cmsis_nn_lstm_params p;", "    memset(&p, 0, sizeof p);",
            f"    p.time_major = 0; p.batch_size = 1; p.time_steps = {T}; p.input_size = {F}; p.hidden_size = {nc};",
            f"    p.forget_to_cell_multiplier = {fc_mul}; p.forget_to_cell_shift = {exponent(fc_shift)};",
            f"    p.input_to_cell_multiplier = {ic_mul}; p.input_to_cell_shift = {exponent(ic_shift)};",
            f"    p.cell_clip = {rnn['cell_clip'] or 32767}; p.cell_scale_power = {rnn['cell_exp']};",
            f"    p.output_multiplier = {m['hidden']}; p.output_shift = {exponent(s['hidden'])};",
            f"    p.output_offset = {rnn['hidden_zp']};",
            "    gate(&p.input_gate, 0, ARM_SIGMOID); gate(&p.forget_gate, 1, ARM_SIGMOID);",
            "    gate(&p.cell_gate, 2, ARM_TANH); gate(&p.output_gate, 3, ARM_SIGMOID);"]
    for k, name in enumerate(("input_gate", "forget_gate", "cell_gate", "output_gate")):
        src.append(f"    p.{name}.input_multiplier = {m['input'][k]}; p.{name}.input_shift = {exponent(s['input'][k])};")
        src.append(f"    p.{name}.hidden_multiplier = {m['recurrent'][k]}; "
                   f"p.{name}.hidden_shift = {exponent(s['recurrent'][k])};")
    src += ["    cmsis_nn_lstm_context ctx = {temp1, temp2, cell_a, NULL};",
            "    uint64_t t0 = hal_counter();",
            f"    for (int t = 0; t < {T}; t++) {{",
            f"        a.x = x + t * {F}; a.h_prev = t ? out_t + (t - 1) * {no} : h0; a.h_next = out_t + t * {no};",
            "        tsr_cmsis_lstm_step(&a, 0, 1);", "    }",
            "    uint64_t t1 = hal_counter();",
            "    arm_cmsis_nn_status st = arm_lstm_unidirectional_s8(x, out_a, &p, &ctx);",
            "    uint64_t t2 = hal_counter();",
            "    int bad = 0, differ = 0, lsb = 0;",
            f"    for (int i = 0; i < {T * no}; i++) {{",
            "        bad += out_t[i] != want[i];", "        int d = out_a[i] - want[i];",
            "        differ += d != 0; if (d < 0) d = -d; if (d > lsb) lsb = d;", "    }",
            '    printf("TSR lstm tessera=%lu arm=%lu status=%d tessera_bad=%d arm_differ=%d arm_max_lsb=%d\\n",',
            "           (unsigned long)(t1 - t0), (unsigned long)(t2 - t1), (int)st, bad, differ, lsb);",
            '    printf("TSR done\\n");', "    return 0;", "}"]
    return "\n".join(src) + "\n"


def arm_sources(checkout):
    out = []
    for d in ("LSTMFunctions", "NNSupportFunctions", "ActivationFunctions", "BasicMathFunctions"):
        folder = os.path.join(checkout, "Source", d)
        out += [os.path.join(folder, f) for f in sorted(os.listdir(folder))
                if f.endswith(".c") and not f.endswith(("_f16.c", "_f32.c"))]
    return out


def run_harness(src, target_name, checkout, tmp):
    from tessera import runners
    from tessera.codegen import linker
    from tessera.config import load_target, parse_target

    real = load_target(os.path.join(ROOT, "targets", target_name + ".yaml"), target_name)
    data = {
        "description": "LSTM benchmark harness", "platform": "cortexm", "cores": 1,
        "memory": {"rom": {"size": 4 << 20, "kind": "flash", "address": 0, "writable": False,
                           "reserved": {"code": (4 << 20) - 4}},
                   "ram": {"size": 4 << 20, "kind": "sram", "address": 0x20000000,
                           "reserved": {"data": 2 << 20, "stack": 64 << 10}}},
        "place": {"tiles": "ram", "activations": "ram", "weights": "rom"},
        "toolchain": dict(real["toolchain"]), "kernels": "cmsis_nn", "runner": dict(real["runner"]),
    }
    target = parse_target(data, "harness", "harness")
    tc = target["toolchain"]
    if shutil.which(tc["cc"]) is None:
        sys.exit(f"needs {tc['cc']}")
    with open(os.path.join(tmp, "harness.c"), "w") as f:
        f.write(src)
    with open(os.path.join(tmp, "link.ld"), "w") as f:
        f.write(linker.script(linker.view(target, linker.CORTEX_M)))
    elf = os.path.join(tmp, "harness.elf")
    kernels = os.path.join(ROOT, "kernels")
    cmd = [tc["cc"], *tc["cflags"], "-fno-tree-loop-distribute-patterns", "--specs=picolibc.specs",
           "--oslib=semihost", "--crt0=semihost", "-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections",
           "-w", f"-I{os.path.join(kernels, 'include')}", f"-I{os.path.join(kernels, 'cmsis_nn')}",
           f"-I{os.path.join(checkout, 'Include')}", "-T", os.path.join(tmp, "link.ld"),
           os.path.join(tmp, "harness.c"), os.path.join(kernels, "hal", "cortexm", "hal.c"),
           os.path.join(kernels, "cmsis_nn", "recurrent.c"), *arm_sources(checkout), "-o", elf]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(res.stderr[-3000:])
    text = runners.run(real["runner"], elf)
    for line in text.splitlines():
        if line.startswith("TSR lstm"):
            return dict(p.split("=") for p in line.split()[2:])
    sys.exit(f"no result line in:\n{text[-2000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cmsis-nn", required=True, help="an ARM CMSIS-NN checkout")
    ap.add_argument("--target", default="stm32h7")
    ap.add_argument("--model", default=os.path.join(ROOT, "examples", "lstm", "trained_lstm.yaml"))
    args = ap.parse_args()
    checkout = os.path.abspath(args.cmsis_nn)
    model = os.path.abspath(args.model)
    name = os.path.splitext(os.path.basename(model))[0]
    with tempfile.TemporaryDirectory(prefix="tessera-lstm-") as tmp:
        rep = build(os.path.join(tmp, "out"), args.target, model, f"cmsis_nn={checkout}")
        out = os.path.join(tmp, "out", args.target, name)
        with open(os.path.join(out, "graph.json")) as f:
            graph = json.load(f)
        layer = next(entry for entry in graph["layers"] if entry["op"] == "lstm")
        weights = np.load(os.path.join(out, "weights.npz"))
        golden = np.load(os.path.join(out, "golden.npz"))
        values = dict(np.load(os.path.join(out, "input.npz")))
        values.update(golden)
        x, want = values[layer["inputs"][0]], values[layer["output"]]
        r = run_harness(harness(layer, weights[layer["weights"]], x, want), args.target, checkout, tmp)
    built = next(entry for entry in rep["layers"] if entry["name"] == layer["name"])
    rnn = layer["rnn"]
    macs = built["macs"]
    tess, arm = int(r["tessera"]), int(r["arm"])
    print(f"{name}: {rnn['steps']} steps, {rnn['n_input']} inputs, {rnn['n_cell']} cells ({macs} MACs); "
          f"QEMU instructions on {args.target}, kernel calls only, same run:")
    print(f"  tessera tsr_cmsis_lstm_step  {tess:>9}  ({tess / macs:.2f}/MAC)  bit-exact with the TFLite interpreter: "
          f"{'yes' if r['tessera_bad'] == '0' else 'NO, ' + r['tessera_bad'] + ' outputs differ'}")
    print(f"  ARM arm_lstm_unidirectional_s8 {arm:>7}  ({arm / macs:.2f}/MAC)  status {r['status']}; "
          f"{r['arm_differ']} of {want.size} outputs differ from the interpreter's (at most {r['arm_max_lsb']} LSB)")
    print(f"  tessera / ARM: {tess / arm:.2f}")
    print(f"  whole layer in the network build (DMA copies and the time loop included): {built['instructions']}")


if __name__ == "__main__":
    main()
