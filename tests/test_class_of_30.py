"""A class of 30 made-up submissions of reduction/05_coarsened graded as an instructor would:
three students' own right answers and copies of them, a right but slow one, wrong ones, ones
that game the grader, stubs and a missing file. Each gets the score and the flag it should."""
import csv
import itertools

import pytest

from pmpp import exercises
from pmpp.cli import main
from pmpp.course.classroom import collect, similar_submissions

COARSENED = exercises.find("reduction/05_coarsened")
TEXT = COARSENED.path.read_text()
BEGIN, END = TEXT.index("// BEGIN SOLUTION"), TEXT.index("// END SOLUTION")

SHUFFLES = """
    __shared__ float warp_sums[BLOCK_DIM / 32];
    unsigned int base = blockIdx.x * (2u * COARSE_FACTOR * BLOCK_DIM) + threadIdx.x;
    float acc = 0.0f;
    for (unsigned int k = 0; k < 2u * COARSE_FACTOR; ++k) {
        unsigned int idx = base + k * BLOCK_DIM;
        acc += (idx < n) ? input[idx] : 0.0f;
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31u) == 0) warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < BLOCK_DIM / 32 ? warp_sums[threadIdx.x] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) w += __shfl_down_sync(0xffffffffu, w, off);
        if (threadIdx.x == 0) atomicAdd(output, w);
    }
"""
INTERLEAVED = """
    __shared__ float partial[BLOCK_DIM];
    const unsigned int me = threadIdx.x;
    const unsigned int start = 2u * COARSE_FACTOR * BLOCK_DIM * blockIdx.x;
    const unsigned int stop = start + 2u * COARSE_FACTOR * BLOCK_DIM;
    float total = 0.0f;
    for (unsigned int pos = start + me; pos < stop && pos < n; pos += BLOCK_DIM) total += input[pos];
    partial[me] = total;
    __syncthreads();
    for (unsigned int width = 1; width < BLOCK_DIM; width *= 2) {
        if (me % (2 * width) == 0) partial[me] += partial[me + width];
        __syncthreads();
    }
    if (me == 0) atomicAdd(output, partial[0]);
"""


def own(body):
    return TEXT[:BEGIN] + "// BEGIN SOLUTION\n" + body + "    " + TEXT[END:]


def renamed(text, names):
    for old, new in names.items():
        text = text.replace(old, new)
    return text.replace("    ", "  ")


def planted(old, new):
    assert old in TEXT, old
    return TEXT.replace(old, new, 1)


# student -> (kernel text or None for no file, passes, points lost of the total or "all", what the feedback says)
CLASS = {
    "ana": (TEXT, True, 0, ""),
    "ben": (own(SHUFFLES), True, 0, ""),
    "cid": (own(INTERLEAVED), True, 0, ""),
    # copies: the same answers, identifiers renamed and reformatted
    "dot": (renamed(own(SHUFFLES), {"warp_sums": "ws", "acc": "s", "base": "b0", "idx": "j", "off": "d"}), True, 0, ""),
    "eli": (renamed(own(INTERLEAVED), {"partial": "buf", "total": "t0", "width": "w", "pos": "p"}), True, 0, ""),
    "fay": (TEXT, True, 0, ""),
    "gus": (TEXT.replace("float sum", "float  sum"), True, 0, ""),
    # right, but one global atomic per thread: the performance point is lost
    "hal": (planted("    input_s[t] = sum;", "    atomicAdd(output, sum);\n    return;\n    input_s[t] = sum;"),
            False, 1, "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum"),
    # wrong
    "ivy": (planted("< n)", "< n - 1)"), False, None, "wrong result"),
    "jon": (planted("        __syncthreads();\n", "\n"), False, None, "RaceError"),
    "kai": (planted("tile < COARSE_FACTOR * 2", "tile < COARSE_FACTOR"), False, None, "wrong result"),
    "lea": (planted("if (i + tile * BLOCK_DIM < n) {", "if (true) {"), False, None, "OutOfBoundsError"),
    "max": (planted("float sum = 0.0f;", "float sum = 0.0f; volatile int spin = 1; while (spin) {}"),
            False, None, "did not finish"),
    "nia": (planted("atomicAdd(output, input_s[0]);", "output[0] = input_s[0];"), False, None, "wrong result"),
    # gaming the grader
    "oli": (planted("float sum = 0.0f;", "float sum = 0.0f;\n    if (n != 1 && n != 31 && n != 1000 && n != 1048579) return;"),
            False, None, "wrong result"),                                  # only the sizes it has seen
    "pam": (TEXT[:BEGIN] + "    " + TEXT[END:], False, None, "wrong result"),  # launches, leaves the output
    "quin": (planted("extern \"C\" __global__", "__device__ int done = 0;\nextern \"C\" __global__")
             .replace("    // BEGIN SOLUTION\n", "    // BEGIN SOLUTION\n    if (done) return;\n", 1)
             .replace("        atomicAdd(output, input_s[0]);", "        atomicAdd(output, input_s[0]);\n        done = 1;"),
             False, None, "wrong result"),                                 # answers its first launch only
    "rae": (planted("atomicAdd(output, input_s[0]);", "atomicAdd(output, input_s[0]); output[1] = 0.0f;"),
            False, None, "OutOfBoundsError"),                              # writes outside its output
    "sam": (planted("float sum = 0.0f;", "float sum = 0.0f; if (t == 0) { FILE *f = fopen(\"/tmp/x\", \"w\"); }"),
            False, "all", "does not compile"),                             # host calls in a kernel
    # nothing done
    "tia": (f"// {exercises.STUB_MARK}\n" + TEXT, False, "all", "not implemented"),
    "uma": (f"// {exercises.STUB_MARK}\n" + TEXT, False, "all", "not implemented"),
    "vic": (None, False, "all", "no submission"),
    # more of the three answers, as a class has them
    **{name: (own(SHUFFLES).replace("acc", f"acc_{name}"), True, 0, "") for name in ("wes", "xia")},
    **{name: (own(INTERLEAVED).replace("total", f"total_{name}"), True, 0, "") for name in ("yan", "zoe")},
    **{name: (TEXT.replace("sum", f"sum_{name}"), True, 0, "") for name in ("abe", "bea", "cal", "dee")},
}
FAMILIES = {"ana": "A", "fay": "A", "gus": "A", "abe": "A", "bea": "A", "cal": "A", "dee": "A",
            "ben": "B", "dot": "B", "wes": "B", "xia": "B", "cid": "C", "eli": "C", "yan": "C", "zoe": "C"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    for student, (text, *_) in CLASS.items():
        (root / student).mkdir()
        if text is not None:
            (root / student / "05_coarsened.cu").write_text(text)
    out = tmp_path_factory.mktemp("out")
    status = main(["grade", "reduction/05_coarsened", str(root), "--seed", "11", "--jobs", "2", "--timeout", "10",
                   "--csv", str(out / "grades.csv"), "--feedback", str(out / "feedback"), "--quiet"])
    rows = {r["student"]: r for r in csv.DictReader((out / "grades.csv").open())}
    pairs = similar_submissions("reduction/05_coarsened", collect("reduction/05_coarsened", [root]))
    return status, rows, out / "feedback", pairs


pytestmark = pytest.mark.slow


def test_the_class_has_thirty_students():
    assert len(CLASS) == 30


def test_each_submission_gets_the_score_it_should(graded):
    status, rows, feedback, _ = graded
    assert status == 1 and sorted(rows) == sorted(CLASS)
    total = float(rows["ana"]["total"])
    assert {float(r["total"]) for r in rows.values()} == {total}           # the same most for everyone
    for student, (_, passes, lost, says) in CLASS.items():
        row, text = rows[student], (feedback / f"{student}.txt").read_text()
        points = float(row["points"])
        assert (row["passed"] == "True") == passes, (student, text)
        if lost == "all":
            assert points == 0, (student, text)
        elif lost is None:
            assert points < total, (student, text)
        else:
            assert points == total - lost, (student, text)
        assert says in text, (student, says, text)


def test_copies_are_flagged_and_different_answers_are_not(graded):
    *_, pairs = graded
    flagged = {frozenset((a, b)) for a, b, _ in pairs}
    for family in "BC":
        members = [s for s, f in FAMILIES.items() if f == family]
        assert all(frozenset(p) in flagged for p in itertools.combinations(members, 2)), family
    across = [p for p in flagged if len({FAMILIES.get(s, "A") for s in p}) > 1 and all(s in FAMILIES for s in p)]
    assert across == [], across
