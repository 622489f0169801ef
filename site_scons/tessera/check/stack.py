"""The worst-case stack depth of a linked RISC-V program, from its
disassembly, symbol table and link map, so that a stack too small for the
deepest call chain stops the build with one line instead of faulting on
the chip (a patched step's frame once overwrote a cluster core's return
address on pulp_open: the run died with a pc in the activation arena).

    funcs = stack.program(elf_path, map_text, objdump_text)   # per function: frame, calls
    rows = stack.check(funcs, spec)     # per stack: need, bytes, chain (the platform's spec)

What it counts: each function's own frame (every `addi sp, sp, -N`, plus the
frame of a `__riscv_save_N` it enters: -msave-restore's millicode leaves
its frame in the caller's), and the deepest of its callees: `jal`, tail
calls (`j` to another function's entry, counted on top of the frame: an
upper bound) and indirect calls (`jalr` through a register):
- in a fork function (hal_fork; the workers' entry): the functions whose
  address a caller of hal_fork computes, and those named as the generated
  code names its fork targets (what the cores are handed);
- in the C library: the C library's and the platform's address-taken
  functions (its output callbacks);
- elsewhere (the network's table of layer functions): every function whose
  address the program takes, in code or as a word of its data.
A path the code never takes still counts. A call back into a function
already on the chain (recursion) is not followed; a function that moves sp
by a register (alloca) is not bounded: both are named in the notes.
"""

import re

FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
INSN = re.compile(r"^\s*([0-9a-f]+):\s+[0-9a-f]+\s+(\S+)\s*(.*)$")
SP_MOVE = re.compile(r"^sp,\s*sp,\s*(-?\d+)$")
TARGET = re.compile(r"([0-9a-f]+) <([^>+]+)(\+0x[0-9a-f]+)?>")
LIBC = ("libc.a(", "libgcc.a(", "libm.a(")


def _fresh(name, owner, platform):
    return {"name": name, "frame": 0, "sp": 0, "calls": set(), "saves": set(), "refs": set(),
            "indirect": False, "dynamic": False,
            "libc": any(k in owner for k in LIBC), "platform": platform in owner.replace("\\", "/")}


def functions(text, symbols, words=(), owners=None, platform="/hal/"):
    """{address: {name, frame, calls, saves, refs, indirect, dynamic, libc,
    platform, taken}} of `objdump -d` output (calls, saves and refs are
    addresses: several static functions share a name). symbols: {address:
    name} of the ELF's function symbols (objdump lists data objects too);
    words: the 32-bit words of the program's loaded sections (a function
    whose address is one of them is taken: a table of function pointers);
    owners: {address: input file} from the link map (the C library's
    functions, and the platform's: those whose input file's path holds
    `platform`)."""
    owners = owners or {}
    funcs, at = {}, None
    for line in text.splitlines():
        m = FUNC.match(line)
        if m:
            if not m.group(2).startswith(".L"):    # a local label stays in its function
                at = int(m.group(1), 16)
                if at in symbols:
                    funcs.setdefault(at, _fresh(m.group(2), owners.get(at, ""), platform))
                else:
                    at = None
            continue
        m = INSN.match(line)
        if m and at is not None:
            _insn(funcs[at], at, m.group(2), m.group(3))
    data_taken = {w for w in words if w in funcs}
    for f in funcs.values():
        f["refs"] &= set(funcs)
    code_taken = {r for f in funcs.values() for r in f["refs"]}
    for a, f in funcs.items():
        f["taken"] = a in data_taken or a in code_taken
    return funcs


def _insn(f, at, op, args):
    """One instruction's share of function f's frame, calls and refs. The
    frame: the deepest the sp moves go in the function's order (separate
    shrink-wrapped regions each restore before the next)."""
    t = TARGET.search(args)
    whole = int(t.group(1), 16) if t and not t.group(3) else None   # a function's entry
    name = t.group(2) if t else ""
    if op in ("add", "addi", "c.addi", "c.addi16sp"):
        move = SP_MOVE.match(args.split("#")[0].strip())
        if move:
            f["sp"] = min(0, f["sp"] + int(move.group(1)))
            f["frame"] = max(f["frame"], -f["sp"])
            return
    if op in ("sub", "c.sub") and args.replace(" ", "").startswith("sp,sp,"):
        f["dynamic"] = True
    elif op in ("jal", "c.jal"):
        if whole is not None and args.startswith("t0,"):
            f["saves"].add(whole)                  # -msave-restore's millicode
        elif whole is not None and not name.startswith("__riscv_restore"):
            f["calls"].add(whole)
    elif op in ("j", "c.j"):
        if whole is not None and whole != at and not name.startswith("__riscv_restore"):
            f["calls"].add(whole)                  # a jump to a function's entry: a tail call
    elif op in ("jr", "c.jr"):
        return     # ret, or a switch's jump table (an indirect tail call would be missed)
    elif op in ("jalr", "c.jalr"):
        regs = args.split("#")[0].replace(" ", "")
        if regs.startswith("zero,") and "(" not in regs:
            return                                 # jalr zero, rs: a jump, not a call
        if whole is not None and "(" in regs and not regs.endswith("(zero)"):
            f["calls"].add(whole)                  # auipc + jalr: a far call, named
        elif regs.startswith("zero") or regs.endswith("(zero)"):
            return                                 # a weak function left undefined (address 0)
        else:
            f["indirect"] = True
    elif whole is not None and "#" in args:
        f["refs"].add(whole)                       # an address computed: maybe a function's


def named(funcs, names):
    """The addresses of the functions called `names`."""
    names = set(names)
    return {a for a, f in funcs.items() if f["name"] in names}


def fork_targets(funcs, fork, patterns=()):
    """What the cores are handed through `fork`'s (hal_fork's) function
    pointer: the functions whose address a caller of it computes where
    objdump names the address, and those named like the generated code's
    fork targets (`patterns`: the compiler also builds an address from a
    spilled base, which no disassembly note names)."""
    import fnmatch

    forks = named(funcs, [fork])
    out = {r for f in funcs.values() if f["calls"] & forks for r in f["refs"]}
    return out | {a for a, f in funcs.items() if any(fnmatch.fnmatchcase(f["name"], p) for p in patterns)}


def depth(funcs, root, forks=(), skip=(), entries=(), handed=()):
    """(bytes, [(function, its frame), ...], notes) of the deepest chain
    from the function named `root`, not entering the functions named in
    `skip` (a worker's entry without main) and never calling `entries`
    indirectly (start-up code); indirect calls of the functions named in
    `forks` run what a caller of the first (hal_fork) hands them
    (fork_targets, with the name patterns `handed`). notes:
    {"recursive": [...], "dynamic": [...]}, the functions whose depth this
    does not bound."""
    forks = tuple(forks)
    handed = fork_targets(funcs, forks[0], handed) if forks else set()
    fork_at, skip_at = named(funcs, forks), named(funcs, skip)
    taken = {a for a, f in funcs.items() if f["taken"]} - named(funcs, entries)
    hooks = {a for a in taken if funcs[a]["libc"] or funcs[a]["platform"]}
    memo, on = {}, set()
    notes = {"recursive": set(), "dynamic": set()}

    def indirect(at, f):
        if at in fork_at:
            return handed
        if f["libc"]:
            return hooks      # the C library calls back into itself or the platform's hooks
        return taken - handed

    def walk(at):
        if at in memo:
            return memo[at]
        f = funcs[at]
        if f["dynamic"]:
            notes["dynamic"].add(f["name"])
        own = f["frame"] + sum(funcs[s]["frame"] for s in f["saves"] if s in funcs)
        callees = set(f["calls"]) | (indirect(at, f) if f["indirect"] else set())
        on.add(at)
        best, chain = 0, []
        for c in sorted(callees - skip_at):
            if c not in funcs:
                continue
            if c in on:
                notes["recursive"].add(funcs[c]["name"])
                continue
            d, ch = walk(c)
            if d > best:
                best, chain = d, ch
        on.discard(at)
        memo[at] = (own + best, [(f["name"], own)] + chain)
        return memo[at]

    import sys
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        total, chain = max((walk(a) for a in sorted(named(funcs, [root]))), default=(0, []))
    finally:
        sys.setrecursionlimit(limit)
    return total, chain, {k: sorted(v) for k, v in notes.items()}


def chain_text(chain, limit=5):
    """'a 176 B -> b 1,312 B -> ...': the chain's largest frames, in order."""
    big = set(sorted((b, i) for i, (_, b) in enumerate(chain))[-limit:])
    return " -> ".join(f"{n} {b:,} B" for i, (n, b) in enumerate(chain) if (b, i) in big and b)


_MAP_IN = re.compile(r"^ \.text\S*(?:\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*))?$")
_MAP_MORE = re.compile(r"^\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$")


def code_ranges(map_text):
    """[(start, end, input file)] of the code input sections a GNU ld map
    places (a section's name and its address may sit on two lines)."""
    out, pending = [], False
    for line in map_text.splitlines():
        m = _MAP_IN.match(line)
        if m:
            pending = m.group(1) is None
            if not pending and int(m.group(2), 16):
                start = int(m.group(1), 16)
                out.append((start, start + int(m.group(2), 16), m.group(3).strip()))
            continue
        m = _MAP_MORE.match(line) if pending else None
        if m and int(m.group(2), 16):
            start = int(m.group(1), 16)
            out.append((start, start + int(m.group(2), 16), m.group(3).strip()))
        pending = False
    return out


def owners(symbols, ranges):
    """{function's address: the input file it falls in}."""
    import bisect

    ranges = sorted(ranges)
    starts = [r[0] for r in ranges]
    out = {}
    for addr in symbols:
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0 and addr < ranges[i][1]:
            out[addr] = ranges[i][2]
    return out


def read_elf(path):
    """({address: function}, {every aligned 32-bit word of the loaded
    sections}) of a linked ELF."""
    from elftools.elf.elffile import ELFFile

    symbols, words = {}, set()
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for sec in elf.iter_sections():
            if sec["sh_type"] == "SHT_SYMTAB":
                for sym in sec.iter_symbols():
                    if sym["st_info"]["type"] == "STT_FUNC":
                        symbols.setdefault(sym["st_value"] & ~1, sym.name)
            elif sec["sh_flags"] & 2 and sec["sh_type"] == "SHT_PROGBITS":   # SHF_ALLOC
                data = sec.data()
                words.update(int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data) - 3, 4))
    return symbols, words


def program(elf_path, map_text, disassembly, platform="/hal/"):
    """The functions of a linked program (functions()) from its ELF, its
    link map and `objdump -d` of it."""
    symbols, words = read_elf(elf_path)
    return functions(disassembly, symbols, words, owners(symbols, code_ranges(map_text)), platform)


def check(funcs, spec):
    """[{who, root, need, bytes, chain, notes}] of each stack in `spec`
    ({"forks", "entries", "stacks": [{who, root, skip, bytes}]}: the
    platform's, tessera_scons/platforms/pulp_open.stacks)."""
    out = []
    for s in spec["stacks"]:
        need, chain, notes = depth(funcs, s["root"], spec.get("forks", ()), s.get("skip", ()),
                                   spec.get("entries", ()), spec.get("handed", ()))
        out.append({"who": s["who"], "root": s["root"], "need": need, "bytes": s["bytes"],
                    "chain": [[n, b] for n, b in chain], "notes": notes})
    return out


def overflow_line(row, spec):
    """(what, fix) of a stack whose deepest chain does not fit: the
    reservation that would hold it, from the stack's share of a core's
    (spec["stacks"][...]["share"]: 2 for pulp_open's core 0)."""
    share = next(s["share"] for s in spec["stacks"] if s["who"] == row["who"])
    per_core = -(-int(row["need"] / share) // 16) * 16
    while int(per_core * share) // 16 * 16 < row["need"]:
        per_core += 16
    what = (f"{row['who']}'s stack: the deepest call chain takes {row['need']:,} B "
            f"({chain_text([tuple(x) for x in row['chain']])}), its share of "
            f"{spec['field']} is {row['bytes']:,} B")
    fix = (f"raise {spec['field']} to at least {per_core * spec['cores']:,} B (now {spec['reserved']:,} B for "
           f"{spec['cores']} cores), or make that chain's frames smaller")
    return what, fix
