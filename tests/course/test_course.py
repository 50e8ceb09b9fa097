"""The course workflow end to end: generate, submit (good, blank and hostile), grade, export.

Runs nbgrader for real, with a SQLite gradebook in a temporary course folder.
"""
import csv
import os
import sys
import time
from pathlib import Path

import nbformat

import leaks  # tests/helpers
import pytest
from nbclient import NotebookClient
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = sorted(p for p in (ROOT / "exercises").iterdir() if p.is_dir())
MAX_POINTS = {"01_copying": 12, "02_averaging": 6, "03_subspace": 3, "04_noisy_keys": 9, "05_two_heads": 8,
              "06_debug_head": 10, "07_bookkeeping": 10,
              "08_patterns_messages": 9, "09_attribution": 10,
              "10_attribution_patching": 10}
# of those, the written answers' points (manually graded: pm-course review); the rest is autograded
WRITTEN_POINTS = {"01_copying": 4, "02_averaging": 2, "04_noisy_keys": 3, "05_two_heads": 2, "08_patterns_messages": 2,
                  "09_attribution": 2, "10_attribution_patching": 2}
PER_CELL_TIMEOUT = 10  # nbgrader_config.py


def run_course(cmd, course, *args, timeout=900):
    env = dict(os.environ, PM_COURSE_DIR=str(course))
    return pm.run([sys.executable, "-m", "pm_course", cmd, *map(str, args)],
                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    proc = run_course("assignments", course)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return course


def source(name):
    folder = ROOT / "exercises" / name
    return next(folder.glob("*.ipynb"))


def solution_lines():
    """Every non-trivial line of each assignment's solutions and hidden tests that no student sees anyway."""
    return {folder.name: lines for folder, lines
            in zip(EXERCISES, leaks.solution_lines([source(f.name) for f in EXERCISES]).values())}


def test_every_assignment_has_points_and_unique_ids():
    assert [p.name for p in EXERCISES] == sorted(MAX_POINTS)
    for folder in EXERCISES:
        nb = nbformat.read(source(folder.name), as_version=4)
        meta = [c.metadata["nbgrader"] for c in nb.cells if "nbgrader" in c.metadata]
        ids = [m["grade_id"] for m in meta]
        assert len(ids) == len(set(ids)), folder.name
        assert sum(m.get("points", 0) for m in meta if m.get("grade")) == MAX_POINTS[folder.name]
        written = [m for m in meta if m.get("grade") and m.get("solution")]
        assert sum(m["points"] for m in written) == WRITTEN_POINTS.get(folder.name, 0), folder.name
        assert all(m["points"] > 0 for m in written), f"{folder.name}: a written answer worth nothing"


def test_student_versions_leak_nothing(course):
    for name, secret in solution_lines().items():
        for path in (course / "release" / name).glob("*.ipynb"):
            raw = path.read_text()
            assert "BEGIN SOLUTION" not in raw and "HIDDEN TESTS" not in raw, path
            # compare with what the student reads (the file's JSON escapes quotes and backslashes)
            text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
            leaked = [line for line in secret if line in text]
            assert not leaked, f"{path.name} contains solution lines: {leaked[:3]}"


def test_a_learners_copy_is_the_released_student_version(course):
    # make exercises (and the site's download button) run nbgrader's preprocessors without
    # a gradebook: they must give what generate_assignment releases, cell for cell
    from pm_course import student

    for folder in EXERCISES:
        released = nbformat.read(next((course / "release" / folder.name).glob("*.ipynb")), as_version=4)
        mine = student.student_version(source(folder.name))
        assert [(c.cell_type, c.source, c.metadata) for c in mine.cells] == \
            [(c.cell_type, c.source, c.metadata) for c in released.cells], folder.name


def test_student_versions_run_until_the_first_gap_and_fail_every_check(course):
    for folder in EXERCISES:
        path = next((course / "release" / folder.name).glob("*.ipynb"))
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=60, allow_errors=True, resources={"metadata": {"path": str(path.parent)}}).execute()
        errors = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"
                  and any(o.output_type == "error" for o in c.outputs)]
        first_i, first = errors[0]
        first_gap = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution"))
        assert first_i > first_gap, f"{path.name}: a cell fails before the first exercise"
        first_error = next(o for o in first.outputs if o.output_type == "error")
        # the first failure is the unfilled answer itself, not a bug in the set-up
        assert first_error.ename == "NotImplementedError", (path.name, first_error.ename)
        for cell in nb.cells:  # every autograded check (written answers are read by a person)
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
                assert any(o.output_type == "error" for o in cell.outputs), \
                    f"{path.name}: check {cell.metadata['nbgrader']['grade_id']} passes on an empty answer"


def _edit(nb, grade_id, fn):
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    fn(cell)
    return nb


def make_submissions(tmp, course):
    """DIR/<student>/<assignment>/<notebook>.ipynb, like nbgrader's submitted folder."""
    subs = tmp / "submissions"
    def put(student, name, nb):
        dest = subs / student / name / source(name).name
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dest)

    for folder in EXERCISES:
        name = folder.name
        put("ada_full", name, nbformat.read(source(name), as_version=4))
        put("bob_blank", name, nbformat.read(next((course / "release" / name).glob("*.ipynb")), as_version=4))

    def solved():
        return nbformat.read(source("01_copying"), as_version=4)

    def loop_in_beta(body):  # smallest_beta runs `body` forever before its solution
        def edit(cell):
            cell.source = cell.source.replace("    ### BEGIN SOLUTION\n    return np.log",
                                              f"    ### BEGIN SOLUTION\n    while True:\n        {body}\n    return np.log")
        return edit
    put("cy_loop", "01_copying", _edit(solved(), "beta", loop_in_beta("pass")))
    # a debugging print left in a loop: gigabytes of output before the timeout
    put("hal_flood", "01_copying", _edit(solved(), "beta", loop_in_beta("print('x' * 10**5)")))
    put("di_syntax", "01_copying", _edit(solved(), "copy", lambda c: setattr(c, "source", c.source + "\nreturn beta * keys[j")))
    put("ed_exception", "01_copying", _edit(solved(), "weights", lambda c: setattr(
        c, "source", c.source.replace("return attention_weights(keys, q) @ values", "raise ValueError('oops')"))))
    deleted = solved()
    deleted.cells = [c for c in deleted.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test-weights"]
    put("fay_deleted", "01_copying", deleted)
    dup = solved()
    i = next(i for i, c in enumerate(dup.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "test-copy")
    dup.cells.insert(i, nbformat.from_dict(dict(dup.cells[i])))
    put("gus_duplicated", "01_copying", dup)
    return subs


def test_grading_end_to_end(course, tmp_path):
    subs = make_submissions(tmp_path, course)
    before = sorted(p.relative_to(subs) for p in subs.rglob("*"))
    start = time.monotonic()
    proc = run_course("grade", course, subs)
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # bound: nbgrader start-up per notebook plus one per-cell timeout for each looping one
    assert elapsed < 20 * 16 + 2 * 2 * PER_CELL_TIMEOUT, elapsed
    assert sorted(p.relative_to(subs) for p in subs.rglob("*")) == before, "submissions were changed"

    with open(course / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    score = {(r["student_id"], r["assignment"]): float(r["score"]) for r in rows if r["status"] == "graded"}
    status = {(r["student_id"], r["assignment"]): r["status"] for r in rows}
    assert status[("cy_loop", "02_averaging")] == "not submitted"
    max_score = {(r["student_id"], r["assignment"]): float(r["max_score"]) for r in rows if r["status"] == "graded"}
    for name, points in MAX_POINTS.items():
        # the written answers count once reviewed: until then the score is the autograded part
        assert score[("ada_full", name)] == points - WRITTEN_POINTS.get(name, 0), (name, score[("ada_full", name)])
        assert max_score[("ada_full", name)] == points, name
        assert score[("bob_blank", name)] == 0, name
    full = MAX_POINTS["01_copying"] - WRITTEN_POINTS["01_copying"]
    expected = {
        "cy_loop": full - 1,         # smallest_beta loops: its 1-point check times out, the rest stand
        "hal_flood": full - 1,       # the same, printing all the while: still only that check
        "di_syntax": full - 2,       # copy_query never defined: only its own check fails
        "ed_exception": full - 1,    # attend raises: its own check fails, and nothing else (judged on its own)
        "fay_deleted": full,         # the deleted check is put back from the source (with a note) and passes
        "gus_duplicated": full,      # the duplicate is dropped; the solutions are complete
    }
    got = {s: score.get((s, "01_copying")) for s in expected}
    assert got == expected, proc.stdout
    feedback = list((course / "feedback").rglob("*.html"))
    assert len(feedback) >= 5 + 6, feedback
    graded = course / "autograded" / "hal_flood" / "01_copying"
    sizes = {p.name: p.stat().st_size for p in [*graded.glob("*.ipynb"), *(course / "feedback" / "hal_flood").rglob("*.html")]}
    assert len(sizes) == 2 and max(sizes.values()) < 5e6, f"the flood's output was not cut: {sizes}"


def test_a_hidden_test_the_source_s_solution_fails_is_refused_by_name(tmp_path):
    """The source's own solution must pass every test, hidden ones included: assignments refuses, naming the
    cell, and grade stops with that sentence, never a traceback."""
    import shutil

    exercises = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises" / "03_subspace", exercises / "03_subspace")
    path = next((exercises / "03_subspace").glob("*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test-proj")
    cell.source = cell.source.replace("### END HIDDEN TESTS",
                                      "assert Pi.shape == (1, 1), 'a wrong hidden check'\n### END HIDDEN TESTS", 1)
    assert "a wrong hidden check" in cell.source
    nbformat.write(nb, path)
    env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"), PM_EXERCISES=str(exercises))
    released = pm.run([sys.executable, "-m", "pm_course", "assignments"], env=env, capture_output=True, text=True)
    said = released.stdout + released.stderr
    assert released.returncode != 0 and "Traceback" not in said, said
    assert "03_subspace: the source's own solution fails test cell 'test-proj' (AssertionError: a wrong hidden" \
           " check)" in said, said
    assert not (tmp_path / "course" / "release" / "03_subspace").exists()
    subs = tmp_path / "subs" / "ada" / "03_subspace"
    subs.mkdir(parents=True)
    shutil.copy(ROOT / "exercises" / "03_subspace" / path.name, subs / path.name)
    graded = pm.run([sys.executable, "-m", "pm_course", "grade", str(tmp_path / "subs")], env=env,
                    capture_output=True, text=True, timeout=600)
    said = graded.stdout + graded.stderr
    assert graded.returncode != 0 and "Traceback" not in said and "fails test cell 'test-proj'" in said, said
