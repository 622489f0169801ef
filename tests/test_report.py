"""The report a user reads (issue 31), on real builds of every target:

- every byte of RAM and flash it counts is the linked ELF's (pyelftools,
  read here on its own: sections per memory region, the arrays network.c
  declares), and what the plan declared equals what was linked;
- every row of its tables is a step, whose count is the sum of its layers'
  slots, and the steps add up to the layers;
- report.html renders in headless Chromium without console errors, with
  the key numbers on the page;
- the console table fits 100 columns in a pipe."""

import json
import os
import re
import subprocess
import sys

import pytest

from helpers import MODEL_CACHE, ROOT, scons
from tessera import config
from tessera.util.cname import c_name

SHF_ALLOC, SHF_TLS = 0x2, 0x400
TARGETS = config.available("target", ROOT)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """tiny built and run on every target (default fusion), and its console."""
    out = tmp_path_factory.mktemp("every_target")
    logs = {}
    for t in TARGETS:
        res = scons(f"target={t}", "model=tiny", "-j2", out=out, check=True, env={"COLUMNS": ""})
        logs[t] = res.stdout
    return out, logs


def _elf(path):
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        loads = [(s["p_vaddr"], s["p_paddr"], s["p_memsz"]) for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
        sections = [(s.name, s["sh_addr"], s["sh_size"], s["sh_flags"], s["sh_type"]) for s in elf.iter_sections()
                    if s["sh_flags"] & SHF_ALLOC and s["sh_size"]]
        symbols = {sym.name: sym["st_size"] for sym in elf.get_section_by_name(".symtab").iter_symbols()}
    return loads, sections, symbols


def _occupied(ranges):
    total, end = 0, None
    for a, b in sorted(ranges):
        if end is None or a >= end:
            total, end = total + b - a, b
        elif b > end:
            total, end = total + b - end, b
    return total


@pytest.mark.parametrize("target", TARGETS)
def test_ram_and_flash_are_the_linked_elfs(tiny, target):
    out, _ = tiny
    check_footprint(os.path.join(out, target, "tiny"), target)


def check_footprint(d, target):
    """The build in `d` (on targets/<target>.yaml): its report's RAM and
    flash, per level and in total, are the linked ELF's."""
    rep = json.load(open(os.path.join(d, "report.json")))
    plan = json.load(open(os.path.join(d, "memplan.json")))
    tcfg = config.load_target(os.path.join(ROOT, "targets", target + ".yaml"), target)
    fw = rep["firmware"]
    elf = os.path.join(d, fw["file"])
    loads, sections, symbols = _elf(elf)
    # the arrays network.c declares: the plan's sizes, linked as planned
    assert fw["arrays"]
    for sym, a in fw["arrays"].items():
        assert symbols[sym] == a["planned"] == a["bytes"], sym
    acts = rep["memory"][plan["activations"]["level"]]
    prefix = c_name(rep["model"])
    assert symbols[f"{prefix}_L2"] == acts.get("declared", acts["peak"])
    assert symbols[f"{prefix}_L1"] == max(plan["tiles"]["arena"], 4)
    levels = {n: lvl for n, lvl in tcfg["memory"].items() if lvl.get("address") is not None and lvl["kind"] != "storage"}
    if not levels:            # a native program: no memory regions, the arrays are all
        assert fw["code"]["kernels"] > 0 and fw["constants"]["weights"] == plan["weights"]["bytes"]
        return
    used = {n: [] for n in levels}

    def region(addr):
        return next((n for n, l in levels.items() if l["address"] <= addr < l["address"] + l["size"]), None)
    for name, addr, size, flags, kind in sections:
        if flags & SHF_TLS and kind == "SHT_NOBITS":
            continue
        used[region(addr)].append((addr, addr + size))
        lma = next((p + addr - v for v, p, m in loads if v <= addr < v + m), addr)
        if kind != "SHT_NOBITS" and lma != addr and region(lma) != region(addr):
            used[region(lma)].append((lma, lma + size))
    sizes = {name: size for name, _, size, _, _ in sections}
    for n, lvl in levels.items():
        m = fw["levels"][n]
        outside = sum(v for k, v in lvl["reserved"].items()
                      if k not in ("code", "data", "stack", "heap") and f".tsr_{k}" not in sizes)
        assert m["used"] == _occupied(used[n]) + outside, n
        assert sum(m["parts"].values()) == m["used"], n
        assert m["size"] == lvl["size"]
        if "stack" in lvl["reserved"]:
            assert m["parts"]["stack"] == sizes[".stack"] == lvl["reserved"]["stack"]
    assert fw["ram"] == sum(fw["levels"][n]["used"] for n, l in levels.items() if l["writable"])
    assert fw["flash"] == sum(fw["levels"][n]["used"] for n, l in levels.items() if not l["writable"])
    # the weights the plan placed are the weights linked (on a storage level: in the card's image instead)
    wl = plan["weights"]["level"]
    if tcfg["memory"][wl]["kind"] == "storage":
        assert not any("weights" in m["parts"] for m in fw["levels"].values())
    else:
        assert fw["levels"][wl]["parts"]["weights"] == plan["weights"]["bytes"]
    # and every byte of the ELF's regions is in some level
    assert sum(m["used"] for m in fw["levels"].values()) >= sum(
        size for name, _, size, flags, kind in sections if not (flags & SHF_TLS and kind == "SHT_NOBITS"))


@pytest.mark.parametrize("target", ["gap8", "stm32h7", "pulp_open"])
def test_every_row_is_a_step_with_its_count(tiny, target):
    out, logs = tiny
    rep = json.load(open(os.path.join(out, target, "tiny", "report.json")))
    key = {"qemu-instructions": "instructions", "gvsoc-cycles": "cycles"}[rep["counts"]["method"]]
    layers = {l["name"]: l for l in rep["layers"]}
    sched = json.load(open(os.path.join(out, target, "tiny", "schedule.json")))
    assert [s["step"] for s in rep["steps"]] == [s["step"] for s in sched["steps"]]
    assert sum(len(s["layers"]) for s in rep["steps"]) == len(rep["layers"])
    for s in rep["steps"]:
        assert s[key] == sum(layers[n][key] for n in s["layers"])
        if len(s["layers"]) > 1:
            # a fused step's layers: no per-layer measurement or error of their own
            assert all(layers[n]["step"] == s["step"] and "measured" not in layers[n]["cost"] for n in s["layers"])
    assert rep["totals"]["steps"][key] == sum(l[key] for l in rep["layers"]) <= rep["totals"][key]
    # the console's rows: one per step, each with its count
    table = [line for line in _summary(logs[target]) if re.match(r"^\s*\d+\s+\S", line)]
    for s in rep["steps"]:
        row = next(line for line in table if line.split()[:2] == [str(s["index"]), s["step"]])
        assert f"{s[key]:,}" in row
    if rep["counts"]["unit"] == "cycles":
        clock = config.load_target(os.path.join(ROOT, "targets", target + ".yaml"), target)["clock_hz"]
        assert rep["totals"]["steps"]["ms"] == round(1000 * rep["totals"]["steps"][key] / clock, 4)


def test_gap8_fuses_a_step_and_the_console_fits_100_columns(tiny):
    out, logs = tiny
    rep = json.load(open(os.path.join(out, "gap8", "tiny", "report.json")))
    assert any(len(s["layers"]) > 1 for s in rep["steps"])     # the default fuses tiny's pairs on gap8
    for t in TARGETS:
        lines = _summary(logs[t])
        assert len(lines) > len(rep["steps"])
        wide = [line for line in lines if len(line) > 100]
        assert not wide, (t, wide[:2])


def _summary(log):
    """The report's console summary in a build's output: printed last,
    after the report step's lines and before the verdict line."""
    lines = log.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("tessera: report "))
    end = next(i for i, line in enumerate(lines) if line.startswith(("tessera: PASS ", "tessera: FAIL ")))
    return lines[start + 1:end]


def test_report_html_renders_in_chromium_with_the_key_numbers(tiny, tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import report_browser

    out, _ = tiny
    d = os.path.join(out, "stm32h7", "tiny")
    rep = json.load(open(os.path.join(d, "report.json")))
    page = os.path.join(d, "report.html")
    html = open(page).read()
    assert "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")   # nothing from the network
    assert "<script" not in html and ROOT not in html and str(out) not in html     # no script, no path
    try:
        browser = report_browser.Browser()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    png = tmp_path / "top.png"
    with browser as b:
        b.open(page, 1200, 900)
        text = b.evaluate("document.body.innerText")
        svgs = b.evaluate("document.querySelectorAll('svg').length")
        b.screenshot(str(png))
        errors = b.errors()
    assert errors == []
    assert "PASS" in text
    tot = rep["totals"]
    for number in (tot["instructions"], tot["steps"]["instructions"], tot["macs"], rep["firmware"]["ram"],
                   rep["firmware"]["flash"], tot["peak_activation_bytes"]):
        assert f"{number:,}" in text, number
    for s in rep["steps"]:
        assert s["step"] in text and f"{s['instructions']:,}" in text
    # the top outputs next to ONNX Runtime's
    assert "ONNX Runtime" in text and str(rep["outputs"][0]["top"][0][0]) in text
    # plots: memory maps, per-level bytes, per-step bars, the decisions
    assert svgs >= 8
    from PIL import Image
    img = Image.open(png).convert("RGB")
    assert img.size == (1200, 900) and len(img.getcolors(maxcolors=1 << 20)) > 50
    assert (0x2a, 0x7d, 0x2a) in {c for _, c in img.getcolors(maxcolors=1 << 20)}     # the PASS badge


def test_report_is_the_same_bytes_when_built_again(tiny, tmp_path):
    out, _ = tiny
    d = os.path.join(out, "stm32h7", "tiny")
    before = [open(os.path.join(d, f), "rb").read() for f in ("report.json", "report.html")]
    os.remove(os.path.join(d, "report.json"))
    scons("target=stm32h7", "model=tiny", out=out, check=True)
    assert [open(os.path.join(d, f), "rb").read() for f in ("report.json", "report.html")] == before


def test_list_says_bytes():
    res = subprocess.run([sys.executable, "-m", "SCons", "-C", ROOT, "-Q", "list"], capture_output=True, text=True,
                         env=dict(os.environ, COLUMNS="200"), check=True)
    gap8 = next(line for line in res.stdout.splitlines() if line.lstrip("│ ").startswith("gap8 "))
    assert "L1 64,000 B" in gap8 and "kB" not in gap8.split("│")[3]


def test_report_diff_matches_steps_across_fusion(tiny, tmp_path):
    """fusion=none against the default on gap8: a pair fused in one build
    and apart in the other is one row that says so, its counts the fused
    step's against the sum of the two steps apart."""
    out, _ = tiny
    fused = os.path.join(out, "gap8", "tiny")
    scons("target=gap8", "model=tiny", "fusion=none", "-j2", out=tmp_path / "none", check=True)
    apart = os.path.join(tmp_path, "none", "gap8", "tiny")
    html = tmp_path / "diff.html"
    res = subprocess.run([sys.executable, "-m", "tessera", "diff", apart, fused, "--html", str(html)],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, COLUMNS="300", PYTHONPATH=os.path.join(ROOT, "site_scons")))
    a, b = (json.load(open(os.path.join(d, "report.json"))) for d in (apart, fused))
    a_steps = {s["step"]: s for s in a["steps"]}
    rows = {line.split("│")[1].strip(): line for line in res.stdout.splitlines() if line.count("│") > 3}
    groups = [s for s in b["steps"] if len(s["layers"]) > 1]
    assert groups
    for g in groups:
        row = rows[f"{', '.join(g['layers'])} | {g['step']}"]
        assert "fused in B, apart in A" in row
        before = sum(a_steps[n]["instructions"] for n in g["layers"])
        assert f"{before:,} -> {g['instructions']:,}" in row
    for s in b["steps"]:
        if len(s["layers"]) == 1 and s["step"] not in {n for g in groups for n in g["layers"]}:
            assert "fused" not in rows[s["step"]]
    assert f"run instructions: {a['totals']['instructions']:,} -> {b['totals']['instructions']:,}" in res.stdout
    assert f"{len(groups)} of them grouped differently" in res.stdout
    assert html.read_text().count("fused in B, apart in A") == len(groups)


def test_network_h_gives_each_input_and_outputs_shape_scale_and_zero_point(tiny, tmp_path):
    """network.h's defines, read by the C compiler, against the ONNX model's
    own QuantizeLinear/DequantizeLinear parameters (the file tessera built
    the network from)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    out, _ = tiny
    from tessera.config import load_model
    from tessera.model.prepare import model_onnx

    # the generated model file the builds read (its name keyed by the generator's parameters and code)
    path = model_onnx(load_model(os.path.join(ROOT, "models", "tiny.yaml"), "tiny"), MODEL_CACHE, print)
    assert os.path.exists(path)
    g = onnx.load(path).graph
    init = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    q_in = next(n for n in g.node if n.op_type == "QuantizeLinear" and n.input[0] == g.input[0].name)
    dq_out = next(n for n in g.node if n.op_type == "DequantizeLinear" and n.output[0] == g.output[0].name)
    prog = tmp_path / "io.c"
    prog.write_text('#include <stdio.h>\n#include "network.h"\nint main(void) { printf("%.9g %d %d %d %d %.9g %d %d\\n", '
                    "(double)TINY_INPUT0_SCALE, TINY_INPUT0_ZERO_POINT, TINY_INPUT0_H, TINY_INPUT0_W, TINY_INPUT0_C, "
                    "(double)TINY_OUTPUT0_SCALE, TINY_OUTPUT0_ZERO_POINT, TINY_OUTPUT0_C); return 0; }\n")
    src = os.path.join(out, "host", "tiny", "src")
    subprocess.run(["cc", "-I", src, "-I", os.path.join(ROOT, "kernels", "include"), str(prog), "-o",
                    str(tmp_path / "io")], check=True)
    vals = subprocess.run([str(tmp_path / "io")], capture_output=True, text=True, check=True).stdout.split()
    shape = [d.dim_value for d in g.input[0].type.tensor_type.shape.dim]         # NCHW
    assert np.float32(vals[0]) == np.float32(init[q_in.input[1]]) and int(vals[1]) == int(init[q_in.input[2]])
    assert [int(v) for v in vals[2:5]] == [shape[2], shape[3], shape[1]]
    assert np.float32(vals[5]) == np.float32(init[dq_out.input[1]]) and int(vals[6]) == int(init[dq_out.input[2]])
    assert int(vals[7]) == [d.dim_value for d in g.output[0].type.tensor_type.shape.dim][-1]


# ---- input: {file: ...} ----------------------------------------------------------

TINY = {"description": "tiny on a sample", "generator": {"arch": "tiny", "resolution": 16, "channels": 3,
                                                         "classes": 10, "seed": 0},
        "quantization": {"calibration_samples": 8, "seed": 0}}


def _prepare(tmp_path, name, sample, **extra):
    import yaml

    from tessera.config import load_model
    from tessera.model.prepare import prepare
    from tessera.util import canon

    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(dict(TINY, input=dict({"file": os.path.basename(sample)}, **extra))))
    paths = prepare(load_model(str(path), name), str(tmp_path / name), str(tmp_path / "models"), log=lambda *a: None)
    graph = json.load(open(paths["graph"]))
    x = graph["tensors"][graph["inputs"][0]]
    return canon.load_npz(paths["input"])[x["name"]], x, json.load(open(paths["ort_check"]))


def test_an_image_is_the_golden_input_quantized_with_the_inputs_parameters(tmp_path):
    """A drawn RGB picture, larger than the input: resized to 16x16, its
    pixels read as [-1, 1] and quantized with the input's scale and zero
    point; ONNX Runtime ran on the same input (its top outputs)."""
    import numpy as np
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (64, 48), (20, 40, 200))
    draw = ImageDraw.Draw(img)
    draw.ellipse((8, 6, 40, 38), fill=(240, 200, 30))
    draw.rectangle((36, 20, 60, 44), fill=(200, 30, 60))
    img.save(tmp_path / "sun.png")
    got, x, ort = _prepare(tmp_path, "sun", tmp_path / "sun.png", range=[-1, 1])
    pixels = np.asarray(Image.open(tmp_path / "sun.png").convert("RGB").resize((16, 16), Image.BILINEAR), float)
    want = np.clip(np.rint((pixels / 255 * 2 - 1) / x["scale"]) + x["zero_point"], -128, 127)
    assert got.dtype == np.int8 and got.shape == (16, 16, 3) and (got == want).all()
    assert ort["outputs"] and len(ort["outputs"][0]["top"]) == 5


def test_arrays_and_raw_bytes_in_the_models_own_layout(tmp_path):
    import numpy as np

    rng = np.random.default_rng(7)
    real = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)         # ONNX: NCHW real values
    np.save(tmp_path / "x.npy", real)
    got, x, _ = _prepare(tmp_path, "npy", tmp_path / "x.npy")
    want = np.clip(np.rint(real[0].transpose(1, 2, 0) / x["scale"]) + x["zero_point"], -128, 127)
    assert (got == want).all()
    q = rng.integers(-128, 128, (3, 16, 16)).astype(np.int8)             # quantized, channel first
    q.tofile(tmp_path / "x.bin")
    got, _, _ = _prepare(tmp_path, "raw", tmp_path / "x.bin")
    assert (got == q.transpose(1, 2, 0)).all()
    np.savez(tmp_path / "x.npz", input=q.transpose(1, 2, 0))             # tessera's own HWC, one array
    got, _, _ = _prepare(tmp_path, "npz", tmp_path / "x.npz")
    assert (got == q.transpose(1, 2, 0)).all()


@pytest.mark.parametrize("make, what", [
    (lambda p: open(p, "wb").write(b"not an array") and p, "cannot read"),
    (lambda p: __import__("numpy").save(p, __import__("numpy").zeros((1, 3, 9, 16), "float32")) or p,
     "holds an array of shape [3, 9, 16], the input"),
    (lambda p: open(p, "wb").write(b"\0" * 10) and p, "has 10 bytes, the input"),
])
def test_a_bad_sample_is_one_line(tmp_path, make, what):
    from helpers import one_error

    name = {"cannot read": "a.npy", "holds an array of shape [3, 9, 16], the input": "b.npy"}.get(what, "c.bin")
    make(str(tmp_path / name))
    import yaml
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(dict(TINY, input={"file": name})))
    line = one_error(scons("target=host", f"model={tmp_path / 'm.yaml'}", out=tmp_path / "out"))
    assert "m.yaml" in line and "input.file" in line and what in line, line


def test_the_firmware_runs_the_sample_and_the_report_shows_its_top_outputs(tmp_path):
    import numpy as np
    import yaml
    from PIL import Image, ImageDraw

    from tessera.util import canon

    img = Image.new("RGB", (32, 32), (250, 250, 250))
    ImageDraw.Draw(img).polygon([(4, 28), (16, 3), (28, 28)], fill=(10, 120, 40))
    img.save(tmp_path / "tree.png")
    (tmp_path / "tree.yaml").write_text(yaml.safe_dump(dict(TINY, input={"file": "tree.png"})))
    scons("target=host", f"model={tmp_path / 'tree.yaml'}", out=tmp_path / "out", check=True)
    d = tmp_path / "out" / "host" / "tree"
    rep = json.load(open(d / "report.json"))
    assert rep["verdict"] == "pass"       # the firmware ran the golden model's input: the picture
    graph = json.load(open(d / "graph.json"))
    out = canon.load_npz(str(d / "golden.npz"))[graph["outputs"][0]].reshape(-1).astype(int)
    order = sorted(range(out.size), key=lambda i: (-out[i], i))[:5]
    o = rep["outputs"][0]
    assert [i for i, _, _ in o["top"]] == order and [v for _, v, _ in o["top"]] == [int(out[i]) for i in order]
    assert o["reference"]["by"] == "ONNX Runtime" and len(o["reference"]["top"]) == 5
    x = graph["tensors"][graph["inputs"][0]]
    pixels = np.asarray(img.resize((16, 16), Image.BILINEAR), float) / 255
    want = np.clip(np.rint(pixels / x["scale"]) + x["zero_point"], -128, 127)
    assert (canon.load_npz(str(d / "input.npz"))[x["name"]] == want).all()


SHARED = os.path.join(os.path.dirname(ROOT), "shared")
VWW = os.path.join(SHARED, "mlperf_tiny", "vww_96_int8.tflite")
PHOTOS = os.path.join(SHARED, "public_models", "tflm")


@pytest.mark.parametrize("photo", ["person", "no_person"])
def test_a_real_photo_on_a_trained_network(tmp_path, photo):
    """MLPerf Tiny's visual wake words network (trained, published int8
    .tflite) on TensorFlow Lite Micro's own 96x96 test photo: the firmware's
    top classes and their values are the TFLite interpreter's, run here on
    the photo read with Pillow and quantized with the input's parameters."""
    import numpy as np
    import yaml
    from PIL import Image

    bmp = os.path.join(PHOTOS, f"person_detect_input_{photo}.bmp")
    if not (os.path.exists(VWW) and os.path.exists(bmp)):
        pytest.skip(f"{VWW} or {bmp} missing (../shared beside the checkout)")
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    (tmp_path / "vww.yaml").write_text(yaml.safe_dump({"description": "VWW on a photo", "tflite": VWW,
                                                      "input": {"file": bmp, "range": [0, 1]}}))
    scons("target=host", f"model={tmp_path / 'vww.yaml'}", out=tmp_path / "out", check=True)
    rep = json.load(open(tmp_path / "out" / "host" / "vww" / "report.json"))
    assert rep["verdict"] == "pass"
    # the interpreter's reference kernels, TFLite's integer recipe (its default XNNPACK delegate rounds
    # otherwise: 43, -43 on the person photo where the reference kernels and the firmware give 46, -46)
    it = Interpreter(model_path=VWW, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp, outp = it.get_input_details()[0], it.get_output_details()[0]
    scale, zero = inp["quantization"]
    pixels = np.asarray(Image.open(bmp).convert("RGB"), float) / 255          # the photo is 96x96: no resize
    it.set_tensor(inp["index"], np.clip(np.rint(pixels / scale) + zero, -128, 127).astype(np.int8)[None])
    it.invoke()
    y = it.get_tensor(outp["index"]).reshape(-1).astype(int)
    want = sorted(range(y.size), key=lambda i: (-y[i], i))
    o = rep["outputs"][0]
    assert [(i, v) for i, v, _ in o["top"]] == [(i, int(y[i])) for i in want]
    assert o["reference"]["by"] == "the TFLite interpreter" and o["reference"]["same_order"]


def test_an_error_line_is_whole_up_to_its_fix():
    """A long message is cut in the middle of what went wrong, never in the
    place or the fix (a weights hint naming every target stays whole)."""
    from tessera.errors import MAX_MESSAGE, TesseraError

    fix = "use a target that holds them: " + ", ".join(f"target{i} (L3: {i:,} B external)" for i in range(40))
    msg = str(TesseraError("models/big.yaml", "weights " * 2000, fix))
    assert len(msg) <= MAX_MESSAGE and "\n" not in msg
    assert msg.startswith("models/big.yaml: weights") and msg.endswith(f"({fix})") and "[...]" in msg
    short = str(TesseraError("a.yaml", "x " * 300, fix))       # 600 characters: whole
    assert "[...]" not in short and len(short) > 480
