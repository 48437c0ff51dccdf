"""What the kernels' headers expect, against what the GPUs recorded.

A header's `// Expect:` paragraph states ratios in the convention of kernels/README.md. Each one is
checked against every recorded GPU that has both rows in one run; a number with an x or a % beside
a variant's name that the convention cannot read is an error, so no ratio goes unchecked.
"""
from __future__ import annotations

import functools
import math
import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

import pytest

from pmpp import lab, results, tuning

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
TOLERANCE = 0.15                              # beyond the stated bounds: "~N" is N +- 15%
CEILINGS = {"copy": "copy_gbs", "read": "read_gbs"}

NUMBER = r"\d+(?:\.\d+)?"
GPU = r"(?:RTX |GTX )?[A-Z]+\d+\w*"
# What reads as a ratio: a number with an x or a %, or a number (or fraction) faster or slower.
RATIO_LIKE = re.compile(rf"(?<![\w.]){NUMBER}(?:x?-{NUMBER})?(?:x(?!\w)|%)"
                        rf"|(?<![\w./]){NUMBER}(?:/{NUMBER})? (?:faster|slower)\b")
CLAUSE_END = re.compile(r"[;:()]| - |\.(?=\s|$)")


# ---------------------------------------------------------------------------------------------
# Parsing

@dataclass(frozen=True)
class Names:
    """What a chapter's statements can name: variants (file stems), library rows, problem sets."""
    stems: frozenset
    libraries: frozenset
    sets: frozenset = frozenset()

    def refs(self) -> list[str]:
        numbers = {s[:2] for s in self.stems if s[:2].isdigit()}
        return _longest_first({*self.stems, *self.libraries, *numbers, *CEILINGS})

    def mentions(self) -> list[str]:
        """The refs but "read" (a common verb), and the parts of stems that read as names rather
        than words (reduce0, tf32_mma)."""
        tails = {s[3:] for s in self.stems if re.search(r"\d|_", s[3:])}
        return _longest_first({*self.refs(), *tails} - {"read"})

    def row(self, ref: str) -> str:
        """The row a ref names: a two-digit number names its variant's stem."""
        if re.fullmatch(r"\d\d", ref):
            return next(s for s in self.stems if s.startswith(ref + "_"))
        return ref


def _longest_first(names) -> list[str]:
    return sorted(names, key=lambda n: (-len(n), n))


def _alternatives(names) -> str:
    return "|".join(map(re.escape, names)) or r"(?!)"


@dataclass(frozen=True)
class Statement:
    text: str
    ref: str                  # a variant's stem, a library row's name, or a ceiling (copy, read)
    low: float                # bounds on the ratio, before the tolerance
    high: float
    direction: str | None     # "slower": the ratio is time(this) / time(ref), else the reverse
    problem_set: str | None   # None: the chapter's default problem
    gpus: tuple               # () for every recorded GPU

    @property
    def slower(self) -> bool:
        return self.direction == "slower"

    def allows(self, ratio: float) -> bool:
        return self.low * (1 - TOLERANCE) <= ratio <= self.high * (1 + TOLERANCE)


def statement_pattern(names: Names) -> re.Pattern:
    return re.compile(
        r"(?P<bound>~|about |roughly |at least |at most )?"
        rf"(?<![\w.])(?P<low>{NUMBER})(?:x?-(?P<high>{NUMBER}))?(?P<unit>x|%)(?!\w)"
        r"(?: (?P<direction>faster|slower)(?: than)?)?"
        rf"(?: (?P<ref>{_alternatives(names.refs())})(?!\w))?"
        rf"(?: on (?P<set>{_alternatives(_longest_first(names.sets))})(?!\w))?"
        rf"(?: on the (?P<gpus>{GPU}(?:(?:, | and )(?:the )?{GPU})*))?")


def expect_paragraph(source: str) -> str:
    """The header's Expect paragraph, from `// Expect:` to the end of the leading comment, on one line."""
    header = []
    for line in source.splitlines():
        if not line.startswith("//"):
            break
        header.append(line[2:].strip())
    start = next((i for i, line in enumerate(header) if line.startswith("Expect:")), len(header))
    return " ".join(header[start:])


def parse(paragraph: str, names: Names) -> tuple[list[Statement], list[str]]:
    """The statements of a paragraph, and what reads as a ratio beside a name but is not one."""
    statements, problems, spans = [], [], []
    previous = None
    for m in statement_pattern(names).finditer(paragraph):
        if not (m["ref"] or m["set"] or m["gpus"]):
            continue
        spans.append(m.span())
        statement = _statement(m, previous, names)
        if isinstance(statement, str):
            problems.append(statement)
        else:
            statements.append(statement)
            previous = statement
    return statements, problems + _unread_ratios(paragraph, names, spans)


def _statement(m: re.Match, previous: Statement | None, names: Names) -> Statement | str:
    if m["ref"] is None and previous is None:
        return f"{m[0]!r}: names no row, and no statement before it does"
    direction = m["direction"] or (previous.direction if m["ref"] is None else None)
    if m["unit"] == "%" and not direction:
        return f"{m[0]!r}: a percentage needs 'faster than' or 'slower than'"
    low, high = _bounds(m)
    return Statement(
        text=m[0], ref=names.row(m["ref"]) if m["ref"] else previous.ref, low=low, high=high,
        direction=direction,
        problem_set=m["set"] or (previous.problem_set if m["ref"] is None else None),
        gpus=tuple(re.findall(GPU, m["gpus"] or "")))


def _bounds(m: re.Match) -> tuple[float, float]:
    """The stated bounds as ratios: "10-30% faster" is 1.1-1.3."""
    as_ratio = (lambda v: 1 + v / 100) if m["unit"] == "%" else (lambda v: v)
    low, high = as_ratio(float(m["low"])), as_ratio(float(m["high"] or m["low"]))
    if m["bound"] == "at least ":
        return low, math.inf
    if m["bound"] == "at most ":
        return 0.0, high
    return low, high


def _unread_ratios(paragraph: str, names: Names, read: list[tuple[int, int]]) -> list[str]:
    """Ratio-like numbers outside the statements, in a clause that names a variant or row."""
    tokens = [t for t in RATIO_LIKE.finditer(paragraph)
              if not any(a <= t.start() < b for a, b in read)]
    blanked = RATIO_LIKE.sub(lambda t: " " * len(t[0]), paragraph)
    mentions = list(re.finditer(rf"(?<![\w.])(?:{_alternatives(names.mentions())})(?!\w)", blanked))
    clause_of = _clauses(blanked, mentions)
    named = {clause_of(m.start()): m[0] for m in mentions}
    return [f"{t[0]!r} beside {named[clause_of(t.start())]!r} is not a ratio in the convention "
            "of kernels/README.md (write other multiples out: '19 times')"
            for t in tokens if clause_of(t.start()) in named]


def _clauses(text: str, mentions: list[re.Match]):
    """Position -> clause number; a name's own punctuation (cub::, (torch conv2d)) splits nothing."""
    masked = list(text)
    for m in mentions:
        masked[m.start():m.end()] = "n" * len(m[0])
    ends = [e.start() for e in CLAUSE_END.finditer("".join(masked))]
    return lambda position: bisect_right(ends, position)


# ---------------------------------------------------------------------------------------------
# Checking against the recordings

def row_pairs(run: dict, key: str, variant: str, ref: str) -> list[tuple[dict, dict | None]]:
    """The (variant, ref) rows of one run's key; where a key repeats names (a sweep over
    problems), rows pair by problem. For a ceiling, the variant's rows with a rate, and None."""
    rows = run["chapters"].get(key, [])
    mine = [r for r in rows if r["name"] == variant]
    if ref in CEILINGS:
        has_ceiling = run["ceilings"].get(CEILINGS[ref])
        return [(r, None) for r in mine if r.get("gbps") and has_ceiling]
    theirs = [r for r in rows if r["name"] == ref]
    if len(mine) == 1 and len(theirs) == 1:
        return [(mine[0], theirs[0])]
    by_problem = {r["problem"]: r for r in theirs}
    return [(r, by_problem[r["problem"]]) for r in mine if r["problem"] in by_problem]


def ratio(statement: Statement, run: dict, row: dict, other: dict | None) -> float:
    if other is None:
        value = row["gbps"] / run["ceilings"][CEILINGS[statement.ref]]
    else:
        value = other["median_us"] / row["median_us"]
    return 1 / value if statement.slower else value


def measured(statement: Statement, variant: str, key: str, runs) -> dict[str, list[float]]:
    """Per GPU, the ratio in its newest run (runs: newest first) with both rows; noisy rows left out."""
    found = {}
    for run in runs:
        gpu = lab.short_name(run["device"]["name"])
        pairs = row_pairs(run, key, variant, statement.ref)
        if gpu in found or not pairs:
            continue
        found[gpu] = [ratio(statement, run, a, b) for a, b in pairs
                      if not any(results.noisy(r) for r in (a, b) if r is not None)]
    return found


def check(statement: Statement, variant: str, chapter: str, runs) -> list[str]:
    key = chapter if statement.problem_set is None else f"{chapter}:{statement.problem_set}"
    found = measured(statement, variant, key, runs)
    gpus = statement.gpus or tuple(gpu for gpu, values in found.items() if values)
    allowed = f"{statement.low * (1 - TOLERANCE):.2f}-{statement.high * (1 + TOLERANCE):.2f}"
    if not gpus:
        return [f"{statement.text!r}: no recorded run of {key} has both rows, not noisy"]
    errors = []
    for gpu in gpus:
        values = found.get(gpu)
        if not values:
            errors.append(f"{statement.text!r}: the {gpu} recorded no {key} run with both rows, not noisy")
        elif not all(statement.allows(v) for v in values):
            shown = ", ".join(f"{v:.2f}" for v in values)
            errors.append(f"{statement.text!r}: the {gpu} recorded {shown}, outside {allowed}")
    return errors


# ---------------------------------------------------------------------------------------------
# The workbook's headers

HEADERS = sorted(p for p in KERNELS.rglob("*.cu") if expect_paragraph(p.read_text()))


@functools.cache
def recorded_runs() -> tuple:
    # The variants as the headers describe them: runs built with tuned configurations left out.
    return tuple(run for run in results.recorded() if tuning.run_as_defined(run))


@functools.cache
def chapter_names(chapter: str) -> Names:
    keys = {(i, k) for i, run in enumerate(recorded_runs()) for k in run["chapters"]
            if k == chapter or k.startswith(chapter + ":")}
    libraries = {e["name"] for i, k in keys for e in recorded_runs()[i]["chapters"][k]
                 if e["kind"] == "library"}
    return Names(stems=frozenset(p.stem for p in (KERNELS / chapter).glob("*.cu")),
                 libraries=frozenset(libraries),
                 sets=frozenset(k.split(":", 1)[1] for _, k in keys if ":" in k))


def header_statements(path: Path) -> tuple[list[Statement], list[str]]:
    return parse(expect_paragraph(path.read_text()), chapter_names(path.parent.name))


@pytest.mark.parametrize("path", HEADERS, ids=lambda p: str(p.relative_to(KERNELS)))
def test_stated_ratios_follow_the_convention(path):
    _, problems = header_statements(path)
    assert not problems, f"{path.relative_to(KERNELS)}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", HEADERS, ids=lambda p: str(p.relative_to(KERNELS)))
def test_stated_ratios_match_every_recorded_gpu(path):
    statements, _ = header_statements(path)
    errors = [e for s in statements for e in check(s, path.stem, path.parent.name, recorded_runs())]
    assert not errors, f"{path.relative_to(KERNELS)}:\n  " + "\n  ".join(errors)


def test_the_headers_state_ratios_the_checker_reads():
    wgmma = KERNELS / "implicit_gemm" / "10_wgmma_tma.cu"
    assert any(s.ref == "08_tf32_mma" for s in header_statements(wgmma)[0])
    assert sum(len(header_statements(p)[0]) for p in HEADERS) >= 20


# ---------------------------------------------------------------------------------------------
# The checker itself, on made-up headers and rows

DEMO = Names(stems=frozenset({"01_reduce0", "02_reduce1"}), libraries=frozenset({"lib (fast)"}),
             sets=frozenset({"small"}))


def demo_row(name: str, median_us: float, gbps: float | None = None, noisy: bool = False) -> dict:
    return {"name": name, "kind": "library" if name == "lib (fast)" else "variant", "problem": "n=1",
            "median_us": median_us, "min_us": median_us, "gbps": gbps, "correct": True, "noisy": noisy}


def demo_run(gpu: str, slow_us: float, fast_us: float, library_us: float = 100.0, gbps: float = 900.0,
             noisy: bool = False, date: str = "2026-01-01") -> dict:
    rows = [demo_row("01_reduce0", slow_us, noisy=noisy), demo_row("02_reduce1", fast_us, gbps=gbps),
            demo_row("lib (fast)", library_us)]
    return {"device": {"name": f"NVIDIA {gpu}"}, "date": date, "ceilings": {"copy_gbs": 1000.0},
            "chapters": {"demo": rows}}


# 02_reduce1 is 1.5x 01_reduce0 on the H200 and 2x on the H100; 0.9x and 0.7x copy.
DEMO_RUNS = [demo_run("H200", 300.0, 200.0), demo_run("H100", 400.0, 200.0, 150.0, gbps=700.0)]


def header(*lines: str) -> str:
    return "".join(f"// {line}\n" for line in lines) + 'extern "C" __global__ void k() {}\n'


def demo_errors(source: str, runs=DEMO_RUNS) -> list[str]:
    statements, problems = parse(expect_paragraph(source), DEMO)
    assert not problems
    return [e for s in statements for e in check(s, "02_reduce1", "demo", runs)]


def test_a_wrong_ratio_is_caught():
    source = header("Demo, step 2: the fast one", "Expect: the tree without divergence, ~3x",
                    "01_reduce0 at large n.")
    errors = demo_errors(source)
    assert len(errors) == 2
    assert "the H200 recorded 1.50" in errors[0] and "the H100 recorded 2.00" in errors[1]
    assert demo_errors(header("Expect: 1.5x 01_reduce0 on the H200, 1.5x on the H100."))
    assert demo_errors(header("Expect: at least 0.85x copy."))            # the H100's 0.7x
    assert demo_errors(header("Expect: faster than the library, 1.2x lib (fast)."))


def test_a_right_ratio_passes_within_the_tolerance():
    assert not demo_errors(header("Expect: 1.5-2x 01_reduce0; 1.50x 01 on the H200, 2.0x on the H100."))
    assert not demo_errors(header("Expect: 50-100% faster than 01_reduce0, at least 0.6x copy."))
    assert not demo_errors(header("Expect: ~0.5x lib (fast) on the H200,",
                                  "1.3x slower than lib (fast) on the H100."))


def test_a_ratio_nobody_recorded_is_an_error():
    assert demo_errors(header("Expect: ~1.5x 01_reduce0 on the RTX 4090."))
    assert demo_errors(header("Expect: ~1.5x 01_reduce0 on small."))      # no demo:small recording


def test_noisy_rows_are_never_used():
    runs = [demo_run("H200", 900.0, 200.0, noisy=True), demo_run("H200", 300.0, 200.0, date="2025-01-01")]
    assert demo_errors(header("Expect: ~4.5x 01_reduce0."), runs)        # not the noisy row,
    assert demo_errors(header("Expect: ~1.5x 01_reduce0."), runs)        # nor an older run instead


def test_a_ratio_outside_the_convention_is_reported():
    for paragraph in ("Expect: 2x or more faster than 01_reduce0.", "Expect: 19x the intensity of 01.",
                      "Expect: ~5/3 faster than 01.", "Expect: within ~10% of the copy bandwidth.",
                      "Expect: 1.8x over reduce0 (Harris).", "Expect: 20% 01_reduce0."):
        _, problems = parse(paragraph, DEMO)
        assert problems, paragraph


def test_numbers_away_from_any_name_are_prose():
    paragraph = "Expect: 8x fewer loads; the TF32 peak is ~7x the FP32 peak (Harris: 2.33x)."
    assert parse(paragraph, DEMO) == ([], [])
