"""Similarity in a class: winnowed token fingerprints, the starter code taken out."""
import csv

from pmpp import exercises
from pmpp.course import classroom, similarity
from pmpp.course.grading import GradeReport

COARSENED = exercises.find("reduction/05_coarsened")
SOLUTION = COARSENED.path.read_text()

# Another student's own answer: the same algorithm, written another way.
OWN = SOLUTION[:SOLUTION.index("// BEGIN SOLUTION")] + """// BEGIN SOLUTION
    __shared__ float partial[BLOCK_DIM];
    unsigned int t = threadIdx.x;
    unsigned int base = blockIdx.x * (2 * COARSE_FACTOR * BLOCK_DIM);
    float acc = 0.0f;
    unsigned int k = 0;
    while (k < 2 * COARSE_FACTOR) {
        unsigned int idx = base + k * BLOCK_DIM + t;
        acc += (idx < n) ? input[idx] : 0.0f;
        ++k;
    }
    partial[t] = acc;
    __syncthreads();
    for (unsigned int s = BLOCK_DIM >> 1; s > 0; s >>= 1) {
        if (t < s) partial[t] = partial[t] + partial[t + s];
        __syncthreads();
    }
    if (t == 0) atomicAdd(output, partial[0]);
    """ + SOLUTION[SOLUTION.index("// END SOLUTION"):]


def disguised(text):
    """A copy with its names changed, its comments rewritten and its lines reflowed."""
    for old, new in (("input_s", "buf"), ("segment", "seg0"), ("sum", "total"), ("stride", "step"),
                     ("tile", "j"), ("// ", "// note: ")):
        text = text.replace(old, new)
    return text.replace("    ", "\t").replace(") {", ")\n{")


def test_a_disguised_copy_is_found_and_an_own_answer_is_not():
    starter = classroom._starter("reduction/05_coarsened")
    pairs = similarity.similar_pairs({"ann": SOLUTION, "ben": disguised(SOLUTION), "cat": OWN}, given=[starter])
    assert [(a, b) for a, b, _ in pairs] == [("ann", "ben")] and pairs[0][2] == 1.0
    assert "pmpp: not implemented yet" in starter and "atomicAdd(output" not in starter


def test_students_who_handed_in_the_starter_file_are_not_alike():
    starter = classroom._starter("reduction/05_coarsened")
    assert similarity.similar_pairs({"dan": starter, "eve": starter + "\n// done\n"}, given=[starter]) == []


def test_the_class_csv_names_who_is_alike(tmp_path):
    files = {"ann": SOLUTION, "ben": disguised(SOLUTION), "cat": OWN}
    submissions = []
    for student, text in files.items():
        (tmp_path / student).mkdir()
        (tmp_path / student / "05_coarsened.cu").write_text(text)
        submissions.append(classroom.Submission(student, tmp_path / student / "05_coarsened.cu"))
    pairs = classroom.similar_submissions("reduction/05_coarsened", submissions)
    reports = [GradeReport("reduction/05_coarsened", str(s.path), student=s.student) for s in submissions]
    classroom.write_csv(reports, tmp_path / "grades.csv", pairs)
    rows = {r["student"]: r["similar_to"] for r in csv.DictReader(open(tmp_path / "grades.csv"))}
    assert rows == {"ann": "ben 1.00", "ben": "ann 1.00", "cat": ""}
