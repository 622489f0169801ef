"""Target and model YAML validation: every mistake is one line naming the
file, the key and the problem, and the command line exits non-zero."""

import os

import pytest
import yaml

from helpers import ROOT, one_error, scons
from tessera import config
from tessera.errors import ConfigError


def target_data():
    with open(os.path.join(ROOT, "targets", "host.yaml")) as f:
        return yaml.safe_load(f)


def write(tmp_path, data, name="t.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return str(path)


@pytest.mark.parametrize("name", config.available("target", ROOT))
def test_bundled_targets_load(name):
    _, path = config.resolve("target", name, ROOT)
    t = config.load_target(path, name)
    assert t["memory"] and t["place"]["tiles"] in t["memory"]


@pytest.mark.parametrize("name", config.available("model", ROOT))
def test_bundled_models_load(name):
    _, path = config.resolve("model", name, ROOT)
    assert config.load_model(path, name)["description"]


def test_required_datasheet_sizes():
    def level(target, name):
        return config.load_target(os.path.join(ROOT, "targets", target + ".yaml"), target)["memory"][name]
    assert level("gap8", "L1")["size"] == 64000
    assert level("gap8", "L2")["size"] == 512000
    assert level("gap8", "L3")["size"] == 8 * 1024 * 1024
    assert level("stm32h7", "L1")["size"] == 128 * 1024
    assert level("stm32h7", "L2")["size"] == 512 * 1024
    assert level("stm32h7", "flash")["size"] == 2 * 1024 * 1024
    f4 = config.load_target(os.path.join(ROOT, "targets", "stm32f4.yaml"), "stm32f4")
    assert f4["memory"]["flash"]["size"] == 512 * 1024
    assert f4["memory"]["L1"]["size"] + f4["memory"]["L2"]["size"] == 128 * 1024


@pytest.mark.parametrize("mutate, key, problem", [
    (lambda d: d["memory"]["L1"].__setitem__("size", "big"), "memory.L1.size", "expected an integer"),
    (lambda d: d["memory"]["L1"].__setitem__("size", -5), "memory.L1.size", "at least 1"),
    (lambda d: d.__setitem__("colour", "red"), "colour", "unknown key"),
    (lambda d: d["memory"]["L2"].__setitem__("sise", 5), "memory.L2.sise", "unknown key"),
    (lambda d: d.pop("cores"), "cores", "missing required key"),
    (lambda d: d["place"].__setitem__("tiles", "L9"), "place.tiles", "unknown level"),
    (lambda d: d.__setitem__("cores", 2.5), "cores", "expected an integer"),
    (lambda d: d["runner"].__setitem__("kind", "jtag"), "runner.kind", "not one of"),
])
def test_target_errors_name_file_key_and_problem(tmp_path, mutate, key, problem):
    data = target_data()
    mutate(data)
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as err:
        config.load_target(path, "t")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(path) and key in msg and problem in msg


def test_duplicate_key_and_syntax_error(tmp_path):
    dup = write(tmp_path, "description: a\ndescription: b\n", "dup.yaml")
    with pytest.raises(ConfigError, match=r"dup.yaml: line 2: duplicate key 'description'"):
        config.load_model(dup, "dup")
    bad = write(tmp_path, "description: [unclosed\n", "bad.yaml")
    with pytest.raises(ConfigError, match=r"bad.yaml: line \d+, column \d+: invalid YAML"):
        config.load_model(bad, "bad")


def test_model_needs_exactly_one_source(tmp_path):
    path = write(tmp_path, {"description": "x"})
    with pytest.raises(ConfigError, match="exactly one of"):
        config.load_model(path, "x")
    path = write(tmp_path, {"description": "x", "onnx": "missing.onnx"})
    with pytest.raises(ConfigError, match="onnx: file not found"):
        config.load_model(path, "x")


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(ConfigError) as err:
        config.resolve("target", "gap9", ROOT)
    assert "gap8" in str(err.value) and "stm32h7" in str(err.value)


def test_command_line_errors(tmp_path):
    out = tmp_path / "out"
    line = one_error(scons("target=gap9", "model=tiny", out=out))
    assert "target=gap9" in line and "host" in line
    line = one_error(scons("target=host", "model=tiny", "colour=red", out=out))
    assert "colour" in line
    data = target_data()
    data["memory"]["L1"]["size"] = -1
    bad = write(tmp_path, data, "neg.yaml")
    line = one_error(scons(f"target={bad}", "model=tiny", out=out))
    assert "neg.yaml" in line and "memory.L1.size" in line and "at least 1" in line


def test_help_lists_targets_models_and_variables(tmp_path):
    res = scons("-h", out=tmp_path)
    assert res.returncode == 0
    for word in config.available("target", ROOT) + config.available("model", ROOT) + ["out=", "target:"]:
        assert word.rstrip("=") in res.stdout


def _c_define(path, name):
    import re
    with open(os.path.join(ROOT, path)) as f:
        return int(re.search(rf"#define {name} (\d+)", f.read()).group(1))


def test_core_limits_agree_with_the_hals():
    """The platform core limits of config/target.py are the HALs' own: the
    per-core state every HAL sizes by HAL_MAX_CORES bounds them all, and the
    pulp_open HAL dispatches to PO_CL_MAX_CORES."""
    from tessera.config.target import HAL_MAX_CORES, PLATFORM_CORES
    assert HAL_MAX_CORES == _c_define("kernels/include/tessera/hal.h", "HAL_MAX_CORES")
    assert max(PLATFORM_CORES.values()) <= HAL_MAX_CORES
    assert PLATFORM_CORES["pulp_open"] == _c_define("kernels/hal/pulp_open/pulp_open.h", "PO_CL_MAX_CORES")
    for name in config.available("target", ROOT):
        t = config.load_target(os.path.join(ROOT, "targets", name + ".yaml"), name)
        assert t["cores"] <= PLATFORM_CORES[t["platform"]], name


@pytest.mark.parametrize("platform, cores, smp, ok", [("qemu_virt_rv32", 8, "9", True),
                                                      ("qemu_virt_rv32", 8, "8", False),
                                                      ("qemu_virt_rv32", 2, "3", True),
                                                      ("qemu_virt_rv32", 2, "x", False)])
def test_qemu_cluster_cores_fit_the_harts(tmp_path, platform, cores, smp, ok):
    """On QEMU's virt, hart 0 is the fabric controller: cores + 1 <= -smp."""
    import yaml
    with open(os.path.join(ROOT, "targets", "gap8.yaml")) as f:
        data = yaml.safe_load(f)
    data["cores"] = cores
    args = data["runner"]["args"]
    args[args.index("-smp") + 1] = smp
    path = write(tmp_path, data)
    if ok:
        assert config.load_target(path, "t")["cores"] == cores
    else:
        with pytest.raises(ConfigError, match=f"cores: {cores} with runner.args -smp {smp}"):
            config.load_target(path, "t")
