"""Hostile environments (issue 35): a full disk, a read-only out=, an
unreadable input, two builds into one out=, the emulator killed mid-run,
damaged entries in a shared cache=, a damaged signature database, an
interrupted export, a hung toolchain. Each ends in one line and a non-zero
exit (or, for what can be repaired, one warning and a correct build), and
the next build's tree equals a clean build's byte for byte.

The full-disk and read-only cases need a small file system of their own:
a tmpfs mounted for the test (root only; skipped elsewhere). Missing
permissions need a user the file modes stop: root runs the build without
CAP_DAC_OVERRIDE (setpriv)."""

import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from helpers import MODEL_CACHE, ROOT, build_tree, one_error, scons, step_lines

ROOT_USER = os.geteuid() == 0
TINY = ("target=host", "model=tiny")


def _mount(path, size):
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def _remount(path, opts):
    subprocess.run(["mount", "-o", f"remount,{opts}", str(path)], check=True, capture_output=True)


def _clear(path):
    for name in os.listdir(path):
        p = os.path.join(path, name)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)


@pytest.fixture(scope="module")
def disk(tmp_path_factory):
    """(a tmpfs of its own, the tree and the bytes of a clean host/tiny build in it)."""
    path = tmp_path_factory.mktemp("disk") / "out"
    path.mkdir()
    if not ROOT_USER or not _mount(path, "64m"):
        pytest.skip("needs root and tmpfs mounts (a small file system of its own)")
    try:
        scons(*TINY, out=path, check=True)
        st = os.statvfs(path)
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        yield path, build_tree(path), used
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _build_under(path, opts, after):
    """host/tiny built into the tmpfs at path remounted with opts, then
    remounted with `after` whatever happened."""
    _remount(path, opts)
    try:
        return scons(*TINY, out=path)
    finally:
        _remount(path, after)


@pytest.mark.parametrize("part", [0.02, 0.12, 0.35])   # the model stage, tiling, compiling
def test_full_disk_is_one_line_and_the_next_build_equals_a_clean_one(disk, part):
    path, clean, used = disk
    _clear(path)
    line = one_error(_build_under(path, f"size={max(4096, int(used * part) // 4096 * 4096)}", "size=64m"))
    assert "No space left on device" in line or "the disk is full" in line, line
    assert "give out= on another disk" in line, line
    assert not (path / "host" / "tiny" / ".passed").exists()
    scons(*TINY, out=path, check=True)
    assert build_tree(path) == clean


def test_read_only_out_is_one_line_and_changes_nothing(disk):
    path, clean, _ = disk
    _clear(path)
    scons(*TINY, out=path, check=True)
    line = one_error(_build_under(path, "ro", "rw"))
    assert "Read-only file system" in line and "give a writable out=" in line, line
    again = scons(*TINY, out=path, check=True)
    assert step_lines(again.stdout) == []       # the tree and its signatures were left whole
    assert build_tree(path) == clean


def _unprivileged():
    """A command prefix under which file modes apply (root without
    CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH)."""
    if not ROOT_USER:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("root without setpriv: file modes do not stop root")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory):
    scons(*TINY, out=tmp_path_factory.mktemp("first"), check=True)     # the tiny ONNX in the model cache
    return sorted(glob.glob(os.path.join(MODEL_CACHE, "tiny-*.onnx")), key=os.path.getmtime)[-1]


@pytest.mark.parametrize("what", ["model YAML", "target YAML", "ONNX file", "out folder"])
def test_an_unreadable_input_or_unwritable_out_is_one_line(tmp_path, tiny_onnx, what):
    shutil.copy(tiny_onnx, tmp_path / "net.onnx")
    (tmp_path / "net.yaml").write_text("description: tiny\nonnx: net.onnx\ninput: {seed: 0}\n")
    shutil.copy(os.path.join(ROOT, "targets", "host.yaml"), tmp_path / "mine.yaml")
    out = tmp_path / "out"
    out.mkdir()
    locked = {"model YAML": tmp_path / "net.yaml", "target YAML": tmp_path / "mine.yaml",
              "ONNX file": tmp_path / "net.onnx", "out folder": out}[what]
    args = [f"target={tmp_path / 'mine.yaml'}", f"model={tmp_path / 'net.yaml'}", f"out={out}"]
    cmd = _unprivileged() + [sys.executable, "-m", "SCons", "-C", ROOT, *args]
    env = dict(os.environ, TESSERA_MODEL_CACHE=MODEL_CACHE)
    os.chmod(locked, 0o555 if what == "out folder" else 0)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    finally:
        os.chmod(locked, 0o755 if what == "out folder" else 0o644)
    line = one_error(res)
    assert "Permission denied" in line and str(locked) in line, line
    assert not (out / "mine" / "net" / ".passed").exists()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (out / "mine" / "net" / ".passed").exists()


def _start(cmd_args, out, **kw):
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, f"out={out}", *cmd_args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TESSERA_MODEL_CACHE=MODEL_CACHE, PYTHONUNBUFFERED="1"), **kw)


def test_a_second_build_into_the_same_out_is_refused(tmp_path):
    out = tmp_path / "out"
    first = _start(TINY, out)
    for line in first.stdout:        # the first holds the folder from before its model stage
        if line.startswith("tessera: "):
            break
    second = scons(*TINY, out=out)
    stdout, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    assert "another build is writing this folder" in one_error(second)
    assert (out / "host" / "tiny" / ".passed").exists()    # the refused build took nothing from the first
    again = scons(*TINY, out=out, check=True)
    assert step_lines(again.stdout) == []


def _descendants(pid):
    children = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
    found, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def _named(pids, prefix):
    for p in pids:
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().startswith(prefix):
                    return p
        except OSError:
            pass
    return None


@pytest.mark.parametrize("target,program", [("stm32h7", "qemu-system-arm"), ("pulp_open", "gvsoc")])
def test_the_emulator_killed_mid_run_is_one_line_and_no_success(tmp_path, target, program):
    if not shutil.which(program):
        pytest.skip(f"{program} not installed")
    out = tmp_path / "out"
    args = (f"target={target}", "model=tiny")
    scons(*args, out=out, check=True)
    clean = build_tree(out)
    shutil.rmtree(out)
    proc = _start(args, out)
    for line in proc.stdout:
        if line.startswith("tessera: run "):
            break
    deadline, qemu = time.monotonic() + 60, None
    while qemu is None and time.monotonic() < deadline and proc.poll() is None:
        qemu = _named(_descendants(proc.pid), program[:15])     # /proc's comm: 15 characters
    assert qemu is not None, "the run ended before its emulator could be killed"
    os.kill(qemu, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=600)
    res = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    line = one_error(res)
    assert "killed by SIGKILL from outside" in line and "run of " in line, line
    netdir = out / target / "tiny"
    for name in (".passed", "run.log", "verdict.json", "report.json"):
        assert not (netdir / name).exists(), name
    scons(*args, out=out, check=True)
    assert build_tree(out) == clean


def _damage_entries(cache):
    entries = sorted(p for p in glob.glob(os.path.join(cache, "*", "*")) if not p.endswith(".sha256"))
    for i, p in enumerate(entries):
        with open(p, "rb") as f:
            data = bytearray(f.read())
        if i % 2 and data:
            data[len(data) // 2] ^= 0x01     # one bit: same size, same time of day
        else:
            data = data[: len(data) // 2]    # truncated, as by a full disk or a crash
        with open(p, "wb") as f:
            f.write(data)
    return len(entries)


def test_damaged_cache_entries_are_detected_and_rebuilt(tmp_path):
    out, cache = tmp_path / "out", tmp_path / "cache"
    scons(*TINY, f"cache={cache}", out=out, check=True)
    clean = build_tree(out)
    shutil.rmtree(out)
    assert _damage_entries(cache) > 20
    res = scons(*TINY, f"cache={cache}", out=out, check=True)
    warned = [l for l in res.stderr.splitlines() if l.startswith("tessera: ")]
    assert warned and all(" is damaged (its bytes are not the ones pushed): removed" in l for l in warned), res.stderr
    assert "Traceback" not in res.stderr
    assert build_tree(out) == clean
    # the rebuilt entries were pushed again, whole: the next build takes them
    shutil.rmtree(out)
    res = scons(*TINY, f"cache={cache}", out=out, check=True)
    assert "damaged" not in res.stderr and "Retrieved" in res.stdout
    assert build_tree(out) == clean


def test_a_damaged_signature_database_is_one_warning_line(tmp_path):
    out = tmp_path / "out"
    scons(*TINY, out=out, check=True)
    clean = build_tree(out)
    db = out / "host" / "tiny" / ".sconsign.dblite"
    for damage in ("truncated", "garbage", "flipped"):
        data = bytearray(db.read_bytes())
        if damage == "truncated":
            data = data[: len(data) // 2]
        elif damage == "garbage":
            data = bytearray(b"\x80\x05not a pickle" * 10)
        else:
            for i in range(7, len(data), 997):
                data[i] ^= 0xFF
        db.write_bytes(bytes(data))
        res = scons(*TINY, out=out, check=True)
        lines = [l for l in res.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and lines[0].startswith("tessera: warning: ") and "signature database" in lines[0], \
            (damage, res.stderr)
        assert build_tree(out) == clean, damage


def test_an_interrupted_export_then_the_next_equals_a_clean_one(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "tessera", "build", "--target", "host", "--model", "tiny", "--out", str(out),
           "--export-only"]
    env = dict(os.environ, TESSERA_MODEL_CACHE=MODEL_CACHE, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.path.join(ROOT, "site_scons"))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr
    clean = build_tree(out)
    assert any(p.startswith(os.path.join("host", "tiny", "export")) for p in clean)
    shutil.rmtree(out)
    # Ctrl-C as a terminal sends it: to the whole process group (tessera and SCons)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("tessera: export "):
            os.killpg(proc.pid, signal.SIGINT)
            break
    text = "".join(seen) + proc.communicate(timeout=600)[0]
    assert proc.returncode != 0, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr
    assert build_tree(out) == clean


def test_a_hung_toolchain_ends_in_one_line(tmp_path):
    """The bound on every compiler, archiver and linker command, shown with a
    bound no real compile meets (a millisecond)."""
    out = tmp_path / "out"
    res = scons(*TINY, out=out, env={"TESSERA_TOOL_TIMEOUT": "0.001"})
    line = one_error(res)
    assert "gave no result within 0.001 s" in line and ".o:" in line, line
    assert not (out / "host" / "tiny" / ".passed").exists()
    scons(*TINY, out=out, check=True)
    assert (out / "host" / "tiny" / ".passed").exists()
