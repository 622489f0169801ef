"""Recurrent layers that TFLite's converter unrolled into plain ops (a Keras
LSTM without the fused kernel: per time step FULLY_CONNECTED, ADD,
SPLIT, LOGISTIC, TANH, MUL), recognised and imported as one IR `lstm`
layer of cell "ops" (golden.recurrent.ops_cell), exactly.

Recognition, from the sequence up:
- the steps' inputs x_t are the outputs of an UNPACK of the sequence
  (through a TRANSPOSE or RESHAPE that keeps the values in order, batch 1);
- step t's ops are those reachable from x_t but not from x_{t+1}; step 1's,
  in a canonical order (ready ops sorted by type and by what they read),
  are the body, and every other step must match it op for op: the same op
  types reading the same constants, x_t, the step's own results, or the
  previous step's (the states). Step 0 reads constants or ops outside the
  loop where the others read the previous step (the initial states, whose
  values are computed here: FILL, and the ops the parser imports, run on
  the golden model); the last step may lack the ops that only feed the
  next step;
- SPLIT is a view: its outputs are slices of its input.
Each body op is imported by the ordinary operator handlers (TfliteParser)
for every step, so each keeps TFLite's arithmetic exactly as imported alone
(checked against the interpreter operator by operator); the steps differ
only in their quantization parameters, which become per-step parameters.
Weights, biases and constant operands are shared by the steps: one copy
each in the layer's packed constants. The loop's ops (and the shape
arithmetic and FILL computing its initial state) are consumed; the layer's
output is what leaves the loop: the last step's hidden state.
"""

import hashlib

import numpy as np

from ..errors import FrontendError
from ..ir import Layer

BODY_OPS = ("FULLY_CONNECTED", "ADD", "MUL", "LOGISTIC", "TANH", "SPLIT")
SHAPE_OPS = ("SHAPE", "STRIDED_SLICE", "PACK", "FILL")


class _NoLoop(Exception):
    """Not an unrolled recurrence tessera recognises (a one-line reason)."""


def _scratch(p):
    """A parser sharing p's model, with a builder of its own: the ordinary
    handlers import one op into it."""
    from .builder import Builder

    q = type(p).__new__(type(p))
    q.__dict__.update(p.__dict__)
    q.b = Builder(p.b.name, "tflite", p.path)
    q.alias, q.views, q.pad_of = {}, {}, {}
    # an ADD or MUL of a constant (a step's bias) stays the op itself, its
    # constant one operand of the layer: the parser's table of it would be a
    # table per channel and per step
    q._constant_operand = lambda ins: None
    return q


class _Graph:
    def __init__(self, p):
        m = p.m
        self.p, self.m = p, m
        self.ops = []
        self.producer = {}
        for i in range(m.sg.OperatorsLength()):
            op = m.sg.Operators(i)
            ins = [int(t) for t in op.InputsAsNumpy()]
            outs = [int(t) for t in op.OutputsAsNumpy()]
            self.ops.append((m.opcode(op), ins, outs, op))
            for t in outs:
                self.producer[t] = i
        self.consumers = {t: list(c) for t, c in p.consumers.items()}

    def closure(self, tensors):
        seen, todo = set(), [c for t in tensors for c in self.consumers.get(t, [])]
        while todo:
            o = todo.pop()
            if o in seen:
                continue
            seen.add(o)
            todo += [c for t in self.ops[o][2] for c in self.consumers.get(t, [])]
        return seen


def _sequence_inputs(g, u):
    """(sequence tensor, [x_t]) of UNPACK op u, or _NoLoop."""
    m = g.m
    _, ins, outs, op = g.ops[u]
    src = ins[0]
    shape = m.shape(src)
    # back through views that keep the values in order: a TRANSPOSE moving
    # only size-1 axes, a RESHAPE
    while src in g.producer:
        name, pins, _, _ = g.ops[g.producer[src]]
        if name == "RESHAPE":
            src = pins[0]
        elif name == "TRANSPOSE":
            perm = m.data(pins[1])
            before = m.shape(pins[0])
            if perm is None or [before[k] for k in perm.reshape(-1) if before[k] != 1] != [d for d in before if d != 1]:
                raise _NoLoop("a TRANSPOSE that reorders the sequence")
            src = pins[0]
        else:
            break
    n = int(np.prod(shape))
    if len(outs) < 3 or n % len(outs) or int(np.prod(m.shape(outs[0]))) * len(outs) != n:
        raise _NoLoop("an UNPACK that is not a sequence of at least three steps")
    return src, outs


def _canonical(g, ops, describe):
    """ops (a step's) in a canonical topological order: among the ready
    ones, by type and by what their inputs are (`describe`)."""
    produced = {t: o for o in ops for t in g.ops[o][2]}
    order, placed, pos = [], set(), {}
    while len(order) < len(ops):
        ready = [o for o in ops if o not in placed and all(t not in produced or produced[t] in placed
                                                           for t in g.ops[o][1])]
        if not ready:
            raise _NoLoop("a cycle inside a step")
        keyed = sorted((g.ops[o][0], tuple(describe(t, pos) for t in g.ops[o][1]), o) for o in ready)
        for name, desc, o in keyed:
            pos[o] = len(order)
            order.append(o)
            placed.add(o)
    return order


def recognise(p):
    """[(first op index to emit at, consumed op indices, emit function)] for
    every unrolled recurrence in the model; [] when there is none."""
    g = _Graph(p)
    found = []
    for u, (name, _, _, _) in enumerate(g.ops):
        if name != "UNPACK":
            continue
        try:
            found.append(_loop(p, g, u))
        except (_NoLoop, FrontendError, KeyError, IndexError, ValueError, TypeError):
            # not a recurrence tessera recognises (or a damaged model): the
            # operator handlers take the UNPACK and what follows, and say why not
            continue
    return found


def _loop(p, g, u):
    m = g.m
    seq, xs = _sequence_inputs(g, u)
    T = len(xs)
    closures = [g.closure([x]) for x in xs]
    steps = [closures[t] - closures[t + 1] for t in range(T - 1)]
    steps.append(set(closures[T - 1]))
    for t, ops in enumerate(steps):
        bad = [g.ops[o][0] for o in ops if g.ops[o][0] not in BODY_OPS]
        if bad and t < T - 1:
            raise _NoLoop(f"step {t} has a {bad[0]}")

    def describe_for(t):
        own = steps[t]
        prev = steps[t - 1] if t else set()

        def describe(tensor, pos):
            if tensor < 0:
                return ("none", tensor)
            if tensor == xs[t]:
                return ("x",)
            o = g.producer.get(tensor)
            if o in own:
                return ("op", pos.get(o, -1), g.ops[o][2].index(tensor))
            if o in prev:
                if o in order_of.get(t - 1, {}):
                    return ("prev", order_of[t - 1][o], g.ops[o][2].index(tensor))
                return ("prev?", g.ops[o][0], g.ops[o][2].index(tensor))
            if m.data(tensor) is not None:
                return ("const", tensor)
            return ("outside", tensor)
        return describe

    order_of = {}
    # step 1 is the template (steps 0 and T - 1 read or write outside the loop)
    order_of[0] = {}
    template = _canonical(g, sorted(steps[1]), describe_for(1))
    tdesc = {}
    pos1 = {o: k for k, o in enumerate(template)}
    for k, o in enumerate(template):
        tdesc[k] = [describe_for(1)(t, pos1) for t in g.ops[o][1]]
    # step 0's order: the same positions, matched op by op
    match = {1: template}
    match[0] = _match(g, steps[0], template, tdesc, xs[0], None, allow_missing=False)
    order_of[0] = {o: k for k, o in enumerate(match[0]) if o is not None}
    # re-describe step 1 with step 0 known (its "prev" reads)
    tdesc = {k: [describe_for(1)(t, pos1) for t in g.ops[o][1]] for k, o in enumerate(template)}
    order_of[1] = pos1
    for t in range(2, T):
        match[t] = _match(g, steps[t], template, tdesc, xs[t], match[t - 1], allow_missing=t == T - 1)
        order_of[t] = {o: k for k, o in enumerate(match[t]) if o is not None}
    leftover = steps[T - 1] - set(o for o in match[T - 1] if o is not None)
    return _build(p, g, seq, xs, template, tdesc, match, leftover)


def _match(g, ops, template, tdesc, x, prev_match, allow_missing):
    """Step's ops in template order (None where the last step lacks one)."""
    m = g.m
    left = set(ops)
    got = []
    out_of = {}
    for k, o_t in enumerate(template):
        name = g.ops[o_t][0]
        want = tdesc[k]
        cands = []
        for o in sorted(left):
            if g.ops[o][0] != name or len(g.ops[o][1]) != len(want):
                continue
            ok = True
            for t, d in zip(g.ops[o][1], want):
                if d[0] == "none":
                    ok = t < 0
                elif d[0] == "x":
                    ok = t == x
                elif d[0] == "op":
                    ok = out_of.get((d[1], d[2])) == t
                elif d[0] in ("prev", "prev?"):
                    if prev_match is None:       # step 0: anything from outside the loop
                        ok = g.producer.get(t) not in ops and t != x
                    else:
                        src = prev_match[d[1]]
                        ok = src is not None and g.ops[src][2][d[2]] == t
                elif d[0] == "const":
                    ok = t == d[1]
                else:
                    ok = t == d[1]
                if not ok:
                    break
            if ok:
                cands.append(o)
        if len(cands) != 1:
            if not cands and allow_missing:
                got.append(None)
                continue
            raise _NoLoop(f"{len(cands)} candidates for a {name} of the step")
        o = cands[0]
        left.discard(o)
        got.append(o)
        for j, t in enumerate(g.ops[o][2]):
            out_of[(k, j)] = t
    if left and not allow_missing:
        raise _NoLoop(f"{len(left)} ops of a step outside the pattern")
    return got


def _digest(arr):
    return hashlib.sha256(str(arr.dtype).encode() + arr.tobytes()).hexdigest()[:12]


def _build(p, g, seq, xs, template, tdesc, match, leftover):
    """The layer's rnn and arrays, the consumed ops and the emit function."""
    m = g.m
    T = len(xs)
    arrays, by_digest = {}, {}

    def keep(prefix, arr):
        arr = np.ascontiguousarray(arr)
        d = _digest(arr)
        if d not in by_digest:
            by_digest[d] = f"{prefix}{len(by_digest)}"
            arrays[by_digest[d]] = arr
        return by_digest[d]

    tables, table_ids = [], {}

    def table_id(table):
        key = tuple(table)
        if key not in table_ids:
            table_ids[key] = len(tables)
            tables.append(list(table))
        return table_ids[key]

    # vectors: op k's output j is "v<k>_<j>"; SPLIT outputs are slices of its input
    ref_of = {}       # (k, j) -> ref
    states = {}       # (k, j) -> state name
    body = []
    for k, o in enumerate(template):
        name = g.ops[o][0]
        if name == "SPLIT":
            src = tdesc[k][1]
            base = _ref(src, ref_of, states, keep, m, None)
            n = int(np.prod(m.shape(g.ops[o][2][0])))
            for j in range(len(g.ops[o][2])):
                ref_of[(k, j)] = dict(base, at=base.get("at", 0) + j * n)
            continue
        ref_of[(k, 0)] = {"v": f"v{k}"}
    # the states: "prev" reads; their sizes and initial values (step 0's tensors)
    init = {}
    for k, o in enumerate(template):
        for idx, d in enumerate(tdesc[k]):
            if d[0] != "prev":
                continue
            key = (d[1], d[2])
            base = key
            if g.ops[template[d[1]]][0] == "SPLIT":
                raise _NoLoop("a state read through a SPLIT")
            states.setdefault(base, f"s{d[1]}_{d[2]}")
            t0 = g.ops[match[0][k]][1][idx]
            init.setdefault(base, t0)
    rnn_states = []
    init_values = _initial_values(p, g, init)
    for key, sname in sorted(states.items(), key=lambda kv: kv[1]):
        v = init_values[key]
        if np.any(v != v.reshape(-1)[0]):
            raise _NoLoop("an initial state that is not one value")
        rnn_states.append({"name": sname, "size": int(v.size), "init": int(v.reshape(-1)[0])})
    # body ops, per step imported by the ordinary handlers
    scratch = _scratch(p)
    for k, o in enumerate(template):
        name = g.ops[o][0]
        if name == "SPLIT":
            continue
        per_step, shared = [], None
        for t in range(T):
            ot = match[t][k] if match[t][k] is not None else match[t - 1][k]
            layer, weights = _import_one(scratch, g, ot)
            step, fixed = _params(layer, weights, keep, table_id)
            if shared is None:
                shared = fixed
            elif shared != fixed:
                raise _NoLoop(f"a {name} whose constants change from step to step")
            per_step.append(step)
        ins = [_ref(d, ref_of, states, keep, m, g) for d in tdesc[k]]
        if name == "FULLY_CONNECTED":
            ins = ins[:1]
        elif name in ("ADD", "MUL"):
            ins = ins[:2]
        else:
            ins = ins[:1]
        op = dict(shared, out=f"v{k}", **{"in": ins})
        op["steps"] = per_step
        # the TFLite tensor each step's result is (tflitecheck compares them all; -1: not computed)
        op["tensors"] = [g.ops[match[t][k]][2][0] if match[t][k] is not None else -1 for t in range(T)]
        body.append(op)
    # what leaves the loop: the last step's tensors read outside it
    inside = set(o for t in range(T) for o in match[t] if o is not None)
    last = [t_ for o in match[T - 1] if o is not None for t_ in g.ops[o][2]]
    leaving = [t_ for t_ in last if any(c not in inside for c in g.consumers.get(t_, [])) or t_ in p.graph_outputs]
    if len(leaving) != 1:
        raise _NoLoop(f"{len(leaving)} tensors leave the loop (one hidden state expected)")
    out_t = leaving[0]
    k_out = next(k for k, o in enumerate(match[T - 1]) if o is not None and out_t in g.ops[o][2])
    emit = ref_of[(k_out, g.ops[match[T - 1][k_out]][2].index(out_t))]
    if "at" in emit:
        raise _NoLoop("a sliced output")
    nxt = {}
    for (kk, j), sname in states.items():
        nxt[sname] = ref_of[(kk, j)]["v"]
    consumed = inside | _prologue(g, inside, seq)
    return {"seq": seq, "out": out_t, "steps": T, "n_input": int(np.prod(m.shape(xs[0]))),
            "states": rnn_states, "body": body, "next": nxt, "emit": emit["v"], "tables": tables,
            "arrays": arrays, "consumed": consumed, "first": min(consumed)}


def _ref(d, ref_of, states, keep, m, g):
    if d[0] == "none":
        return None
    if d[0] == "x":
        return {"v": "x"}
    if d[0] == "op":
        return dict(ref_of[(d[1], d[2])])
    if d[0] == "prev":
        return {"v": states[(d[1], d[2])]}
    if d[0] == "const":
        if g is None:
            raise _NoLoop("a SPLIT of a constant")
        return {"const": keep("k", np.asarray(m.data(d[1])).reshape(-1))}
    raise _NoLoop(f"a step reading a tensor from outside the loop ({d})")


def _import_one(scratch, g, o):
    """Import op o alone into the scratch parser: (its IR layer, weights)."""
    name, ins, outs, op = g.ops[o]
    scratch.b.layers.clear()
    scratch.b.weights.clear()
    scratch.alias.clear()
    handlers = {"FULLY_CONNECTED": scratch.fully_connected, "ADD": scratch.add, "MUL": scratch.mul,
                "LOGISTIC": scratch.lut, "TANH": scratch.lut}
    handlers[name](o, name, op, ins, outs)
    layer = scratch.b.layers[-1]
    layer.n = scratch.b.tensors[layer.output].size
    return layer, scratch.b.weights


def _params(layer, weights, keep, table_id):
    """(the step's parameters, the op's fixed fields) of an imported layer."""
    rq = layer.requant
    step, fixed = {}, {"op": layer.op, "n": int(layer.n)}
    if rq is not None:
        if len(rq.mul) != 1 or len(rq.shift) != 1 or any(rq.add):
            raise _NoLoop("per-channel requantization in a step")
        step["rq"] = [int(rq.mul[0]), int(rq.shift[0]), int(rq.zero_point), int(rq.lo), int(rq.hi)]
        fixed["rounding"] = rq.rounding
    if layer.op == "linear":
        w = weights[layer.weights]
        fixed["weights"] = keep("w", w.reshape(-1))
        fixed["bias"] = keep("b", weights[layer.bias]) if layer.bias else None
        step["input_offset"] = int(layer.input_offset)
    elif layer.op in ("add", "mul"):
        step["in_offset"] = [int(v) for v in layer.in_offset]
        if layer.op == "add":
            step["in_mul"] = [int(v) for v in layer.in_mul]
            step["in_shift"] = [int(v) for v in layer.in_shift] if layer.in_shift else None
    elif layer.op == "lut":
        step["table"] = table_id(layer.table)
    else:
        raise _NoLoop(f"a {layer.op} in a step")
    return step, fixed


def _initial_values(p, g, init):
    """{state key: stored int8 values} of step 0's inputs from outside the loop."""
    out = {}
    for key, t in init.items():
        out[key] = _evaluate(p, g, t)
    return out


def _evaluate(p, g, t, depth=0):
    m = g.m
    data = m.data(t)
    if data is not None:
        return np.asarray(data, dtype=np.int64).reshape(-1)
    o = g.producer.get(t)
    if o is None or depth > 4:
        raise _NoLoop("an initial state that is not a constant")
    name, ins, outs, op = g.ops[o]
    if name == "FILL":
        value = m.data(ins[1])
        if value is None:
            raise _NoLoop("a FILL of a computed value")
        return np.full(int(np.prod(m.shape(t))), int(np.asarray(value).reshape(-1)[0]), dtype=np.int64)
    if name not in ("FULLY_CONNECTED", "ADD", "MUL", "LOGISTIC", "TANH"):
        raise _NoLoop(f"an initial state computed by a {name}")
    from .. import golden

    scratch = _scratch(p)
    layer, weights = _import_one(scratch, g, o)
    values = {}
    for name_in in layer.inputs:
        src = next(u for u, v in scratch.alias.items() if v == name_in)
        shape = scratch.b.tensors[name_in].shape
        values[name_in] = _evaluate(p, g, src, depth + 1).astype(np.int8).reshape(shape)
    graph, _ = scratch.b.finish()
    return np.asarray(golden.run_layer(layer, graph, weights, values), dtype=np.int64).reshape(-1)


def _prologue(g, inside, seq):
    """Ops outside the loop whose outputs only the loop (or each other)
    reads: the sequence's UNPACK and views, the initial state's FILL and
    shape arithmetic, ops computing an initial state."""
    taken = set(inside)
    changed = True
    while changed:
        changed = False
        for o, (name, ins, outs, _) in enumerate(g.ops):
            if o in taken:
                continue
            users = [c for t in outs for c in g.consumers.get(t, [])]
            if users and all(c in taken for c in users) and not any(t in g.p.graph_outputs for t in outs):
                if name in ("UNPACK", "TRANSPOSE", "RESHAPE", "FULLY_CONNECTED", "ADD", "MUL") + SHAPE_OPS:
                    taken.add(o)
                    changed = True
    return taken - set(inside) - _ancestors(g, seq)


def _ancestors(g, t):
    """The ops the sequence tensor t is computed by (never consumed)."""
    out, todo = set(), [t]
    while todo:
        o = g.producer.get(todo.pop())
        if o is not None and o not in out:
            out.add(o)
            todo += g.ops[o][1]
    return out


def emit_layer(p, loop):
    """Add the recurrent layer of a recognised loop to p's builder."""
    m = p.m
    x = p.act_tensor(loop["seq"], -1, "UNPACK")
    if p.b.tensors[x].size != loop["steps"] * loop["n_input"]:
        raise FrontendError(p.path, f"the unrolled recurrence reads {p.b.tensors[x].size} values as "
                            f"{loop['steps']} steps of {loop['n_input']}")
    n_out = int(np.prod(m.shape(loop["out"])))
    s_y, zp_y = p.scale_zp(loop["out"], -1, "recurrence")
    y = p.b.tensor(f"t{loop['out']}", [1, 1, n_out], "int8", s_y, zp_y)
    p.alias[loop["out"]] = y
    rnn = {"cell": "ops", "steps": loop["steps"], "n_input": loop["n_input"], "n_output": n_out,
           "states": loop["states"], "body": loop["body"], "next": loop["next"], "emit": loop["emit"],
           "sequence": False, "tables": loop["tables"]}
    ops = sorted(loop["consumed"])
    layer = Layer(name=p.b.layer_name(f"unrolled_{ops[0]}"), op="lstm", inputs=[x], output=y, rnn=rnn,
                  source=[f"{ops[0]}..{ops[-1]}: an unrolled recurrence of {len(ops)} operators"])
    p.b.recurrent(layer, loop["arrays"])
