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

from helpers import ROOT, scons
from tessera import config

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
    d = os.path.join(out, target, "tiny")
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
    assert symbols["tiny_L2"] == acts.get("declared", acts["peak"])
    assert symbols["tiny_L1"] == max(plan["tiles"]["arena"], 4)
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
    """The report's console summary in a build's output: between the report
    step's line and the line naming report.html."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("tessera: report ") and line.endswith(".json"))
    end = next(i for i, line in enumerate(lines) if line.startswith("tessera: report ") and line.endswith(".html"))
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
    res = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "report_diff.py"), apart, fused,
                          "--html", str(html)], capture_output=True, text=True, check=True,
                         env=dict(os.environ, COLUMNS="300"))
    a, b = (json.load(open(os.path.join(d, "report.json"))) for d in (apart, fused))
    a_steps = {s["step"]: s for s in a["steps"]}
    rows = {line.split("│")[1].strip(): line for line in res.stdout.splitlines() if line.count("│") > 3}
    groups = [s for s in b["steps"] if len(s["layers"]) > 1]
    assert groups
    for g in groups:
        row = rows[f"{', '.join(g['layers'])} | {g['step']}"]
        assert "fused in B, apart in A" in row
        before = sum(a_steps[n]["instructions"] for n in g["layers"])
        assert f"{before} -> {g['instructions']}" in row
    for s in b["steps"]:
        if len(s["layers"]) == 1 and s["step"] not in {n for g in groups for n in g["layers"]}:
            assert "fused" not in rows[s["step"]]
    assert f"run instructions: {a['totals']['instructions']} -> {b['totals']['instructions']}" in res.stdout
    assert html.read_text().count("fused in B, apart in A") == len(groups)
