"""User-facing errors: one line naming the file, the thing and the fix.

Every mistake a user can make (bad YAML, unsupported ONNX, a model that does
not fit) raises a TesseraError. The command-line and SCons entry points print
`str(err)` and exit non-zero; they never show a traceback for these.
"""


MAX_MESSAGE = 480


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
        text = f"{self.where}: {self.what}" if self.where else self.what
        if self.fix:
            text += f" ({self.fix})"
        # one line, always, and bounded: a value quoted from a huge input
        # must not make a megabyte-long message
        text = " ".join(text.split())
        if len(text) > MAX_MESSAGE:
            text = text[:MAX_MESSAGE - 6] + " [...]"
        return text


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
