"""Out-of-core execution (docs/out_of_core.md): a `kind: storage` level in
the target YAML, weights that do not fit flash and activations that do not
fit SRAM placed on the card, the firmware reading and writing the card's
image through semihosting under QEMU, bit-exact, and the report's storage
accounting equal to what the storage driver counted."""

import hashlib
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from helpers import ROOT, report, scons
from tessera import config
from tessera.storage import ooc
from tessera.errors import ConfigError
from tessera.tiler import solve_layer
from tessera.tiles.geometry import box_transfers

SD = os.path.join(ROOT, "targets", "stm32f746_sd.yaml")


def sd_data():
    with open(SD) as f:
        return yaml.safe_load(f)


def parse(data):
    return config.parse_target(data, "t.yaml", "t")


# ---- the storage level in the target YAML --------------------------------------

def test_the_bundled_sd_target_has_the_datasheet_sizes():
    t = config.load_target(SD, "stm32f746_sd")
    mem = t["memory"]
    # DS10916: 320 kB of SRAM (64 kB DTCM + 240 kB SRAM1 + 16 kB SRAM2), 1 MB of flash
    assert mem["L1"]["size"] + mem["L2"]["size"] == 320 * 1024
    assert mem["flash"]["size"] == 1024 * 1024
    assert mem["sd"]["kind"] == "storage" and mem["sd"]["block"] == 512
    assert t["clock_hz"] == 216_000_000


@pytest.mark.parametrize("mutate, key, fix", [
    (lambda t: t["memory"]["sd"].pop("read_bandwidth"), "memory.sd.read_bandwidth", "missing"),
    (lambda t: t["memory"]["sd"].pop("endurance"), "memory.sd.endurance", "missing"),
    (lambda t: t["memory"]["sd"].pop("address"), "memory.sd.address", "window"),
    (lambda t: t["memory"]["L2"].update(block=512), "memory.L2.block", "only a `kind: storage` level"),
    (lambda t: t["memory"]["sd"].update(writable=False), "memory.sd.writable", "swapped activations"),
    (lambda t: t["place"].update(activations="sd"), "place.activations", "SRAM"),
    (lambda t: t.pop("clock_hz"), "clock_hz", "core clock"),
    (lambda t: t["memory"]["sd"].update(latency_us=-1), "memory.sd.latency_us", "at least 0"),
    (lambda t: t["memory"]["sd"].update(read_bandwidth="fast"), "memory.sd.read_bandwidth", "a number"),
])
def test_storage_level_errors_are_one_line(mutate, key, fix):
    data = sd_data()
    mutate(data)
    with pytest.raises(ConfigError) as err:
        parse(data)
    text = str(err.value)
    assert "\n" not in text and key in text and fix in text, text


# ---- transfers and tiles --------------------------------------------------------

def test_a_box_is_as_few_transfers_as_the_card_allows():
    # a 4x5x6 int8 tensor at offset 1000: whole rows of every channel are one
    # run, rows of every channel one run per row, a channel slice one per pixel
    assert box_transfers(1000, [4, 5, 6], 1, 1, 2, 0, 5, 0, 6) == [(1000 + 30, 60)]
    assert box_transfers(1000, [4, 5, 6], 1, 1, 2, 1, 3, 0, 6) == [(1000 + 36, 18), (1000 + 66, 18)]
    assert box_transfers(1000, [4, 5, 6], 1, 0, 1, 1, 2, 2, 3) == [(1000 + 8, 3), (1000 + 14, 3)]


def test_a_transfer_costs_its_latency_and_whole_blocks():
    st = {"block": 512, "latency_us": 500, "read_bandwidth": 10e6, "write_bandwidth": 5e6, "clock_hz": 100_000_000}
    # 0.5 ms + 512 B / 10 MB/s = 0.5512 ms; one byte costs a whole block too
    assert ooc.transfer_cycles(st, 512, "read") == 55120
    assert ooc.transfer_cycles(st, 1, "read") == 55120
    assert ooc.transfer_cycles(st, 513, "write") == 50000 + 20480


def _pointwise(h, w, cin, cout):
    return {"name": "pw", "op": "pointwise", "in": [h, w, cin], "out": [h, w, cout], "kernel": [1, 1],
            "stride": [1, 1], "pad": [0, 0, 0, 0], "in_bytes": 1, "out_bytes": 1, "n_inputs": 1,
            "w_bytes_per_cout": cin, "param_bytes_per_cout": 9}


def _tiler_target(budget):
    from tessera.config import views
    lib = views.kernel_library("cmsis_nn")
    return {"l1_budget": budget, "cores": 1, "buffering": 2, "kernels": lib["tiler"]}


def test_a_layer_touching_the_card_gets_row_bands_when_they_fit():
    from tessera.planning.alloc import l1_layout
    layer = _pointwise(32, 32, 32, 64)
    # room for rows of every channel (64 x 32 B of weights, loaded once: one buffer)
    rows = solve_layer(dict(layer, rows=1), _tiler_target(20000))
    assert (rows["tile"]["w"], rows["tile"]["c"]) == (32, 64) and rows["weight_buffers"] == 1
    assert len(l1_layout(rows)["weights"]) == 1 and len(l1_layout(rows)["out"]) == 2
    assert solve_layer(layer, _tiler_target(20000))["tile"] != rows["tile"]   # else the test shows nothing
    # room for every channel but not whole rows: a transfer per row
    part = solve_layer(dict(layer, rows=1), _tiler_target(6000))
    assert part["tile"]["c"] == 64 and part["tile"]["w"] < 32
    # not even that: any tile, as without the card
    tight = solve_layer(dict(layer, rows=1), _tiler_target(3000))
    assert tight["tile"]["c"] < 64 and "weight_buffers" not in tight
    assert tight["tile"] == solve_layer(layer, _tiler_target(3000))["tile"]


def test_a_channel_sliced_card_layer_takes_the_fewest_bands_its_sram_share_allows():
    """vgg16_224's conv9 (3x3, 28x28x512 -> 512, both tensors on the card,
    57,344 B of L1 on stm32f746_sd): its tiles are 2 channels of a few
    pixels, and the program reloads its 2.36 MB of weights once per row
    band. Sized for L1 alone it took one-row bands (28 reloads); with the
    SRAM share the plan gives its bands (tessera.pipeline.plan.layer_views:
    at most usable // 4 each) and its weights on the card (`band_weights`)
    it takes the fewest bands within it: 2-row tiles, 4-row input bands,
    14 bands."""
    conv9 = {"name": "conv9", "op": "conv2d", "in": [28, 28, 512], "out": [28, 28, 512], "kernel": [3, 3],
             "stride": [1, 1], "pad": [1, 1, 1, 1], "in_bytes": 1, "out_bytes": 1, "n_inputs": 1,
             "w_bytes_per_cout": 4608, "param_bytes_per_cout": 12, "rows": 1, "storage_out": 1}
    usable = 257880
    before = solve_layer(conv9, _tiler_target(57344))
    assert before["order"] == "hcw" and before["n_tiles"]["h"] == 28
    after = solve_layer(dict(conv9, band_in=usable // 4, band_out=usable // 4, band_weights=1), _tiler_target(57344))
    assert after["order"] == "hcw" and after["tile"]["c"] < 512
    assert after["in_tile"]["h"] * 28 * 512 <= usable // 4 and after["tile"]["h"] * 28 * 512 <= usable // 4
    assert after["n_tiles"]["h"] == 14 and after["l1_bytes"]["total"] <= 57344
    # its weights in flash: no reloads from the card, the library's tile within the shares
    flash = solve_layer(dict(conv9, band_in=usable // 4, band_out=usable // 4), _tiler_target(57344))
    assert flash["n_tiles"]["h"] > 14 and flash["in_tile"]["h"] * 28 * 512 <= usable // 4


# ---- a whole network out of core under QEMU -------------------------------------

TINY = """description: tiny at 64x64 (an out-of-core test network)
generator: {arch: tiny, resolution: 64, channels: 3, classes: 10, seed: 0}
quantization: {calibration_samples: 8, seed: 0}
input: {seed: 0}
"""


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    """stm32f746_sd shrunk so that a small network runs out of core: 2 kB of
    flash for weights, 36 kB of SRAM for activations, 16 kB for tiles."""
    d = tmp_path_factory.mktemp("ooc")
    t = sd_data()
    t["memory"]["flash"]["size"] = t["memory"]["flash"]["reserved"]["code"] + 2048
    t["memory"]["L2"]["size"] = t["memory"]["L2"]["reserved"]["data"] + 36864
    t["memory"]["L1"]["size"] = t["memory"]["L1"]["reserved"]["stack"] + 16384
    t["description"] = "stm32f746_sd with 2 kB of flash for weights, 36 kB for activations"
    (d / "sd_tight.yaml").write_text(yaml.safe_dump(t, sort_keys=False))
    (d / "tiny_ooc.yaml").write_text(TINY)
    out = d / "gen"
    res = scons(f"target={d / 'sd_tight.yaml'}", f"model={d / 'tiny_ooc.yaml'}", out=str(out), timeout=1800)
    return {"dir": d, "out": out, "net": out / "sd_tight" / "tiny_ooc", "res": res}


def test_weights_and_activations_on_the_card_run_bit_exact(tight):
    assert tight["res"].returncode == 0, tight["res"].stdout[-3000:] + tight["res"].stderr[-3000:]
    rep = report(str(tight["out"]), "sd_tight", "tiny_ooc")
    assert rep["verdict"] == "pass"
    plan = json.loads((tight["net"] / "memplan.json").read_text())
    on_card = plan["weights"]["storage"]["layers"]
    swapped = plan["activations"]["spill"]
    # both kinds of data really live on the card
    assert on_card and swapped["level"] == "sd" and swapped["offsets"]
    for name in on_card:   # nothing of theirs is in the firmware
        assert "const int8_t" not in (tight["net"] / "src" / f"{name}_w.c").read_text()
    image = tight["net"] / "storage.bin"
    assert image.stat().st_size == swapped["bytes"]
    # the card was read and written through the storage driver
    io = rep["out_of_core"]["totals"]
    assert io["read_bytes"] > 0 and io["written_bytes"] > 0
    # no SRAM reserved for the scheduler's pools: the program runs in the
    # arena's free bytes, per phase, each within the arena
    fw = rep["out_of_core"]["firmware"]
    prog = json.loads((tight["net"] / "program.json").read_text())
    assert fw["program"] == prog["candidate"] and prog["phases"]
    graph = json.loads((tight["net"] / "graph.json").read_text())
    names = [layer["name"] for layer in graph["layers"]]
    for phase in prog["phases"]:
        lo, hi = phase["base"], phase["base"] + sum(phase["pools"].values())
        assert hi <= plan["activations"]["usable"]
        # no tensor in SRAM while the phase's layers run (from its producer
        # to its last reader) shares a byte with the phase's pools
        first, last = names.index(phase["layers"][0]), names.index(phase["layers"][1])
        if not set(names[first:last + 1]) & set(on_card):
            # no weights from the card: the in and out pools take the w pool's room
            assert phase["pools"]["w"] == 8, phase
        for name, at in plan["activations"]["offsets"].items():
            if name not in graph["tensors"]:
                continue
            made = next((i for i, la in enumerate(graph["layers"]) if la["output"] == name), 0)
            used = max([i for i, la in enumerate(graph["layers"]) if name in la["inputs"]]
                       + ([len(names) - 1] if name in graph["outputs"] else []) + [made])
            size = {"int8": 1, "int16": 2, "int32": 4}[graph["tensors"][name]["dtype"]]
            for d in graph["tensors"][name]["shape"]:
                size *= d
            if made <= last and used >= first:
                assert at + size <= lo or at >= hi, (name, phase)
    assert _program_line(tight["net"]) == prog["totals"]


def test_the_report_accounts_for_every_transfer_the_driver_made(tight):
    rep = report(str(tight["out"]), "sd_tight", "tiny_ooc")
    ooc_rep = rep["out_of_core"]
    t = ooc_rep["totals"]
    assert t["measured"] == {k: t[k] for k in ("read_bytes", "written_bytes", "reads", "writes")}
    # per layer, the report's traffic is the program's (the run counts a
    # transfer in the layer during which it went: reads ahead, writes behind)
    prog = json.loads((tight["net"] / "program.json").read_text())
    for layer, mine in zip(ooc_rep["layers"], prog["io"]):
        assert (layer["read_bytes"], layer["reads"], layer["written_bytes"], layer["writes"]) == \
            (mine["read"], mine["reads"], mine["written"], mine["writes"]), layer["name"]
    verdict = json.loads((tight["net"] / "verdict.json").read_text())
    assert sum(m["written"] for m in verdict["io"]) == sum(mine["written"] for mine in prog["io"]) > 0
    # row-band tiles: a swapped tensor moves in a few large transfers
    assert t["writes"] <= 8


def _symbol_sizes(elf):
    """Symbol name -> bytes in a linked firmware (arm-none-eabi-nm)."""
    nm = subprocess.run(["arm-none-eabi-nm", "-S", str(elf)], capture_output=True, text=True, check=True).stdout
    return {f[3]: int(f[1], 16) for f in (line.split() for line in nm.splitlines()) if len(f) == 4}


def _reserved(memory, level, sizes):
    """A level's reserved bytes as linked: the YAML's, and where the C
    runtime's data is, the network's per-layer counts beside it."""
    counts = sizes["tiny_ooc_layer_counts"] if "data" in memory[level]["reserved"] else 0
    return sum(memory[level]["reserved"].values()) + counts


def test_the_ram_line_counts_the_arena_the_firmware_declares(tight):
    """Without SRAM reserved for the program's pools, network.c declares
    the activation arena at the level's usable bytes (the pools take the
    free ones): the report's RAM is that arena (the symbol's size in the
    linked firmware) plus the reserved bytes, with the pools' share."""
    rep = report(str(tight["out"]), "sd_tight", "tiny_ooc")
    plan = json.loads((tight["net"] / "memplan.json").read_text())
    sizes = _symbol_sizes(tight["net"] / "firmware.elf")
    arena = sizes["tiny_ooc_L2"]
    l2 = rep["memory"]["L2"]
    assert arena == plan["activations"]["usable"] > plan["activations"]["peak"]
    assert l2["declared"] == arena and l2["pools"] == arena - l2["peak"]
    mem = sd_data()["memory"]
    assert l2["ram"] == arena + _reserved(mem, "L2", sizes)
    # the tiles' level keeps its planned peak (its arena is the plan's)
    assert rep["memory"]["L1"]["ram"] == sizes["tiny_ooc_L1"] + _reserved(mem, "L1", sizes)
    assert "declared" not in rep["memory"]["L1"]
    assert f"the firmware declares {arena:,} B" in (tight["net"] / "report.html").read_text()


def test_a_run_leaves_the_built_image_as_it_was(tight):
    image = tight["net"] / "storage.bin"
    before = hashlib.sha256(image.read_bytes()).hexdigest()
    res = scons(f"target={tight['dir'] / 'sd_tight.yaml'}", f"model={tight['dir'] / 'tiny_ooc.yaml'}",
                out=str(tight["out"]))
    assert res.returncode == 0
    assert "storage.bin" not in res.stdout      # up to date: nothing rewrote it
    assert hashlib.sha256(image.read_bytes()).hexdigest() == before
    assert not list(tight["net"].glob(".card-*"))   # the run's scratch copy is gone


def test_the_counts_do_not_depend_on_where_the_build_is(tight, tmp_path):
    """The firmware gets its card's name, not its path: the harness reads
    the argument after the counter starts and QEMU's timer ticks every 40
    instructions, so a path one character longer could move a layer's
    count by a tick (two checkouts gave two reports)."""
    from tessera import runners
    runner = config.load_target(str(tight["dir"] / "sd_tight.yaml"), "t")["runner"]
    counts = set()
    for n in range(1, 11):   # the path's length grows by one each time: every phase of a tick
        d = tmp_path / ("d" * n)
        d.mkdir()
        for name in ("firmware.elf", "storage.bin"):
            shutil.copyfile(tight["net"] / name, d / name)
        text = runners.run(runner, str(d / "firmware.elf"))
        counts.add(tuple(re.findall(r"^TSR layer .* count=(\d+)", text, re.M)))
    assert len(counts) == 1 and len(next(iter(counts))) == len(json.loads((tight["net"] / "graph.json")
                                                                         .read_text())["layers"])


def test_without_its_card_the_firmware_stops_with_a_message(tight):
    from tessera.runners import qemu
    from tessera.errors import RunError
    runner = config.load_target(str(tight["dir"] / "sd_tight.yaml"), "t")["runner"]
    with pytest.raises(RunError) as err:
        qemu.run(runner, str(tight["net"] / "firmware.elf"), [], 120)
    assert "failed (no card: run with storage=<image>)" in str(err.value)


def test_a_card_too_small_for_the_weights_is_one_line(tight):
    from helpers import one_error
    t = yaml.safe_load((tight["dir"] / "sd_tight.yaml").read_text())
    t["memory"]["sd"]["size"] = 1024
    path = tight["dir"] / "sd_tiny_card.yaml"
    path.write_text(yaml.safe_dump(t, sort_keys=False))
    line = one_error(scons(f"target={path}", f"model={tight['dir'] / 'tiny_ooc.yaml'}", out=str(tight["out"])))
    assert "sd:" in line and "do not fit its 1,024 B" in line and "memory.sd.size" in line, line


# ---- the firmware executes the scheduler's program --------------------------------

POOLS = 24576


@pytest.fixture(scope="module")
def scheduled(tight):
    """The same network and target with 24 kB of L2 reserved for the
    program's tile pools: the firmware runs the scheduler's program."""
    t = yaml.safe_load((tight["dir"] / "sd_tight.yaml").read_text())
    t["memory"]["L2"]["size"] += POOLS
    t["memory"]["L2"]["reserved"]["pools"] = POOLS
    path = tight["dir"] / "sd_pools.yaml"
    path.write_text(yaml.safe_dump(t, sort_keys=False))
    res = scons(f"target={path}", f"model={tight['dir'] / 'tiny_ooc.yaml'}", out=str(tight["out"]), timeout=1800)
    net = tight["out"] / "sd_pools" / "tiny_ooc"
    return {"res": res, "net": net, "rep": report(str(tight["out"]), "sd_pools", "tiny_ooc") if res.returncode == 0
            else None, "program": json.loads((net / "program.json").read_text()) if res.returncode == 0 else None}


def test_with_reserved_pools_the_ram_line_counts_their_array_and_the_arena(scheduled):
    """Pools the target reserves are their own array; network.c still
    declares the arena up to the in-order firmware's weight stream: the RAM
    line counts both, as linked."""
    sizes = _symbol_sizes(scheduled["net"] / "firmware.elf")
    l2 = scheduled["rep"]["memory"]["L2"]
    assert sizes["tiny_ooc_pools"] == POOLS and "pools" not in l2
    assert l2["ram"] == sizes["tiny_ooc_L2"] + POOLS + _reserved(sd_data()["memory"], "L2", sizes)


def _program_line(net):
    line = next(x for x in (net / "run.log").read_text().splitlines() if x.startswith("TSR program "))
    return {k: int(v) for k, v in (f.split("=") for f in line.split()[2:])}


def test_the_firmware_runs_the_scheduled_program_bit_exact(scheduled):
    res = scheduled["res"]
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert scheduled["rep"]["verdict"] == "pass"
    prog = scheduled["program"]
    assert prog.get("program") and "why" not in prog
    fw = scheduled["rep"]["out_of_core"]["firmware"]
    # the report names the program the firmware ran, with the in-order estimate beside it
    assert fw["program"] == prog["candidate"] and fw["estimate_ms"] < fw["in_order_ms"]
    assert "firmware: the scheduler's program" in res.stdout
    # the pools sit in the bytes the target reserves, and every program fits them
    assert sum(prog["pools"].values()) <= POOLS


def test_the_harness_counts_what_the_program_moves(scheduled):
    prog = scheduled["program"]
    ops = prog["program"]["ops"]
    # the interpreter's counts of executed ops and bytes equal the program's
    assert _program_line(scheduled["net"]) == prog["totals"]
    assert scheduled["rep"]["out_of_core"]["firmware"]["counted"] == prog["totals"]
    assert prog["totals"]["reads"] == sum(1 for op in ops if op["op"] == "READ") > 0
    # and the storage driver's own counts (per layer, summed) equal them too
    t = scheduled["rep"]["out_of_core"]["totals"]
    assert t["measured"] == {"read_bytes": prog["totals"]["read_bytes"], "reads": prog["totals"]["reads"],
                             "written_bytes": prog["totals"]["written_bytes"], "writes": prog["totals"]["writes"]}


def test_the_next_layers_weights_load_during_earlier_layers(scheduled):
    # conv2's weights are on the card; the program reads them ahead, while
    # earlier layers compute, and the driver saw those reads in those layers
    ops = scheduled["program"]["program"]["ops"]
    names = [layer["name"] for layer in scheduled["program"]["problem"]["layers"]]
    first = next(i for i, op in enumerate(ops) if op["op"] == "COMPUTE" and names[op["layer"]] == "conv2")
    early = [op for op in ops[:first] if op["op"] == "READ" and op["region"] == "w:conv2"]
    assert early and any(op["op"] == "COMPUTE" and names[op["layer"]] != "conv2" for op in ops[:first])
    verdict = json.loads((scheduled["net"] / "verdict.json").read_text())
    io = dict(zip(names, verdict["io"]))
    assert io["conv2"]["read"] == 0
    assert sum(m["read"] for n, m in io.items() if names.index(n) < names.index("conv2")) \
        >= sum(op["bytes"] for op in early)


def _host_like_sd():
    """targets/host.yaml without its L3 (GAP8's, where the host moves the
    activations L2 cannot hold): like stm32f746_sd, the card is the only
    level beyond L2, so activations L2 cannot hold move to the card."""
    with open(os.path.join(ROOT, "targets", "host.yaml")) as f:
        t = yaml.safe_load(f)
    del t["memory"]["L3"]
    t["dma"] = [d for d in t["dma"] if "L3" not in (d["src"], d["dst"])]
    return t


def _host_sd(keep_l3=False):
    """The host shrunk as sd_tight, with a stdio card and reserved pools."""
    if keep_l3:
        with open(os.path.join(ROOT, "targets", "host.yaml")) as f:
            t = yaml.safe_load(f)
    else:
        t = _host_like_sd()
    t["cores"] = 1
    t["clock_hz"] = 216_000_000
    t["memory"]["L1"]["size"] = 16384
    t["memory"]["L2"]["size"] = 36864 + POOLS
    t["memory"]["L2"]["reserved"] = {"pools": POOLS}
    t["memory"]["flash"]["size"] = 2048
    t["memory"]["sd"] = dict(sd_data()["memory"]["sd"], note="a file on the build machine")
    t["dma"].append({"name": "card", "src": "sd", "dst": "L2", "dims": 1, "bandwidth": 0.046, "setup": 108000})
    return t


def _build_on_host(tmp_path, target, keep_l3=False):
    """tiny_ooc built on `target` (_host_sd's target written under that
    name): its folder and report."""
    (tmp_path / f"{target}.yaml").write_text(yaml.safe_dump(_host_sd(keep_l3=keep_l3), sort_keys=False))
    (tmp_path / "tiny_ooc.yaml").write_text(TINY)
    res = scons(f"target={tmp_path / (target + '.yaml')}", f"model={tmp_path / 'tiny_ooc.yaml'}",
                out=str(tmp_path / "gen"))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return tmp_path / "gen" / target / "tiny_ooc", report(str(tmp_path / "gen"), target, "tiny_ooc")


def test_the_host_runs_out_of_core_with_a_stdio_card(tmp_path):
    """The host HAL's storage driver (kernels/hal/host/storage.c): the card
    is a file read and written with stdio; the same network on a host
    target shrunk the same way runs the scheduler's program bit-exact."""
    net, rep = _build_on_host(tmp_path, "host_sd")
    assert rep["verdict"] == "pass"
    prog = json.loads((net / "program.json").read_text())
    assert prog.get("program") and _program_line(net) == prog["totals"]
    ooc_rep = rep["out_of_core"]
    assert ooc_rep["firmware"]["program"] == prog["candidate"]
    assert ooc_rep["totals"]["measured"]["read_bytes"] == prog["totals"]["read_bytes"] > 0
    assert ooc_rep["totals"]["measured"]["written_bytes"] == prog["totals"]["written_bytes"] > 0


def test_activations_in_l3_beside_weights_on_the_card(tmp_path):
    """The same build keeping the host's L3: activations L2 cannot hold move
    to L3 (not the card), the weights flash cannot hold still come from the
    card through the program, and the layers touching L3 keep their own
    spill copies between the program's computes (they once wrote their
    tiles into the program's 8-byte out pool, past it into the
    interpreter's state: SIGSEGV)."""
    net, rep = _build_on_host(tmp_path, "host_l3", keep_l3=True)
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    spill = json.loads((net / "memplan.json").read_text())["activations"]["spill"]
    assert spill["level"] == "L3" and spill["offsets"]
    prog = json.loads((net / "program.json").read_text())
    assert prog.get("program") and _program_line(net) == prog["totals"]
    assert prog["totals"]["read_bytes"] > 0 and prog["totals"]["written_bytes"] == 0
    measured = rep["out_of_core"]["totals"]["measured"]
    assert measured["read_bytes"] == prog["totals"]["read_bytes"] and measured["written_bytes"] == 0


@pytest.mark.parametrize("fault, code, message", [
    ("OK", 0, None),
    ("FAULT_ORDER", 4, "layer 0 tile 1 is not the program's next compute (op 3)"),
    ("FAULT_WAIT", 3, "wait for request 1, only 1 issued"),
])
def test_the_interpreter_follows_its_table_and_stops_off_it(tmp_path, fault, code, message):
    """tessera/program.h on the host HAL's storage driver with a hand-made
    program (tests/c/program_test.c): reads land at their pool offsets, the
    gather brings them to the tile, the write takes the out pool's bytes to
    the card; a tile asked for out of order, or a WAIT for a request never
    issued, stops the firmware with one line."""
    import subprocess
    exe = tmp_path / "program_test"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=c99", f"-D{fault}",
                    "-DTSR_STORAGE_WINDOW=0xc0000000u", "-DTSR_STORAGE_BYTES=0x10000000u",
                    f"-I{os.path.join(ROOT, 'kernels', 'include')}", os.path.join(ROOT, "tests", "c", "program_test.c"),
                    os.path.join(ROOT, "kernels", "hal", "host", "storage.c"),
                    os.path.join(ROOT, "kernels", "hal", "host", "hal.c"), "-o", str(exe)], check=True)
    card = tmp_path / "card.bin"
    card.write_bytes(bytes(range(1, 33)))
    res = subprocess.run([str(exe), str(card)], capture_output=True, text=True)
    assert res.returncode == code, res.stderr
    if message:
        assert res.stderr.strip().endswith(message) and res.stderr.count("\n") == 1, res.stderr
        return
    # in[] = card[4:7], w[] = card[0:2]; out = in + w[0] written to card[16:19]
    assert res.stdout.strip() == "in=5,6,7 w=1,2 ops=2,1,2,1"
    data = card.read_bytes()
    assert list(data[16:19]) == [6, 7, 8] and data[:16] == bytes(range(1, 17)) and data[19:] == bytes(range(20, 33))


# ---- a storage-level tile: a band gathered in SRAM, written once -----------------

BAND_NET = """description: tiny at 64x64x1 (conv2's output on the card, its weights wider than L1)
generator: {arch: tiny, resolution: 64, channels: 1, classes: 10, seed: 0}
quantization: {calibration_samples: 8, seed: 0}
input: {seed: 0}
"""


@pytest.fixture(scope="module")
def banded(tmp_path_factory):
    """stm32f746_sd with 8.5 kB of SRAM for activations and 1.8 kB of L1,
    built with overlap=0: conv2's 16x16x32 output moves to the card, and its
    4.6 kB of weights (in flash) do not fit L1 with every output channel, so
    its tiles are channel slices; the layers before it read and write
    tensors on the card in tiles narrower than a row."""
    d = tmp_path_factory.mktemp("band")
    t = sd_data()
    t["memory"]["flash"]["size"] = t["memory"]["flash"]["reserved"]["code"] + 65536
    t["memory"]["L2"]["size"] = t["memory"]["L2"]["reserved"]["data"] + 8704
    t["memory"]["L1"]["size"] = t["memory"]["L1"]["reserved"]["stack"] + 1856
    (d / "sd_band.yaml").write_text(yaml.safe_dump(t, sort_keys=False))
    (d / "tiny_band.yaml").write_text(BAND_NET)
    out = d / "gen"
    res = scons(f"target={d / 'sd_band.yaml'}", f"model={d / 'tiny_band.yaml'}", "overlap=0", out=str(out),
                timeout=1800)
    return {"out": out, "net": out / "sd_band" / "tiny_band", "res": res}


def test_channel_slices_gather_their_band_in_sram_and_write_it_once(banded):
    assert banded["res"].returncode == 0, banded["res"].stdout[-3000:] + banded["res"].stderr[-3000:]
    rep = report(str(banded["out"]), "sd_band", "tiny_band")
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    net = banded["net"]
    tiling = json.loads((net / "tiling" / "conv2.json").read_text())
    plan = json.loads((net / "memplan.json").read_text())
    graph = json.loads((net / "graph.json").read_text())
    out = graph["tensors"][next(l["output"] for l in graph["layers"] if l["name"] == "conv2")]
    H, W, C = out["shape"]
    # channel slices, walked row band first, through a band of every channel
    assert tiling["tile"]["c"] < C and tiling["order"] == "hcw"
    assert "conv2:bounce:out" in plan["activations"]["spill"]["bands"]
    assert plan["activations"]["spill"]["bounces"]["conv2:bounce:out"] == tiling["tile"]["h"] * W * C
    # each byte of the output written to the card once, a transfer per row
    # band, nothing read back (a band per tile would be C / tile c times that)
    o = rep["out_of_core"]
    conv2 = next(layer for layer in o["layers"] if layer["name"] == "conv2")
    bands = -(-H // tiling["tile"]["h"])
    assert conv2["written_bytes"] == H * W * C and conv2["writes"] == bands
    assert conv2["read_bytes"] == 0 and conv2["reads"] == 0
    # tiles narrower than a row: their row band, every channel, read once
    # and written once per band (not a transfer per row of each tile)
    banded = plan["activations"]["spill"]["bands"]
    by_name = {layer["name"]: layer for layer in o["layers"]}
    checked = 0
    for layer in graph["layers"]:
        t = json.loads((net / "tiling" / f"{layer['name']}.json").read_text())
        ins = [i for i in range(len(layer["inputs"])) if f"{layer['name']}:bounce:in{i}" in banded]
        if ins and t.get("order") != "hcw" and t["n_tiles"]["c"] == 1:
            assert t["tile"]["w"] < graph["tensors"][layer["inputs"][0]]["shape"][1]
            assert by_name[layer["name"]]["reads"] == len(ins) * t["n_tiles"]["h"], layer["name"]
            checked += 1
        if f"{layer['name']}:bounce:out" in banded and t["n_tiles"]["w"] > 1:
            assert by_name[layer["name"]]["writes"] == t["n_tiles"]["h"], layer["name"]
    assert checked >= 2
    # what the storage driver counted is what the report says (the program
    # runs: a transfer counts in the layer during which it went, so the sums)
    t = o["totals"]
    assert t["measured"] == {k: t[k] for k in ("read_bytes", "written_bytes", "reads", "writes")}
    # every activation byte written once: the scheduler takes the problem
    assert "skipped" not in o["schedule"] and o["schedule"]["latency_ms"] >= o["schedule"]["lower_bound_ms"]


def test_a_layer_writing_through_a_band_runs_the_program(banded):
    """The banded network on the stock target: the program reads an input
    band once for its tiles and gathers an output band from its tiles in one
    out pool buffer, written once; bit-exact, and the card traffic of every
    layer the driver counted is the program's."""
    net = banded["net"]
    prog = json.loads((net / "program.json").read_text())
    assert prog.get("program"), prog.get("why")
    rep = report(str(banded["out"]), "sd_band", "tiny_band")
    assert rep["out_of_core"]["firmware"]["program"] == prog["candidate"]
    assert _program_line(net) == prog["totals"]
    names = [layer["name"] for layer in prog["problem"]["layers"]]
    conv2 = prog["problem"]["layers"][names.index("conv2")]["tiles"]
    tiling = json.loads((net / "tiling" / "conv2.json").read_text())
    bands = -(-16 // tiling["tile"]["h"])
    # one buffer per band: every tile but a band's first continues it; one write per band
    assert sum(1 for t in conv2 if not t.get("band")) == bands
    assert sum(len(t["writes"]) for t in conv2) == bands
    _assert_traffic_is_the_programs(rep, prog)


def _assert_traffic_is_the_programs(rep, prog):
    """What the driver counted (summed: the program moves a layer's reads
    ahead, into earlier layers' time) is what the program moves, and the
    report's per-layer traffic is the program's."""
    t = rep["out_of_core"]["totals"]
    assert t["measured"] == {"read_bytes": prog["totals"]["read_bytes"], "reads": prog["totals"]["reads"],
                             "written_bytes": prog["totals"]["written_bytes"], "writes": prog["totals"]["writes"]}
    for layer, mine in zip(rep["out_of_core"]["layers"], prog["io"]):
        assert (layer["read_bytes"], layer["reads"], layer["written_bytes"], layer["writes"]) == \
            (mine["read"], mine["reads"], mine["written"], mine["writes"]), layer["name"]


@pytest.mark.parametrize("program", [True, False], ids=["program", "in_order"])
def test_a_channel_sliced_writer_with_weights_on_the_card_walks_its_bands(tmp_path, program):
    """The banded network with 2 kB of flash for constants: conv2's weights
    go to the card too. It is still walked row band first (its output
    gathered per band, written once), its channel tiles' weights read from
    the card again for every band, outside the in-order weight stream: by
    the program's reads, or (the program off) straight from the card;
    bit-exact either way, and the driver moves what the report says."""
    t = sd_data()
    t["memory"]["flash"]["size"] = t["memory"]["flash"]["reserved"]["code"] + 2048
    t["memory"]["L2"]["size"] = t["memory"]["L2"]["reserved"]["data"] + 8704
    t["memory"]["L1"]["size"] = t["memory"]["L1"]["reserved"]["stack"] + 1856
    if not program:
        t["memory"]["L2"]["reserved"]["pools"] = 0
    (tmp_path / "sd_bandw.yaml").write_text(yaml.safe_dump(t, sort_keys=False))
    (tmp_path / "tiny_band.yaml").write_text(BAND_NET)
    res = scons(f"target={tmp_path / 'sd_bandw.yaml'}", f"model={tmp_path / 'tiny_band.yaml'}", "overlap=0",
                out=str(tmp_path / "gen"), timeout=1800)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    net = tmp_path / "gen" / "sd_bandw" / "tiny_band"
    rep = report(str(tmp_path / "gen"), "sd_bandw", "tiny_band")
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    plan = json.loads((net / "memplan.json").read_text())
    tiling = json.loads((net / "tiling" / "conv2.json").read_text())
    assert "conv2" in plan["weights"]["storage"]["layers"] and "stream" not in plan["weights"]
    assert tiling["order"] == "hcw" and tiling["tile"]["c"] < 32
    o = rep["out_of_core"]
    conv2 = next(layer for layer in o["layers"] if layer["name"] == "conv2")
    bands = -(-16 // tiling["tile"]["h"])
    assert conv2["written_bytes"] == 16 * 16 * 32 and conv2["writes"] == bands
    t = o["totals"]
    assert t["measured"] == {k: t[k] for k in ("read_bytes", "written_bytes", "reads", "writes")}
    prog = json.loads((net / "program.json").read_text())
    if program:
        assert prog.get("program"), prog.get("why")
        assert o["firmware"]["program"] == prog["candidate"] and _program_line(net) == prog["totals"]
        _assert_traffic_is_the_programs(rep, prog)
        # every band reads the layer's weights again (3x3x16 per channel)
        weights = 32 * 3 * 3 * 16
        reads = next(x for x in prog["io"] if x["name"] == "conv2")
        assert bands * weights <= reads["read"] < (bands + 1) * weights
    else:
        assert o["firmware"]["program"] == "in order"


def test_a_banded_chain_runs_the_program_on_the_host(tmp_path):
    """The banded network on a host target shrunk the same way, without
    SRAM reserved for pools (the host storage driver: a stdio file): the
    program takes the arena's free bytes, runs bit-exact, and moves per
    layer what the program says (each band read or written once)."""
    t = _host_like_sd()
    t["cores"] = 1
    t["clock_hz"] = 216_000_000
    t["memory"]["L1"]["size"] = 1856
    t["memory"]["L2"]["size"] = 8704
    t["memory"]["flash"]["size"] = 65536
    t["memory"]["sd"] = dict(sd_data()["memory"]["sd"], note="a file on the build machine")
    t["dma"].append({"name": "card", "src": "sd", "dst": "L2", "dims": 1, "bandwidth": 0.046, "setup": 108000})
    (tmp_path / "host_band.yaml").write_text(yaml.safe_dump(t, sort_keys=False))
    (tmp_path / "tiny_band.yaml").write_text(BAND_NET)
    res = scons(f"target={tmp_path / 'host_band.yaml'}", f"model={tmp_path / 'tiny_band.yaml'}", "overlap=0",
                out=str(tmp_path / "gen"))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    net = tmp_path / "gen" / "host_band" / "tiny_band"
    rep = report(str(tmp_path / "gen"), "host_band", "tiny_band")
    assert rep["verdict"] == "pass" and all(layer["match"] for layer in rep["layers"])
    prog = json.loads((net / "program.json").read_text())
    assert prog.get("program"), prog.get("why")
    assert _program_line(net) == prog["totals"]
    bands = json.loads((net / "memplan.json").read_text())["activations"]["spill"]["bands"]
    assert "conv2:bounce:out" in bands and any(b.endswith(":bounce:in0") for b in bands)
    layers = prog["problem"]["layers"]
    assert any(t.get("band") for layer in layers for t in layer["tiles"])
    # an input band is one read held by the band's tiles: the program's
    # reads of a banded input are its distinct bands
    for b in bands:
        name, _, which = b.split(":")
        if which == "in0":
            tiles = layers[[la["name"] for la in layers].index(name)]["tiles"]
            keys = [{(r["region"], r["offset"], r["bytes"]) for r in t["reads"] if r["pool"] == "in"} for t in tiles]
            reads = next(x for x in prog["io"] if x["name"] == name)
            assert reads["reads"] - sum(1 for r in reads["tiles"][0]["reads"] if r["kind"] == "weights") \
                == sum(len(k - prev) for k, prev in zip(keys, [set()] + keys)) < sum(map(len, keys))
    _assert_traffic_is_the_programs(rep, prog)
    # guard=1 fills the arena's free bytes before each layer and checks them
    # after: the pools' ranges are left to the program (else its buffers
    # would be overwritten and its writes taken for strays)
    res = scons(f"target={tmp_path / 'host_band.yaml'}", f"model={tmp_path / 'tiny_band.yaml'}", "overlap=0",
                "guard=1", out=str(tmp_path / "guarded"))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert report(str(tmp_path / "guarded"), "host_band", "tiny_band")["verdict"] == "pass"
    assert _program_line(tmp_path / "guarded" / "host_band" / "tiny_band") == prog["totals"]


def _run_program(deltas, period_ops=0):
    """program.c for one layer of len(deltas) tiles, each reading 8 weight
    bytes at its delta into one chunk (a channel tile's rows) and one band
    held by all: one READ each, a WAIT, then the computes."""
    from tessera.codegen.program import c_source
    tiles = [{"reads": [{"pool": "w", "kind": 8, "bytes": 64, "delta": d, "use": 8},
                        {"pool": "in", "kind": 0, "bytes": 96}], "writes": []} for d in deltas]
    ops = [{"op": "READ", "id": 0, "pool": "w", "buf": 0, "offset": 0, "bytes": 64},
           {"op": "READ", "id": 1, "pool": "in", "buf": 0, "offset": 512, "bytes": 96},
           {"op": "WAIT", "id": 1}]
    ops += [{"op": "COMPUTE", "layer": 0, "tile": i, "bufs": [0, 0], "out": 0} for i in range(len(deltas))]
    res = {"program": {"ops": ops}, "pools": {"in": 96, "w": 64, "out": 8}, "candidate": "c", "estimate_ns": 1,
           "in_order_ns": 1, "tasks": [{"kind": "read"}, {"kind": "read"}] + [{"kind": "compute"}] * len(deltas),
           "detail": [{"name": "conv", "tiles": tiles}], "layer_level": [0]}
    return c_source("net", "L2", res, 1, period_ops=period_ops)


def test_a_run_of_computes_advances_its_reads_every_p_tiles():
    """A band's channel tiles, each over the band's columns (order hcw):
    their weight rows move every 3 tiles, the band stays: one COMPUTE op
    for the 6 tiles, the weight reference advancing every 3 (the
    interpreter divides: TSR_PROG_PERIODS); a run advancing every tile
    keeps the interpreter as it was, and a step off the period ends the run."""
    src = _run_program([0, 0, 0, 8, 8, 8])
    assert src.count("{TSR_OP_COMPUTE, 6, 0, 0,") == 1 and "{TSR_POOL_W, 8, 3, 0, 8}," in src
    assert "{TSR_POOL_IN, 0, 0, 0, 96}," in src and src.index("#define TSR_PROG_PERIODS") < src.index("#include")
    src = _run_program([0, 8, 16])
    assert "{TSR_OP_COMPUTE, 3, 0, 0," in src and "{TSR_POOL_W, 8, 1, 0, 8}," in src
    assert "TSR_PROG_PERIODS" not in src
    src = _run_program([0, 0, 8, 8, 24])
    assert "{TSR_OP_COMPUTE, 4, 0, 0," in src and "{TSR_OP_COMPUTE, 0, 0, 4," in src
    # a program of few ops keeps the interpreter division-free: a run per period
    src = _run_program([0, 0, 0, 8, 8, 8], period_ops=5)
    assert src.count("{TSR_OP_COMPUTE, 3, 0, ") == 2 and "TSR_PROG_PERIODS" not in src
