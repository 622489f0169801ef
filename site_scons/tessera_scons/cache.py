"""cache=: SCons's CacheDir with every entry checked before it is used.

SCons names a cache entry by the build signature of the step that made it
and copies it back without looking at its bytes: an entry truncated by a
full disk, cut by a crash on a network share or edited by hand would
become a build's output, and everything after it would be built on it.
Here each entry has a sidecar `<entry>.sha256` (the digest of the file the
step made, written after the entry); an entry is used only when its bytes
have that digest. A damaged one is removed with one line and the step
runs; the fresh output is pushed again. An entry without a sidecar (being
pushed at this moment, or pushed by an older tessera) is not used."""

import os
import sys

from SCons.CacheDir import CacheDir

from tessera.util.canon import file_digest

SUFFIX = ".sha256"


def _read(path):
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(200).strip()
    except OSError:
        return None


class VerifiedCache(CacheDir):
    def retrieve(self, node):
        if not self.is_enabled():
            return False
        _, entry = self.cachepath(node)
        if entry is None or not os.path.isfile(entry) or os.path.islink(entry):
            return super().retrieve(node) if entry is not None and os.path.islink(entry) else False
        expected = _read(entry + SUFFIX)
        if expected is None:
            return False                       # not verifiable: build it
        try:
            ok = file_digest(entry) == expected
        except OSError:
            ok = False
        if not ok:
            for path in (entry, entry + SUFFIX):
                try:
                    os.remove(path)
                except OSError:
                    pass
            sys.stderr.write(f"tessera: warning: cache={self.path}: entry {os.path.basename(entry)} for "
                             f"{node.get_internal_path()} is damaged (its bytes are not the ones pushed): removed, "
                             f"the step runs again\n")
            return False
        return super().retrieve(node)

    def push(self, node):
        if self.is_readonly() or not self.is_enabled() or node.nocache:
            return None
        _, entry = self.cachepath(node)
        built = node.get_internal_path()
        if entry is None or os.path.islink(built) or not os.path.isfile(built):
            return super().push(node)
        digest = file_digest(built)
        if os.path.exists(entry) and not (_read(entry + SUFFIX) == digest == file_digest(entry)):
            # damaged (a step of several outputs runs again for one damaged
            # entry: the others are pushed here), unverifiable or stale
            os.remove(entry)
        result = super().push(node)
        if os.path.isfile(entry):
            tmp = f"{entry}{SUFFIX}.{os.getpid()}"
            try:
                with open(tmp, "w", encoding="ascii") as f:
                    f.write(digest + "\n")
                os.replace(tmp, entry + SUFFIX)
            except OSError:
                pass   # a cache that cannot take the digest is a cache miss next time, not an error
        return result
