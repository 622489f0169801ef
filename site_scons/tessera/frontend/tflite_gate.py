"""The validity gate for .tflite files, as frontend.gate is for ONNX: a
model the TFLite interpreter itself refuses (a flatbuffer its verifier
rejects, a tensor index or buffer out of range, shapes its kernels'
Prepare steps refuse) is not a network tessera should build and call
passing. The interpreter (ai-edge-litert, with the reference kernels
golden.tflitecheck compares against) loads the model, allocates its
tensors and runs it once on zeros.

A flatbuffer the verifier rejects is never handed to the Python reader
(frontend.tflite): its offsets and vector lengths are then arbitrary, and
a loop over a garbage length could run for billions of steps."""

import json
import os

import numpy as np

from ..errors import FrontendError

FIX = "give a .tflite file the TFLite interpreter runs (re-convert the model)"


def _first_line(err):
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


def check_identifier(path):
    """One line for a file that is no TFLite flatbuffer at all."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as err:
        raise FrontendError(path, f"cannot read ({err.strerror})") from None
    if len(head) < 8 or head[4:8] != b"TFL3":
        raise FrontendError(path, "not a TFLite flatbuffer (no TFL3 identifier)",
                            "give a .tflite file written by TensorFlow's converter")


def interpreter_refusal(path):
    """(error, structural): a FrontendError when the interpreter refuses the
    model, structural when it could not even read the flatbuffer (then
    nothing else may read it either); (None, False) when it runs it.

    The interpreter runs in a forked child: on some damaged models (a
    quantization whose scale and zero-point vectors differ in length) it
    aborts the process instead of raising, which must not take the build
    (or SConstruct's reading) down with a core dump and no message."""
    try:
        import ai_edge_litert.interpreter  # noqa: F401  (imported before the fork, once)
    except ImportError:
        raise FrontendError(path, "the TFLite interpreter (ai-edge-litert) is not installed",
                            "run ./scons (it installs requirements.txt)") from None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: report, then leave without running any cleanup of the parent's
        code = 0
        try:
            os.close(read)
            import faulthandler
            faulthandler.disable()   # its dump of an abort would reach the parent's stderr
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)   # the interpreter's own abort message
            _verdict(path, lambda line: os.write(write, (json.dumps(line) + "\n").encode()))
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        lines = [json.loads(line) for line in f.read().decode().splitlines() if line.strip()]
    _, status = os.waitpid(pid, 0)
    loaded = any(line.get("loaded") for line in lines)
    final = next((line for line in lines if "error" in line), None)
    if final is None:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        how = f"signal {sig}" if sig else f"exit status {os.WEXITSTATUS(status)}"
        return FrontendError(path, f"the TFLite interpreter crashed on the model ({how})", FIX), not loaded
    if final["error"] is None:
        return None, False
    return FrontendError(path, final["error"], FIX), final["structural"]


def _verdict(path, say):
    """In the child: load, allocate, run on zeros, compare shapes; say()
    {"loaded": True} once the flatbuffer is read, then the verdict."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from ..golden.tflitecheck import RESOLVER
    from ..golden.tflite_repair import repair
    try:
        interp = Interpreter(model_content=repair(path)[0],
                             experimental_op_resolver_type=getattr(OpResolverType, RESOLVER))
    except Exception as err:
        say({"error": f"the TFLite interpreter cannot read the model: {_first_line(err)}", "structural": True})
        return
    say({"loaded": True})
    try:
        # sizes as stored, then as the kernels compute them, and the stored
        # shapes against the computed ones: all before the run, which would
        # otherwise compute a memory bomb's tensors in full
        error = _too_big(interp, "stores")
        if not error:
            interp.allocate_tensors()
            error = _too_big(interp, "computes") or _names_not_text(path) or _shape_disagreement(interp, path)
        if error:
            say({"error": error, "structural": False})
            return
        for d in interp.get_input_details():
            interp.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        interp.invoke()
    except Exception as err:
        say({"error": f"the TFLite interpreter refuses the model: {_first_line(err)}", "structural": False})
        return
    say({"error": None, "structural": False})


def _too_big(interp, how):
    """A tensor, or all of them, past any target's 32-bit address space
    (frontend.gate.check_sizes for ONNX)."""
    from ..config.target import ADDRESS_SPACE
    total = 0
    for d in interp.get_tensor_details():
        size = int(np.prod([int(x) for x in d["shape"]], dtype=object)) * np.dtype(d["dtype"]).itemsize
        total += size
        if size > ADDRESS_SPACE:
            return (f"tensor {d['index']} ({d['name'][:60]!r}): the model {how} shape {[int(x) for x in d['shape']]} "
                    f"({size} bytes), more than any target's {ADDRESS_SPACE >> 30} GiB address space")
    if total > ADDRESS_SPACE:
        return f"the model {how} {total} bytes of tensors in all, more than any target's {ADDRESS_SPACE >> 30} GiB address space"
    return None


def _names_not_text(path):
    """A tensor name that is not UTF-8 (the interpreter's Python side cannot
    decode it when the golden model is compared with it)."""
    import tflite
    with open(path, "rb") as f:
        sg = tflite.Model.GetRootAsModel(f.read(), 0).Subgraphs(0)
    for i in range(sg.TensorsLength()):
        name = sg.Tensors(i).Name() or b""
        try:
            name.decode("utf-8")
        except UnicodeDecodeError:
            return f"tensor {i}: its name {name[:40]!r} is not UTF-8 text"
    return None


def _shape_disagreement(interp, path):
    """The interpreter computes every tensor's shape from its inputs (each
    kernel's Prepare); the parser reads the shapes the flatbuffer stores.
    A stored shape the interpreter does not compute is a damaged or
    hand-edited model: one line, rather than a network of the wrong size."""
    import tflite
    with open(path, "rb") as f:
        sg = tflite.Model.GetRootAsModel(f.read(), 0).Subgraphs(0)
    for d in interp.get_tensor_details():
        i = int(d["index"])
        if i >= sg.TensorsLength():
            continue   # the interpreter's own scratch tensors
        t = sg.Tensors(i)
        stored = [int(x) for x in t.ShapeAsNumpy()] if t.ShapeLength() else []
        if stored != [int(x) for x in d["shape"]]:
            return (f"tensor {i} ({d['name'][:60]!r}): the flatbuffer says shape {stored[:8]}, "
                    f"the interpreter computes {[int(x) for x in d['shape']]}")
    return None
