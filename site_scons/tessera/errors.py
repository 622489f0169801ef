"""User-facing errors: one line naming the file, the thing and the fix.

Every mistake a user can make (bad YAML, unsupported ONNX, a model that does
not fit) raises a TesseraError. The command-line and SCons entry points print
`str(err)` and exit non-zero; they never show a traceback for these.
"""

import errno


# a message is one line and bounded (a value quoted from a huge input must
# not make a megabyte-long line), but long enough that real ones are whole:
# only the middle of `what` is ever cut, never the place or the fix
MAX_MESSAGE = 4000


class TesseraError(Exception):
    """A problem the user can fix.

    where: the file (or layer, or level) the problem is in.
    what:  what is wrong.
    fix:   what to change (optional but expected).
    """

    def __init__(self, where, what, fix=None):
        self.where = str(where) if where is not None else None
        self.what = what
        self.fix = fix
        super().__init__(self.message())

    def message(self):
        def one_line(s, limit):
            s = " ".join(str(s).split())
            if len(s) <= limit:
                return s
            half = max(limit - 7, 0) // 2
            return f"{s[:half]} [...] {s[len(s) - half:]}" if half else s[:limit]
        where = one_line(self.where, 500) + ": " if self.where else ""
        fix = f" ({one_line(self.fix, 1500)})" if self.fix else ""
        return where + one_line(self.what, MAX_MESSAGE - len(where) - len(fix)) + fix


class ConfigError(TesseraError):
    """Malformed target or model YAML."""


class FrontendError(TesseraError):
    """An ONNX graph tessera cannot lower."""


class FitError(TesseraError):
    """A layer or a memory level that cannot hold what it must."""


class ToolchainError(TesseraError):
    """A compiler, emulator or simulator that is missing or failed."""


class RunError(TesseraError):
    """Firmware that faulted, hung or printed something unexpected."""


class HostError(TesseraError):
    """The machine refused: a full disk, a read-only or unreadable place."""


_OS_FIXES = {errno.ENOSPC: "free space on that disk, or give out= on another disk",
             errno.EDQUOT: "free space within your quota, or give out= on another disk",
             errno.EROFS: "give a writable out=",
             errno.EACCES: "give yourself access to it (chmod), or build as its owner",
             errno.EPERM: "give yourself access to it (chmod), or build as its owner"}


def from_os_error(err, where):
    """An OSError the build met (not the user's input being wrong, but the
    machine refusing) as one line: the file, the system's words, the fix."""
    return HostError(err.filename or where, err.strerror or str(err),
                     _OS_FIXES.get(err.errno, "check the disk and the permissions there"))
