"""A term through Canvas and Moodle, end to end: collect the zips, grade, export, pack the feedback, regrade.

Two short assignments, three students per LMS: the exported Canvas import and
Moodle worksheet are checked cell by cell against the LMS's own files.
"""
import json
import os
import sys
import zipfile

import browser
import pytest

from conftest import (CANVAS_COLUMNS, MOODLE_COLUMNS, canvas_gradebook, canvas_zips, moodle_worksheet, moodle_zip,
                      read_csv)
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check


def run(env, *args, timeout=900):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=timeout)


@pytest.fixture(scope="module")
def term(tmp_path_factory, two_assignments):
    tmp = tmp_path_factory.mktemp("term")
    env = dict(os.environ, PM_COURSE_DIR=str(tmp / "course"), PM_EXERCISES=str(two_assignments))
    zips, gradebook = canvas_zips(tmp / "downloads"), canvas_gradebook(tmp / "gradebook.csv")
    worksheet = moodle_worksheet(tmp / "Grades-PM-03_subspace-77.csv")
    for args in (("collect", "--from", "canvas", zips["03_subspace"], "--roster", gradebook),
                 ("collect", "--from", "canvas", zips["02_averaging"], "--roster", gradebook),
                 ("collect", "--from", "moodle", moodle_zip(tmp / "downloads"), "--assignment", "03_subspace",
                  "--roster", worksheet)):
        proc = run(env, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    graded = run(env, "grade", "--jobs", "2")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    return tmp, env, gradebook, worksheet, graded


def test_grading_shows_progress_and_a_summary(term):
    *_, graded = term
    # tqdm's bar: the count, the rate (notebooks a second, or seconds a notebook) and the time left
    assert "Grading: 100%" in graded.stderr and " 5/5 [" in graded.stderr, graded.stderr[-2000:]
    assert "s/notebook" in graded.stderr or "notebook/s" in graded.stderr, graded.stderr[-2000:]
    assert "Graded 5 notebooks of 6 students." in graded.stdout, graded.stdout
    table = graded.stdout.split("\nstudent ")[1]
    # 02_averaging's written answer (2 points) awaits review: 4 of its 6 points so far
    assert "nunezjose_101               4/6          3/3      7/9" in table, table


def test_the_canvas_import_has_canvas_columns_one_row_per_student_and_the_scores(term):
    tmp, env, gradebook, *_ = term
    out = tmp / "canvas-import.csv"
    proc = run(env, "export", "--to", "canvas", gradebook, "-o", out, "--late-penalty", "10")
    assert proc.returncode != 0 and "no submission time" in proc.stderr, proc.stdout  # Canvas's zip has none
    times = tmp / "times.csv"
    times.write_text("student,assignment,submitted_at\n101,03_subspace,2025-03-02 14:00\n")
    proc = run(env, "export", "--to", "canvas", gradebook, "-o", out, "--late-penalty", "10", "--times", times,
               "--due", "03_subspace=2025-03-01 23:59")
    assert proc.returncode == 0, proc.stderr
    assert read_csv(out) == [
        CANVAS_COLUMNS[:7],
        ["    Points Possible", "", "", "", "", "6", "3"],
        ["Núñez, José", "101", "S101", "jnunez", "Section A", "4", "2.7"],   # 03 late: 3 - 10%
        ["O'Brien, Zoë", "102", "S102", "zobrien", "Section A", "", "0"],
        ["Smith, Ann Marie", "103", "S103", "asmith", "Section B", "", ""],  # submitted nothing
    ]
    assert "Núñez, José (101) 03_subspace: late 1 day(s), -10%: 3 -> 2.7" in proc.stdout
    assert out.read_bytes().startswith(b"\xef\xbb\xbf")  # the export's encoding, byte-order mark included


def test_the_moodle_worksheet_keeps_every_column_and_gets_grades_and_comments(term):
    tmp, env, _, worksheet, _ = term
    out = tmp / "worksheet-filled.csv"
    proc = run(env, "export", "--to", "moodle", worksheet, "-o", out)
    assert proc.returncode == 0, proc.stderr
    before, after = read_csv(worksheet), read_csv(out)
    assert after[0] == MOODLE_COLUMNS and len(after) == len(before) == 4
    grade, comments = MOODLE_COLUMNS.index("Grade"), MOODLE_COLUMNS.index("Feedback comments")
    for old, new in zip(before[1:], after[1:]):  # only Grade and Feedback comments change
        assert [c for i, c in enumerate(old) if i not in (grade, comments)] == \
            [c for i, c in enumerate(new) if i not in (grade, comments)]
    assert [r[grade] for r in after[1:]] == ["3.00", "0.00", ""]
    assert "submitted late" in after[1][comments] and "penalty" not in after[1][comments]  # no due date: none
    assert after[3][comments] == "03_subspace: no notebook was submitted."


def test_feedback_is_packed_as_each_lms_takes_it(term):
    tmp, env, *_ = term
    proc = run(env, "feedback", "-o", tmp / "out")
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(tmp / "out" / "feedback-canvas-03_subspace.zip") as z:  # Canvas: Re-upload submissions
        # named as the file graded (Núñez's re-submission), page and comment in one
        assert sorted(z.namelist()) == ["nunezjose_LATE_101_9001_feedback-subspace.html",
                                        "obrienzoe_102_9002_feedback-subspace.html"]
        html = z.read("nunezjose_LATE_101_9001_feedback-subspace.html").decode()
        assert "03_subspace: 3 of 3 points" in html and "<math" in html
    with zipfile.ZipFile(tmp / "out" / "feedback-moodle-03_subspace.zip") as z:
        names = z.namelist()
        assert "José Núñez_201_assignsubmission_file_/subspace.html" in names
        assert not [n for n in names if "mathjax" in n.lower()], names  # nothing beside the pages
        html = z.read("José Núñez_201_assignsubmission_file_/subspace.html").decode()
        assert "<math" in html and "<script src" not in html


@pytest.mark.browser
@browser.required("the packed feedback's browser test", browser.missing())
def test_packed_feedback_shows_its_maths_offline(term, tmp_path):
    """Where a student opens them: a page from each zip, alone, offline, scripts off (an LMS preview)."""
    tmp, env, *_ = term
    out = tmp / "packed"
    assert run(env, "feedback", "-o", out).returncode == 0
    pages = []
    for name, member in (("canvas", "nunezjose_LATE_101_9001_feedback-subspace.html"),
                         ("moodle", "José Núñez_201_assignsubmission_file_/subspace.html")):
        with zipfile.ZipFile(out / f"feedback-{name}-03_subspace.zip") as z:
            page = tmp_path / name / "page.html"
            page.parent.mkdir()
            page.write_bytes(z.read(member))
            pages.append(page)
    driver = browser.chrome(tmp_path / "profile", "1100,1400")
    try:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
        for page in pages:
            shown = browser.maths_offline(driver, page)
            assert shown["maths"] > 5 and shown["empty"] == 0 and shown["tex"] == [], (page, shown)
    finally:
        driver.quit()


def test_regrading_one_student_keeps_the_others_and_a_changed_source_is_released_again(term, two_assignments):
    tmp, env, *_ = term
    grades = (tmp / "course" / "grades.csv").read_text()
    proc = run(env, "grade", "--student", "nunezjose_101", "--assignment", "03_subspace", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    assert "Graded 1 notebooks of 1 students" in proc.stdout and "Regraded: no score changed." in proc.stdout
    assert (tmp / "course" / "grades.csv").read_text() == grades
    proc = run(env, "grade", "--student", "nobody")
    assert proc.returncode != 0 and "--student nobody: not among those collected" in proc.stderr
    # the instructor gives the projector check one more point: its submissions are regraded
    path = two_assignments / "03_subspace" / "subspace.ipynb"
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test-proj")
    cell["metadata"]["nbgrader"]["points"] += 1
    path.write_text(json.dumps(nb, indent=1))
    proc = run(env, "grade", "--assignment", "02_averaging", "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Source changed since its release: 03_subspace" in proc.stdout, proc.stdout
    assert "nunezjose_101/03_subspace: 3/3 -> 4/4" in proc.stdout and "obrienzoe_102/03_subspace: 0/3 -> 0/4" \
        in proc.stdout, proc.stdout
