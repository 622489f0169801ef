"""The network-level sources: network.h (the public entry point),
network.c (arenas, layer table, run), and for test runs harness.c (a main
that runs the golden input and prints per-layer checksums and counts) with
input.c (the golden input)."""

import numpy as np

from ..planning import guard
from .. import ir
from ..util.cname import c_comment
from ..config.views import param_arrays
from .cfmt import byte_string, header_comment, section_attr
from .layer import symbol

C_TYPES = {"int8": "int8_t", "uint8": "uint8_t", "int32": "int32_t"}


def view(graph, the_plan, target):
    """Everything the network-level files read (a canonical dict)."""
    offsets = the_plan["activations"]["offsets"]
    spill = the_plan["activations"].get("spill")
    spilled = spill["offsets"] if spill else {}

    def io(name):
        t = graph.tensor(name)
        return {"name": name, "offset": offsets[name], "bytes": t.nbytes, "shape": t.shape,
                "dtype": t.dtype, "source_dtype": t.source_dtype, "shift": t.shift,
                # the model's own shape where it orders the values as the firmware does
                "source_shape": t.source_shape if t.source_layout == "hwc" else None,
                "scale": None if t.scale is None else f"{t.scale:.9g}", "zero_point": t.zero_point}
    v = {
        "model": graph.name,
        "prefix": target["prefix"],
        "layers": [_output(layer, graph, offsets, spilled) for layer in graph.layers],
        "inputs": [io(n) for n in graph.inputs],
        "outputs": [io(n) for n in graph.outputs],
        "arenas": {"L2": the_plan["activations"]["arena"], "L1": the_plan["tiles"]["arena"]},
        "levels": {"activations": the_plan["activations"]["level"], "tiles": the_plan["tiles"]["level"]},
        "sections": target["sections"],
        "engines": target["n_engines"],
    }
    tail = (graph.notes or {}).get("float_tail")
    if tail:
        out = graph.tensor(graph.outputs[0])
        v["float_tail"] = {"ops": [f"{t['op']} ({t['node']})" for t in tail],
                           "scale": f"{out.scale:.9g}", "zero_point": out.zero_point}
    stream = the_plan["weights"].get("stream")
    if stream is not None:
        v["wstream"] = _stream_view(graph, stream, target, the_plan["weights"].get("storage"))
    if target.get("storage"):
        from ..storage import firmware
        v["storage"] = {"level": target["storage"]["level"]}
        if firmware.declared_arena(the_plan):
            # the out-of-core program's pools take the arena's free bytes
            # (tessera.storage.firmware): the arena spans the usable bytes
            v["storage"]["arena"] = firmware.declared_arena(the_plan)
    chw = the_plan["activations"].get("chw")
    if chw:
        # [layer index, channels, pixels] of the outputs stored channel-major
        shapes = [(i, graph.tensor(layer.output).shape) for i, layer in enumerate(graph.layers)
                  if layer.output in chw]
        v["chw"] = [[i, shape[2], shape[0] * shape[1]] for i, shape in shapes]
    if target.get("core_counts"):
        v["core_counts"] = target["cores"]
        v["core_counts_always"] = target["core_counts"] == "always"
    if spill:
        v["spill"] = {"level": spill["level"], "bytes": spill["bytes"], "section": target["spill"]["section"]}
        if "window" in target["spill"]:
            v["spill"]["window"] = target["spill"]["window"]
    if target.get("guard"):
        held = []
        if v.get("storage", {}).get("arena"):     # the program's pools in the arena's free bytes
            held = firmware.pool_lives(graph, the_plan)
        v["guard"] = guard.free_ranges(graph, the_plan, held)
    return v


def _output(layer, graph, offsets, spilled):
    """A layer's output in the layer table: its offset in the activation
    arena, or in the spill arena when it was moved there."""
    out = {"name": layer.name, "bytes": graph.tensor(layer.output).nbytes}
    if layer.output in spilled:
        out.update(output=spilled[layer.output], level="spill")
    elif layer.output in offsets:
        out["output"] = offsets[layer.output]
    else:
        # the first layer of a fused step: its output exists only in L1
        out.update(output=None, bytes=0)
    return out


def _stream_view(graph, stream, target, storage=None):
    """The weight stream's table: per chunk, the pieces (source, bytes,
    offset in the buffer) that bring it in. A source is an array and its
    first byte, or a place on the storage level (a window address)."""
    arrays, chunks = {}, []
    on_card = storage["layers"] if storage else {}
    # PULP-open: a chunk's arrays that follow each other on the card and in
    # the buffer (a whole layer's) are one HyperFlash read, not four (each
    # queued read costs core 0 about 300 cycles before the layer's first fork)
    merge = target.get("platform") == "pulp_open"
    for chunk in stream["chunks"]:
        layer = graph.layer(chunk["layer"])
        layout = stream["layers"][layer.name]["layout"]
        rows = []
        if layer.weights:
            rows.append(("weights", "int8_t", ir.weight_bytes_per_cout(layer, graph)))
        rows += [(name, ctype, size) for name, ctype, size in param_arrays(layer)]
        pieces = []
        for name, ctype, size in rows:
            nbytes, at = chunk["n"] * size, chunk["at"] + layout[name]
            if layer.name in on_card:
                where = on_card[layer.name]
                addr = target["storage"]["window"] + where["at"] + where["arrays"][name] + chunk["c0"] * size
                if merge and pieces and pieces[-1][3] == addr and pieces[-1][2] + pieces[-1][1] == at:
                    pieces[-1][1] += nbytes
                    pieces[-1][3] += nbytes
                    continue
                pieces.append([f"0x{addr:08x}u", nbytes, at, addr + nbytes])
                continue
            sym = symbol(target["prefix"], layer.name, name)
            arrays[sym] = ctype
            pieces.append([f"{sym} + {chunk['c0'] * size}", nbytes, at, None])
        pieces = [piece[:3] for piece in pieces]
        assert pieces[0][2] == chunk["at"], "a chunk's first piece starts its buffer (tsr_wstream_next)"
        chunks.append({"layer": layer.name, "c0": chunk["c0"], "n": chunk["n"], "pieces": pieces})
    if storage:
        engine, source = target["storage"]["engine"], storage["level"]
    else:
        engine, source = target["w_stage"]["engine"], target["w_level"]
    return {"end": stream["end"], "engine": engine, "from": source,
            "level": stream["level"], "arrays": dict(sorted(arrays.items())), "chunks": chunks}


def header(v):
    p, P = v["prefix"], v["prefix"].upper()
    out = [header_comment([f"tessera: network {v['model']}: the entry point for your firmware.",
                           "Write the input, call run, read the output. Activations are HWC, batch 1."])]
    out.append(f"#ifndef TSR_{P}_NETWORK_H\n#define TSR_{P}_NETWORK_H\n")
    out.append('#include <stdint.h>\n\n#include "tessera/runtime.h"\n')
    out.append(f"#define {P}_NUM_LAYERS {len(v['layers'])}")
    out.append(f"#define {P}_NUM_INPUTS {len(v['inputs'])}")
    out.append(f"#define {P}_NUM_OUTPUTS {len(v['outputs'])}")
    tail = v.get("float_tail")
    for kind, items in (("INPUT", v["inputs"]), ("OUTPUT", v["outputs"])):
        for i, t in enumerate(items):
            shape = "x".join(map(str, t["shape"]))
            out.append(f"#define {P}_{kind}{i}_BYTES {t['bytes']}   /* {shape} {t['source_dtype']} (HWC) */")
            out.append(f"#define {P}_{kind}{i}_TYPE {C_TYPES[t['source_dtype']]}")
            h, w, c = t["shape"]
            out.append(f"#define {P}_{kind}{i}_H {h}\n#define {P}_{kind}{i}_W {w}\n#define {P}_{kind}{i}_C {c}")
            # its shape in the order of its bytes (the model's own, or HWC where the model's is
            # channel first), and real = scale * (q - zero_point) for values of that type
            dims = t["source_shape"] or t["shape"]
            out.append(f"#define {P}_{kind}{i}_RANK {len(dims)}")
            out.append(f"#define {P}_{kind}{i}_SHAPE {{{', '.join(map(str, dims))}}}")
            # a float tail's output 0 says its scale and zero point below
            if t["scale"] is not None and not (tail and kind == "OUTPUT" and i == 0):
                out.append(f"#define {P}_{kind}{i}_SCALE {t['scale']}f   /* real = scale * (q - zero point) */")
                out.append(f"#define {P}_{kind}{i}_ZERO_POINT {t['zero_point'] or 0}")
    if tail:
        out.append(f"/* Output 0 is the quantized tensor before the model's float tail, left to\n"
                   f" * the application: {', '.join(tail['ops'])}.\n"
                   f" * real = {P}_OUTPUT0_SCALE * (q - {P}_OUTPUT0_ZERO_POINT) */")
        out.append(f"#define {P}_OUTPUT0_SCALE {tail['scale']}f")
        out.append(f"#define {P}_OUTPUT0_ZERO_POINT {tail['zero_point']}")
    out.append("")
    out.append(f"/* Call once before the first run (resets the per-layer counts). */\nvoid {p}_init(void);")
    out.append(f"/* Where input i goes (in the {v['levels']['activations']} arena; "
               "rewrite it before every run). */")
    out.append(f"void *{p}_input(int i);")
    out.append(f"/* Where output i is after a run. */\nconst void *{p}_output(int i);")
    out.append(f"/* Run every layer on the current input. */\nvoid {p}_run(void);")
    out.append(f"/* The same, calling trace() around each layer. */\nvoid {p}_run_traced(tsr_trace_fn trace);")
    out.append(f"extern const tsr_layer_info_t {p}_layers[{P}_NUM_LAYERS];")
    out.append(f"/* hal_counter() ticks each layer took in the last run (instructions or\n"
               f" * cycles, as the platform's HAL counts). */\n"
               f"extern uint64_t {p}_layer_counts[{P}_NUM_LAYERS];\n")
    out.append(f"#endif /* TSR_{P}_NETWORK_H */")
    return "\n".join(out) + "\n"


def declared(arenas, stream_end=None, storage_arena=0):
    """{"L2": bytes, "L1": bytes} of the two arenas network.c declares: the
    activation arena holds the planned activations, the weight stream's
    chunk buffers (up to its end) and the out-of-core program's pools (the
    arena's usable bytes); the tile arena the plan's tiles. `arenas`: the
    plan's {"L2", "L1"} arena sizes. The report counts RAM by it."""
    return {"L2": max(arenas["L2"], stream_end or 0, storage_arena or 0, 4), "L1": max(arenas["L1"], 4)}


def declared_arrays(the_plan, prefix, storage_arena=0, spill_window=False):
    """{symbol: bytes} of every array network.c declares for activations
    and tiles (the arenas, and a spill level's array)."""
    stream = the_plan["weights"].get("stream")
    arenas = declared({"L2": the_plan["activations"]["arena"], "L1": the_plan["tiles"]["arena"]},
                      stream and stream["end"], storage_arena)
    out = {f"{prefix}_{k}": n for k, n in arenas.items()}
    spill = the_plan["activations"].get("spill")
    if spill and not spill_window:
        out[f"{prefix}_{spill['level']}"] = spill["bytes"]
    return out


def source(v):
    p, P = v["prefix"], v["prefix"].upper()
    secs = v["sections"]
    out = [header_comment([f"tessera: network {v['model']}: arenas, layer table and run."])]
    stream = v.get("wstream")
    out.append('#include <stdint.h>\n\n#include "network.h"\n#include "tessera/hal.h"\n' + ('#include "tessera/tile.h"\n' if stream else "")
               + ('#include "tessera/program.h"\n' if v.get("storage") else ""))
    out.append(f"/* activations ({v['levels']['activations']}) and tiles ({v['levels']['tiles']}): "
               "every offset was fixed at build time"
               + ("; weight chunks in the room they leave" if stream else "") + " */")
    arrays = declared(v["arenas"], stream and stream["end"], v.get("storage", {}).get("arena", 0))
    out.append(f"int8_t {p}_L2[{arrays['L2']}] {section_attr(secs.get('activations', ''), 8)};")
    out.append(f"int8_t {p}_L1[{arrays['L1']}] {section_attr(secs.get('tiles', ''), 8)};\n")
    spill = v.get("spill")
    if spill and "window" in spill:
        out.append(f"/* activations the {v['levels']['activations']} arena cannot hold, swapped to the storage "
                   f"level {spill['level']} (offsets on the card, through the HAL's storage driver) */")
        out.append(f"#define {p}_{spill['level']} ((int8_t *)0x{spill['window']:08x}u)\n")
    elif spill:
        out.append(f"/* activations the {v['levels']['activations']} arena cannot hold, moved to {spill['level']} */")
        out.append(f"int8_t {p}_{spill['level']}[{spill['bytes']}] {section_attr(spill['section'], 8)};\n")
    for layer in v["layers"]:
        out.append(f"void {symbol(p, layer['name'])}(void);")
    if stream:
        out.append(_stream_source(p, stream))
    out.append(f"\nconst tsr_layer_info_t {p}_layers[{P}_NUM_LAYERS] = {{")
    for layer in v["layers"]:
        arena = f"{p}_{v['spill']['level']}" if layer.get("level") == "spill" else f"{p}_L2"
        where = "0" if layer["output"] is None else f"{arena} + {layer['output']}"
        out.append(f'    {{"{layer["name"]}", {symbol(p, layer["name"])}, {where}, {layer["bytes"]}}},')
    out.append("};\n")
    out.append(f"uint64_t {p}_layer_counts[{P}_NUM_LAYERS];\n")
    out.append(f"void {p}_init(void)\n{{\n    for (int i = 0; i < {P}_NUM_LAYERS; i++)\n"
               f"        {p}_layer_counts[i] = 0;\n}}\n")
    for kind, items in (("input", v["inputs"]), ("output", v["outputs"])):
        out.append(f"void{' ' if kind == 'input' else ' const '}*{p}_{kind}(int i)\n{{")
        out.append("    switch (i) {")
        for i, t in enumerate(items):
            out.append(f"    case {i}:\n        return {p}_L2 + {t['offset']};")
        out.append("    default:\n        return 0;\n    }\n}\n")
    if any(t["shift"] for t in v["inputs"] + v["outputs"]):
        out.append("/* uint8 tensors are stored as int8 (value - 128): flip the top bit on the way in and out */")
        out.append("static void flip(int8_t *p, uint32_t n)\n{\n    for (uint32_t k = 0; k < n; k++)\n"
                   "        p[k] = (int8_t)(p[k] ^ 0x80);\n}\n")
    out.append(f"void {p}_run_traced(tsr_trace_fn trace)\n{{")
    if stream:
        out.append(f"    {p}_wstream.next = 0;")
    for t in v["inputs"]:
        if t["shift"]:
            out.append(f"    flip({p}_L2 + {t['offset']}, {t['bytes']});")
    if v.get("storage"):
        out.append("    tsr_prog_begin();   /* the out-of-core program (program.c), if the build made one */")
    out.append(f"    for (int i = 0; i < {P}_NUM_LAYERS; i++) {{")
    out.append("        uint64_t start;")
    out.append("        if (trace)\n            trace(i, 0);")
    out.append("        start = hal_counter();")
    if v.get("storage"):
        out.append("        tsr_prog_layer((uint32_t)i);   /* whole and fused layers: their computes */")
    out.append(f"        {p}_layers[i].run();")
    if v.get("storage"):
        out.append(f"        if (i == {P}_NUM_LAYERS - 1)\n            tsr_prog_end();   /* the last writes, in the last "
                   "layer's window */")
    out.append(f"        {p}_layer_counts[i] = hal_counter() - start;")
    out.append("        if (trace)\n            trace(i, 1);\n    }")
    for t in v["outputs"]:
        if t["shift"]:
            out.append(f"    flip({p}_L2 + {t['offset']}, {t['bytes']});")
    out.append("}\n")
    out.append(f"void {p}_run(void)\n{{\n    {p}_run_traced(0);\n}}")
    return "\n".join(out) + "\n"


def _stream_source(p, st):
    """The weight stream: its chunk table and state (see tessera/tile.h)."""
    out = [f"\n/* weights and parameters stream from {st['from']} through {st['level']}, in "
           f"{len(st['chunks'])} chunks placed by the memory plan */"]
    for sym, ctype in st["arrays"].items():
        out.append(f"extern const {ctype} {sym}[];")
    out.append(f"\nstatic const tsr_wpiece_t wpieces[] = {{")
    first, n = [], 0
    for chunk in st["chunks"]:
        first.append(n)
        out.append(f"    /* {c_comment(chunk['layer'])}: channels {chunk['c0']}..{chunk['c0'] + chunk['n'] - 1} */")
        for src, nbytes, at in chunk["pieces"]:
            out.append(f"    {{(const int8_t *){src}, {p}_L2 + {at}, {nbytes}}},")
            n += 1
    first.append(n)
    out.append("};")
    out.append(f"static const uint16_t wchunks[] = {{{', '.join(map(str, first))}}};")
    out.append(f"tsr_wstream_t {p}_wstream = {{wpieces, wchunks, {len(st['chunks'])}, {st['engine']}, 0, "
               "{{0}, {0}}};")
    return "\n".join(out)


def golden_input(v, inputs):
    """input.c: the golden input in the source dtype (what a user writes)."""
    p = v["prefix"]
    out = [header_comment([f"tessera: the golden input of {v['model']} (test runs only)."]),
           "#include <stdint.h>\n"]
    for i, t in enumerate(v["inputs"]):
        stored = np.asarray(inputs[t["name"]])
        if t["shift"]:
            stored = (stored.astype(np.int16) + t["shift"]).astype(np.uint8).view(np.int8)
        data = stored.astype(np.int8) if stored.dtype != np.int32 else stored.view(np.int8)
        # with weights staged (their level is not the program's), the test
        # input waits with them rather than in the program's bytes
        # (not when that level is storage: nothing is loaded there)
        staged = v.get("wstream") and v.get("storage", {}).get("level") != v["sections"]["weights"].split(".")[-1]
        attr = section_attr(v["sections"]["weights"]) if staged else "__attribute__((aligned(4)))"
        out.append(f"const int8_t {p}_golden_input{i}[{t['bytes']}] {attr} =")
        out.append(byte_string(data) + ";\n")
    return "\n".join(out)


def _guard_source(p, ranges):
    """guard=1 (tessera.planning.guard): per layer, the activation arena's free
    ranges, filled with a pattern before the layer and checked after it."""
    rows, first = [], [0]
    for step in ranges:
        rows += [f"{{{at}u, {n}u}}" for at, n in step]
        first.append(len(rows))
    body = ",\n    ".join(rows) if rows else "{0u, 0u}"
    return f"""extern int8_t {p}_L2[];
static const uint32_t guard_ranges[][2] = {{
    {body}
}};
static const uint32_t guard_first[] = {{{', '.join(map(str, first))}}};

/* a byte that depends on its offset: a shifted copy of the pattern does not pass */
static uint8_t guard_byte(uint32_t k)
{{
    return (uint8_t)(0xa5u ^ k ^ (k >> 8));
}}

static void guard_fill(int i)
{{
    uint32_t r, k;
    for (r = guard_first[i]; r < guard_first[i + 1]; r++)
        for (k = guard_ranges[r][0]; k < guard_ranges[r][0] + guard_ranges[r][1]; k++)
            ((uint8_t *){p}_L2)[k] = guard_byte(k);
}}

static void guard_check(int i)
{{
    uint32_t r, k;
    for (r = guard_first[i]; r < guard_first[i + 1]; r++)
        for (k = guard_ranges[r][0]; k < guard_ranges[r][0] + guard_ranges[r][1]; k++)
            if (((const uint8_t *){p}_L2)[k] != guard_byte(k)) {{
                printf("TSR guard %d %s offset=%lu\\n", i, {p}_layers[i].name, (unsigned long)k);
                return;
            }}
}}
"""


def harness(v):
    """main() of a test run: golden input in, per-layer checksum/count/DMA
    lines out, then every output in hex. The check step parses this."""
    p = v["prefix"]
    n_in = len(v["inputs"])
    out = [header_comment([f"tessera: test harness of {v['model']}: runs the golden input and reports",
                           "per-layer output checksums (FNV-1a), counts and DMA bytes."])]
    out.append('#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n'
               '#include "network.h"\n#include "tessera/hal.h"\n' + ('#include "tessera/program.h"\n' if v.get("storage") else ""))
    for i in range(n_in):
        out.append(f"extern const int8_t {p}_golden_input{i}[];")
    out.append(f"\n#define ENGINES {v['engines']}\n")
    out.append("static uint64_t start_count;\nstatic uint64_t start_dma[HAL_MAX_DMA];\n"
               "static int dump_layer = -1;\n")
    out.append("""static uint32_t fnv1a(const uint8_t *p, uint32_t n)
{
    uint32_t h = 2166136261u;""" + ("""
#ifdef TSR_STORAGE_WINDOW
    if (HAL_IN_STORAGE(p)) {   /* an output swapped to the card: read it back in pieces */
        uint8_t buf[256];
        uint32_t at = HAL_STORAGE_OFFSET(p);
        while (n) {
            uint32_t k, m = n > sizeof buf ? (uint32_t)sizeof buf : n;
            hal_storage_read(buf, at, m);
            for (k = 0; k < m; k++) {
                h ^= buf[k];
                h *= 16777619u;
            }
            at += m;
            n -= m;
        }
        return h;
    }
#endif""" if v.get("storage") else "") + """
    while (n--) {
        h ^= *p++;
        h *= 16777619u;
    }
    return h;
}

""" + _chw_hash_function(v) + """/* printf's 64-bit support differs between C libraries; print it by hand */
static void print_u64(uint64_t v)
{
    char buf[24];
    int k = 23;
    buf[k] = 0;
    do {
        buf[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    fputs(buf + k, stdout);
}

static void print_hex(const char *tag, int i, const uint8_t *p, uint32_t n)
{
    static const char digits[] = "0123456789abcdef";
    char line[129];
    printf("TSR %s %d ", tag, i);
    while (n) {
        uint32_t k, m = n > 64 ? 64 : n;""" + ("""
#ifdef TSR_STORAGE_WINDOW
        uint8_t buf[64];
        if (HAL_IN_STORAGE(p)) {
            hal_storage_read(buf, HAL_STORAGE_OFFSET(p), m);
            for (k = 0; k < m; k++) {
                line[2 * k] = digits[buf[k] >> 4];
                line[2 * k + 1] = digits[buf[k] & 15];
            }
        } else
#endif""" if v.get("storage") else "") + """
        for (k = 0; k < m; k++) {
            line[2 * k] = digits[p[k] >> 4];
            line[2 * k + 1] = digits[p[k] & 15];
        }
        line[2 * m] = 0;
        fputs(line, stdout);
        p += m;
        n -= m;
    }
    fputs("\\n", stdout);
}
""")
    cores = v.get("core_counts")
    if cores:
        # the platform counts per core: each core's share of the layer, and
        # what emulated DMA copies took of the total. Asked for with the
        # argument `cores` only where the counts are not repeatable: how QEMU
        # interleaves the harts can move a few instructions between these
        # windows from run to run (the totals above never change), and a
        # build's outputs must not; GVSoC's are, so they are always printed
        out.append(f"#define CORES {cores}\nstatic uint64_t start_core[CORES], start_dma_count;\n"
                   f"static int profile = {1 if v.get('core_counts_always') else 0};\n")
        core_start = """
        for (e = 0; e < CORES; e++)
            start_core[e] = hal_core_counts[e];
        start_dma_count = hal_dma_copy_count;"""
        core_end = """
    if (profile) {
        fputs(" cores=", stdout);
        for (e = 0; e < CORES; e++) {
            if (e)
                fputs(",", stdout);
            print_u64(hal_core_counts[e] - start_core[e]);
        }
        fputs(" dmacount=", stdout);
        print_u64(hal_dma_copy_count - start_dma_count);
    }"""
    else:
        core_start = core_end = ""
    io_start = io_end = ""
    if v.get("storage"):
        # the card's traffic in the layer's window: bytes read, written, and the transfers
        out.append("static uint64_t start_io[2];\nstatic uint32_t start_ops[2];\n")
        io_start = """
        for (e = 0; e < 2; e++) {
            start_io[e] = hal_storage_bytes[e];
            start_ops[e] = hal_storage_ops[e];
        }"""
        io_end = """
    fputs(" io=", stdout);
    print_u64(hal_storage_bytes[0] - start_io[0]);
    fputs(",", stdout);
    print_u64(hal_storage_bytes[1] - start_io[1]);
    printf(",%lu,%lu", (unsigned long)(hal_storage_ops[0] - start_ops[0]),
           (unsigned long)(hal_storage_ops[1] - start_ops[1]));"""
    g = v.get("guard")
    if g is not None:
        out.append(_guard_source(p, g))
    fill = "\n        guard_fill(i);" if g is not None else ""
    check = "\n    guard_check(i);" if g is not None else ""
    # per-core counting (pulp_open) prints at once: its driver only reads
    # the card, so no output there waits for a queued write
    late = v.get("storage") and not core_start
    if late:
        out.append(_late_lines(p, v, fill, check))
    else:
        out.append(f"""static void trace(int i, int end)
{{
    const tsr_layer_info_t *layer = &{p}_layers[i];
    uint64_t now;
    int e;
    if (!end) {{{fill}
        for (e = 0; e < ENGINES; e++)
            start_dma[e] = hal_dma_bytes[e];{core_start}{io_start}
        start_count = hal_counter();
        return;
    }}
    now = hal_counter();{check}
    printf("TSR layer %d %s fnv=%08lx count=", i, layer->name,
           (unsigned long){_layer_hash(v)});
    print_u64(now - start_count);
    fputs(" dma=", stdout);
    for (e = 0; e < ENGINES; e++) {{
        if (e)
            fputs(",", stdout);
        print_u64(hal_dma_bytes[e] - start_dma[e]);
    }}{core_end}{io_end}
    fputs("\\n", stdout);
    if (i == dump_layer)
        print_hex("dump", i, (const uint8_t *)layer->output, layer->output_bytes);
}}
""")
    out.append(f"""int main(int argc, char **argv)
{{
    uint64_t total;
    int k;
    for (k = 1; k < argc; k++)
        if (strncmp(argv[k], "dump=", 5) == 0)
            dump_layer = atoi(argv[k] + 5);""" + ("""
        else if (strcmp(argv[k], "cores") == 0)
            profile = 1;""" if cores else "") + f"""
    hal_init();
    {p}_init();""")
    if v.get("storage"):
        out.append(f"""    for (k = 1; k < argc; k++)
        if (strncmp(argv[k], "storage=", 8) == 0 && hal_storage_open(argv[k] + 8) != 0) {{
            fprintf(stderr, "tessera: cannot open the storage image %s\\n", argv[k] + 8);
            return 2;
        }}""")
    for i, t in enumerate(v["inputs"]):
        out.append(f"    memcpy({p}_input({i}), {p}_golden_input{i}, {t['bytes']});")
    out.append(f"""    total = hal_counter();
    {p}_run_traced(trace);
    total = hal_counter() - total;""")
    if late:
        out.append("    late_lines();")
    if v.get("storage"):
        out.append("""    printf("TSR program ops=%lu reads=%lu writes=%lu waits=%lu computes=%lu", (unsigned long)(tsr_prog_counts[0]
           + tsr_prog_counts[1] + tsr_prog_counts[2] + tsr_prog_counts[3]), (unsigned long)tsr_prog_counts[0],
           (unsigned long)tsr_prog_counts[1], (unsigned long)tsr_prog_counts[2], (unsigned long)tsr_prog_counts[3]);
    fputs(" read_bytes=", stdout);
    print_u64(tsr_prog_bytes[0]);
    fputs(" written_bytes=", stdout);
    print_u64(tsr_prog_bytes[1]);
    fputs("\\n", stdout);""")
    for i, t in enumerate(v["outputs"]):
        out.append(f"    print_hex(\"output\", {i}, (const uint8_t *){p}_output({i}), {t['bytes']});")
    out.append("""    fputs("TSR total count=", stdout);
    print_u64(total);
    if (hal_stack_peak && hal_stack_size && hal_stack_size()) {
        /* the stack's high-water mark (where the HAL measures it): a stack that
         * reached the end of its reservation may have overwritten other data */
        printf(" stack=%lu", (unsigned long)hal_stack_peak());
        if (hal_stack_peak() >= hal_stack_size()) {
            fprintf(stderr, "\\ntessera: the stack used all of its %lu reserved bytes (raise the target's "
                    "memory.<level>.reserved.stack)\\n", (unsigned long)hal_stack_size());
            return 3;
        }
    }""" + ("""
    if (profile)
        printf(" overlaps=%lu", (unsigned long)hal_core_count_overlaps);""" if cores else "") + """
    fputs("\\nTSR done\\n", stdout);
    fflush(stdout);
    return 0;
}""")
    return "\n".join(out) + "\n"


def _layer_hash(v):
    """The harness's checksum of layer i's output: FNV-1a of its bytes, or
    layer_fnv (_chw_hash_function) where some outputs are stored
    channel-major."""
    return "layer_fnv(i, layer)" if v.get("chw") else "fnv1a((const uint8_t *)layer->output, layer->output_bytes)"


def _chw_hash_function(v):
    """layer_fnv: the channel-major layers' outputs (the plan's chw tensors,
    [C][H][W] in the arena) hashed in HWC order, as the check hashes the
    golden tensors; the others' bytes as they are. Empty without them."""
    if not v.get("chw"):
        return ""
    rows = ", ".join(f"{{{i}, {c}, {n}}}" for i, c, n in v["chw"])
    return f"""/* outputs stored channel-major (the plan's chw tensors): hashed in HWC order */
static const struct {{
    int layer;
    uint32_t c, p;
}} chw_layers[{len(v["chw"])}] = {{{rows}}};

static uint32_t layer_fnv(int i, const tsr_layer_info_t *layer)
{{
    uint32_t k, c, q, h = 2166136261u;
    for (k = 0; k < {len(v["chw"])}; k++) {{
        const uint8_t *x = (const uint8_t *)layer->output;
        if (chw_layers[k].layer != i)
            continue;
        for (q = 0; q < chw_layers[k].p; q++)
            for (c = 0; c < chw_layers[k].c; c++) {{
                h ^= x[c * chw_layers[k].p + q];
                h *= 16777619u;
            }}
        return h;
    }}
    return fnv1a((const uint8_t *)layer->output, layer->output_bytes);
}}

"""


def _late_lines(p, v, fill, check):
    """The trace of a target with a storage level: each layer's figures are
    taken around it, its checksum at once when its output is in SRAM (a
    later layer may reuse the bytes) and after the run when it is on the
    card (under the out-of-core program, its writes may still be queued
    when the layer returns); the lines are printed in order after the run."""
    P = p.upper()
    return f"""static struct {{
    uint64_t count, dma[ENGINES], io[2];
    uint32_t ops[2], fnv;
}} late[{P}_NUM_LAYERS];

static void trace(int i, int end)
{{
    const tsr_layer_info_t *layer = &{p}_layers[i];
    uint64_t now;
    int e;
    if (!end) {{{fill}
        for (e = 0; e < ENGINES; e++)
            start_dma[e] = hal_dma_bytes[e];
        for (e = 0; e < 2; e++) {{
            start_io[e] = hal_storage_bytes[e];
            start_ops[e] = hal_storage_ops[e];
        }}
        start_count = hal_counter();
        return;
    }}
    now = hal_counter();{check}
    late[i].count = now - start_count;
    for (e = 0; e < ENGINES; e++)
        late[i].dma[e] = hal_dma_bytes[e] - start_dma[e];
    for (e = 0; e < 2; e++) {{
        late[i].io[e] = hal_storage_bytes[e] - start_io[e];
        late[i].ops[e] = hal_storage_ops[e] - start_ops[e];
    }}
    if (!HAL_IN_STORAGE(layer->output)) {{
        late[i].fnv = {_layer_hash(v)};
        if (i == dump_layer)
            print_hex("dump", i, (const uint8_t *)layer->output, layer->output_bytes);
    }}
}}

/* after the run: the card's outputs are all written (each has its own range) */
static void late_lines(void)
{{
    int i, e;
    for (i = 0; i < {P}_NUM_LAYERS; i++) {{
        const tsr_layer_info_t *layer = &{p}_layers[i];
        if (HAL_IN_STORAGE(layer->output)) {{
            late[i].fnv = {_layer_hash(v)};
            if (i == dump_layer)
                print_hex("dump", i, (const uint8_t *)layer->output, layer->output_bytes);
        }}
        printf("TSR layer %d %s fnv=%08lx count=", i, layer->name, (unsigned long)late[i].fnv);
        print_u64(late[i].count);
        fputs(" dma=", stdout);
        for (e = 0; e < ENGINES; e++) {{
            if (e)
                fputs(",", stdout);
            print_u64(late[i].dma[e]);
        }}
        fputs(" io=", stdout);
        print_u64(late[i].io[0]);
        fputs(",", stdout);
        print_u64(late[i].io[1]);
        printf(",%lu,%lu\\n", (unsigned long)late[i].ops[0], (unsigned long)late[i].ops[1]);
    }}
}}
"""
