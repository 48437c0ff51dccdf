"""The student release: the workbook with every exercise's solution replaced by a stub.

:func:`release` writes the student tree:

* **what** is released is the workbook's own list (:data:`RELEASED_FOLDERS`,
  :data:`RELEASED_FILES`), the same whether or not the source is a git checkout; editor backups,
  caches and dotfiles never go, nor the test suite (it tests the solutions) or CI;
* every kernel solution (:mod:`pmpp.markers`) becomes a stub that compiles and grades as "not
  implemented yet", in the exercise's file and in any later variant that repeats part of it;
  notebooks lose their outputs, solutions and hidden tests; README.md is the student's
  (``docs/student-README.md``);
* nothing is written unless every marker is well formed and the release, checked file by file,
  holds no exercise's solution (:mod:`pmpp.course.leaks`);
* a release folder is updated in place: ``.pmpp-release`` lists the files the release wrote, and
  releasing again rewrites those, removes the ones no longer released and leaves everything else
  (``.git``, files added there) alone. Releasing twice gives identical files.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import exercises, hosted, markers
from . import leaks
from ..notebooks import cell_source, notebook_text
from ..source import kernels_dir

# What a release holds: under each folder, files with these endings (None: any file) ...
RELEASED_FOLDERS = {"pmpp": None, "kernels": (".cu", ".cuh", ".h", ".toml"), "notebooks": (".ipynb",),
                    "docs": None, "results": None}
# ... and these files of the workbook's root, where present.
RELEASED_FILES = ("pyproject.toml", "environment.yml", "LICENSE", "LICENSE.md", "LICENSE.txt", ".gitignore")
STUDENT_README = "docs/student-README.md"
RECORD = ".pmpp-release"
_RECORD_HEADER = "# pmpp student release: the files it wrote (releasing again rewrites them)"
_NEVER = re.compile(r"(~|\.orig|\.bak|\.rej|\.swp|\.swo|\.pyc|\.pyo|\.so|\.o|\.egg-info)$|^[.#]|^__pycache__$")
_KERNEL_SOURCES = (".cu", ".cuh", ".h")


class LeakError(ValueError):
    """The release would give an exercise's solution away; the message names file, exercise and lines."""


@dataclass
class Released:
    folder: Path
    files: list[str]                                   # every file of the release, relative
    changed: list[str] = field(default_factory=list)   # written this time (new or different)
    removed: list[str] = field(default_factory=list)   # released before, no longer


def release(student_dir, source_dir=None, solutions=(), workbook_url="") -> Released:
    """Write (or update) the student release of the workbook in ``student_dir``.

    ``solutions``: exercises whose solutions to release as well (after their deadline).
    ``workbook_url``: the git URL students get the release from, written into every notebook's
    setup cell (``WORKBOOK``) so that it installs the workbook by itself on Colab and Kaggle."""
    source = Path(source_dir) if source_dir else kernels_dir().parent
    target = Path(student_dir).resolve()
    if target == source.resolve() or source.resolve() in target.parents:
        raise ValueError(f"the student tree {target} must be outside the instructor tree {source}")
    previous = _previous_release(target)
    files = student_files(source, solutions, workbook_url)
    _refuse_overwriting(target, files, previous)
    return _write(target, files, previous)


# ----------------------------------------------------------------------------------------------
# What is released

def released_paths(source: Path) -> list[str]:
    """The workbook files a release is made from (relative, sorted): the list above, never junk."""
    found = [name for name in RELEASED_FILES if (source / name).is_file()]
    for folder, endings in RELEASED_FOLDERS.items():
        for path in sorted((source / folder).rglob("*")):
            rel = path.relative_to(source)
            if path.is_file() and not any(_NEVER.search(part) for part in rel.parts[1:]) \
                    and (endings is None or path.name.endswith(endings)):
                found.append(rel.as_posix())
    return sorted(set(found) - {STUDENT_README})


def exercise_names(source: Path) -> list[str]:
    """The exercises of ``source``'s ``kernels/exercises.toml``."""
    return list(exercises.manifest(source / "kernels").get("exercise", {}))


def student_files(source: Path, solutions=(), workbook_url="") -> dict[str, bytes]:
    """The release, in memory: relative path -> content. Raises :class:`markers.MarkerError` for
    malformed markers and :class:`LeakError` if a file would still hold a solution."""
    known = exercise_names(source)
    unknown = sorted(set(solutions) - set(known))
    if unknown:
        raise ValueError(f"no exercise {', '.join(unknown)}; the exercises are: {', '.join(known)}")
    files, regions, problems = {}, [], []
    for exercise in known:
        if not (source / "kernels" / f"{exercise}.cu").is_file():
            problems.append(f"kernels/{exercise}.cu: listed in kernels/exercises.toml but missing")
    for rel in released_paths(source):
        files[rel], found, wrong = _student_version(source / rel, rel, known, solutions)
        if rel.endswith(".ipynb"):
            files[rel] = notebook_text(hosted.with_setup_cell(json.loads(files[rel]), workbook_url))
        regions += found
        problems += wrong
    if problems:
        raise markers.MarkerError("solution markers to fix before releasing:\n  " + "\n  ".join(problems))
    files["README.md"] = student_readme(source)
    _check_leaks(files, regions, known, solutions)
    return {rel: text.encode() if isinstance(text, str) else text for rel, text in files.items()}


def _student_version(path: Path, rel: str, known, solutions):
    """(content, solution regions, marker problems) of one released file."""
    if rel.startswith("kernels/") and rel.endswith(_KERNEL_SOURCES):
        text = path.read_text()
        own = rel[len("kernels/"):-len(".cu")] if rel.endswith(".cu") else None
        own = own if own in known else None
        regions, problems = markers.kernel_regions(text, rel, own, set(known))
        return markers.stub_kernel(text, regions, own, keep=solutions), regions, problems
    if rel.endswith(".ipynb"):
        return student_notebook(path.read_text(), rel)
    return path.read_bytes(), [], []


def student_notebook(text: str, where: str = "notebook") -> tuple[str, list, list[str]]:
    """(the notebook without outputs, solutions or hidden tests; its solution regions; problems)."""
    nb = json.loads(text)
    regions, problems = [], []
    for number, cell in enumerate(nb.get("cells", [])):
        cell.get("metadata", {}).pop("execution", None)
        if cell.get("cell_type") != "code":
            continue
        source = cell_source(cell)
        found, wrong = markers.cell_regions(source, f"{where}, cell {number}")
        regions += found
        problems += wrong
        cell["source"] = markers.stub_cell(source)
        cell["outputs"] = []
        cell["execution_count"] = None
    return notebook_text(nb), regions, problems


_INCLUDE = re.compile(r"^<!-- include README\.md: (?P<heading>#+ .+?) -->$", re.MULTILINE)


def student_readme(source: Path) -> str:
    """``docs/student-README.md``, with the sections it includes from the workbook's README.md."""
    template = (source / STUDENT_README).read_text()
    readme = (source / "README.md").read_text() if (source / "README.md").is_file() else ""

    def section(match):
        heading = match.group("heading")
        level = len(heading) - len(heading.lstrip("#"))
        found = re.search(rf"^{re.escape(heading)}[ \t]*\n(.*?)(?=^#{{1,{level}}} |\Z)", readme,
                          re.MULTILINE | re.DOTALL)
        if found is None:
            raise ValueError(f"{STUDENT_README} includes README.md's section {heading!r}, which "
                             "README.md no longer has; update the template")
        return f"{heading}\n{found.group(1).rstrip()}"
    return _INCLUDE.sub(section, template)


def _check_leaks(files: dict, regions: list, known, solutions) -> None:
    texts = {}
    for rel, content in files.items():
        try:
            texts[rel] = content if isinstance(content, str) else content.decode()
        except UnicodeDecodeError:
            continue                                   # an image, say: no source lines in it
    found = leaks.find_leaks(texts, solution_index(texts, regions, known, solutions))
    if found:
        raise LeakError("the release would give solutions away; mark each repeated part as the "
                        "exercise's (`// BEGIN SOLUTION chapter/NN_name` ... `// END SOLUTION "
                        "chapter/NN_name`) or reword it:\n" + "\n".join(map(str, found)))


def solution_index(texts: dict[str, str], regions: list, known, solutions=()) -> list[leaks.Solution]:
    """Each exercise still to write (kernel and notebook ones) as a :class:`leaks.Solution`.

    Lines the student is given anyway are public: those of the exercise's own released file (the
    code around the stub), of the variants before it in its chapter (its starting point), and of
    the solutions released on purpose. A kernel exercise's answer is what its own file marks; a
    later variant may mark more than it repeats, so that its stub still compiles."""
    released = {line for r in regions if r.exercise in solutions for line in map(leaks.normalize, r.body)}
    by_exercise: dict[str, list] = {}
    for region in regions:
        if region.exercise not in solutions and _is_the_answer(region, known):
            by_exercise.setdefault(region.exercise, []).append(region)
    index = []
    for exercise, found in by_exercise.items():
        if exercise not in known:                       # a notebook's Python warm-up
            index.append(leaks.Solution(exercise, found, language="python"))
            continue
        public = set(released)
        for rel in _starting_point(exercise, texts):
            public.update(leaks.text_lines(rel, texts[rel]))
        index.append(leaks.Solution(exercise, found, public))
    return index


def _is_the_answer(region, known) -> bool:
    return region.exercise not in known or region.where == f"kernels/{region.exercise}.cu"


def _starting_point(exercise: str, texts) -> list[str]:
    """The released kernel files of an exercise's chapter up to the exercise's own."""
    chapter, _, variant = exercise.partition("/")
    number = _variant_number(variant)
    return [rel for rel in texts if rel.startswith(f"kernels/{chapter}/") and rel.endswith(".cu")
            and _variant_number(Path(rel).stem) <= number]


def _variant_number(variant: str) -> int:
    digits = re.match(r"\d+", variant)
    return int(digits.group()) if digits else -1


def check_folder(folder, source_dir=None) -> list[leaks.Leak]:
    """The leak check on a release already on disk (every text file of ``folder`` but ``.git``)."""
    source = Path(source_dir) if source_dir else kernels_dir().parent
    folder = Path(folder)
    known = exercise_names(source)
    regions = []
    for rel in released_paths(source):
        regions += _student_version(source / rel, rel, known, ())[1]
    texts = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and ".git" not in path.relative_to(folder).parts:
            try:
                texts[path.relative_to(folder).as_posix()] = path.read_text()
            except UnicodeDecodeError:
                continue
    return leaks.find_leaks(texts, solution_index(texts, regions, known))


# ----------------------------------------------------------------------------------------------
# Writing it, in place

def _previous_release(target: Path) -> set[str] | None:
    """The files an earlier release wrote into ``target``; None if there is no such list (a new or
    empty folder, or a release by an older pmpp). Refuses a folder with files that is not a release."""
    if not target.exists() or not any(target.iterdir()):
        return None
    record = target / RECORD
    if not record.is_file():
        raise ValueError(f"{target} is not empty and is not an earlier student release; "
                         "choose an empty folder")
    lines = record.read_text().splitlines()
    if not lines or lines[0] != _RECORD_HEADER:
        return None                    # an older release, which listed nothing: overwrite, remove nothing
    listed = {line for line in lines[1:] if line}
    for rel in listed:
        if rel.startswith(("/", "../", ".git/")) or "/../" in rel or rel == RECORD:
            raise ValueError(f"{record} lists {rel!r}, which a release never writes; fix or delete that line")
    return listed


def _refuse_overwriting(target: Path, files: dict, previous: set[str] | None) -> None:
    """A file the release would write over that an earlier release did not write is someone's."""
    if previous is None:
        return
    theirs = [rel for rel in files if rel not in previous and (target / rel).exists()]
    if theirs:
        raise ValueError(f"{target} holds files the release would overwrite but did not write: "
                         f"{', '.join(theirs[:5])}; move them away first")


def _write(target: Path, files: dict[str, bytes], previous: set[str] | None) -> Released:
    result = Released(target, sorted(files))
    for rel, data in sorted(files.items()):
        out = target / rel
        if out.is_file() and out.read_bytes() == data:
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        result.changed.append(rel)
    for rel in sorted((previous or set()) - set(files)):
        path = target / rel
        if path.is_file() or path.is_symlink():
            path.unlink()
            result.removed.append(rel)
            _remove_empty_folders(path.parent, target)
    (target / RECORD).write_text("\n".join([_RECORD_HEADER, *sorted(files)]) + "\n")
    return result


def _remove_empty_folders(folder: Path, top: Path) -> None:
    while folder != top and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
