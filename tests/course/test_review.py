"""Written answers scored by a person, through ``pm-course``: the review sheet, --apply, status, a regrade.

One assignment (02_averaging: 4 autograded points and one written answer of 2),
two students from a Canvas zip, graded twice (four notebooks in all): the sheet
carries the answers' text; a bad sheet is refused naming its row and column and
changes nothing; a good one lands in grades.csv, the Canvas import and the
feedback pages; a regrade keeps a review while its answer is unchanged and
clears it when the answer changed; a score entered as nbgrader's formgrader
enters it counts the same.

The tests are the steps of that term, in order, on one graded class (a module
fixture): run the file in one process, as ``make test`` does (``--dist loadfile``).
"""
import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile

import nbformat
import pytest

from conftest import ROOT, MARCH, LATER, _zip, read_csv, solved
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

NAME, NOTEBOOK, CELL = "02_averaging", "averaging.ipynb", "why-average"
ZOE_FIRST = "The denominator is 2e^beta + n - 2, so alpha_a = e^beta/(2e^beta + n - 2), which tends to 1/2."
# starts as a spreadsheet formula would: the sheet must not hand it to Excel as one
ZOE_SECOND = "=HYPERLINK(\"http://example.org\") Both weights tend to one half; the others vanish."
JOSE = "Two scores are $\\beta$, $n-2$ are $0$: $\\alpha_a = 1/(2 + (n-2)e^{-\\beta})$ <b>not bold</b>"
GRADEBOOK = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{NAME} (501)"],
             ["    Points Possible", "", "", "", "", "6"],
             ["Núñez, José", "101", "S101", "jnunez", "Section A", ""],
             ["O'Brien, Zoë", "102", "S102", "zobrien", "Section A", ""]]


def answered(text):
    """The instructor's notebook (all code right) with ``text`` as the written answer, as a student types it."""
    nb = nbformat.reads(solved(NAME).decode(), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == CELL)
    cell.source = f"**Your answer.**\n\n{text}"
    return nbformat.writes(nb).encode()


def run(env, *args):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=900)


def sheet(path):
    with path.open(newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def write_sheet(path, rows):
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def status_row(env):
    """``pm-course status``'s row for the assignment, split."""
    proc = run(env, "status")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return next(line.split() for line in proc.stdout.splitlines() if line.startswith(NAME))


def grades(course):
    with (course / "grades.csv").open(newline="", encoding="utf-8") as f:
        return {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == NAME}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review")
    exercises = tmp / "exercises"
    shutil.copytree(ROOT / "exercises" / NAME, exercises / NAME)
    env = dict(os.environ, PM_COURSE_DIR=str(tmp / "course"), PM_EXERCISES=str(exercises))
    gradebook = tmp / "gradebook.csv"
    with gradebook.open("w", newline="", encoding="utf-8-sig") as f:
        csv.writer(f).writerows(GRADEBOOK)
    first = _zip(tmp / "first.zip", [("nunezjose_101_9101_averaging.ipynb", answered(JOSE), MARCH),
                                     ("obrienzoe_102_9102_averaging.ipynb", answered(ZOE_FIRST), MARCH)])
    for args in (("collect", "--from", "canvas", first, "--roster", gradebook, "--assignment", NAME),
                 ("grade", "--jobs", "2")):
        proc = run(env, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp, env, gradebook, proc


def test_grading_counts_the_written_points_in_the_maximum_and_awaits_their_review(graded):
    tmp, env, _, proc = graded
    rows = grades(tmp / "course")
    for student in ("nunezjose_101", "obrienzoe_102"):
        assert rows[student]["score"] == "4" and rows[student]["max_score"] == "6", rows[student]
        assert (rows[student]["written_score"], rows[student]["written_max"], rows[student]["awaiting_review"]) \
            == ("0", "2", "1")
    assert "Written answers awaiting review: 2" in proc.stdout, proc.stdout
    page = (tmp / "course" / "feedback" / "nunezjose_101" / NAME / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert "Awaiting review by your instructor" in page
    # the answer's score is not shown as 0 beside it, in the page's list of cells or at the answer
    assert f'<a href="#{CELL}">Written response</a> (Score: not yet counted / 2.0)' in page, page
    answer = page.split(f'<a name="{CELL}"></a>')[1][:600]
    assert "Score: not yet counted / 2.0" in answer and "Score: 0.0" not in answer, answer


def test_status_and_the_review_sheet_before_any_review(graded):
    tmp, env, *_ = graded
    proc = run(env, "status")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["assignment", "submissions", "graded"], proc.stdout
    assert lines[1].split() == [NAME, "2", "2", "0", "0", "2"], proc.stdout
    proc = run(env, "review", NAME)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = sheet(tmp / "course" / "review" / f"{NAME}.csv")
    assert list(rows[0]) == ["student_id", "cell", "max_points", "points", "comment", "answer", "answer_sha256"]
    assert [(r["student_id"], r["cell"], r["max_points"], r["points"], r["answer"]) for r in rows] == [
        ("nunezjose_101", CELL, "2", "", JOSE), ("obrienzoe_102", CELL, "2", "", ZOE_FIRST)]
    page = (tmp / "course" / "review" / f"{NAME}.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<link" not in page and 'lang="en"' in page  # self-contained
    assert "&lt;b&gt;not bold&lt;/b&gt;" in page and "<b>not bold</b>" not in page  # an answer is text, not markup
    assert "**Rubric (2 points).**" in page and "awaiting review" in page
    assert page.index("The model answer") < page.index("nunezjose_101")


def test_a_bad_sheet_is_refused_naming_row_and_column_and_nothing_is_applied(graded):
    tmp, env, *_ = graded
    rows = sheet(tmp / "course" / "review" / f"{NAME}.csv")
    good = dict(rows[0], points="2", comment="right")                  # row 2: fine on its own
    bad = [good, dict(rows[1], points="3"),                             # row 3: more than the cell's 2
           dict(rows[1], points="two"),                                 # row 4: not a number
           dict(rows[1], student_id="nobody_999", points="1"),          # row 5: not a student
           dict(rows[1], cell="why-nothing", points="1"),               # row 6: not a written cell
           dict(rows[1], points="-1"),                                  # row 7: negative
           dict(rows[1], points="nan")]                                 # row 8: not a number either
    path = write_sheet(tmp / "bad.csv", bad)
    proc = run(env, "review", NAME, "--apply", path)
    assert proc.returncode != 0
    err = proc.stderr
    assert "Nothing was applied" in err, err
    for row, column, says in ((3, "points", "outside 0 to 2"), (4, "points", "'two' is not a number"),
                              (5, "student_id", "'nobody_999'"), (6, "cell", "'why-nothing'"),
                              (7, "points", "outside 0 to 2"), (8, "points", "'nan' is not a number")):
        assert f"{path}, row {row}, column {column}: " in err and says in err, (row, err)
    assert "row 2," not in err
    assert all(r["awaiting_review"] == "1" and r["score"] == "4" for r in grades(tmp / "course").values())
    assert [r["points"] for r in sheet(tmp / "course" / "review" / f"{NAME}.csv")] == ["", ""]
    missing = write_sheet(tmp / "no-points.csv", [{k: v for k, v in good.items() if k != "points"}])
    proc = run(env, "review", NAME, "--apply", missing)
    assert proc.returncode != 0 and f"{missing}, row 1: no column 'points'" in proc.stderr, proc.stderr


def test_an_applied_sheet_lands_in_grades_the_canvas_import_the_feedback_and_status(graded):
    tmp, env, gradebook, _ = graded
    course = tmp / "course"
    path = course / "review" / f"{NAME}.csv"
    rows = sheet(path)
    rows[0].update(points="2", comment="Clear and stable: full marks.")
    rows[1].update(points="1,5", comment="The limit is right; say why the other weights vanish.")
    proc = run(env, "review", NAME, "--apply", write_sheet(path, rows))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = grades(course)
    assert (got["nunezjose_101"]["score"], got["nunezjose_101"]["written_score"]) == ("6", "2")
    assert (got["obrienzoe_102"]["score"], got["obrienzoe_102"]["written_score"]) == ("5.5", "1.5")
    assert {r["awaiting_review"] for r in got.values()} == {"0"}
    # reviewed: no reason says "not reviewed yet", and a full score has no lost points
    assert not [r["reason"] for r in got.values() if "not reviewed yet" in r["reason"]], got
    assert "lost points" not in got["nunezjose_101"]["reason"], got["nunezjose_101"]
    out = tmp / "canvas-import.csv"
    proc = run(env, "export", "--to", "canvas", gradebook, "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [r[-1] for r in read_csv(out)[1:]] == ["6", "6", "5.5"], read_csv(out)
    packed = run(env, "feedback", "-o", tmp / "packed-reviewed")
    assert packed.returncode == 0, packed.stdout + packed.stderr
    with zipfile.ZipFile(tmp / "packed-reviewed" / f"feedback-canvas-{NAME}.zip") as z:
        jose = next(z.read(n).decode() for n in z.namelist() if "_101_" in n)
    # the banner says who scored it: not "graded automatically" alone
    assert f"{NAME}: 6 of 6 points, graded automatically, written answers reviewed by your instructor" in jose
    page = (course / "feedback" / "obrienzoe_102" / NAME / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert "say why the other weights vanish" in page and "5.5" in page and "Awaiting review" not in page
    assert status_row(env) == [NAME, "2", "2", "0", "0", "0"]
    again = run(env, "review", NAME)  # the sheet written again shows what was recorded
    assert [(r["points"], r["comment"]) for r in sheet(path)] == [
        ("2", "Clear and stable: full marks."), ("1.5", "The limit is right; say why the other weights vanish.")], \
        again.stdout + again.stderr


def test_a_regrade_keeps_a_review_while_the_answer_is_unchanged_and_flags_a_changed_one(graded):
    tmp, env, gradebook, _ = graded
    course = tmp / "course"
    # Canvas's download after Zoë resubmitted: José's notebook as before, Zoë's with a new answer
    second = _zip(tmp / "second.zip", [("nunezjose_101_9101_averaging.ipynb", answered(JOSE), MARCH),
                                       ("obrienzoe_102_9102_averaging-1.ipynb", answered(ZOE_SECOND), LATER)])
    for args in (("collect", "--from", "canvas", second, "--roster", gradebook, "--assignment", NAME),
                 ("grade", "--jobs", "2", "--assignment", NAME)):
        proc = run(env, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "changed since they were reviewed" in proc.stdout and f"obrienzoe_102/{NAME} {CELL} (was 1.5 of 2)" \
        in proc.stdout, proc.stdout
    assert f"nunezjose_101/{NAME} {CELL}" not in proc.stdout  # the same answer: its review stands
    got = grades(course)
    assert (got["nunezjose_101"]["score"], got["nunezjose_101"]["awaiting_review"]) == ("6", "0")
    assert (got["obrienzoe_102"]["score"], got["obrienzoe_102"]["awaiting_review"]) == ("4", "1")
    assert status_row(env) == [NAME, "2", "2", "0", "0", "1"]
    proc = run(env, "review", NAME)
    rows = {r["student_id"]: r for r in sheet(course / "review" / f"{NAME}.csv")}
    assert (rows["nunezjose_101"]["points"], rows["obrienzoe_102"]["points"]) == ("2", "")
    assert rows["obrienzoe_102"]["answer"] == "'" + ZOE_SECOND  # text to a spreadsheet, not a formula
    # that sheet, filled in, applies: the quote is not part of the answer
    rows["obrienzoe_102"].update(points="1", comment="-1 for the missing reason")
    path = write_sheet(tmp / "after-regrade.csv", list(rows.values()))
    proc = run(env, "review", NAME, "--apply", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (grades(course)["obrienzoe_102"]["score"], grades(course)["obrienzoe_102"]["awaiting_review"]) == ("5", "0")
    assert run(env, "review", NAME).returncode == 0
    assert sheet(course / "review" / f"{NAME}.csv")[1]["comment"] == "'-1 for the missing reason"


def test_a_sheet_written_before_the_answer_changed_is_refused(graded):
    tmp, env, *_ = graded
    stale = [{"student_id": "obrienzoe_102", "cell": CELL, "max_points": "2", "points": "2", "comment": "",
              "answer": ZOE_FIRST}]
    path = write_sheet(tmp / "stale.csv", stale)
    proc = run(env, "review", NAME, "--apply", path)
    assert proc.returncode != 0 and f"{path}, row 2, column answer: not the answer graded last" in proc.stderr, \
        proc.stderr
    assert grades(tmp / "course")["obrienzoe_102"]["score"] == "5"  # as the last applied sheet left it


def test_a_sheet_without_its_answers_or_their_hashes_is_refused_naming_the_student(graded):
    """Columns deleted in a spreadsheet: nothing says which answer a row scores, so nothing is applied."""
    tmp, env, *_ = graded
    bare = [{"student_id": "obrienzoe_102", "cell": CELL, "max_points": "2", "points": "2", "comment": ""}]
    path = write_sheet(tmp / "no-answers.csv", bare)
    proc = run(env, "review", NAME, "--apply", path)
    assert proc.returncode != 0, proc.stdout
    assert f"{path}, row 2, columns answer, answer_sha256: obrienzoe_102's row says neither which answer it" \
        " scores nor its hash" in proc.stderr, proc.stderr
    semicolons = tmp / "semicolons.csv"
    semicolons.write_text("student_id;cell;max_points;points;comment;answer\n", encoding="utf-8")
    proc = run(env, "review", NAME, "--apply", semicolons)
    assert proc.returncode != 0 and "save it comma-separated" in proc.stderr, proc.stderr


def test_a_score_entered_in_the_formgrader_counts_the_same(graded):
    """The formgrader writes the grade's manual_score (and clears needs_manual_grade): nothing else."""
    tmp, env, gradebook, _ = graded
    course = tmp / "course"
    from nbgrader.api import Gradebook

    # both students scored in the formgrader, so this test does not depend on what earlier ones applied
    # (pytest-xdist may run them in another process, with its own copy of the graded class)
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        for student in ("nunezjose_101", "obrienzoe_102"):
            grade = gb.find_grade(CELL, "averaging", NAME, student)
            grade.manual_score, grade.needs_manual_grade = 2.0, False
        gb.db.commit()
    assert status_row(env) == [NAME, "2", "2", "0", "0", "0"]
    out = tmp / "canvas-after-formgrader.csv"
    proc = run(env, "export", "--to", "canvas", gradebook, "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [r[-1] for r in read_csv(out)[1:]] == ["6", "6", "6"], read_csv(out)
    assert grades(course)["obrienzoe_102"]["written_score"] == "2"


def test_the_gradebook_is_read_again_only_when_it_changed(graded, tmp_path):
    """export brings grades.csv up to date with the gradebook; where nothing changed since the last command
    did (grades.csv, the gradebook and the source the same bytes), it does not open the gradebook, nor load
    nbgrader; a score entered in the formgrader since is read at once."""
    tmp, env, gradebook, _ = graded
    course = tmp / "course"
    from nbgrader.api import Gradebook

    def export(name):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pm_course", "export", "--to", "canvas",
                               str(gradebook), "-o", str(tmp_path / name)], env=env, capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        return re.search(r"\|\s+nbgrader$", proc.stderr, re.M) is not None, read_csv(tmp_path / name)

    def score(student, points):
        with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
            grade = gb.find_grade(CELL, "averaging", NAME, student)
            grade.manual_score, grade.needs_manual_grade = points, False
            gb.db.commit()

    score("nunezjose_101", 2.0)
    export("first.csv")  # whatever the earlier tests left: read now
    loaded, first = export("again.csv")
    assert not loaded, "nothing changed since the last export, and it loaded nbgrader"
    score("nunezjose_101", 1.0)  # the formgrader, between two commands
    try:
        loaded, after = export("after.csv")
        assert loaded and grades(course)["nunezjose_101"]["written_score"] == "1", grades(course)["nunezjose_101"]
        jose = [next(r[-1] for r in rows if r[0] == "Núñez, José") for rows in (first, after)]
        assert jose == ["6", "5"], (first, after)
    finally:
        score("nunezjose_101", 2.0)
        export("restored.csv")


def test_a_row_of_an_assignment_since_removed_does_not_stop_sync(tmp_path):
    """grades.csv may keep rows of an assignment no longer in exercises/ (export and its checks skip them):
    sync records what it read without a source for it, and leaves the rows as they are."""
    code = ("from pm_course.state.course import Course, default_folder\n"
            "from pm_course.state.grades_csv import write_grades\n"
            "from pm_course.state import written as reviews\ncourse = Course(default_folder())\n"
            "rows = {('ann_1', '99_removed'): {'student_id': 'ann_1', 'assignment': '99_removed',"
            " 'status': 'not submitted'}}\nwrite_grades(rows, course.grades)\n"
            "print(reviews.sync(course), reviews.sync(course))")
    env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"))
    (tmp_path / "course").mkdir()
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["[]", "[]"], proc.stdout + proc.stderr
    assert '"99_removed": null' in (tmp_path / "course" / "synced.json").read_text()


def test_a_multi_line_answer_reads_back_as_written(tmp_path):
    """A written answer keeps its lines through the sheet (a sheet read line by line would join them)."""
    from pm_course.steps import review

    sheet = tmp_path / "sheet.csv"
    answer = "Keys $a$ and $b$ score beta:\n\n$\\alpha_a = 1/2$\r\nso c is the average."
    with sheet.open("w", newline="", encoding="utf-8-sig") as f:
        writer = csv.DictWriter(f, review.SHEET)
        writer.writeheader()
        writer.writerow({"student_id": "ada", "cell": "why-average", "max_points": "2", "points": "2",
                         "comment": "", "answer": review.cell_text(answer)})
    _, rows = review._read_sheet(sheet)
    assert review.from_cell(rows[0]["answer"]).split() == answer.split()
    assert review.digest(review.from_cell(rows[0]["answer"])) == review.digest(answer)


def _half_points(env, course, tmp_path):
    """The sheet written now, every answer given 0.5 of 2 (a score no other test gives): its path."""
    assert run(env, "review", NAME).returncode == 0
    rows = sheet(course / "review" / f"{NAME}.csv")
    for row in rows:
        row.update(points="0.5", comment="Half a point: say why the other weights vanish.")
    return write_sheet(tmp_path / "half.csv", rows)


def page_of(course, student):
    return course / "feedback" / student / NAME / NOTEBOOK.replace(".ipynb", ".html")


def test_an_apply_stopped_by_a_closed_pipe_leaves_the_gradebook_grades_and_pages_agreeing(graded, tmp_path):
    """``review --apply SHEET | head -c 1``: the pipe closes after the first byte, while the points are recorded.

    Whatever was written before the write that failed, grades.csv, the pages, the export and the packed
    feedback all say the score the gradebook now holds (4 autograded + 0.5 reviewed)."""
    tmp, env, gradebook, _ = graded
    course = tmp_path / "course"
    shutil.copytree(tmp / "course", course)
    env = {**env, "PM_COURSE_DIR": str(course), "PYTHONUNBUFFERED": "1"}  # each line written as printed
    path = _half_points(env, course, tmp_path)
    proc = subprocess.run(f"{shlex.quote(sys.executable)} -m pm_course review {NAME} --apply {shlex.quote(str(path))}"
                          " | head -c 1", shell=True, env=env, capture_output=True, text=True, timeout=900)
    assert proc.stdout == "R", proc.stdout  # "Recorded ...": head took one byte and closed the pipe
    assert "pm-course review stopped: its output was closed (a closed pipe)" in proc.stderr, proc.stderr
    packed = run(env, "feedback", "-o", tmp_path / "packed")
    assert packed.returncode == 0, packed.stdout + packed.stderr
    assert {s: r["score"] for s, r in grades(course).items()} == {"nunezjose_101": "4.5", "obrienzoe_102": "4.5"}
    with zipfile.ZipFile(tmp_path / "packed" / f"feedback-canvas-{NAME}.zip") as z:
        pages = [z.read(n).decode() for n in z.namelist()]
    assert len(pages) == 2 and all("(Score: 4.5 / 6.0)" in p and "4.5 of 6 points" in p for p in pages), \
        [re.findall(r"\(Score: [\d.]+ / [\d.]+\)|[\d.]+ of 6 points", p) for p in pages]
    assert all("Half a point" in page_of(course, s).read_text() for s in ("nunezjose_101", "obrienzoe_102"))
    out = tmp_path / "import.csv"
    assert run(env, "export", "--to", "canvas", gradebook, "-o", out).returncode == 0
    assert [r[-1] for r in read_csv(out)[2:]] == ["4.5", "4.5"], read_csv(out)


def test_a_page_older_than_its_grade_stops_feedback_naming_the_student_until_graded_again(graded, tmp_path):
    """José's page put back as it was before a review (as a stop between grades.csv and the pages left it):
    status lists it, feedback and export refuse it by name; grading him again makes it anew."""
    tmp, env, gradebook, _ = graded
    course = tmp_path / "course"
    shutil.copytree(tmp / "course", course)
    env = {**env, "PM_COURSE_DIR": str(course)}
    old = page_of(course, "nunezjose_101").read_bytes()
    assert "(Score: 4.5 / 6.0)" not in old.decode()
    applied = run(env, "review", NAME, "--apply", _half_points(env, course, tmp_path))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    page_of(course, "nunezjose_101").write_bytes(old)
    said = re.search(r"\(Score: ([\d.]+) / 6\.0\)", old.decode()).group(1)
    why = (f"its feedback page says {float(said):g} points, grades.csv 4.5: grade --student nunezjose_101"
           f" --assignment {NAME} makes it again")
    status = run(env, "status")
    assert status.returncode == 0 and f"  out of date: nunezjose_101: {why}" in status.stdout, status.stdout
    assert "obrienzoe_102" not in status.stdout, status.stdout
    refused = run(env, "feedback", "-o", tmp_path / "packed")
    assert refused.returncode != 0 and not (tmp_path / "packed").exists(), refused.stdout + refused.stderr
    assert f"feedback refused: 1 row(s) would be written from out-of-date state: nunezjose_101/{NAME} ({why})" \
        in refused.stderr, refused.stderr
    refused = run(env, "export", "--to", "canvas", gradebook, "-o", tmp_path / "import.csv")
    assert refused.returncode != 0 and f"nunezjose_101/{NAME} ({why})" in refused.stderr, refused.stderr
    regraded = run(env, "grade", "--student", "nunezjose_101", "--assignment", NAME, "--jobs", "1")
    assert regraded.returncode == 0, regraded.stdout + regraded.stderr
    assert "(Score: 4.5 / 6.0)" in page_of(course, "nunezjose_101").read_text()
    assert run(env, "feedback", "-o", tmp_path / "packed").returncode == 0
