# SPDX-License-Identifier: Apache-2.0
"""Machine code (cuobjdump -sass) of one kernel as a control-flow graph, and the
instructions a thread executes on the kernel's hot path: what benchmarks/gpu_model.py
counts per element.

The hot path is found without running anything.  Back edges (a branch to an earlier
address) are set aside, which leaves a DAG of basic blocks from the entry to the
exits; of its paths, the hot one is the path that stores the most bytes (a thread inside
the tensor over one past its end), the most of them with wide (64- or 128-bit)
global stores (the vector path over a scalar fallback), and among those the one
with the fewest instructions (a completion mark or a slow path for non-finite
scales is skipped).
Code reached only by CALL (the IEEE division's slow path) is not on it.  Loops are
weighted afterwards (path_cost): a loop whose body moves elements runs once per
element group, any other loop an assumed number of times."""
import re
from dataclasses import dataclass, field

_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_PRED = re.compile(r"^(@!?U?P[T0-9]+)\s+")
_REG = re.compile(r"(?<![\w.])R(\d+)(\.64)?")

# Instruction classes by pipe (benchmarks/gpu_model.py gives each a rate).
FP32 = {"FADD", "FMUL", "FFMA", "FMNMX", "HADD2", "HMUL2", "HFMA2", "HMNMX2", "FSEL", "FSET", "FCHK", "DADD"}
CONVERSION = {"F2F", "F2I", "I2F", "F2FP", "FRND", "I2FP", "F2IP", "I2IP", "MUFU"}
SHUFFLE = {"SHFL"}
MEMORY = {"LDG", "STG", "LD", "ST", "LDS", "STS", "LDL", "STL", "ATOM", "ATOMS", "ATOMG", "RED", "REDG", "LDSM",
          "LDC"}
BRANCHES = {"BRA", "BRX", "JMP", "JMX"}
NO_DEST = {"STG", "ST", "STS", "STL", "RED", "REDG", "BAR", "BRA", "BRX", "JMP", "EXIT", "RET", "CALL", "MEMBAR",
           "ERRBAR", "CCTL", "BSSY", "BSYNC", "WARPSYNC", "NOP", "FENCE", "DEPBAR", "BPT", "YIELD", "BREAK", "KILL",
           "NANOSLEEP", "CGAERRBAR", "UCGABAR_ARV", "UCGABAR_WAIT"}


@dataclass
class Instr:
    addr: int
    pred: str
    op: str        # opcode with modifiers, e.g. "LDG.E.128"
    args: str

    @property
    def base(self) -> str:
        return self.op.split(".")[0]

    def target(self) -> int | None:
        """Branch or call target address."""
        m = re.search(r"0x([0-9a-f]+)\s*$", self.args)
        return int(m.group(1), 16) if m else None

    def width(self) -> int:
        """Bits moved by a memory instruction (LDG.E.128 -> 128, STG.E.U8 -> 8, else 32)."""
        parts = self.op.split(".")[1:]
        for bits in ("U8", "S8", "U16", "S16", "64", "128"):
            if bits in parts:
                return int(bits.lstrip("US"))
        return 32

    def is_global_load(self) -> bool:
        return self.base in ("LDG", "LD")

    def is_global_store(self) -> bool:
        return self.base in ("STG", "ST")

    def regs(self) -> tuple[set[int], set[int]]:
        """(registers written, registers read) by the instruction (R-registers only)."""
        operands = [a.strip() for a in self.args.split(",")] if self.args else []
        dest_index = None
        if self.base not in NO_DEST and operands:
            dest_index = 1 if self.base in ("SHFL",) else 0
        written, read = set(), set()
        for i, operand in enumerate(operands):
            for m in _REG.finditer(operand):
                r = int(m.group(1))
                n = 2 if m.group(2) else 1
                if i == dest_index:
                    n = max(n, self.dest_count())
                    written.update(range(r, r + n))
                else:
                    if self.is_global_store() or self.base in ("STS", "STL", "ATOMS", "RED", "ATOM"):
                        # the data operand of a store is as wide as the access
                        if "[" not in operand:
                            n = max(n, self.width() // 32)
                    read.update(range(r, r + n))
        return written, read

    def dest_count(self) -> int:
        if self.base in ("LDG", "LD", "LDS", "LDL", "LDC", "ATOM", "ATOMS", "ATOMG"):
            return max(1, self.width() // 32)
        if ".WIDE" in self.op or self.op.endswith(".64") or ".U64" in self.op or ".S64" in self.op:
            return 2
        return 1


@dataclass
class Block:
    start: int
    instrs: list = field(default_factory=list)
    succ: list = field(default_factory=list)   # forward successors (block starts)
    back: list = field(default_factory=list)   # back-edge targets (loop heads)


def parse(lines: list[str]) -> list[Instr]:
    """The instructions of one function's cuobjdump -sass listing."""
    out = []
    for line in lines:
        m = _LINE.search(line)
        if not m:
            continue
        text = m.group(2)
        pred = ""
        pm = _PRED.match(text)
        if pm:
            pred = pm.group(1)
            text = text[pm.end():]
        op, _, args = text.partition(" ")
        out.append(Instr(int(m.group(1), 16), pred, op, args.strip()))
    return out


def _unconditional(ins: Instr) -> bool:
    # "@!P3 BRA P4, 0xba0": conditional; "BRA 0x360": not; a predicate argument also makes it conditional
    return not ins.pred and not re.match(r"!?U?P\d", ins.args)


def blocks(instrs: list[Instr]) -> dict[int, Block]:
    """Basic blocks reachable from the entry (code reached only by CALL is left out)."""
    by_addr = {ins.addr: i for i, ins in enumerate(instrs)}
    leaders = {instrs[0].addr}
    for i, ins in enumerate(instrs):
        if ins.base in BRANCHES or ins.base in ("EXIT", "RET", "BPT"):
            t = ins.target() if ins.base in BRANCHES else None
            if t is not None and t in by_addr:
                leaders.add(t)
            if i + 1 < len(instrs):
                leaders.add(instrs[i + 1].addr)
    result, order = {}, sorted(leaders)
    for k, start in enumerate(order):
        end = order[k + 1] if k + 1 < len(order) else None
        b = Block(start)
        for ins in instrs[by_addr[start]:]:
            if end is not None and ins.addr >= end:
                break
            b.instrs.append(ins)
        last = b.instrs[-1]
        nxt = end
        targets = []
        if last.base in BRANCHES:
            t = last.target()
            if t is not None:
                targets.append(t)
            if not _unconditional(last) and nxt is not None:
                targets.append(nxt)
        elif last.base in ("EXIT", "RET", "BPT"):
            if not _unconditional(last) and nxt is not None:
                targets.append(nxt)
        elif nxt is not None:
            targets.append(nxt)
        for t in targets:
            (b.succ if t > b.start else b.back).append(t)
        result[start] = b
    # keep what the entry reaches
    seen, stack = set(), [instrs[0].addr]
    while stack:
        s = stack.pop()
        if s in seen or s not in result:
            continue
        seen.add(s)
        stack.extend(result[s].succ + result[s].back)
    return {s: b for s, b in result.items() if s in seen}


def _is_data_store(ins: Instr) -> bool:
    """A global store of data: not a .STRONG (volatile) flag such as the completion mark's
    word, nor a store of the zero register (the mark's counter reset)."""
    return ins.is_global_store() and ".STRONG" not in ins.op and not ins.args.rstrip().endswith("RZ")


def _bytes(b: Block, store: bool, least_bits: int = 0) -> int:
    return sum(ins.width() // 8 for ins in b.instrs
               if (_is_data_store(ins) if store else ins.is_global_load()) and ins.width() >= least_bits)


def hot_path(instrs: list[Instr], load_bytes: int | None = None, rotated: bool = False) -> list[Block]:
    """The hot path through the DAG of forward edges (see the module comment): of the paths
    that store the most bytes, those storing the most with wide (64- and 128-bit) stores; of
    these the one whose wide loads come closest to load_bytes (the thread's data, once: not
    the noise of a stochastic instance it was not asked for, not a second pass; None: the
    most), with the most shuffles if `rotated` (a kernel whose rotation is a run-time choice),
    then the fewest instructions.  The DP keeps, per block, the best prefix for each amount
    of wide loads."""
    bl = blocks(instrs)
    entry = instrs[0].addr
    states: dict[int, dict[int, tuple]] = {entry: {0: ((0, 0, 0, 0), [entry])}}
    for s in sorted(bl):
        if s not in states:
            continue
        b = bl[s]
        shuffled = sum(1 for ins in b.instrs if ins.base == "SHFL") if rotated else 0
        done = {}
        for loads, ((stored, wide, shuffles, neg_count), path) in states[s].items():
            score = (stored + _bytes(b, True), wide + _bytes(b, True, 64), shuffles + shuffled,
                     neg_count - len(b.instrs))
            done[loads + _bytes(b, False, 64)] = (score, path)
        states[s] = done
        for t in b.succ:
            if t not in bl:
                continue
            into = states.setdefault(t, {})
            for loads, (score, path) in done.items():
                if loads not in into or score > into[loads][0]:
                    into[loads] = (score, path + [t])

    def rank(item):
        loads, (score, _) = item
        closeness = loads if load_bytes is None else -abs(loads - load_bytes)
        return (score[0], score[1], closeness, score[2], score[3])

    # a path may end at any EXIT, also a predicated one (a thread past the mark's first lane)
    ends = [item for s in states if not bl[s].succ or bl[s].instrs[-1].base in ("EXIT", "RET")
            for item in states[s].items()]
    return [bl[s] for s in max(ends, key=rank)[1][1]]


@dataclass
class Loop:
    head: int
    tail: int          # address of the back-edge branch
    depth: int = 1


def loops(instrs: list[Instr]) -> list[Loop]:
    """Natural loops as address ranges [head, tail] (nvcc lays loop bodies out contiguously)."""
    result = []
    for b in blocks(instrs).values():
        for head in b.back:
            result.append(Loop(head, b.instrs[-1].addr))
    for lp in result:
        lp.depth = sum(1 for o in result if o.head <= lp.head and lp.tail <= o.tail)
    return result


def classify(ins: Instr) -> str:
    base = ins.base
    if base in SHUFFLE:
        return "shuffle"
    if base in CONVERSION:
        return "conversion"
    if base in MEMORY or base in ("ATOMS", "LDSM"):
        return "memory"
    if base in FP32 or base.startswith("IMAD") or base == "IMUL":
        return "fma"
    if base in ("BAR", "MEMBAR", "BSSY", "BSYNC", "WARPSYNC", "EXIT", "RET", "CALL", "NOP", "S2R", "S2UR", "CS2R",
                "DEPBAR", "ERRBAR", "CCTL", "FENCE") or base in BRANCHES or base.startswith("U"):
        return "control"
    return "alu"


def path_cost(instrs: list[Instr], in_bytes: float, out_bytes: float, elements: float,
              other_loop_trips: float = 2.0, rotated: bool = False, load_bytes: int | None = None) -> dict:
    """Per-thread instruction counts by class on the hot path for a thread that handles
    `elements` elements; in_bytes/out_bytes: bytes read/written per element.  A loop whose
    body (with its nested loops) loads or stores global memory is an element loop and runs
    elements / (elements moved per iteration) times; any other loop other_loop_trips
    times per iteration of its enclosing loop.  Also: the global loads and stores by width,
    local memory accesses, and the loads issued before the first use of any loaded value."""
    path = [ins for b in hot_path(instrs, load_bytes, rotated) for ins in b.instrs]
    lps = loops(instrs)

    def inside(lp, ins):
        return lp.head <= ins.addr <= lp.tail

    weights = {}
    for lp in sorted(lps, key=lambda lp: lp.depth):
        body = [ins for ins in path if inside(lp, ins)]
        loaded = sum(ins.width() // 8 for ins in body if ins.is_global_load())
        stored = sum(ins.width() // 8 for ins in body if ins.is_global_store())
        per_iter = stored / out_bytes if stored and out_bytes else (loaded / in_bytes if in_bytes else 0.0)
        outer = [o for o in lps if o is not lp and o.head <= lp.head and lp.tail <= o.tail]
        parent = max(outer, key=lambda o: o.depth) if outer else None
        parent_weight = weights.get(id(parent), 1.0) if parent else 1.0
        if per_iter > 0:
            weights[id(lp)] = max(elements / per_iter, parent_weight)
        else:
            weights[id(lp)] = parent_weight * other_loop_trips

    def weight(ins):
        inner = [lp for lp in lps if inside(lp, ins)]
        return weights[id(max(inner, key=lambda lp: lp.depth))] if inner else 1.0

    cost = {"fma": 0.0, "alu": 0.0, "conversion": 0.0, "shuffle": 0.0, "memory": 0.0, "control": 0.0}
    widths = {}
    for ins in path:
        w = weight(ins)
        cost[classify(ins)] += w
        if ins.is_global_load() or ins.is_global_store() or ins.base in ("LDL", "STL"):
            key = f"{ins.base} {ins.width()}"
            widths[key] = widths.get(key, 0.0) + w
    cost["total"] = sum(cost[k] for k in ("fma", "alu", "conversion", "shuffle", "memory", "control"))
    cost["accesses"] = widths
    cost["local"] = sum(v for k, v in widths.items() if k.startswith(("LDL", "STL")))
    cost.update(load_order(path, [weight(ins) for ins in path]))
    cost["barriers"] = sum(weight(ins) for ins in path if ins.base == "BAR")
    return cost


def load_order(path: list[Instr], weights: list[float] | None = None) -> dict:
    """Global loads on the path before the first instruction that reads a loaded value
    (loads_before_first_use, bytes_before_first_use), all loads on the path, and the
    number of load rounds: a round starts at a load issued after a use of an earlier
    round's value (a thread waits for DRAM once per round; a round in a loop counts as
    often as the loop runs, `weights`)."""
    weights = weights or [1.0] * len(path)
    loaded, first_use, rounds, waiting = set(), None, 0.0, False
    total, early, early_bytes = 0, 0, 0
    for i, ins in enumerate(path):
        written, read = ins.regs()
        if read & loaded:
            if first_use is None:
                first_use = i
            waiting = False
            loaded -= read
        if ins.is_global_load():
            total += 1
            if first_use is None:
                early += 1
                early_bytes += ins.width() // 8
            if not waiting:
                rounds += weights[i]
                waiting = True
            loaded |= written
        else:
            loaded -= written
    return {"loads": total, "loads_before_first_use": early, "bytes_before_first_use": early_bytes,
            "load_rounds": rounds}
