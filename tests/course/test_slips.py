"""An instructor's slips refused or undone exactly, and the work a student ran graded (issue 40, items 4 and 5).

- a download whose notebooks are mostly another assignment's (by their cells, not their names) is refused,
  naming that assignment and the command to run instead; one student's wrong file is not;
- after ``collect --undo``, ``grade`` regrades every row whose collected notebook is not what was graded, so
  undo-then-grade gives back the very rows (and reviews) of before; status and export say so until then;
- a source whose points moved on a written cell sends its reviews back to review (or rescales them, asked),
  saying the source changed, never blaming the student.
"""
import csv
import os
import subprocess
import sys

import nbformat
import pytest

from conftest import MARCH, LATER, _zip, solved, blank

A, B = "02_averaging", "03_subspace"


def run(env, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=timeout)


def files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def rows(course):
    with (course / "grades.csv").open(newline="", encoding="utf-8") as f:
        return {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}


def env_of(tmp_path, exercises):
    return dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"), PM_EXERCISES=str(exercises))


def test_a_download_mostly_of_another_assignment_is_refused_naming_it_and_the_command(tmp_path, two_assignments):
    env = env_of(tmp_path, two_assignments)
    course = tmp_path / "course"
    first = _zip(tmp_path / "week3.zip", [(f"s{i}_10{i}_900{i}_subspace.ipynb", solved(B), MARCH) for i in range(4)])
    assert run(env, "collect", "--from", "canvas", first).returncode == 0
    before = files(course)
    # last week's flag from the shell history on this week's download: three averaging notebooks (one named
    # like the other assignment's) and one student who uploaded subspace.ipynb here
    week2 = _zip(tmp_path / "week2.zip", [
        ("s0_100_9100_averaging.ipynb", solved(A), LATER),
        ("s1_101_9101_subspace.ipynb", solved(A), LATER),      # named like 03_subspace's: its cells are 02's
        ("s2_102_9102_averaging.ipynb", blank(A), LATER),
        ("s3_103_9103_subspace.ipynb", solved(B), LATER)])     # the one student's wrong upload
    proc = run(env, "collect", "--from", "canvas", week2, "--assignment", B)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    says = proc.stderr
    assert f"{week2}: refused: most of its notebooks are another assignment's: 3 of 4 students' are {A}'s" \
        " (by their graded cells, whatever their file names), 1 03_subspace's (s3_103)" in says, says
    assert "replace 4 notebook(s) already collected for 03_subspace" in says, says
    assert f"run instead: pm-course collect --from canvas {week2} --assignment {A}" in says, says
    assert files(course) == before  # nothing changed
    # the command it names works: the three are 02_averaging's, the stray subspace notebook is named
    proc = run(env, "collect", "--from", "canvas", week2, "--assignment", A)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"s3_103/{A}: could not be graded: submitted {B}'s notebook (subspace.ipynb), not {A}'s" in proc.stdout
    # a download where only one student uploaded the wrong file is collected, and that student is named
    one_wrong = _zip(tmp_path / "week3-again.zip", [
        ("s0_100_9200_subspace-1.ipynb", solved(B), LATER), ("s1_101_9201_subspace-1.ipynb", solved(B), LATER),
        ("s2_102_9202_subspace-1.ipynb", solved(A), LATER)])
    proc = run(env, "collect", "--from", "canvas", one_wrong, "--assignment", B)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"s2_102/{B}: could not be graded: submitted {A}'s notebook (subspace-1.ipynb), not {B}'s" in proc.stdout


CELL = "why-average"
STUDENTS = {"nunezjose_101": "alpha_a = 1/(2 + (n-2)e^{-beta}): two scores are beta, the rest 0.",
            "obrienzoe_102": "Both weights tend to one half.",
            "smithann_103": "The denominator is 2e^beta + n - 2."}


def written(text):
    """The instructor's notebook (all code right) with ``text`` as the written answer."""
    nb = nbformat.reads(solved(A).decode(), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == CELL)
    cell.source = f"**Your answer.**\n\n{text}"
    return nbformat.writes(nb).encode()


def review_all(env, course, points):
    """Fill the review sheet with ``points`` by student and apply it."""
    assert run(env, "review", A).returncode == 0
    path = course / "review" / f"{A}.csv"
    with path.open(newline="", encoding="utf-8-sig") as f:
        sheet = list(csv.DictReader(f))
    for row in sheet:
        row.update(points=points[row["student_id"]], comment=f"{points[row['student_id']]} points")
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(sheet[0]))
        writer.writeheader()
        writer.writerows(sheet)
    proc = run(env, "review", A, "--apply", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    """02_averaging collected from Canvas for three students, graded, and their written answers reviewed."""
    import shutil
    from conftest import ROOT

    tmp = tmp_path_factory.mktemp("slips")
    exercises = tmp / "exercises"
    shutil.copytree(ROOT / "exercises" / A, exercises / A)
    shutil.copytree(ROOT / "exercises" / B, exercises / B)
    env = env_of(tmp, exercises)
    download = _zip(tmp / "week2.zip", [(f"{s}_90{i}_averaging.ipynb", written(t), MARCH)
                                        for i, (s, t) in enumerate(STUDENTS.items())])
    for args in (("collect", "--from", "canvas", download, "--assignment", A), ("grade", "--jobs", "2")):
        proc = run(env, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    review_all(env, tmp / "course", {"nunezjose_101": "2", "obrienzoe_102": "1.5", "smithann_103": "1"})
    got = rows(tmp / "course")
    assert [got[(s, A)]["score"] for s in STUDENTS] == ["6", "5.5", "5"], got
    return tmp, exercises


def copy_of(reviewed, tmp_path, *, own_exercises=False):
    """The reviewed course (and, when asked, its exercises) copied, so that a test may change them: its env."""
    import shutil

    tmp, exercises = reviewed
    shutil.copytree(tmp / "course", tmp_path / "course")
    if own_exercises:
        shutil.copytree(exercises, tmp_path / "exercises")
        exercises = tmp_path / "exercises"
    return env_of(tmp_path, exercises), tmp_path / "course"


def test_undo_then_grade_gives_back_the_very_rows_and_reviews(reviewed, tmp_path):
    env, course = copy_of(reviewed, tmp_path)
    earlier = rows(course)
    # a download in which one student's notebook is another assignment's (below the refusal's "mostly"): it
    # is collected, and that student's graded and reviewed work is replaced by "could not be graded"
    slip = _zip(tmp_path / "slip.zip", [("nunezjose_101_9300_averaging.ipynb", solved(B), LATER),
                                        ("obrienzoe_102_9301_averaging.ipynb", written(STUDENTS["obrienzoe_102"]),
                                         LATER),
                                        ("smithann_103_9302_averaging.ipynb", written(STUDENTS["smithann_103"]),
                                         LATER)])
    proc = run(env, "collect", "--from", "canvas", slip, "--assignment", A)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run(env, "grade", "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {k[0]: r["status"] for k, r in rows(course).items()} == {
        "nunezjose_101": "could not be graded", "obrienzoe_102": "graded", "smithann_103": "graded"}
    undone = run(env, "collect", "--undo")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    status = run(env, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    for s in ("nunezjose_101",):
        assert f"out of date: {s}: its collected notebook is not the one that could not be graded" in status.stdout, \
            status.stdout
    export = run(env, "export", "--to", "csv", "-o", tmp_path / "out.csv")
    assert export.returncode != 0 and "1 row(s) would be written from out-of-date state" in export.stderr, \
        export.stdout + export.stderr
    proc = run(env, "grade", "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Graded 1 notebooks" in proc.stdout, proc.stdout
    assert rows(course) == earlier  # every column: scores, reasons, reviews
    assert "out of date" not in run(env, "status").stdout
    assert run(env, "export", "--to", "csv", "-o", tmp_path / "out.csv").returncode == 0
