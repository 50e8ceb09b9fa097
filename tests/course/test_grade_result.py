"""``grade`` returns what it did: plan, run, record and report, asserted on as objects.

One assignment (03_subspace, 3 points), graded in this process as
:func:`pm_course.cli.main` would (the course folder's lock held): a first run
grades what was handed in and writes each row; a second grades nothing and
keeps every row; a changed notebook is the only one graded next, and its
change of score is in the result; a regrade asked for by name is graded
although unchanged.
"""
import pytest

from conftest import blank, solved
from pm_course.state import config
from pm_course.state.course import Course, forget
from pm_course.state.files import lock
from pm_course.state.grades_csv import read_grades
from pm_course.steps.collect import collect
from pm_course.steps.grade import Result, grade

pytestmark = pytest.mark.grading  # grades a class: not in make check

A, NB = "03_subspace", "subspace.ipynb"


def hand_in(folder, work):
    for student, text in work.items():
        (folder / student / A).mkdir(parents=True, exist_ok=True)
        (folder / student / A / NB).write_bytes(text)
    return folder


def run(course, step, *args, **kwargs):
    try:
        with lock(course, "test"):
            return step(course, *args, **kwargs)
    finally:
        forget(course)


def test_grade_returns_what_it_graded_kept_and_changed(tmp_path, monkeypatch):
    monkeypatch.setenv("PM_GRADE_JOBS", "2")
    course = Course(tmp_path / "course", settings=config.load(None))
    subs = hand_in(tmp_path / "class", {"ada": solved(A), "bo": blank(A)})
    run(course, collect, "folder", subs)

    first = run(course, grade)
    assert first.rows == read_grades(course.grades)
    assert isinstance(first, Result) and not first.interrupted and not first.faulted
    assert sorted(e.student for e in first.graded) == ["ada", "bo"]
    assert {k: (r["status"], r["score"], r["max_score"]) for k, r in first.rows.items() if k[1] == A} == {
        ("ada", A): ("graded", "3", "3"), ("bo", A): ("graded", "0", "3")}
    others = {r["status"] for k, r in first.rows.items() if k[1] != A}
    assert others == {"not submitted"} and len(first.rows) == 2 * len({a for _, a in first.rows})
    assert first.changes == [] and first.plan.kept == []

    second = run(course, grade)  # nothing new: nothing graded, every row kept as it was
    assert second.plan.todo == [] and sorted(e.student for e in second.plan.kept) == ["ada", "bo"]
    assert second.rows == first.rows and second.changes == []

    hand_in(subs, {"bo": solved(A)})  # bo hands in the right answer: only bo is graded, and the change is said
    run(course, collect, "folder", subs)
    third = run(course, grade)
    assert [e.student for e in third.plan.todo] == ["bo"] and [e.student for e in third.plan.kept] == ["ada"]
    assert third.changes == [(("bo", A), "0", "3", "3", "3")]
    assert third.rows[("bo", A)]["score"] == "3" and third.rows[("ada", A)] == first.rows[("ada", A)]

    asked = run(course, grade, students=["ada"])  # asked for by name: graded although unchanged
    assert [e.student for e in asked.graded] == ["ada"] and asked.plan.kept == [] and asked.changes == []
    assert asked.rows == third.rows
