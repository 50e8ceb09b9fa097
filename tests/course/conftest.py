"""A small class as Canvas and Moodle give it: zips and rosters built here, for two assignments.

Canvas (one zip per assignment, a gradebook export) and Moodle (a zip of folders,
a grading worksheet), with accents and spaces in names, late work, re-submissions,
a stray file that is not a notebook, and a student who submitted nothing.
"""
import csv
import io
import re
import shutil
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
# notebook and points (02_averaging: 4 autograded, and a written answer of 2 scored by a person)
ASSIGNMENTS = {"02_averaging": ("averaging.ipynb", 6), "03_subspace": ("subspace.ipynb", 3)}

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "02_averaging (501)",
                  "03_subspace (502)", "Current Score", "Final Score"]
CANVAS_ROSTER = [  # Student, ID, SIS User ID, SIS Login ID, Section
    ("Núñez, José", "101", "S101", "jnunez", "Section A"),
    ("O'Brien, Zoë", "102", "S102", "zobrien", "Section A"),
    ("Smith, Ann Marie", "103", "S103", "asmith", "Section B"),   # submits nothing
]
MOODLE_COLUMNS = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                  "Grade can be changed", "Last modified (submission)", "Last modified (grade)", "Feedback comments"]
MOODLE_ROSTER = [  # participant id, full name, status
    ("201", "José Núñez", "Submitted for grading - Assignment was submitted 1 day 2 hours late"),
    ("202", "Zoë O'Brien", "Submitted for grading"),
    ("203", "Ann Marie Smith", "No submission"),                  # submits nothing
]


def source(name):
    if name not in ASSIGNMENTS:  # any other exercise of the repository
        return next((ROOT / "exercises" / name).glob("*.ipynb"))
    return ROOT / "exercises" / name / ASSIGNMENTS[name][0]


def solved(name):
    return nbformat.writes(nbformat.read(source(name), as_version=4)).encode()


def blank(name):
    """The student version's answers: every solution raises NotImplementedError."""
    nb = nbformat.read(source(name), as_version=4)
    for cell in nb.cells:
        if "### BEGIN SOLUTION" in cell.source:
            head = cell.source.split("### BEGIN SOLUTION")[0]
            cell.source = head + "raise NotImplementedError()\n"
    return nbformat.writes(nb).encode()


HIDDEN = re.compile(r"[ \t]*### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS[^\n]*\n?", re.S)


def answered(name, *, strip_metadata=False, drop=(), rename=None, edit=None, unanswered=False):
    """A right answer as a student hands it in: the student version (no hidden tests) with the answers written.

    ``strip_metadata``: every cell's nbgrader metadata gone and new cell ids (the
    cells copied into a new notebook); ``drop``: the cells with these grade_ids
    deleted; ``rename``: {old: new} function names changed everywhere; ``edit``:
    {grade_id: source} cells rewritten; ``unanswered``: the answers left as released
    (``raise NotImplementedError()``).
    """
    nb = nbformat.read(source(name), as_version=4)
    for cell in nb.cells:
        cell.source = (edit or {}).get(cell.metadata.get("nbgrader", {}).get("grade_id"), cell.source)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in drop]
    for i, cell in enumerate(nb.cells):
        cell.source = HIDDEN.sub("", cell.source)
        if unanswered and "### BEGIN SOLUTION" in cell.source:
            cell.source = cell.source.split("### BEGIN SOLUTION")[0] + "raise NotImplementedError()\n"
        for old, new in (rename or {}).items():
            cell.source = re.sub(rf"\b{old}\b", new, cell.source)
        if strip_metadata:
            cell.metadata.pop("nbgrader", None)
            cell.id = f"copied-{i}"
    return nbformat.writes(nb).encode()


def _zip(path, files):
    """files: [(name, bytes, (y, m, d, H, M, S))]"""
    with zipfile.ZipFile(path, "w") as z:
        for name, data, when in files:
            z.writestr(zipfile.ZipInfo(name, date_time=when), data)
    return path


MARCH = (2025, 3, 1, 12, 0, 0)
LATER = (2025, 3, 2, 14, 0, 0)


def canvas_zips(folder: Path) -> dict[str, Path]:
    """Canvas's Download Submissions, one flat zip per assignment."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "03_subspace": _zip(folder / "submissions-03.zip", [
            ("nunezjose_LATE_101_9001_subspace.ipynb", blank("03_subspace"), MARCH),     # first upload
            ("nunezjose_LATE_101_9001_subspace-1.ipynb", solved("03_subspace"), LATER),  # re-submission wins
            ("obrienzoe_102_9002_Subspace (2).ipynb", blank("03_subspace"), MARCH),      # a browser's rename
            ("obrienzoe_102_9002_notes.pdf", b"%PDF-1.4 stray", MARCH),                  # not a notebook
        ]),
        "02_averaging": _zip(folder / "submissions-02.zip", [
            ("nunezjose_101_9101_averaging.ipynb", solved("02_averaging"), MARCH),
        ]),
    }


def canvas_gradebook(path: Path) -> Path:
    """Canvas's gradebook export: a Points Possible row, the roster, and its test student."""
    with path.open("w", newline="", encoding="utf-8-sig") as f:
        w = csv.writer(f)
        w.writerow(CANVAS_COLUMNS)
        w.writerow(["    Points Possible", "", "", "", "", "6", "3", "(read only)", "(read only)"])
        for row in CANVAS_ROSTER:
            w.writerow([*row, "", "", "", ""])
        w.writerow(["Student, Test", "999", "", "", "Section A", "", "", "", ""])
    return path


def moodle_zip(folder: Path) -> Path:
    """Moodle's Download all submissions for 03_subspace: a folder per student."""
    folder.mkdir(parents=True, exist_ok=True)
    return _zip(folder / "moodle-03_subspace.zip", [
        ("José Núñez_201_assignsubmission_file_/subspace.ipynb", solved("03_subspace"), LATER),
        ("Zoë O'Brien_202_assignsubmission_file_/subspace.ipynb", solved("03_subspace"), MARCH),  # older
        ("Zoë O'Brien_202_assignsubmission_file_/Subspace (2).ipynb", blank("03_subspace"), LATER),
        ("Zoë O'Brien_202_assignsubmission_onlinetext_/onlinetext.html", b"<p>see my notebook</p>", MARCH),
    ])


def moodle_worksheet(path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(MOODLE_COLUMNS)
        for pid, name, status in MOODLE_ROSTER:
            w.writerow([f"Participant {pid}", name, f"{name.split()[0].lower()}@example.org", status, "", "3.00",
                        "Yes", "Sunday, 2 March 2025, 2:00 PM" if "No" not in status else "-", "-", ""])
    return path


def read_csv(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))


@pytest.fixture(scope="session")
def two_assignments(tmp_path_factory) -> Path:
    """A copy of exercises/ with the two short assignments only (PM_EXERCISES), which a test may change."""
    dest = tmp_path_factory.mktemp("exercises")
    for name in ASSIGNMENTS:
        shutil.copytree(ROOT / "exercises" / name, dest / name)
    return dest
