"""Fair grading through the real grader: ``make grade``, the sandbox included.

A class is built from the released (student) notebooks, filled in the ways
students fill them: the instructor's answers, valid answers written another
way (``ALTERNATIVES``), common wrong answers (``WRONG``) and nothing at all.
Wrong answers go into every other function of a notebook at once (the even
ones, then the odd ones), so the right functions beside them, and those that
call them, show whether a mistake costs anything beyond its own cells.

Asserted per cell, from the gradebook: right and alternative work keeps every
point; a wrong function loses points in the cells that judge it and nowhere
else; a blank notebook scores 0. Asserted on the feedback pages: the visible
check's own message is shown for a wrong function (never "a hidden test"
when a visible check failed), no raw error text appears on a right page, and
no solution line reaches a student.

``make test`` grades a representative class (the first wrong answer of each
function); ``make fairness`` grades every wrong answer (``PM_FAIRNESS=all``).
``PM_FAIRNESS_ONLY=01,08`` builds the class from those exercises only (an author's check of
the exercises they changed).
"""
from __future__ import annotations

import html
import os
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

from test_exercises import ROOT, graded_cells, isolate, notebook, run_cell, solution_cell, with_wrong_answer
from wrong_answers import ALTERNATIVES, WRONG

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

ASSIGNMENTS = sorted(p.name for p in (ROOT / "exercises").iterdir() if p.is_dir()
                     # PM_FAIRNESS_ONLY=01,08 grades a class on those exercises only
                     and any(p.name.startswith(k) for k in os.environ.get("PM_FAIRNESS_ONLY", p.name).split(",")))
MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[^\n]*\n?", re.M)
EVERY = os.environ.get("PM_FAIRNESS") == "all"
# how the feedback labels a cell lost to a hidden test ("a hidden test of attend failed: ...")
HIDDEN_LABEL = re.compile(r"hidden test (of \w+ )?(failed|found)|HiddenTestFailed", re.I)


def source_name(name):
    return next((ROOT / "exercises" / name).glob("*.ipynb")).name


def meta(cell):
    return cell.metadata.get("nbgrader", {})


def functions(name):
    """The exercise's judged names, in the order their test cells come."""
    seen = []
    for gid in graded_cells(name):
        cell = next(c for c in notebook(name).cells if meta(c).get("grade_id") == gid)
        seen += [n for n in isolate.judged(cell.source) if n not in seen]
    return seen


def filled(name, release, answers):
    """The released notebook with every code solution cell filled: the instructor's code, with
    ``answers`` ({function: code}) in place of those functions' solutions."""
    nb = nbformat.read(release / name / source_name(name), as_version=4)
    sources = {meta(c)["grade_id"]: c.source for c in notebook(name).cells
               if meta(c).get("solution") and c.cell_type == "code"}
    for target, body in answers.items():
        gid = meta(solution_cell(name, target))["grade_id"]
        sources[gid] = with_wrong_answer(sources[gid], target, body)
    for cell in nb.cells:
        if cell.cell_type == "code" and meta(cell).get("solution"):
            cell.source = MARKERS.sub("", sources[meta(cell)["grade_id"]])
    return nb


def wrong_answers(name, k, parity):
    """The k-th listed wrong answer (cycling) of every other function: {function: (test cell, why, code)}."""
    out = {}
    for i, fn in enumerate(functions(name)):
        listed = [c for c in WRONG.get(name, []) if c[0] == fn]
        if i % 2 == parity and listed:
            out[fn] = listed[k % len(listed)][1:]
    return out


def class_plan():
    """{student: {assignment: ("kind", {function: code}, {function: why})}}"""
    plan = {"right": {}, "blank": {}}
    rounds = range(max(len([c for c in WRONG[n] if c[0] == fn]) for n in WRONG for fn in functions(n))) \
        if EVERY else range(1)
    alt_rounds = range(max(len([c for c in ALTERNATIVES[n] if c[0] == fn]) for n in ALTERNATIVES
                           for fn in functions(n))) if EVERY else range(2)
    for name in ASSIGNMENTS:
        plan["right"][name] = ("right", {}, {})
        plan["blank"][name] = ("blank", {}, {})
        for k in alt_rounds:
            alts = {}
            for fn in functions(name):
                listed = [c for c in ALTERNATIVES.get(name, []) if c[0] == fn]
                if listed:
                    alts[fn] = listed[k % len(listed)][2]
            plan.setdefault(f"alt-{k}", {})[name] = ("right", alts, {})
        for k in rounds:
            for parity in (0, 1):
                wrong = wrong_answers(name, k, parity)
                plan.setdefault(f"wrong-{k}-{parity}", {})[name] = (
                    "wrong", {fn: code for fn, (_, _, code) in wrong.items()}, {fn: why for fn, (_, why, _) in wrong.items()})
    return plan


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course, subs = tmp_path_factory.mktemp("course"), tmp_path_factory.mktemp("class")
    env = dict(os.environ, PM_COURSE_DIR=str(course))
    done = subprocess.run(["make", "-s", "assignments"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    plan = class_plan()
    for student, work in plan.items():
        for name, (kind, answers, _) in work.items():
            nb = nbformat.read(course / "release" / name / source_name(name), as_version=4) if kind == "blank" \
                else filled(name, course / "release", answers)
            (subs / student / name).mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, subs / student / name / source_name(name))
    done = subprocess.run(["make", "-s", "grade", f"SUBMISSIONS={subs}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gradebook:
        for student, work in plan.items():
            for name in work:
                nb = Path(source_name(name)).stem
                for gid in graded_cells(name):
                    grade = gradebook.find_grade(gid, nb, name, student)
                    scores[student, name, gid] = (grade.score, grade.max_score)
    return plan, scores, course


def judged_by(name, gid):
    cell = next(c for c in notebook(name).cells if meta(c).get("grade_id") == gid)
    return set(isolate.judged(cell.source))


def page(course, student, name):
    return (course / "feedback" / student / name / source_name(name).replace(".ipynb", ".html")).read_text()


ERROR_OUTPUT = re.compile(r'<div class="[^"]*output_error[^"]*">\s*<pre>(.*?)</pre>', re.S)


def errors(text):
    """The text of every error output on a feedback page."""
    return [html.unescape(re.sub(r"<[^>]+>", "", m)) for m in ERROR_OUTPUT.findall(text)]


def test_right_and_alternative_work_keeps_every_point(graded):
    plan, scores, _ = graded
    lost = [(s, n, gid, got) for s in plan if s == "right" or s.startswith("alt-") for n in plan[s]
            for gid in graded_cells(n) if (got := scores[s, n, gid])[0] != got[1]]
    assert lost == [], f"right work that lost points: {lost}"


def test_a_blank_notebook_scores_nothing(graded):
    plan, scores, _ = graded
    assert all(scores["blank", n, gid][0] == 0 for n in plan["blank"] for gid in graded_cells(n))


def test_a_wrong_function_loses_points_in_its_own_cells_only(graded):
    plan, scores, _ = graded
    problems = []
    for student, work in plan.items():
        if not student.startswith("wrong"):
            continue
        for name, (_, answers, why) in work.items():
            for gid in graded_cells(name):
                got, most = scores[student, name, gid]
                wrong_here = judged_by(name, gid) & set(answers)
                if wrong_here and got >= most:
                    problems.append(f"{student}/{name}/{gid}: {why[next(iter(wrong_here))]} kept {got:g} of {most:g}")
                if not wrong_here and got < most:
                    problems.append(f"{student}/{name}/{gid} is right but lost points beside {sorted(answers)}")
    assert problems == []


def _visible_message(name, answers, gid):
    """What the visible part of test cell ``gid`` says about these answers, run in-process."""
    sources = [with_wrong_answer(solution_cell(name, fn).source, fn, body) for fn, body in answers.items()]
    error = run_cell(name, gid, sources, "visible")
    return str(error).strip().splitlines()[0] if error is not None else None


def test_the_feedback_names_the_part_that_failed(graded):
    plan, _, course = graded
    problems = []
    for student, work in plan.items():
        for name, (kind, answers, why) in work.items():
            if kind == "blank":
                continue
            shown = errors(page(course, student, name))
            if kind == "right":
                if shown:
                    problems.append(f"{student}/{name}: a right page shows errors: {[e[:80] for e in shown]}")
                continue
            if any(HIDDEN_LABEL.search(e) for e in shown):
                problems.append(f"{student}/{name}: a page whose failures are all visible says a hidden test failed")
            text = "\n".join(shown)
            for gid in graded_cells(name):
                wrong_here = judged_by(name, gid) & set(answers)
                if not wrong_here:
                    continue
                message = _visible_message(name, {fn: answers[fn] for fn in wrong_here}, gid)
                if message and message[:60] not in text:
                    problems.append(f"{student}/{name}/{gid}: the visible check's message {message[:60]!r} is not shown")
    assert problems == []


def test_no_solution_line_reaches_a_student(graded):
    plan, _, course = graded
    for name in ASSIGNMENTS:
        secret = {line.strip() for c in notebook(name).cells if meta(c).get("solution") and c.cell_type == "code"
                  for m in re.finditer(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", c.source, re.S)
                  for line in m.group(1).splitlines() if len(line.strip()) > 20}
        text = html.unescape(page(course, "blank", name))
        assert not [line for line in secret if line in text], name
