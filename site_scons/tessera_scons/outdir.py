"""A network's output folder before SCons touches it: writable, held by one
build at a time, and its signature database readable (SCons-specific: the
database is SCons's, and the lock must live as long as this SCons process)."""

import fcntl
import os
import pickle
import sys
import tempfile

from SCons.Script import Exit, SConsignFile

_held = []   # the locked folders' descriptors: the lock lasts until this process ends


def claim(net_dir):
    """Make net_dir, check it can be written, lock it (flock on the folder
    itself, so no lock file is left behind) and point SCons's signature
    database there. One line and exit 2 when it cannot be written or
    another build holds it: two builds writing one tree would mix their
    outputs and signatures."""
    try:
        os.makedirs(net_dir, exist_ok=True)
        with tempfile.TemporaryFile(dir=net_dir):
            pass
        fd = os.open(net_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as err:
        _stop(f"{net_dir}: cannot write the build folder: {err.strerror} (give a writable out=, or make it "
              f"writable)")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        _stop(f"{net_dir}: another build is writing this folder now (wait for it to end, or give this one "
              f"another out=)")
    _held.append(fd)
    signatures = os.path.join(net_dir, ".sconsign")
    _drop_if_damaged(signatures + ".dblite")
    SConsignFile(signatures)


def _drop_if_damaged(path):
    """SCons reads a damaged database as empty, but says so in a warning
    with a Python stack line, and some damage (a byte flipped inside a
    pickle) raises an error SCons does not catch. Read it as SCons will
    (the file, then each folder's entries); when that fails, remove it with
    one line: every step is then checked against its files' contents."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return
    try:
        entries = pickle.loads(data, encoding="bytes") if data else {}
        if not isinstance(entries, dict):
            raise TypeError(type(entries).__name__)
        for raw in entries.values():
            if not isinstance(pickle.loads(raw), dict):
                raise TypeError("an entry is not a dict")
    except Exception:   # any damage: the file is SCons's cache of signatures, not an input
        os.remove(path)
        sys.stderr.write(f"tessera: warning: {path}: damaged signature database, removed (every step "
                         f"runs again)\n")


def _stop(message):
    sys.stderr.write(f"tessera: error: {message}\n")
    Exit(2)
