"""A network's output folder before SCons touches it: writable, held by one
build at a time, and its signature database readable (SCons-specific: the
database is SCons's, and the lock must live as long as this SCons process)."""

import atexit
import fcntl
import os
import pickle
import sys
import tempfile

import SCons.SConsign
from SCons.Script import Exit, SConsignFile

from . import steps

_held = []   # (folder, descriptor) of the locked folders: the lock lasts until this process ends
FULL = 64 << 10   # free bytes below which a failed build's folder counts as on a full disk


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
    _held.append((net_dir, fd))
    signatures = os.path.join(net_dir, ".sconsign")
    _drop_if_damaged(signatures + ".dblite")
    SConsignFile(signatures)
    if SCons.SConsign.write is not _write_signatures:
        _scons_write.append(SCons.SConsign.write)
        SCons.SConsign.write = _write_signatures
        atexit.register(_explain)


_scons_write = []


def _write_signatures():
    """SCons saves the database when the build ends; on a full or read-only
    disk that raised a traceback (and again when Python exits). Instead:
    no database left, so that the next build checks every step against its
    files rather than trusting a database older than them, and one line
    when the process exits (_explain)."""
    try:
        _scons_write[0]()
    except OSError as err:
        import SCons.Script.Main as main

        for db in SCons.SConsign.DB_sync_list:
            db._needs_sync = False     # SCons would try again when Python exits
            for path in (db._file_name, db._tmp_name):
                if os.path.exists(path):
                    os.remove(path)
            _unsaved.append((db._file_name, err.strerror))
        main.exit_status = main.exit_status or 2


_unsaved = []   # (database, why) that could not be saved


def _explain():
    """A step that failed for want of space says so in its tool's words (an
    assembler's "can't write", a Python OSError): name the cause once, in
    one line, with the database that could not be saved."""
    from SCons.Script import GetBuildFailures

    failed = [os.path.abspath(str(f.node)) for f in GetBuildFailures()]
    for net_dir in sorted({path for path, _ in _held}):
        mine = sorted(p for p in failed if p.startswith(net_dir + os.sep))
        unsaved = [why for path, why in _unsaved if path.startswith(net_dir + os.sep)]
        if not (mine or unsaved) or set(mine) & steps.HOST_ERRORS:
            continue       # nothing failed, or a step's own line named the cause
        st = os.statvfs(os.path.dirname(net_dir) if not os.path.isdir(net_dir) else net_dir)
        free = st.f_bavail * st.f_frsize
        if free < FULL:
            what = os.path.relpath(mine[0], net_dir) if mine else "the signature database"
            sys.stderr.write(f"tessera: error: {net_dir}: the disk is full ({free} bytes free) while making "
                             f"{what} (free space there, or give out= on another disk; the next build makes "
                             f"what is missing)\n")
        elif unsaved:
            sys.stderr.write(f"tessera: error: {net_dir}: cannot save the build's signatures: {unsaved[0]} "
                             f"(make it writable; the next build runs every step again)\n")


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
