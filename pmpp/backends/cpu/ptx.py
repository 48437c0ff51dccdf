"""Inline PTX for pmpp's CPU engine: each ``asm("..." : outputs : inputs : clobbers)`` statement
of a kernel becomes C++ on the same line (``do { ... } while (0)``), calling the helpers of
``include/pmpp_ptx.h``.

The template is read as NVCC reads an extended asm (``%0`` names an operand, ``%%`` is a ``%``;
GCC's ``%[name]`` is refused, as NVCC and NVRTC refuse it); a basic asm (no ``:``) is taken as it is. The PTX in it (``;``-separated
instructions, ``{ }`` scopes with ``.reg`` declarations, ``@p`` guards) is translated instruction
by instruction after the PTX ISA's semantics. Registers are C++ locals: an ``"r"`` operand a
``uint32_t``, ``"l"`` a ``uint64_t``, ``"f"`` a ``float``, ``"d"`` a ``double``, ``"h"`` a
``uint16_t``; an instruction reads a register as its own type by reinterpreting the bits (as the
hardware does). Loads and stores become plain dereferences written in the kernel's code, so the
checks (bounds, races) and the counters see them as they see a C++ access. An instruction the
engine does not know is a ``CompileError`` at the line of the string that holds it, naming it
and what to write instead.
"""

import re
from dataclasses import dataclass, field

from pmpp.source import split_top

NS = "::pmpp::ptx::"

# C++ type of a register, by operand constraint and by PTX type.
CONSTRAINT_TYPES = {"r": "uint32_t", "l": "uint64_t", "f": "float", "d": "double", "h": "uint16_t",
                    "c": "uint8_t"}
PTX_TYPES = {"pred": "bool", "b8": "uint8_t", "u8": "uint8_t", "s8": "int8_t", "b16": "uint16_t",
             "u16": "uint16_t", "s16": "int16_t", "f16": "uint16_t", "bf16": "uint16_t",
             "b32": "uint32_t", "u32": "uint32_t", "s32": "int32_t", "f32": "float", "tf32": "uint32_t",
             "b64": "uint64_t", "u64": "uint64_t", "s64": "int64_t", "f64": "double"}
SIZES = {"bool": 1, "uint8_t": 1, "int8_t": 1, "uint16_t": 2, "int16_t": 2, "uint32_t": 4,
         "int32_t": 4, "float": 4, "uint64_t": 8, "int64_t": 8, "double": 8}

# Special registers: (C++ expression, type). %tid & co. per dimension are added below.
SPECIAL = {
    "%laneid": (NS + "laneid()", "uint32_t"), "%warpid": (NS + "warpid()", "uint32_t"),
    "%nwarpid": (NS + "nwarpid()", "uint32_t"), "%smid": (NS + "smid()", "uint32_t"),
    "%nsmid": (NS + "nsmid()", "uint32_t"), "%lanemask_eq": (NS + "lanemask_eq()", "uint32_t"),
    "%lanemask_lt": (NS + "lanemask_lt()", "uint32_t"), "%lanemask_le": (NS + "lanemask_le()", "uint32_t"),
    "%lanemask_gt": (NS + "lanemask_gt()", "uint32_t"), "%lanemask_ge": (NS + "lanemask_ge()", "uint32_t"),
    "%clock": (NS + "clock32()", "uint32_t"), "%clock64": (NS + "clock64_()", "uint64_t"),
    "%globaltimer": (NS + "globaltimer()", "uint64_t"),
    "%globaltimer_lo": ("uint32_t(" + NS + "globaltimer())", "uint32_t"),
    "%globaltimer_hi": ("uint32_t(" + NS + "globaltimer() >> 32)", "uint32_t"),
    "WARP_SZ": ("32u", "uint32_t"),
}
for _reg, _var in (("tid", "threadIdx"), ("ntid", "blockDim"), ("ctaid", "blockIdx"), ("nctaid", "gridDim")):
    for _d in "xyz":
        SPECIAL[f"%{_reg}.{_d}"] = (f"uint32_t({_var}.{_d})", "uint32_t")
NO_SPECIAL = {"%dynamic_smem_size": "pass the size of the dynamic shared memory as a kernel argument",
              "%total_smem_size": "pass the size of the shared memory as a kernel argument"}

_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b(?:\s*(?:volatile|__volatile__|inline|goto)\b)*\s*\(")
_OPERAND = re.compile(r'\s*(?:\[\s*(\w+)\s*\])?\s*"([^"]*)"\s*\((.*)\)\s*', re.S)
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "", "0": "\0"}
_INT = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)[uU]?$")
_FLOAT_BITS = re.compile(r"0[fF]([0-9a-fA-F]{8})$|0[dD]([0-9a-fA-F]{16})$")
_PERCENT = re.compile(r"%(?:(\d+)|\[(\w+)\]|(%)|(=))")
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?$")


class PtxError(Exception):
    """An asm statement the engine cannot translate; ``pos``: offset in the template (or None)."""

    def __init__(self, message, pos=None):
        super().__init__(message)
        self.pos = pos


@dataclass
class Operand:
    constraint: str
    expr: str
    name: str | None
    output: bool
    cpp: str = ""        # the local that holds it (or the immediate's expression)
    ctype: str = ""      # its C++ type; "" for an immediate


@dataclass
class Asm:
    template: str
    positions: list      # source offset of each template character
    basic: bool
    outputs: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    clobbers: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# The asm statement in the C++ source
# ---------------------------------------------------------------------------------------------

def asm_edits(src, masked, fail):
    """``(start, end, replacement)`` for each asm statement of ``src`` (``masked``: the source with
    strings and comments blanked); ``fail(offset, message)`` raises the CompileError."""
    from .source import _directive_end
    edits = []
    for m in _ASM.finditer(masked):
        close = _matching_paren(masked, m.end() - 1)
        if close is None:
            fail(m.start(), "cannot parse this asm statement: its parentheses do not close")
        try:
            asm = parse(src, masked, m.end(), close)
        except PtxError as e:
            fail(m.start(), str(e))
        try:
            code = translate(asm)
        except PtxError as e:
            fail(m.start() if e.pos is None else asm.positions[min(e.pos, len(asm.positions) - 1)], str(e))
        newlines = src.count("\n", m.start(), close + 1)
        in_directive = _directive_end(masked, m.start()) is not None
        edits.append((m.start(), close + 1, code + ("\\\n" if in_directive else "\n") * newlines))
    return edits


def _matching_paren(masked, open_at):
    depth = 0
    for k in range(open_at, len(masked)):
        if masked[k] == "(":
            depth += 1
        elif masked[k] == ")":
            depth -= 1
            if depth == 0:
                return k
    return None


def _split(masked, start, end, sep):
    """Offsets ``[(a, b), ...]`` of the parts of masked[start:end] split at ``sep`` outside
    brackets."""
    parts, depth, a = [], 0, start
    for k in range(start, end):
        ch = masked[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append((a, k))
            a = k + 1
    parts.append((a, end))
    return parts


def parse(src, masked, start, end):
    """The asm statement whose parenthesized part is src[start:end]."""
    sections = _split(masked, start, end, ":")
    if len(sections) > 4:
        raise PtxError("asm goto is not supported by pmpp's CPU engine: branch in C++ instead")
    template, positions = _template(src, *sections[0])
    asm = Asm(template, positions, basic=len(sections) == 1)
    for kind, (a, b) in zip(("outputs", "inputs"), sections[1:3]):
        for pa, pb in _split(masked, a, b, ","):
            if src[pa:pb].strip():
                getattr(asm, kind).append(_operand(src[pa:pb], kind == "outputs"))
    if len(sections) == 4:
        asm.clobbers = [s for s in _STRING.findall(src[sections[3][0]:sections[3][1]])]
    return asm


def _template(src, a, b):
    text, positions, k = [], [], a
    for m in _STRING.finditer(src, a, b):
        if src[k:m.start()].strip():
            raise PtxError("the PTX of an asm statement must be string literals (pmpp's CPU engine "
                           "reads it before macros are expanded): write the instruction out")
        k = m.end()
        i = m.start(1)
        while i < m.end(1):
            if src[i] == "\\" and i + 1 < m.end(1):
                text.append(_ESCAPES.get(src[i + 1], src[i + 1]))
                positions.append(i)
                i += 2
            else:
                text.append(src[i])
                positions.append(i)
                i += 1
        text.append("\n")   # keeps a line's string apart from the next line's
        positions.append(m.end() - 1)
    if src[k:b].strip():
        raise PtxError("the PTX of an asm statement must be string literals (pmpp's CPU engine "
                       "reads it before macros are expanded): write the instruction out")
    return "".join(text), positions


def _operand(text, output):
    m = _OPERAND.fullmatch(text)
    if not m:
        raise PtxError(f"cannot parse the asm operand '{text.strip()}': write it as \"r\"(value)")
    name, constraint, expr = m.groups()
    return Operand(constraint, expr, name, output)


# ---------------------------------------------------------------------------------------------
# Translation
# ---------------------------------------------------------------------------------------------

def translate(asm):
    """The C++ statement (one line) that does what ``asm`` does."""
    ops = asm.outputs + asm.inputs
    setup, finish = [], []
    for i, op in enumerate(ops):
        setup += _bind(i, op, ops)
    for i, op in enumerate(asm.outputs):
        finish.append(f"__pmpp_ref{i} = {NS}as<std::remove_reference_t<decltype(__pmpp_ref{i})>>({op.cpp});")
    text, positions = (asm.template, list(range(len(asm.template)))) if asm.basic else \
        _substitute(asm.template, ops)
    body = Translator(ops, positions).run(text)
    fence = "__atomic_signal_fence(__ATOMIC_SEQ_CST);" if "memory" in asm.clobbers else ""
    return "do { " + " ".join(setup) + fence + " { " + body + " } " + fence + " ".join(finish) + " } while (0)"


def _bind(i, op, ops):
    c = op.constraint.lstrip("=+&")
    if op.output and not op.constraint.startswith(("=", "+")):
        raise PtxError(f"the output operand \"{op.constraint}\" needs '=' or '+' (\"={c}\")")
    if c.isdigit():
        tied = ops[int(c)] if int(c) < len(ops) else None
        if tied is None or not tied.output:
            raise PtxError(f"the operand constraint \"{c}\" names no output operand")
        op.cpp, op.ctype = tied.cpp, tied.ctype
        return [f"{tied.cpp} = {NS}as<{tied.ctype}>({op.expr});"]
    if c in ("n", "i"):
        if op.output:
            raise PtxError(f"an output operand cannot be an immediate (\"{op.constraint}\")")
        op.cpp, op.ctype = f"({op.expr})", ""
        return []
    if c not in CONSTRAINT_TYPES:
        raise PtxError(f"the asm operand constraint \"{op.constraint}\" is not supported by pmpp's "
                       f"CPU engine: use \"r\" (32-bit), \"l\" (64-bit), \"f\" (float), \"d\" (double), "
                       f"\"h\" (16-bit) or \"n\" (a constant)")
    op.cpp, op.ctype = f"__pmpp_op{i}", CONSTRAINT_TYPES[c]
    if not op.output:
        return [f"const {op.ctype} {op.cpp} = {NS}as<{op.ctype}>({op.expr});"]
    ref = f"auto &__pmpp_ref{i} = ({op.expr});"
    if op.constraint.startswith("+"):
        return [ref, f"{op.ctype} {op.cpp} = {NS}as<{op.ctype}>(__pmpp_ref{i});"]
    return [ref, f"{op.ctype} {op.cpp} = 0;"]


def _substitute(template, ops):
    """The template with ``%N`` made ``$N`` and ``%%`` made ``%``, and the template offset of each
    character of the result. ``%[name]`` is refused, as NVRTC and NVCC refuse it."""
    out, where, i = [], [], 0
    while i < len(template):
        m = _PERCENT.match(template, i)
        if template[i] != "%" or not m:
            out.append(template[i])
            where.append(i)
            i += 1
            continue
        if m.group(2) is not None:
            raise PtxError(f"'{m.group()}' names an operand by name, which GCC allows but NVCC and NVRTC "
                           f"refuse (\"symbolic operand reference not supported\"): write it as %N, N the "
                           f"operand's position in the lists (outputs first, from 0)", i)
        if m.group(1) is not None:
            index = int(m.group(1))
            if index is None or index >= len(ops):
                raise PtxError(f"'{m.group()}' names no operand of this asm statement "
                               f"(it has {len(ops)})", i)
            piece = f"${index}"
        elif m.group(3):
            piece = "%"
        else:
            piece = "0"   # %=: a number unique to the statement; every copy here is its own scope
        out.extend(piece)
        where.extend([i] * len(piece))
        i = m.end()
    return "".join(out), where


@dataclass
class Instr:
    opcode: str          # e.g. "ld.global.nc.f32"
    parts: list          # ["ld", "global", "nc", "f32"]
    args: list           # operand texts
    guard: str | None    # "p" or "!p"
    pos: int             # offset in the substituted template


class Translator:
    """Translates the PTX text of one asm statement into C++ statements."""

    def __init__(self, ops, positions):
        self.ops, self.positions = ops, positions
        self.scopes = [{}]
        self.counter = 0

    def error(self, instr, message):
        raise PtxError(message, self.positions[instr.pos] if instr.pos < len(self.positions) else None)

    def run(self, text):
        text = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: " " * len(m.group()), text, flags=re.S)
        code, i = [], 0
        while i < len(text):
            ch = text[i]
            if ch.isspace() or ch == ";":
                i += 1
            elif ch == "{":
                self.scopes.append({})
                code.append("{")
                i += 1
            elif ch == "}":
                if len(self.scopes) == 1:
                    raise PtxError("a '}' without its '{' in the PTX of this asm statement",
                                   self.positions[i])
                self.scopes.pop()
                code.append("}")
                i += 1
            else:
                end = text.find(";", i)
                end = len(text) if end < 0 else end
                code.append(self.statement(text[i:end], i))
                i = end + 1
        if len(self.scopes) != 1:
            raise PtxError("a '{' without its '}' in the PTX of this asm statement")
        return " ".join(code)

    def statement(self, text, pos):
        stripped = text.strip()
        pos += len(text) - len(text.lstrip())
        if stripped.startswith("."):
            return self.directive(stripped, pos)
        guard = None
        m = re.match(r"@(!?)\s*(%?\w+)\s*", stripped)
        if m:
            guard, stripped = m.group(1) + m.group(2), stripped[m.end():]
        m = re.match(r"([\w.:]+)\s*(.*)", stripped, re.S)
        if not m:
            raise PtxError(f"cannot read the PTX statement '{stripped}'", self.positions[pos])
        opcode, rest = m.groups()
        args = [a.strip() for a in _split_args(rest)] if rest.strip() else []
        instr = Instr(opcode, opcode.split("."), args, guard, pos)
        code = self.instruction(instr)
        if guard:
            code = f"if ({self.pred(instr, guard)}) {{ {code} }}"
        return code

    # ---- registers and values ------------------------------------------------------------

    def directive(self, text, pos):
        m = re.match(r"\.reg\s+\.(\w+)\s+(.*)", text, re.S)
        if not m or m.group(1) not in PTX_TYPES:
            raise PtxError(f"the PTX directive '{text.split()[0]}' is not supported in inline PTX by "
                           f"pmpp's CPU engine (only .reg declarations are)", self.positions[pos])
        ctype, decls = PTX_TYPES[m.group(1)], []
        for name in _split_args(m.group(2)):
            name = name.strip()
            many = re.fullmatch(r"(%?\w+)<(\d+)>", name)
            for reg in ([f"{many.group(1)}{k}" for k in range(int(many.group(2)))] if many else [name]):
                self.counter += 1
                cpp = f"__pmpp_r{self.counter}"
                self.scopes[-1][reg] = (cpp, ctype)
                decls.append(f"{ctype} {cpp} = 0;")
        return " ".join(decls)

    def register(self, instr, name):
        """(C++ expression, type, is_immediate) of a register or immediate operand."""
        if name.startswith("$"):
            op = self.ops[int(name[1:])]
            return op.cpp, op.ctype, not op.ctype
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name][0], scope[name][1], False
        if name in SPECIAL:
            return SPECIAL[name][0], SPECIAL[name][1], False
        if name in NO_SPECIAL:
            self.error(instr, f"the special register {name} is not supported by pmpp's CPU engine: "
                              f"{NO_SPECIAL[name]}")
        if name.startswith("%"):
            self.error(instr, f"'{name}' in '{instr.opcode}' is neither an operand nor a register "
                              f"declared with .reg, nor a special register pmpp's CPU engine knows")
        self.error(instr, f"cannot read the operand '{name}' of '{instr.opcode}'")

    def value(self, instr, text, ctype):
        """C++ expression of type ``ctype`` for operand ``text``."""
        text = text.strip()
        m = _FLOAT_BITS.match(text)
        if m:
            bits = m.group(1) or m.group(2)
            floating, raw = ("float", "uint32_t") if m.group(1) else ("double", "uint64_t")
            literal = f"{raw}(0x{bits}ull)"
            if SIZES.get(ctype) == SIZES[raw]:
                return f"{NS}as<{ctype}>({literal})"
            return f"static_cast<{ctype}>({NS}as<{floating}>({literal}))"
        if _INT.match(text):
            literal = text.rstrip("uU")
            return f"static_cast<{ctype}>({literal}ll)" if literal.startswith("-") else \
                f"static_cast<{ctype}>({literal}ull)"
        if _FLOAT.match(text):
            return f"static_cast<{ctype}>({text})"
        cpp, rtype, immediate = self.register(instr, text)
        if immediate:
            return f"static_cast<{ctype}>{cpp}"
        return cpp if rtype == ctype else f"{NS}as<{ctype}>({cpp})"

    def pred(self, instr, text):
        text = text.strip()
        if text.startswith("!"):
            return f"!({self.pred(instr, text[1:])})"
        return self.value(instr, text, "bool") if text not in ("1", "0") else text

    def assign(self, instr, dest, expr, ctype):
        """Statement storing ``expr`` (of type ``ctype``) to register ``dest``."""
        if dest == "_":
            return f"(void)({expr});"
        cpp, rtype, immediate = self.register(instr, dest.strip())
        if immediate or dest.strip() in SPECIAL or dest.strip().startswith("$") and \
                not self.ops[int(dest.strip()[1:])].output:
            self.error(instr, f"'{instr.opcode}' writes to '{dest.strip()}', which is not an output "
                              f"operand or a .reg register (outputs are \"=r\"(x) & co.)")
        return f"{cpp} = {expr};" if rtype == ctype else f"{cpp} = {NS}as<{rtype}>({expr});"

    def type_of(self, instr, suffix=None):
        suffix = suffix or instr.parts[-1]
        if suffix not in PTX_TYPES:
            self.error(instr, f"'{instr.opcode}' has no type pmpp's CPU engine knows ('.{suffix}')")
        return PTX_TYPES[suffix]

    def expect(self, instr, n):
        if len(instr.args) not in (n if isinstance(n, tuple) else (n,)):
            self.error(instr, f"'{instr.opcode}' takes {n} operands, not {len(instr.args)}")

    # ---- instructions ----------------------------------------------------------------------

    def instruction(self, instr):
        handler = getattr(self, "op_" + instr.parts[0], None)
        if handler is None:
            self.unsupported(instr)
        return handler(instr)

    def unsupported(self, instr, why=None):
        head = instr.parts[0]
        advice = why or ADVICE.get(head) or ADVICE.get(".".join(instr.parts[:2])) or (
            "write it in CUDA C++ (the intrinsic or the plain code that does the same); the engine's "
            "README lists the PTX it translates")
        self.error(instr, f"inline PTX instruction '{instr.opcode}' is not supported by pmpp's CPU "
                          f"engine: {advice}")

    def op_mov(self, instr):
        self.expect(instr, 2)
        t = self.type_of(instr)
        dest, src = instr.args
        if src.startswith("{"):       # pack: mov.b64 d, {lo, hi}
            pieces = _vector(src)
            piece_type = {2: {"uint32_t": "uint16_t", "uint64_t": "uint32_t"},
                          4: {"uint32_t": "uint8_t", "uint64_t": "uint16_t"}}.get(len(pieces), {}).get(t)
            if piece_type is None:
                self.error(instr, f"'{instr.opcode}' cannot pack {len(pieces)} values")
            bits = 8 * SIZES[piece_type]
            expr = " | ".join(f"({t}({self.value(instr, p, piece_type)}) << {bits * k})"
                              for k, p in enumerate(pieces))
            return self.assign(instr, dest, f"{t}({expr})", t)
        if dest.startswith("{"):      # unpack: mov.b64 {lo, hi}, d
            pieces = _vector(dest)
            bits = 8 * SIZES[t] // len(pieces)
            piece_type = {8: "uint8_t", 16: "uint16_t", 32: "uint32_t"}.get(bits)
            if piece_type is None:
                self.error(instr, f"'{instr.opcode}' cannot unpack into {len(pieces)} values")
            whole = self.value(instr, src, t)
            return " ".join(self.assign(instr, p, f"{piece_type}({whole} >> {bits * k})", piece_type)
                            for k, p in enumerate(pieces))
        return self.assign(instr, dest, self.value(instr, src, t), t)

    def op_cvta(self, instr):
        if "shared" in instr.parts or "local" in instr.parts or "const" in instr.parts:
            self.unsupported(instr, "only the global window exists on the engine: pass a generic "
                                    "pointer (\"l\") and use ld/st without a state space")
        self.expect(instr, 2)
        t = self.type_of(instr)
        return self.assign(instr, instr.args[0], self.value(instr, instr.args[1], t), t)

    def op_cvt(self, instr):
        self.expect(instr, 2)
        mods = set(instr.parts[1:-2])
        dtype, atype = self.type_of(instr, instr.parts[-2]), self.type_of(instr, instr.parts[-1])
        a = self.value(instr, instr.args[1], atype)
        dst_name, src_name = instr.parts[-2], instr.parts[-1]
        if dst_name == "tf32":
            if src_name != "f32" or "rna" not in mods:
                self.unsupported(instr, "of the conversions to TF32, cvt.rna.tf32.f32 is supported")
            return self.assign(instr, instr.args[0], f"{NS}tf32_rna({a})", dtype)
        if "f16" in (dst_name, src_name) or "bf16" in (dst_name, src_name) or "sat" in mods:
            self.unsupported(instr, "use the conversions of cuda_fp16.h (__float2half, __half2float) "
                                    "or C++ casts")
        rounding = {"rni": 0, "rzi": 1, "rmi": 2, "rpi": 3}
        to_float, from_float = dst_name[0] == "f", src_name[0] == "f"
        if mods & {"rz", "rm", "rp"}:
            self.unsupported(instr, "only round-to-nearest (.rn) conversions are supported")
        mode = next((rounding[m] for m in mods if m in rounding), None)
        if from_float and not to_float:
            expr = f"{NS}float_to_int<{dtype}>({a}, {mode if mode is not None else 1})"
        elif from_float and to_float and mode is not None:
            expr = f"static_cast<{dtype}>({NS}round_to_integer({a}, {mode}))"
        else:
            expr = f"static_cast<{dtype}>({a})"
        return self.assign(instr, instr.args[0], expr, dtype)

    # arithmetic: name -> (C++ helper or operator, number of sources)
    def op_add(self, instr):
        return self.arith(instr, "add", 2)

    def op_sub(self, instr):
        return self.arith(instr, "sub", 2)

    def op_min(self, instr):
        return self.arith(instr, "min_", 2)

    def op_max(self, instr):
        return self.arith(instr, "max_", 2)

    def op_neg(self, instr):
        return self.arith(instr, "neg", 1)

    def op_abs(self, instr):
        return self.arith(instr, "abs_", 1)

    def op_div(self, instr):
        return self.arith(instr, "/", 2)

    def op_rem(self, instr):
        return self.arith(instr, "%", 2)

    def op_and(self, instr):
        return self.arith(instr, "&", 2)

    def op_or(self, instr):
        return self.arith(instr, "|", 2)

    def op_xor(self, instr):
        return self.arith(instr, "^", 2)

    def op_not(self, instr):
        return self.arith(instr, "~", 1)

    def op_sqrt(self, instr):
        return self.arith(instr, "std::sqrt", 1)

    def op_rcp(self, instr):
        return self.arith(instr, "1/", 1)

    def op_fma(self, instr):
        return self.arith(instr, "std::fma", 3)

    def op_mul(self, instr):
        t = self.type_of(instr)
        if t in ("float", "double"):
            return self.arith(instr, "*", 2)
        if "wide" in instr.parts:
            return self.wide(instr, 2)
        return self.arith(instr, "mul_hi" if "hi" in instr.parts else "mul_lo", 2)

    def op_mad(self, instr):
        t = self.type_of(instr)
        if t in ("float", "double"):
            return self.arith(instr, "std::fma", 3)
        if "wide" in instr.parts:
            return self.wide(instr, 3)
        self.expect(instr, 4)
        mul = "mul_hi" if "hi" in instr.parts else "mul_lo"
        a, b, c = (self.value(instr, x, t) for x in instr.args[1:])
        return self.assign(instr, instr.args[0], f"{NS}add<{t}>({NS}{mul}<{t}>({a}, {b}), {c})", t)

    def wide(self, instr, n):
        self.expect(instr, n + 1)
        t = self.type_of(instr)
        if SIZES[t] not in (2, 4):
            self.error(instr, f"'{instr.opcode}': .wide takes 16- or 32-bit operands")
        wide_t = {"int16_t": "int32_t", "uint16_t": "uint32_t", "int32_t": "int64_t",
                  "uint32_t": "uint64_t"}[t]
        a, b = (self.value(instr, x, t) for x in instr.args[1:3])
        expr = f"{wide_t}({NS}mul_wide<{t}>({a}, {b}))"
        if n == 3:
            expr = f"{NS}add<{wide_t}>({expr}, {self.value(instr, instr.args[3], wide_t)})"
        return self.assign(instr, instr.args[0], expr, wide_t)

    def arith(self, instr, op, n):
        self.expect(instr, n + 1)
        mods = set(instr.parts[1:-1])
        t = self.type_of(instr)
        floating = t in ("float", "double")
        if mods & {"rz", "rm", "rp"} and floating:
            self.unsupported(instr, "only round-to-nearest (.rn) floating-point arithmetic is supported")
        if mods & {"cc", "hi", "sat"} - ({"sat"} if floating else set()) - ({"hi"} if op == "mul_hi" else set()):
            self.unsupported(instr, "carry chains (.cc, addc) and integer saturation are not translated: "
                                    "write the arithmetic in C++")
        srcs = [self.value(instr, x, t) for x in instr.args[1:]]
        if op.isidentifier() or op.endswith("_"):
            expr = f"{NS}{op}<{t}>({', '.join(srcs)})" if not (floating and op in ("add", "sub", "mul_lo")) \
                else f"{t}({srcs[0]} {'+' if op == 'add' else '-' if op == 'sub' else '*'} {srcs[1]})"
        elif op.startswith("std::"):
            expr = f"{t}({op}({', '.join(srcs)}))"
        elif op == "1/":
            expr = f"{t}({t}(1) / {srcs[0]})"
        elif op == "~":
            expr = f"{t}(!{srcs[0]})" if t == "bool" else f"{t}(~{srcs[0]})"
        else:
            expr = f"{t}({srcs[0]} {op} {srcs[1]})"
        if "sat" in mods and t == "float":
            expr = f"{NS}saturate_({expr})"
        return self.assign(instr, instr.args[0], expr, t)

    def op_shl(self, instr):
        return self.shift(instr, "shl")

    def op_shr(self, instr):
        return self.shift(instr, "shr")

    def shift(self, instr, op):
        self.expect(instr, 3)
        t = self.type_of(instr)
        a, b = self.value(instr, instr.args[1], t), self.value(instr, instr.args[2], "uint32_t")
        return self.assign(instr, instr.args[0], f"{NS}{op}<{t}>({a}, {b})", t)

    def op_popc(self, instr):
        return self.count(instr, "popc")

    def op_clz(self, instr):
        return self.count(instr, "clz")

    def count(self, instr, op):
        self.expect(instr, 2)
        t = self.type_of(instr)
        return self.assign(instr, instr.args[0], f"{NS}{op}<{t}>({self.value(instr, instr.args[1], t)})",
                           "uint32_t")

    def op_brev(self, instr):
        self.expect(instr, 2)
        t = self.type_of(instr)
        if t not in ("uint32_t", "uint64_t"):
            self.error(instr, f"'{instr.opcode}': brev takes .b32 or .b64")
        return self.assign(instr, instr.args[0], f"{NS}brev({self.value(instr, instr.args[1], t)})", t)

    def op_bfe(self, instr):
        self.expect(instr, 4)
        t = self.type_of(instr)
        a = self.value(instr, instr.args[1], t)
        b, c = (self.value(instr, x, "uint32_t") for x in instr.args[2:])
        return self.assign(instr, instr.args[0], f"{NS}bfe<{t}>({a}, {b}, {c})", t)

    def op_bfi(self, instr):
        self.expect(instr, 5)
        t = self.type_of(instr)
        a, b = (self.value(instr, x, t) for x in instr.args[1:3])
        c, d = (self.value(instr, x, "uint32_t") for x in instr.args[3:])
        return self.assign(instr, instr.args[0], f"{NS}bfi<{t}>({a}, {b}, {c}, {d})", t)

    def op_prmt(self, instr):
        if len(instr.parts) != 2:
            self.unsupported(instr, "prmt.b32 in its default mode is supported (__byte_perm)")
        self.expect(instr, 4)
        a, b, c = (self.value(instr, x, "uint32_t") for x in instr.args[1:])
        return self.assign(instr, instr.args[0], f"{NS}prmt({a}, {b}, {c})", "uint32_t")

    def op_lop3(self, instr):
        self.expect(instr, 5)
        a, b, c, lut = (self.value(instr, x, "uint32_t") for x in instr.args[1:])
        return self.assign(instr, instr.args[0], f"{NS}lop3({a}, {b}, {c}, {lut})", "uint32_t")

    _COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
                "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}

    def op_setp(self, instr):
        cmp, t = instr.parts[1], self.type_of(instr)
        boolop = next((p for p in instr.parts[2:-1] if p in ("and", "or", "xor")), None)
        self.expect(instr, 4 if boolop else 3)
        a, b = (self.value(instr, x, t) for x in instr.args[1:3])
        base, unordered = (cmp[:-1], True) if cmp.endswith("u") and cmp[:-1] in self._COMPARE else (cmp, False)
        if cmp in ("num", "nan"):
            test = f"({'!' if cmp == 'nan' else ''}({a} == {a} && {b} == {b}))"
        elif base in self._COMPARE:
            test = f"({a} {self._COMPARE[base]} {b})"
            if unordered:
                test = f"({test} || {a} != {a} || {b} != {b})"
        else:
            self.error(instr, f"'{instr.opcode}': unknown comparison '.{cmp}'")
        if boolop:
            op = {"and": "&&", "or": "||", "xor": "!="}[boolop]
            c = self.pred(instr, instr.args[3])
            whole, negated = f"({test} {op} {c})", f"(!{test} {op} {c})"
        else:
            whole, negated = test, f"!{test}"
        dests = instr.args[0].split("|")
        code = self.assign(instr, dests[0], whole, "bool")
        if len(dests) == 2:
            code += " " + self.assign(instr, dests[1], negated, "bool")
        return code

    def op_selp(self, instr):
        self.expect(instr, 4)
        t = self.type_of(instr)
        a, b = (self.value(instr, x, t) for x in instr.args[1:3])
        return self.assign(instr, instr.args[0], f"({self.pred(instr, instr.args[3])} ? {a} : {b})", t)

    # ---- memory ----------------------------------------------------------------------------

    def address(self, instr, text, ctype, const):
        m = re.fullmatch(r"\[\s*([^\]+\-]+?)\s*(?:([+-])\s*(\w+)\s*)?\]", text.strip())
        if not m:
            self.error(instr, f"'{instr.opcode}': cannot read the address '{text}' (write [%1] or [%1+8])")
        base = m.group(1)
        rtype = "" if _INT.match(base) else self.register(instr, base)[1]
        if rtype and SIZES.get(rtype) != 8:
            self.error(instr, f"'{instr.opcode}': the address '{base}' is a 32-bit register; pass the "
                              f"pointer as a 64-bit operand: \"l\"(pointer)")
        addr = self.value(instr, base, "uint64_t")
        if m.group(2):
            addr = f"{addr} {m.group(2)} {int(m.group(3), 0)}"
        qual = "const " if const else ""
        return f"reinterpret_cast<{qual}{ctype} *>(static_cast<uintptr_t>({addr}))"

    def space(self, instr):
        for bad in ("shared", "local", "const", "param", "tex"):
            if bad in instr.parts or any(p.startswith(bad + ":") for p in instr.parts):
                self.unsupported(instr, f"the .{bad} state space is not translated: pass a generic "
                                        f"pointer (\"l\"(p)) and leave the state space out, or use C++")

    def access_type(self, instr):
        vector = next((int(p[1:]) for p in instr.parts if re.fullmatch(r"v[248]", p)), 1)
        t = self.type_of(instr)
        if vector > 1 and SIZES[t] * vector > 16:
            self.error(instr, f"'{instr.opcode}': vectors of more than 16 bytes are not supported")
        return t, vector, (t if vector == 1 else f"{NS}vec<{t}, {vector}>")

    def coherent(self, instr):
        return bool(set(instr.parts) & {"volatile", "relaxed", "acquire", "release", "cg", "cv", "wt"})

    def op_ld(self, instr):
        self.space(instr)
        self.expect(instr, 2)
        t, n, whole = self.access_type(instr)
        ptr = self.address(instr, instr.args[1], whole, const=True)
        load = f"{NS}load_coherent({ptr})" if self.coherent(instr) and n == 1 else f"*{ptr}"
        fence = " __threadfence();" if "acquire" in instr.parts else ""
        if n == 1:
            return self.assign(instr, instr.args[0], load, t) + fence
        self.counter += 1
        tmp = f"__pmpp_v{self.counter}"
        dests = _vector(instr.args[0])
        if len(dests) != n:
            self.error(instr, f"'{instr.opcode}' loads {n} values into {len(dests)} registers")
        return (f"const {whole} {tmp} = {load};" + fence + " " +
                " ".join(self.assign(instr, d, f"{tmp}.v[{k}]", t) for k, d in enumerate(dests)))

    def op_st(self, instr):
        self.space(instr)
        self.expect(instr, 2)
        t, n, whole = self.access_type(instr)
        ptr = self.address(instr, instr.args[0], whole, const=False)
        fence = "__threadfence(); " if "release" in instr.parts else ""
        if n == 1:
            v = self.value(instr, instr.args[1], t)
            if self.coherent(instr):
                return f"{fence}{NS}store_coherent({ptr}, {v});"
            return f"{fence}*{ptr} = {v};"
        srcs = _vector(instr.args[1])
        if len(srcs) != n:
            self.error(instr, f"'{instr.opcode}' stores {n} values, given {len(srcs)}")
        return f"{fence}*{ptr} = {whole}{{{{{', '.join(self.value(instr, s, t) for s in srcs)}}}}};"

    _ATOMIC = {"add": "atomicAdd", "exch": "atomicExch", "cas": "atomicCAS", "min": "atomicMin",
               "max": "atomicMax", "and": "atomicAnd", "or": "atomicOr", "xor": "atomicXor",
               "inc": "atomicInc", "dec": "atomicDec"}
    _ATOMIC_TYPES = {"uint32_t": "unsigned int", "int32_t": "int", "uint64_t": "unsigned long long",
                     "int64_t": "long long", "float": "float", "double": "double"}

    def atomic(self, instr, has_result):
        self.space(instr)
        op = next((p for p in instr.parts[1:-1] if p in self._ATOMIC), None)
        if op is None:
            self.unsupported(instr, "atom/red with add, exch, cas, min, max, and, or, xor, inc or dec "
                                    "are supported")
        t = self.type_of(instr)
        if t not in self._ATOMIC_TYPES:
            self.error(instr, f"'{instr.opcode}': atomics on .{instr.parts[-1]} are not supported")
        nsrc = 2 if op == "cas" else 1
        args = instr.args[1:] if has_result else instr.args
        self.expect(instr, nsrc + 1 + has_result)
        ctype = self._ATOMIC_TYPES[t]
        ptr = self.address(instr, args[0], ctype, const=False)
        vals = ", ".join(f"static_cast<{ctype}>({self.value(instr, a, t)})" for a in args[1:])
        call = f"{self._ATOMIC[op]}({ptr}, {vals})"
        before = "__threadfence(); " if set(instr.parts) & {"release", "acq_rel"} else ""
        after = " __threadfence();" if set(instr.parts) & {"acquire", "acq_rel"} else ""
        if has_result:
            return before + self.assign(instr, instr.args[0], f"{t}({call})", t) + after
        return f"{before}(void){call};{after}"

    def op_atom(self, instr):
        return self.atomic(instr, True)

    def op_red(self, instr):
        return self.atomic(instr, False)

    # ---- synchronization and warps ---------------------------------------------------------

    def op_bar(self, instr):
        if instr.parts[1:2] == ["warp"]:
            self.expect(instr, 1)
            return f"::pmpp::syncwarp(__FILE__, __LINE__, {self.value(instr, instr.args[0], 'uint32_t')});"
        if instr.parts[1:2] == ["red"]:
            return self.barrier_reduce(instr)
        if not set(instr.parts[1:]) <= {"sync", "aligned"}:
            self.unsupported(instr, "bar.sync / barrier.sync on barrier 0 is supported (__syncthreads())")
        self.expect(instr, (1, 2))
        if len(instr.args) == 2:
            self.unsupported(instr, "named barriers with a thread count are not supported by the "
                                    "engine: use __syncthreads() for the whole block")
        ident = instr.args[0]
        if _INT.match(ident):
            if int(ident, 0) != 0:
                self.unsupported(instr, "named barriers (other than 0) are not supported: use "
                                        "__syncthreads()")
            return "pmpp_syncthreads(__FILE__, __LINE__);"
        return f"{NS}bar_sync({self.value(instr, ident, 'uint32_t')}, __FILE__, __LINE__);"

    op_barrier = op_bar

    def barrier_reduce(self, instr):
        kind = instr.parts[2] if len(instr.parts) > 2 else ""
        ops = {"popc": "PMPP_BAR_COUNT", "and": "PMPP_BAR_AND", "or": "PMPP_BAR_OR"}
        if kind not in ops:
            self.unsupported(instr, "bar.red.popc/and/or are supported")
        self.expect(instr, (3, 4))
        if instr.args[1].strip() not in ("0",):
            self.unsupported(instr, "bar.red on barrier 0 is supported")
        call = f"pmpp_syncthreads_op({ops[kind]}, {self.pred(instr, instr.args[-1])} ? 1 : 0, __FILE__, __LINE__)"
        return self.assign(instr, instr.args[0], f"uint32_t({call})", "uint32_t") if kind == "popc" else \
            self.assign(instr, instr.args[0], f"bool({call})", "bool")

    def op_membar(self, instr):
        return "__threadfence_block();" if "cta" in instr.parts else "__threadfence();"

    def op_fence(self, instr):
        return "__threadfence_block();" if "cta" in instr.parts else "__threadfence();"

    def op_shfl(self, instr):
        if "sync" not in instr.parts:
            self.unsupported(instr, "shfl without .sync was removed (sm_70 on): use shfl.sync with a "
                                    "member mask, or __shfl_sync")
        modes = {"idx": "PMPP_W_SHFL_IDX", "up": "PMPP_W_SHFL_UP", "down": "PMPP_W_SHFL_DOWN",
                 "bfly": "PMPP_W_SHFL_XOR"}
        mode = next((modes[p] for p in instr.parts if p in modes), None)
        if mode is None or instr.parts[-1] != "b32":
            self.unsupported(instr, "shfl.sync.{idx,up,down,bfly}.b32 are supported")
        self.expect(instr, 5)
        dests = instr.args[0].split("|")
        a, b, c, mask = (self.value(instr, x, "uint32_t") for x in instr.args[1:])
        if len(dests) == 1:
            return self.assign(instr, dests[0],
                               f"{NS}shfl({mode}, {a}, {b}, {c}, {mask}, nullptr, __FILE__, __LINE__)", "uint32_t")
        self.counter += 1
        p = f"__pmpp_p{self.counter}"
        return (f"bool {p} = false; " + self.assign(
            instr, dests[0], f"{NS}shfl({mode}, {a}, {b}, {c}, {mask}, &{p}, __FILE__, __LINE__)", "uint32_t")
            + " " + self.assign(instr, dests[1], p, "bool"))

    def op_vote(self, instr):
        ops = {"ballot": "PMPP_W_BALLOT", "any": "PMPP_W_ANY", "all": "PMPP_W_ALL"}
        kind = next((p for p in instr.parts if p in ops or p == "uni"), None)
        if "sync" not in instr.parts or kind is None:
            self.unsupported(instr, "vote.sync.{ballot,any,all,uni} are supported (vote without .sync "
                                    "was removed: use __ballot_sync & co.)")
        self.expect(instr, 3)
        p, mask = self.pred(instr, instr.args[1]), self.value(instr, instr.args[2], "uint32_t")
        vote = f"::pmpp::vote({{op}}, __FILE__, __LINE__, {mask}, {p})"
        if kind == "ballot":
            return self.assign(instr, instr.args[0], vote.format(op=ops["ballot"]), "uint32_t")
        if kind == "uni":
            expr = f"({vote.format(op='PMPP_W_ALL')} != 0 || {vote.format(op='PMPP_W_ANY')} == 0)"
        else:
            expr = f"({vote.format(op=ops[kind])} != 0)"
        return self.assign(instr, instr.args[0], expr, "bool")

    def op_activemask(self, instr):
        self.expect(instr, 1)
        return self.assign(instr, instr.args[0], "pmpp_activemask()", "uint32_t")

    def op_match(self, instr):
        if "any" not in instr.parts or "sync" not in instr.parts:
            self.unsupported(instr, "match.any.sync is supported; for match.all use __match_all_sync")
        self.expect(instr, 3)
        t = self.type_of(instr)
        a, mask = self.value(instr, instr.args[1], t), self.value(instr, instr.args[2], "uint32_t")
        return self.assign(instr, instr.args[0], f"::pmpp::match_any(__FILE__, __LINE__, {mask}, {a})",
                           "uint32_t")

    def op_redux(self, instr):
        ops = {"add": "PMPP_W_REDUCE_ADD", "and": "PMPP_W_REDUCE_AND", "or": "PMPP_W_REDUCE_OR",
               "xor": "PMPP_W_REDUCE_XOR"}
        kind = next((p for p in instr.parts if p in ops or p in ("min", "max")), None)
        if "sync" not in instr.parts or kind is None:
            self.unsupported(instr, "redux.sync.{add,min,max,and,or,xor} on 32-bit integers are supported")
        self.expect(instr, 3)
        t = self.type_of(instr)
        a, mask = self.value(instr, instr.args[1], t), self.value(instr, instr.args[2], "uint32_t")
        if kind in ("min", "max"):
            op = f"PMPP_W_REDUCE_{kind.upper()}_{'I' if t == 'int32_t' else 'U'}"
        else:
            op = ops[kind]
        expr = f"uint32_t(pmpp_warp_op({op}, {mask}, uint32_t({a}), 0, 32, __FILE__, __LINE__))"
        return self.assign(instr, instr.args[0], expr, "uint32_t")

    def op_nanosleep(self, instr):
        return "pmpp_yield();"   # a thread that sleeps in a wait lets the others of its block run

    def op_trap(self, instr):
        return 'pmpp_trap("trap (inline PTX)", __FILE__, __LINE__);'

    def op_brkpt(self, instr):
        return 'pmpp_trap("brkpt (inline PTX)", __FILE__, __LINE__);'


# What to write instead of a PTX instruction the engine does not translate.
ADVICE = {
    "tex": "texture fetches are not supported: read the array through a pointer",
    "tld4": "texture fetches are not supported: read the array through a pointer",
    "suld": "surfaces are not supported: read and write the array through a pointer",
    "sust": "surfaces are not supported: read and write the array through a pointer",
    "mma": "tensor-core instructions are not emulated: write the product as multiply-adds in CUDA C "
           "for the CPU engine",
    "wmma": "tensor-core instructions are not emulated: write the product as multiply-adds in CUDA C",
    "wgmma": "tensor-core instructions are not emulated: write the product as multiply-adds in CUDA C",
    "ldmatrix": "load the fragments from shared memory in C++",
    "stmatrix": "store the fragments to shared memory in C++",
    "cp": "use __pipeline_memcpy_async (cuda_pipeline.h) or cuda::memcpy_async, or a plain copy",
    "mbarrier": "use cuda::barrier (cuda/barrier) or __syncthreads()",
    "bra": "branch in C++ (if, loops) around the asm statement",
    "call": "call the function in C++",
    "ret": "return in C++",
    "exit": "return from the kernel in C++",
    "addc": "carry chains are not translated: write the arithmetic in C++ (64-bit or __int128)",
    "subc": "carry chains are not translated: write the arithmetic in C++ (64-bit or __int128)",
    "madc": "carry chains are not translated: write the arithmetic in C++ (64-bit or __int128)",
    "prefetch": "leave the prefetch out on the CPU engine",
    "prefetchu": "leave the prefetch out on the CPU engine",
    "griddepcontrol": "leave it out on the CPU engine (launches run one after another)",
    "elect": "pick the lane in C++: __ffs(__activemask()) - 1 == lane",
}


def _split_args(text):
    """Operands of a PTX instruction: split at commas outside ``{}`` and ``[]``."""
    return split_top(text, "{[", "}]")


def _vector(text):
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return [text]
    return [p.strip() for p in text[1:-1].split(",")]
