"""The LMS's other shapes: a Moodle assignment graded with a scale, a Canvas group assignment; and what status
and grade say of Canvas's test student and of students who handed in nothing.

Every class here is built here (03_subspace: 3 points, one test cell), graded
through ``pm-course`` as an instructor runs it.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import MARCH, _zip, blank, solved

NAME, NOTEBOOK = "03_subspace", "subspace.ipynb"
SCALE = ["Not yet competent", "Competent", "Excellent"]
MOODLE_SCALE_COLUMNS = ["Identifier", "Full name", "Email address", "Status", "Grade", "Scale",
                        "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
                        "Feedback comments"]


def run(env, *args):
    return subprocess.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=900)


def ok(proc):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def gradebook(path, people):
    with path.open("w", newline="", encoding="utf-8-sig") as f:
        w = csv.writer(f)
        w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{NAME} (502)"])
        w.writerow(["    Points Possible", "", "", "", "", "3"])
        for name, uid in people:
            w.writerow([name, uid, "", "", "Section A", ""])
    return path


def rows(path):
    with path.open(newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def environment(tmp, two_assignments, config=None):
    env = dict(os.environ, PM_COURSE_DIR=str(tmp / "course"), PM_EXERCISES=str(two_assignments))
    env.pop("PM_COURSE_CONFIG", None)
    if config is not None:
        env["PM_COURSE_CONFIG"] = str(config)
    return env


# --- status and grade: the test student, and students who handed in nothing ---------------------
@pytest.fixture(scope="module")
def canvas_class(tmp_path_factory, two_assignments):
    tmp = tmp_path_factory.mktemp("small-ones")
    exercises = tmp / "exercises"  # this module changes a source: its own copy
    shutil.copytree(two_assignments, exercises)
    env = environment(tmp, exercises)
    book = gradebook(tmp / "gradebook.csv", [("Lovelace, Ada", "401"), ("Hopper, Grace", "402"),
                                             ("Turing, Alan", "403"), ("Student, Test", "999")])
    download = _zip(tmp / "week3.zip", [("lovelaceada_401_9401_subspace.ipynb", solved(NAME), MARCH),
                                        ("hoppergrace_402_9402_subspace.ipynb", blank(NAME), MARCH),
                                        ("studenttest_999_9999_subspace.ipynb", solved(NAME), MARCH)])
    ok(run(env, "collect", "--from", "canvas", download, "--roster", book, "--assignment", NAME))
    ok(run(env, "grade", "--jobs", "2"))
    return tmp, env, exercises


def test_status_counts_the_test_student_nowhere(canvas_class):
    _, env, _ = canvas_class
    out = ok(run(env, "status")).stdout
    row = next(line.split() for line in out.splitlines() if line.startswith(NAME))
    assert row == [NAME, "2", "2", "0", "0", "0"], out  # Ada and Grace; not the test student, not Alan
    assert "studenttest" not in out, out


def test_no_score_changed_is_said_only_when_a_notebook_was_regraded(canvas_class):
    _, env, _ = canvas_class
    out = ok(run(env, "grade", "--student", "turingalan_403")).stdout  # handed in nothing: nothing regraded
    assert "Regraded: no score changed." not in out, out
    out = ok(run(env, "grade", "--student", "lovelaceada_401")).stdout
    assert "Regraded: no score changed." in out, out


def test_no_change_line_between_two_not_submitted(canvas_class):
    _, env, exercises = canvas_class
    path = exercises / NAME / NOTEBOOK  # the instructor gives the projector one more point: all regraded
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test-proj")
    cell["metadata"]["nbgrader"]["points"] += 1
    path.write_text(json.dumps(nb, indent=1))
    out = ok(run(env, "grade", "--jobs", "2")).stdout
    assert "lovelaceada_401/03_subspace: 3/3 -> 4/4" in out, out
    assert "turingalan_403/03_subspace" not in out and "not submitted/3 -> not submitted/4" not in out, out
