"""A grade is a function of the submitted bytes, the assignment's source and the reviews, and of nothing else.

One class of 01_copying (slow but right code, loops the interrupt cannot stop,
a crash, lots of output, damaged cells, a wrong answer), handed in as a Canvas
download, is graded

(a) at JOBS=1 on a quiet machine (the reference),
(b) at JOBS=2 with two busy processes beside the grader,
(c) again (``grade --all``) from the course folder of (a) moved to another path,
(d) from the same download with its entries shuffled,
(e) unconfined (no sandbox) rather than in bubblewrap,

and every run gives byte-identical scores and reasons.
"""
import os
import random
import shutil
import zipfile
from pathlib import Path

import nbformat
import pytest

from limits_class import (CRASH, NAME, NOTEBOOK, PRINTS, RECURSION, RIGHT_COPY, SWALLOWS_INPUT, busy,  # noqa: E402
                          notebook, pm_course, scores, slow)

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

ENV = {"PM_GRADE_CELL_CPU": "2"}  # stopped cells cost 2 CPU seconds each, not 10
WHEN = (2025, 3, 1, 12, 0, 0)


def the_class() -> dict[str, nbformat.NotebookNode]:
    """The smallest class that covers the cases: eight notebooks, two that lose points."""
    return {
        "okada": notebook(),                                                      # right: 8 of 8 autograded
        "slowe": slow(0.7),                                                       # right, 0.7 CPU s of 2
        "inputa": notebook(before={"test-copy": SWALLOWS_INPUT}),                 # swallows the interrupt
        "recurso": notebook(before={"test-beta": RECURSION}),                     # so does its recursion
        "crashow": notebook(before={"test-attend": CRASH}),                       # the kernel dies
        "printz": notebook(before={"weights": PRINTS}),                           # 300,000 lines: past 2 CPU s
        "bare": notebook(strip_metadata=True),                                    # cells copied: metadata gone
        "wrongo": notebook(edit={"copy": RIGHT_COPY.replace("beta * keys[j]",     # test-copy 0, and a loop
                                                            "keys[j]\n\n\nwhile True:\n    pass")}),
    }


def canvas_zip(path: Path, shuffle: int | None = None) -> Path:
    """Canvas's Download Submissions of the class (``shuffle``: its entries in a random order of that seed)."""
    entries = [(f"{name}_{101 + i}_{9001 + i}_{NOTEBOOK}", nbformat.writes(nb).encode())
               for i, (name, nb) in enumerate(the_class().items())]
    if shuffle is not None:
        random.Random(shuffle).shuffle(entries)
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries:
            z.writestr(zipfile.ZipInfo(name, date_time=WHEN), data)
    return path


def graded(tmp: Path, label: str, download: Path, jobs: int, env: dict | None = None) -> tuple[Path, str]:
    course = tmp / label / "course"
    got = pm_course("collect", "--from", "canvas", download, "--assignment", NAME, course=course, env=env)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-2000:]
    run = pm_course("grade", "--jobs", jobs, course=course, env={**ENV, **(env or {})})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return course, scores(course)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("invariance")


@pytest.fixture(scope="module")
def download(tmp):
    return canvas_zip(tmp / "submissions.zip")


@pytest.fixture(scope="module")
def reference(tmp, download):
    """(a): one at a time, nothing else running (beyond what the machine runs anyway)."""
    return graded(tmp, "quiet", download, 1)


def test_the_reference_grades_the_work(reference):
    """The reference itself is the work's: each student loses exactly what their notebook deserves."""
    _, text = reference
    rows = {line.split(",", 1)[0]: line for line in text.splitlines()}
    full = "lost points: why-distribution not reviewed yet, why-copy not reviewed yet\",8,12"  # after any repair note
    for student in ("okada", "slowe", "inputa", "recurso", "crashow", "printz", "bare"):
        assert rows[f"{student}_{list(the_class()).index(student) + 101}"].endswith(full), text
    assert "test-copy 0/2" in rows["wrongo_108"] and rows["wrongo_108"].endswith(",6,12"), text


def test_two_jobs_beside_busy_processes_grade_the_same(tmp, download, reference):
    """(b)"""
    with busy(2):
        _, text = graded(tmp, "busy", download, 2)
    assert text == reference[1]


def test_a_moved_course_folder_grades_the_same(tmp, reference):
    """(c): the reference's course folder moved elsewhere, and everything graded again there."""
    moved = tmp / "elsewhere" / "course-moved"
    moved.parent.mkdir()
    shutil.move(str(reference[0]), moved)
    try:
        run = pm_course("grade", "--all", "--jobs", 2, course=moved, env=ENV)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert scores(moved) == reference[1]
    finally:
        shutil.move(str(moved), reference[0])


def test_a_shuffled_download_grades_the_same(tmp, reference):
    """(d)"""
    _, text = graded(tmp, "shuffled", canvas_zip(tmp / "shuffled.zip", shuffle=40), 2)
    assert text == reference[1]


def test_unconfined_grades_as_the_sandbox_does(tmp, download, reference):
    """(e): bubblewrap made unusable (a bwrap that fails), the unconfined mode asked for by name (as batch use
    must: CI set, no terminal): the grades are the sandbox's."""
    fake = tmp / "no-bwrap"
    fake.mkdir(exist_ok=True)
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "PM_GRADE_UNSAFE": "unconfined"}
    _, text = graded(tmp, "unconfined", download, 2, env=env)
    assert text == reference[1]
