"""The out-of-core IO/compute scheduler (site_scons/tessera/storage/): its
programs always pass the replay checker, the checker catches bad programs,
the schedule is never slower than the in-order program, and on VGG- and
AlexNet-like chains it is close to a lower bound and classifies layers as
SwapNN does."""

import json
import os

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from tessera.report import timeline as report_timeline
from tessera.storage import chain, costs, estimate, replay as rp, schedule as sc, tasks as tg, timeline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COEFS = yaml.safe_load(open(os.path.join(ROOT, "kernels", "cmsis_nn", "cost", "stm32h7.yaml")))
# the stm32f746_sd target's card: 10 MB/s reads, 5 MB/s writes, 0.5 ms a transfer
SD = costs.storage_params({"read_bandwidth": 10e6, "write_bandwidth": 5e6, "latency_us": 500, "block": 512})
CLOCK = 216e6


def small_problem(pools=None):
    layers = [{"op": "conv", "name": "c1", "cout": 16}, {"op": "maxpool", "name": "p1"},
              {"op": "conv", "name": "c2", "cout": 32}, {"op": "maxpool", "name": "p2"},
              {"op": "linear", "name": "fc1", "cout": 256}, {"op": "linear", "name": "fc2", "cout": 10}]
    pools = pools or {"in": 16384, "w": 32768, "out": 16384}
    return chain.build_problem(layers, pools, SD, CLOCK, COEFS, input_shape=(32, 32, 3))


def pool_bounds_hold(problem, program):
    """Independently of the checker: every buffer lies inside its pool."""
    tasks = tg.build(problem, program["frames"])
    for op in program["ops"]:
        if op["op"] == "READ":
            assert 0 <= op["buf"] and op["buf"] + op["bytes"] <= problem["pools"][op["pool"]]
        elif op["op"] == "COMPUTE":
            assert 0 <= op["out"] and op["out"] + tasks[op["id"]]["bytes"] <= problem["pools"]["out"]


@st.composite
def chains(draw, band=None):
    h0 = h = draw(st.sampled_from([4, 8, 12, 16]))
    layers = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["conv", "conv", "maxpool", "linear"]))
        if kind == "maxpool" and h >= 4:
            layers.append({"op": "maxpool", "name": f"p{i}"})
            h //= 2
        elif kind == "linear":
            layers.append({"op": "linear", "name": f"fc{i}", "cout": draw(st.integers(1, 300))})
            h = 1             # further layers see a vector
        elif h > 1:
            layers.append({"op": "conv", "name": f"c{i}", "cout": draw(st.integers(1, 48)),
                           "band": draw(st.booleans()) if band is None else band})
    assume(layers)
    pools = {"in": draw(st.integers(256, 8192)), "w": draw(st.integers(256, 16384)),
             "out": draw(st.integers(64, 4096))}
    storage = {"read_ns_per_kb": draw(st.integers(1, 200000)), "write_ns_per_kb": draw(st.integers(1, 400000)),
               "latency_ns": draw(st.integers(0, 1000000)), "block": draw(st.sampled_from([1, 64, 512]))}
    try:
        problem = chain.build_problem(layers, pools, storage, CLOCK, None, draw(st.sampled_from([0.5, 2.0, 20.0])),
                                      input_shape=(h0, h0, draw(st.integers(1, 4))))
    except chain.ChainError:
        assume(False)
    return problem, draw(st.integers(1, 3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(chains())
def test_programs_always_pass_the_checker(case):
    problem, frames = case
    result = sc.schedule(problem, frames)
    again = rp.replay(problem, result["program"])          # the checker, run on its own
    assert again["end"] == result["replay"]["end"]
    pool_bounds_hold(problem, result["program"])
    assert all(again["pool_peak"][p] <= problem["pools"][p] for p in tg.POOLS)
    naive = rp.replay(problem, sc.naive_program(problem, frames))
    assert result["replay"]["end"] <= naive["end"] == result["naive_ns"]
    computes = [op["id"] for op in result["program"]["ops"] if op["op"] == "COMPUTE"]
    assert sorted(computes) == [t["id"] for t in again["tasks"] if t["kind"] == "compute"]
    if frames == 1:
        assert estimate.lower_bound(problem, again["tasks"]) <= result["replay"]["end"]
    else:       # pipelining never loses to frames one by one
        assert result["replay"]["end"] <= frames * sc.schedule(problem)["replay"]["end"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(chains(band=True))
def test_banded_chains_gather_each_band_in_one_buffer(case):
    """Storage-level row bands: the tiles of a band compute into the one
    buffer the band's first tile took, and the band is written once, after
    its last tile; the checker accepts the program (and would refuse a band
    tile computing elsewhere)."""
    problem, frames = case
    bands = [(li, ti) for li, layer in enumerate(problem["layers"]) for ti, t in enumerate(layer["tiles"])
             if t.get("band")]
    assume(bands)
    result = sc.schedule(problem, frames)
    again = rp.replay(problem, result["program"])
    pool_bounds_hold(problem, result["program"])
    assert all(again["pool_peak"][p] <= problem["pools"][p] for p in tg.POOLS)
    tasks = again["tasks"]
    ops = result["program"]["ops"]
    out_at = {op["id"]: op["out"] for op in ops if op["op"] == "COMPUTE"}
    first = {}
    for op in ops:
        if op["op"] != "COMPUTE":
            continue
        t = tasks[op["id"]]
        tile = problem["layers"][t["layer"]]["tiles"][t["tile"]]
        if tile.get("band"):
            assert op["out"] == out_at[first[(t["frame"], t["layer"])]]
        else:
            first[(t["frame"], t["layer"])] = op["id"]
    # every byte of a banded output written once per frame, in a transfer per band
    for li, layer in enumerate(problem["layers"]):
        if any(t.get("band") for t in layer["tiles"]):
            writes = [t for t in tasks if t["kind"] == "write" and t["layer"] == li and t["frame"] == 0]
            n_bands = sum(1 for t in layer["tiles"] if not t.get("band"))
            assert len(writes) == n_bands
            assert sorted((w["offset"], w["bytes"]) for w in writes)[-1][0] + writes[-1]["bytes"] \
                == sum(w["bytes"] for w in writes)
    # a band tile moved off its band's buffer is caught
    li, ti = bands[0]
    k = next(i for i, op in enumerate(ops) if op["op"] == "COMPUTE" and op["frame"] == 0
             and (op["layer"], op["tile"]) == (li, ti))
    bad = dict(result["program"], ops=ops[:k] + [dict(ops[k], out=ops[k]["out"] + 1)] + ops[k + 1:])
    with pytest.raises(rp.ProgramError, match="does not hold its band's output"):
        rp.replay(problem, bad)


@st.composite
def raw_problems(draw):
    """Problems no tiler would write: any number of reads (none, repeated,
    reused across tiles or not) of weights or of earlier layers' outputs,
    several or no writes per tile, zero-cost tasks."""
    n_layers = draw(st.integers(1, 4))
    pools = {"in": draw(st.integers(64, 2048)), "w": draw(st.integers(64, 2048)), "out": draw(st.integers(64, 2048))}
    layers, outputs = [], []
    for li in range(n_layers):
        tiles, mine, at = [], [], 0
        weights = [(o, draw(st.integers(1, 64))) for o in range(0, 256, 64)]
        for ti in range(draw(st.integers(1, 5))):
            reads, need = [], {"in": 0, "w": 0}
            for _ in range(draw(st.integers(0, 3))):
                if outputs and draw(st.booleans()):
                    region, o, n = draw(st.sampled_from(outputs))
                    r = {"pool": "in", "region": region, "offset": o + draw(st.integers(0, n - 1)) if n > 1 else o}
                    r["bytes"] = draw(st.integers(1, o + n - r["offset"]))
                else:
                    o, n = draw(st.sampled_from(weights))
                    r = {"pool": "w", "region": f"w:l{li}", "offset": o, "bytes": n}
                if need[r["pool"]] + r["bytes"] <= pools[r["pool"]]:
                    need[r["pool"]] += r["bytes"]
                    reads.append(r)
            writes = []
            for _ in range(draw(st.integers(0, 2))):
                n = draw(st.integers(1, 32))
                if sum(w["bytes"] for w in writes) + n <= pools["out"]:
                    writes.append({"region": f"a:l{li}", "offset": at, "bytes": n})
                    mine.append((f"a:l{li}", at, n))
                    at += n + draw(st.integers(0, 8))
            tiles.append({"reads": reads, "compute_ns": draw(st.integers(0, 5000)), "writes": writes,
                          "holds": {"in": need["in"], "w": need["w"], "out": sum(w["bytes"] for w in writes)}})
        layers.append({"name": f"l{li}", "tiles": tiles})
        outputs += mine
    storage = {"read_ns_per_kb": draw(st.integers(0, 100000)), "write_ns_per_kb": draw(st.integers(0, 100000)),
               "latency_ns": draw(st.integers(0, 3000)), "block": draw(st.sampled_from([1, 16, 512]))}
    return {"storage": storage, "pools": pools, "layers": layers}, draw(st.integers(1, 3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_problems())
def test_any_problem_gets_a_checked_program(case):
    problem, frames = case
    try:
        tg.validate(problem)
    except tg.ProblemError:
        assume(False)
    result = sc.schedule(problem, frames)
    again = rp.replay(problem, result["program"])
    assert again["end"] == result["replay"]["end"] <= result["naive_ns"]
    assert all(again["pool_peak"][p] <= problem["pools"][p] for p in tg.POOLS)
    pool_bounds_hold(problem, result["program"])


def test_cp_sat_proves_a_tiny_schedule_optimal():
    # three tiles sharing nothing: CP-SAT's optimum, replayed, is no better than the list scheduler's
    problem = {"storage": {"read_ns_per_kb": 1000, "write_ns_per_kb": 2000, "latency_ns": 100, "block": 1},
               "pools": {"in": 200, "w": 200, "out": 100},
               "layers": [{"name": "a", "tiles": [
                   {"reads": [{"pool": "w", "region": "w:a", "offset": i * 100, "bytes": 100}], "compute_ns": 500,
                    "writes": [{"region": "a:a", "offset": i * 50, "bytes": 50}], "holds": {}} for i in range(3)]}]}
    result = sc.schedule(problem, exact_ok=True)
    ends = result["candidates"]
    assert "cp-sat" in ends                     # solved to optimality
    assert estimate.lower_bound(problem, result["replay"]["tasks"]) <= ends["cp-sat"]
    assert min(v for k, v in ends.items() if v and k != "cp-sat") == ends["cp-sat"] == result["replay"]["end"]


def _program():
    problem = small_problem()
    return problem, sc.schedule(problem)["program"]


def _expect(problem, program, words):
    with pytest.raises(rp.ProgramError) as err:
        rp.replay(problem, program)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("program.json: ")
    for w in words:
        assert w in msg, msg


def test_a_missing_wait_is_caught():
    problem, program = _program()
    ops = program["ops"]
    i = next(i for i, op in enumerate(ops) if op["op"] == "COMPUTE" and ops[i - 1]["op"] == "WAIT")
    j = i
    while ops[j - 1]["op"] == "WAIT":
        j -= 1
    del ops[j:i]
    _expect(problem, program, ["before its read completes", "a WAIT is missing"])


def test_a_buffer_reused_while_live_is_caught():
    problem, program = _program()
    ops = program["ops"]
    rep = rp.replay(problem, program)
    tasks = rep["tasks"]
    when = {e["op"]: e for e in rep["timeline"]}
    last_use = {}
    for i, op in enumerate(ops):
        if op["op"] == "COMPUTE":
            for r in tasks[op["id"]]["reads"]:
                last_use[r] = when[i]["end"]
    # a read that starts while another read's buffer in the same pool is still needed: move it onto that buffer
    reads = [(i, op) for i, op in enumerate(ops) if op["op"] == "READ"]
    first, other = next((a, b) for _, a in reads for j, b in reads
                        if a["pool"] == b["pool"] and a["buf"] != b["buf"]
                        and when[ops.index(a)]["start"] < when[j]["start"] < last_use[a["id"]])
    # one byte off the other buffer: the computes still find their data, only the overlap is wrong
    to = first["buf"] + 1 if first["buf"] + 1 + other["bytes"] <= problem["pools"][first["pool"]] else first["buf"] - 1
    for op in ops:
        if op["op"] == "COMPUTE":
            op["bufs"] = [to if r == other["id"] else b for b, r in zip(op["bufs"], tasks[op["id"]]["reads"])]
    other["buf"] = to
    _expect(problem, program, ["holds it until", f"{first['pool']}["])


def test_a_read_before_its_write_is_caught():
    problem, program = _program()
    ops = program["ops"]
    tasks = tg.build(problem)
    i = next(i for i, op in enumerate(ops) if op["op"] == "READ" and tasks[op["id"]]["deps"])
    dep = tasks[ops[i]["id"]]["deps"][-1]
    w = next(k for k, op in enumerate(ops) if op["op"] == "WRITE" and op["id"] == dep)
    read = ops.pop(i)
    ops.insert(w, read)
    _expect(problem, program, ["before write", "completed", tasks[read["id"]]["region"]])


def test_a_pool_overflow_is_caught():
    problem, program = _program()
    op = next(op for op in program["ops"] if op["op"] == "READ" and op["pool"] == "in")
    op["buf"] = problem["pools"]["in"] - op["bytes"] + 1
    _expect(problem, program, ["exceeds the in pool", f"({problem['pools']['in']} B)"])


def test_a_lost_write_is_caught():
    problem, program = _program()
    ops = program["ops"]
    i = max(i for i, op in enumerate(ops) if op["op"] == "WRITE")
    wid = ops[i]["id"]
    program["ops"] = [op for op in ops if op.get("id") != wid]
    _expect(problem, program, ["never runs", "write fc2"])


def test_a_pool_too_small_is_a_one_line_error():
    problem = small_problem()
    problem["pools"]["w"] = 1000
    with pytest.raises(tg.ProblemError) as err:
        sc.schedule(problem)
    assert "needs" in str(err.value) and "w pool" in str(err.value) and "\n" not in str(err.value)


@pytest.fixture(scope="module")
def vgg():
    out = {}
    for sram in (320 * 1024, 512 * 1024):
        pools = {"in": sram // 4, "w": sram // 2, "out": sram // 4}         # SwapNN's split
        layers, shape = chain.vgg16(64)
        out[sram] = estimate.estimate(chain.build_problem(layers, pools, SD, CLOCK, COEFS, input_shape=shape),
                                      frames=1)["summary"]
    return out


def test_vgg16_64_is_close_to_the_lower_bound(vgg):
    for sram, s in vgg.items():
        # no program with these tiles can beat lower_bound_ns; the schedule is within 10% of it
        assert s["lower_bound_ns"] <= s["latency_ns"] <= 1.10 * s["lower_bound_ns"], (sram, s)
        assert s["latency_ns"] * 2 < s["in_order_ns"]      # reuse and overlap at least halve the in-order time
        # SwapNN's Table 1: the convolutions of the first blocks compute-bound, the FC layers IO-bound
        by = {r["name"]: r for r in s["layers"]}
        assert all(by[n]["bound"] == "io" for n in ("fc1", "fc2", "fc3"))
        assert all(by[n]["bound"] == "compute" for n in ("block1_conv2", "block2_conv2", "block3_conv1"))
        assert s["written_bytes"] < s["read_bytes"] // 20      # reads dominate (SwapNN section 5.4)


def test_vgg16_224_in_swapnns_setting_is_within_10_percent_of_unlimited_sram():
    # SwapNN's VGG-16 (224x224) with 512 kB of SRAM and a fast card (SDMMC's 4-bit bus at 50 MHz: 25 MB/s)
    card = costs.storage_params({"read_bandwidth": 25e6, "write_bandwidth": 12.5e6, "latency_us": 500, "block": 512})
    layers, shape = chain.vgg16(224)
    problem = chain.build_problem(layers, {"in": 131072, "w": 262144, "out": 131072}, card, CLOCK, COEFS,
                                  input_shape=shape)
    result = sc.schedule(problem, policies=("reads_first",))
    unlimited = sum(t["compute_ns"] for layer in problem["layers"] for t in layer["tiles"])
    assert result["replay"]["end"] <= 1.10 * unlimited          # SwapNN: +6.9%


def test_alexnet_like_is_io_bound_and_pipelines():
    pools = {"in": 64 * 1024, "w": 128 * 1024, "out": 64 * 1024}
    layers, shape = chain.alexnet_like(32, fc=2048)
    problem = chain.build_problem(layers, pools, SD, CLOCK, COEFS, input_shape=shape)
    s = estimate.estimate(problem, frames=3)["summary"]
    by = {r["name"]: r for r in s["layers"]}
    assert all(by[n]["bound"] == "io" for n in ("fc6", "fc7", "fc8"))
    io = sum(r["io_ns"] for r in s["layers"])
    compute = sum(r["compute_ns"] for r in s["layers"])
    assert io > compute                           # the network as a whole is IO-heavy
    assert s["ratio_x1000"] > 1500                # SwapNN: AlexNet's delay +50% against unlimited SRAM
    # pipelined frames never do worse than one after the other
    assert s["throughput_fps_x1000"] >= 10**12 // s["latency_ns"]


def test_program_and_timeline_are_deterministic():
    problem = small_problem()
    result = sc.schedule(problem)
    again = sc.schedule(problem)
    assert json.dumps(result["program"], sort_keys=True) == json.dumps(again["program"], sort_keys=True)
    a = timeline.svg(problem, result["replay"])
    b = timeline.svg(problem, again["replay"])
    assert a == b and a.startswith("<svg") and 'class="io"' in a and 'class="compute"' in a
    # report.html's section draws the same bars from report.json
    bars = timeline.bars(problem, result["replay"])
    assert sum(b[6] for b in bars) == len(result["replay"]["timeline"])
    section = report_timeline.html({"timeline": json.loads(json.dumps(bars))})
    assert a in section and report_timeline.html({}) == ""
    entry = estimate.report_entry(problem, frames=2)
    assert entry["timeline"] == bars and entry["latency_ms"] == round(result["replay"]["end"] / 1e6, 3)
    assert entry["lower_bound_ms"] <= entry["latency_ms"] and entry["throughput_fps"] >= 1e3 / entry["latency_ms"]
