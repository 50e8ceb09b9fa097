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
