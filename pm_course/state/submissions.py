"""What students handed in, matched to the assignments, with nothing dropped silently.

A class's folder is ``DIR/<student>/<assignment>/<notebook>.ipynb``, but real
uploads drift: a browser saves ``copying (2).ipynb``, Jupyter ``copying-Copy1.ipynb``,
a student renames the file, or leaves it beside the assignment folder rather
than in it. :func:`match` finds, for every student and assignment, the one file
meant (warning when its name differs), says why when there is none or several,
and lists every file it did not use.

The same matching serves the LMS downloads (:mod:`pm_course.steps.collect`): what
was found is kept in the course folder's manifest, ``course/submissions.csv``
(:func:`write_manifest`), one row per student and assignment, with the LMS's
identifiers, the late flag and the submission time where the LMS gives them.
"""
from __future__ import annotations

import csv
import io
import re
import unicodedata
from dataclasses import dataclass, field, fields
from pathlib import Path

from pm_course.state.files import write_text


def slug(name: str) -> str:
    """A name folded to ASCII letters and digits, as Canvas writes ``lastfirst``.

    >>> slug("Núñez, José"), slug("Zoë O'Brien-Smith")
    ('nunezjose', 'zoeobriensmith')
    """
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]", "", folded.lower()) or "student"


def is_test_student(name: str) -> bool:
    """Whether ``name`` is Canvas's test student, as its gradebook ("Student, Test") or its zips ("studenttest") name it.

    Its work is never graded nor exported.

    >>> is_test_student("Student, Test"), is_test_student("studenttest"), is_test_student("Test Student")
    (True, True, True)
    >>> is_test_student("Testa, Stu")
    False
    """
    return slug(name or "") in ("studenttest", "teststudent")


GRADED, MISSING, FAILED = "graded", "not submitted", "could not be graded"
NOT_YET = "not graded yet"                            # collected, not graded (new, or grading was interrupted)
MACHINE = "not graded (machine error)"                # the machine failed (full disk, database, sandbox): retried


@dataclass
class Entry:
    """One student's work on one assignment, and what became of it."""

    student: str
    assignment: str
    file: Path | None = None          # the notebook that will be graded
    status: str = GRADED
    reason: str = ""                  # why it was not graded, or what was noticed (a renamed file)
    score: float | None = None
    max_score: float | None = None
    name: str = ""                    # the student's name, as the LMS gives it
    lms: str = ""                     # "canvas", "moodle", or "" (a folder)
    lms_id: str = ""                  # Canvas user id, Moodle participant id
    late: bool = False                # the LMS marked the submission late
    submitted: str = ""               # when it was submitted (as the LMS gives it, or the zip entry's time)
    source: str = ""                  # the file in the download or folder that was used
    written_score: str = ""           # grades.csv: the points the written answers got ("" when none)
    written_max: str = ""             # grades.csv: the written answers' points ("" when none)
    awaiting_review: str = ""         # grades.csv: how many of them await review


# the manifest's columns: what collect found, what grade reads
MANIFEST = ("student_id", "assignment", "status", "reason", "name", "lms", "lms_id", "late", "submitted", "source")


@dataclass
class Class:
    """What a collection found: an entry per student and assignment, and every file it did not use."""

    entries: list[Entry] = field(default_factory=list)
    unused: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    why_unused: dict = field(default_factory=dict)  # a file not used -> why (when it is not the usual reason)
    foreign: dict = field(default_factory=dict)     # a notebook another assignment's cells -> that assignment
    foreign_students: dict = field(default_factory=dict)  # (student, assignment) sent another's -> that one
    choices: dict = field(default_factory=dict)     # (student, assignment) -> {file name: download entry}


def normal(stem: str) -> str:
    """A notebook's name without what downloads and copies add: case, " (2)", "-Copy1", Canvas's "-1".

    >>> [normal(s) for s in ("Copying (2)", "copying-Copy1", "copying-1", "copying copy")]
    ['copying', 'copying', 'copying', 'copying']
    """
    stem = stem.lower().strip()
    stem = re.sub(r"\s*\(\d+\)$", "", stem)          # browser: "copying (2)"
    stem = re.sub(r"[-_ ]copy\d*$", "", stem)          # Jupyter: "copying-Copy1"
    stem = re.sub(r"-\d+$", "", stem)                  # Canvas, a file uploaded again: "copying-1"
    return stem.strip()


def resubmission(stem: str) -> int:
    """Which upload of a name a file is: 0 for the first, N for Canvas's ``-N`` or a browser's `` (N)``.

    >>> resubmission("copying"), resubmission("copying-2"), resubmission("Copying (3)")
    (0, 2, 3)
    """
    found = re.search(r"(?:-|\s\()(\d+)\)?$", stem.strip())
    return int(found.group(1)) if found else 0


def write_manifest(entries: list[Entry], path: Path) -> None:
    """Write ``entries`` to the manifest at ``path`` (CSV, :data:`MANIFEST`'s columns)."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(MANIFEST)
    for e in sorted(entries, key=lambda e: (e.student, e.assignment)):
        writer.writerow([e.student, e.assignment, e.status, e.reason, e.name, e.lms, e.lms_id,
                         "late" if e.late else "", e.submitted, e.source])
    write_text(path, buffer.getvalue())  # whole, or not at all


def read_manifest(path: Path) -> list[Entry]:
    """The entries :func:`write_manifest` wrote ([] when there is no manifest yet)."""
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    known = {f.name for f in fields(Entry)}
    return [Entry(**{k: v for k, v in {**row, "student": row["student_id"], "late": row["late"] == "late"}.items()
                     if k in known}) for row in rows]


def match(submissions: Path, expected: dict[str, str]) -> Class:
    """Match ``submissions`` against ``expected`` (assignment -> notebook file name)."""
    result = Class()
    by_folder = {normal(a): a for a in expected}
    for student_dir in sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith(".")):
        student = student_dir.name
        files = sorted(p for p in student_dir.rglob("*") if p.is_file() and not _ignored(p))
        used: set[Path] = set()
        for assignment, notebook in expected.items():
            entry = Entry(student, assignment)
            inside = [p for p in files if p.parent != student_dir
                      and by_folder.get(normal(p.relative_to(student_dir).parts[0])) == assignment]
            named = [p for p in files if normal(p.stem) == normal(Path(notebook).stem) and p.suffix == ".ipynb"
                     and (p.parent == student_dir or p in inside)]
            notebooks_inside = [p for p in inside if p.suffix == ".ipynb"]
            exact = [p for p in named if p.name == notebook and p in inside]
            if exact:
                candidates = exact
            elif named:
                candidates = named
            elif len(notebooks_inside) == 1:  # one notebook in the assignment's folder, whatever its name
                candidates = notebooks_inside
            else:
                candidates = notebooks_inside or [p for p in inside if normal(p.stem) == normal(Path(notebook).stem)]
            if len(candidates) == 1:
                entry.file = candidates[0]
                used.add(entry.file)
                rel = entry.file.relative_to(submissions)
                entry.source = str(rel)
                if entry.file.name != notebook or entry.file not in inside:
                    # in grades.csv too: the console is gone by the time a student asks
                    entry.reason = f"graded {rel} as {assignment}/{notebook}"
                    result.warnings.append(f"{student}/{assignment}: grading {rel} as {assignment}/{notebook}")
            elif not candidates:
                entry.status = MISSING
            else:
                entry.status, entry.reason = FAILED, "several candidates: " + ", ".join(
                    str(p.relative_to(submissions)) for p in candidates)
                used.update(candidates)
            result.entries.append(entry)
        result.unused += [p for p in files if p not in used]
    return result


def _ignored(path: Path) -> bool:
    return any(part in (".ipynb_checkpoints", "__pycache__", ".DS_Store") for part in path.parts)


def summary(entries: list[Entry], max_points: dict[str, float]) -> str:
    """A table: one row per student, one column per assignment, and the totals."""
    assignments = list(max_points)
    students = sorted({e.student for e in entries})
    cell = {(e.student, e.assignment): e for e in entries}

    def show(e: Entry | None) -> str:
        if e is None or e.status == MISSING:
            return "-"
        if e.status == FAILED:
            return "failed"
        if e.score is None:  # collected, not graded yet
            return "?"
        return f"{e.score:g}/{e.max_score:g}"

    width = max([len("student"), *map(len, students)])
    cols = [max(len(a), 7) for a in assignments]
    lines = ["  ".join(["student".ljust(width), *(a.rjust(w) for a, w in zip(assignments, cols)), "  total"])]
    for s in students:
        got = [cell.get((s, a)) for a in assignments]
        total = sum(e.score or 0 for e in got if e and e.status == GRADED)
        lines.append("  ".join([s.ljust(width), *(show(e).rjust(w) for e, w in zip(got, cols)),
                                f"{total:g}/{sum(max_points.values()):g}".rjust(7)]))
    return "\n".join(lines)


def drop_duplicate_cells(nb) -> list[str]:
    """Keep one copy of each graded cell, the one the student executed last; a sentence per cell kept so.

    nbgrader rejects a notebook with a grade id twice, and a copy-paste
    accident (or a solution copied and rewritten below the first) must cost
    nothing: of the copies, the one with the highest ``execution_count`` is
    graded, else (none was run) the last in the notebook. It takes the place
    of the first copy, where the assignment has the cell, so that the tests
    below it run after it.
    """
    copies: dict[str, list[int]] = {}
    for i, cell in enumerate(nb.cells):
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid is not None:
            copies.setdefault(gid, []).append(i)
    cells, notes, drop = list(nb.cells), [], set()
    for gid, where in copies.items():
        if len(where) < 2:
            continue
        ran = [(cells[i].get("execution_count"), i) for i in where if isinstance(cells[i].get("execution_count"), int)]
        keep = max(ran)[1] if ran else where[-1]
        how = (f"the one executed last (execution count {cells[keep].get('execution_count')})" if ran
               else "the last one (none was executed)")
        notes.append(f"cell {gid!r} was there {len(where)} times: graded {how}, copy {where.index(keep) + 1}"
                     f" of {len(where)}")
        cells[where[0]] = cells[keep]
        drop |= set(where[1:])
    nb.cells = [c for i, c in enumerate(cells) if i not in drop]
    return notes
