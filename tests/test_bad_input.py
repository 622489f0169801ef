"""Bad input from the command line and in files: one `tessera: error:` line
naming the file or variable and what to change, a non-zero exit, no
traceback, and nothing written that a later build would trust."""

import os

import pytest

from helpers import ROOT, one_error, scons


def _model_yaml(tmp_path, text, encoding="utf-8"):
    path = tmp_path / "m.yaml"
    path.write_bytes(text.encode(encoding))
    return path


@pytest.mark.parametrize("encoding, expect", [("utf-16", "UTF-16"), ("latin-1", "not UTF-8")])
def test_a_model_yaml_that_is_not_utf8(tmp_path, encoding, expect):
    yml = _model_yaml(tmp_path, "description: caf\u00e9\nonnx: net.onnx\n", encoding)
    line = one_error(scons("target=host", f"model={yml}", out=tmp_path / "out"))
    assert str(yml) in line and expect in line and "UTF-8" in line


def test_a_target_yaml_that_is_not_utf8(tmp_path):
    with open(os.path.join(ROOT, "targets", "host.yaml"), encoding="utf-8") as f:
        text = f.read()
    target = tmp_path / "t.yaml"
    target.write_bytes(text.encode("utf-16"))
    line = one_error(scons(f"target={target}", "model=tiny", out=tmp_path / "out"))
    assert str(target) in line and "UTF-16" in line


def test_a_model_yaml_that_is_huge(tmp_path):
    yml = tmp_path / "m.yaml"
    yml.write_bytes(b"#" * (2 << 20))
    line = one_error(scons("target=host", f"model={yml}", out=tmp_path / "out"))
    assert str(yml) in line and "larger than" in line


@pytest.mark.parametrize("kind", ["file", "under a file", "empty", "dollar"])
def test_out_that_cannot_be_an_output_directory(tmp_path, kind):
    afile = tmp_path / "afile"
    afile.write_text("x")
    out = {"file": str(afile), "under a file": str(afile / "sub"), "empty": "",
           "dollar": str(tmp_path / "a$b")}[kind]
    cmd = ["target=host", "model=tiny"]
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-m", "SCons", "-C", ROOT, f"out={out}", *cmd],
                         capture_output=True, text=True)
    line = one_error(res)
    assert line.startswith(f"tessera: error: out={out}:"), line
    assert afile.read_text() == "x"
    assert sorted(os.listdir(tmp_path)) == ["afile"]   # nothing made beside it


# A representative subset of the corpus (tests/bad_input_cases.py, run
# in-process by test_bad_input_corpus.py) through the real command line.
def _corpus_files(tmp_path, kind, case_id):
    import copy

    import onnx
    import yaml

    import bad_input_cases as cases
    from tessera import config
    from tessera.model import prepare

    with open(os.path.join(ROOT, "targets", "host.yaml"), encoding="utf-8") as f:
        host = yaml.safe_load(f)
    target, model = os.path.join(ROOT, "targets", "host.yaml"), os.path.join(ROOT, "models", "tiny.yaml")
    tiny = config.load_model(model, "tiny")
    from helpers import MODEL_CACHE
    tiny_onnx = prepare.model_onnx(tiny, MODEL_CACHE, log=lambda line: None)
    if kind == "target":
        _, edit, words = next(c for c in cases.TARGET_CASES if c[0] == case_id)
        target = tmp_path / "brd.yaml"
        target.write_text(yaml.safe_dump(edit(copy.deepcopy(host))))
        return target, model, target, words
    model = tmp_path / "net.yaml"
    net = tmp_path / "net.onnx"
    extra = ""
    if kind == "onnx":
        _, edit, words = next(c for c in cases.ONNX_CASES if c[0] == case_id)
        net.write_bytes(edit(onnx.load(tiny_onnx)).SerializeToString())
        named = net
    elif kind == "garbage-with-reference":
        net.write_bytes(b"garbage \xff\x00")
        (tmp_path / "ref").mkdir()
        (tmp_path / "ref" / "input.txt").write_text("# input (shape [1, 3, 16, 16]),\n" + "1,\n" * 768)
        extra, named, words = "reference: {kind: dory, dir: ref}\n", net, ["ONNX"]
    elif kind == "dory":
        _, files, words = next(c for c in cases.DORY_CASES if c[0] == case_id)
        net.write_bytes(open(tiny_onnx, "rb").read())
        (tmp_path / "ref").mkdir()
        for name, text in files.items():
            (tmp_path / "ref" / name).write_text(text)
        extra, named = "reference: {kind: dory, dir: ref}\n", tmp_path / "ref"
    elif kind == "tflite":
        # the TFLite gate forks the interpreter: its abort or refusal is one line through scons too
        from tflite_edit import Flatbuffer
        _, edit, words = next(c for c in cases.TFLITE_CASES if c[0] == case_id)
        with open(os.path.join(ROOT, "tests", "data", "tflite", cases.TFLITE_BASE + ".tflite"), "rb") as f:
            (tmp_path / "net.tflite").write_bytes(edit(Flatbuffer(f.read())).bytes())
        model.write_text("description: corpus case\ntflite: net.tflite\n")
        return target, model, tmp_path / "net.tflite", words
    elif kind == "deeploy":
        import test_bad_input_corpus as corpus
        _, edit, words = next(c for c in cases.DEEPLOY_CASES if c[0] == case_id)
        files, good = corpus._deeploy_folder()
        corpus._quantlib_graph(net)
        (tmp_path / "ref").mkdir()
        for name, data in edit(files, good).items():
            if data is not None:
                (tmp_path / "ref" / name).write_bytes(data)
        extra, named = "reference: {kind: deeploy, dir: ref}\n", tmp_path / "ref"
    model.write_text(f"description: corpus case\nonnx: net.onnx\n{extra}")
    return target, model, named, words


CLI_CASES = [("target", "l2-2pow63"), ("target", "cores-4-cortexm-host"), ("target", "kernels-unknown"),
             ("target", "cc-empty"), ("target", "flash-1000"), ("onnx", "input-scale-inf"),
             ("onnx", "zero-point-length"), ("garbage-with-reference", ""), ("dory", "nan"),
             ("tflite", "no-quantization"), ("tflite", "buffer-out-of-range"), ("tflite", "scale-nan"),
             ("deeploy", "outputs-missing"), ("deeploy", "inputs-nan")]


@pytest.mark.parametrize("kind, case_id", CLI_CASES, ids=[f"{k}-{c}" for k, c in CLI_CASES])
def test_corpus_through_the_command_line(tmp_path, kind, case_id):
    target, model, named, words = _corpus_files(tmp_path, kind, case_id)
    out = tmp_path / "out"
    line = one_error(scons(f"target={target}", f"model={model}", out=out))
    assert str(named) in line or (kind == "target" and "brd" in line), line
    for w in words:
        assert w in line, (w, line)
    # nothing a later build would take as done, and no empty folders
    left = [os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs]
    assert not any(os.path.basename(p) in (".passed", "report.json", "verdict.json") for p in left), left
    empty = [d for d, ds, fs in os.walk(out) if not ds and not fs and d != str(out)]
    assert not empty, empty


@pytest.mark.parametrize("key, value, words", [
    ("place.tiles", "L2", ["place.tiles", "'L2' is also place.activations"]),
    ("place.activations", "L1", ["place.tiles", "'L1' is also place.activations"]),
    ("cflags", ["-O2", "-fno-such-flag"], ["toolchain.cflags", "-fno-such-flag"]),
    ("cc", "no-such-compiler-gcc", ["toolchain.cc", "no-such-compiler-gcc", "not found"]),
])
def test_a_target_that_cannot_build_a_network_is_one_line(tmp_path, key, value, words):
    """Checked when the build is declared, before any step: the file, the
    key and the value, not the compiler's or the shell's own output, nor a
    missing DMA engine for a wrong place.*."""
    import yaml

    with open(os.path.join(ROOT, "targets", "host.yaml"), encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if key.startswith("place."):
        data["place"][key[6:]] = value
    else:
        data["toolchain"][key] = value
    target = tmp_path / "tc.yaml"
    target.write_text(yaml.safe_dump(data))
    line = one_error(scons(f"target={target}", "model=tiny", out=tmp_path / "out"))
    assert str(target) in line, line
    for w in words:
        assert w in line, (w, line)
    assert not list((tmp_path / "out").rglob(".passed"))


# Every command-line variable with a value it cannot take: one line naming
# `name=value`, before anything is built (overlap=2 used to build with
# overlap on, silently). The variables other branches add (guard=, ram_cap=)
# are checked by config.cli as soon as SConstruct declares them.
CLI_VARIABLES = [
    (["overlap=2"], "overlap=2", "on/off"),
    (["overlap=off"], "overlap=off", "overlap=1 or overlap=0"),
    (["chw=maybe"], "chw=maybe", "chw=1 or chw=0"),
    (["fusion=bogus"], "fusion=bogus", "unknown fusion policy"),
    (["export=zip"], "export=zip", "unknown export kind"),
    (["bogus=1"], "unknown variable(s) bogus", "known:"),
    (["Target=host"], "unknown variable(s) Target", "known:"),
    (["target=nope"], "target=nope", "unknown target"),
    (["model=nope"], "model=nope", "unknown model"),
    (["model=/nowhere/m.yaml"], "model=/nowhere/m.yaml", "file not found"),
]


@pytest.mark.parametrize("args, where, words", CLI_VARIABLES, ids=[a[0] for a, _, _ in CLI_VARIABLES])
def test_a_command_line_variable_it_cannot_take_is_one_line(tmp_path, args, where, words):
    base = {"target": "target=host", "model": "model=tiny"}
    for a in args:
        base.pop(a.split("=")[0], None)
    line = one_error(scons(*base.values(), *args, out=tmp_path / "out"))
    assert where in line and words in line, line
    assert not list((tmp_path / "out").rglob(".passed")) and not list((tmp_path / "out").rglob("*.c"))


def test_flag_and_size_variables_are_checked_in_the_library():
    from tessera.config import check_arguments
    from tessera.errors import ConfigError
    for ok in ({"overlap": "0"}, {"overlap": "1"}, {"overlap": ""}, {"guard": "yes"}, {"ram_cap": "262144"}):
        check_arguments(ok)
    for bad, where in (({"overlap": "2"}, "overlap=2"), ({"guard": "maybe"}, "guard=maybe"),
                       ({"chw": "2"}, "chw=2"),
                       ({"ram_cap": "-3"}, "ram_cap=-3"), ({"ram_cap": "1e9"}, "ram_cap=1e9"),
                       ({"model": "a\nb"}, "model=...")):
        with pytest.raises(ConfigError) as info:
            check_arguments(bad)
        assert str(info.value).startswith(where), info.value
