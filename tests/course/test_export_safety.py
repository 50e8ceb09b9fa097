"""Exports that cannot land in the wrong place: a Canvas term of two weeks, graded once, exported many ways.

Week 1 is 02_averaging (gradebook column ``02_averaging (4402)``), week 2 is
03_subspace, which the instructor named ``Exercise 3: Subspace (4403)`` in
Canvas. José hands week 1 in two days late and week 2 on time; Zoë hands week
1 in on time and week 2 late by Canvas's date, within her extension (their real
times come in a CSV: Canvas's download has none); Ann Marie
hands in nothing; Canvas's test student hands in week 1. The Moodle section
hands week 2 in (conftest's Moodle class). 01_copying is not collected yet.
"""
import csv
import io
import os
import shutil
import sys

import pytest

from conftest import ROOT, _zip, blank, moodle_worksheet, moodle_zip, solved
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "02_averaging (4402)",
           "Exercise 3: Subspace (4403)", "Current Score", "Final Score"]
ROSTER = [("Núñez, José", "101", "S101", "jnunez", "Section A"),
          ("O'Brien, Zoë", "102", "S102", "zobrien", "Section A"),
          ("Smith, Ann Marie", "103", "S103", "asmith", "Section B")]
COURSE_TOML = """\
timezone = "America/Chicago"
[assignments.02_averaging]
due = 2025-03-03T23:59:00
[assignments.03_subspace]
due = 2025-03-10T23:59:00
canvas = "Exercise 3: Subspace (4403)"
[extensions.obrienzoe_102]
03_subspace = 2025-03-13T23:59:00
"""


def gradebook(path, points=("6", "3"), delimiter=",", columns=COLUMNS, rows=None):
    """Canvas's gradebook export: the Points Possible row, the roster, the test student."""
    n = sum(c in ("Student", "ID", "SIS User ID", "SIS Login ID", "Section") for c in columns)
    rest = len(columns) - n - len(points)
    with path.open("w", newline="", encoding="utf-8-sig") as f:
        w = csv.writer(f, delimiter=delimiter)
        w.writerow(columns)
        w.writerow(["    Points Possible", *[""] * (n - 1), *points, *["(read only)"] * rest])
        for row in rows or ROSTER:
            w.writerow([*row, *[""] * (len(columns) - len(row))])
        w.writerow(["Student, Test", "999", "", "", "Section A"][:n] + [""] * (len(columns) - n))
    return path


def table(path, delimiter=","):
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig")), delimiter=delimiter))


def run(env, *args, timeout=600):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=timeout)


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """Collected from Canvas and Moodle and graded once (6 notebooks); tests that change it work on a copy."""
    tmp = tmp_path_factory.mktemp("export-term")
    exercises = tmp / "exercises"
    for name in ("01_copying", "02_averaging", "03_subspace"):
        shutil.copytree(ROOT / "exercises" / name, exercises / name)
    (tmp / "course.toml").write_text(COURSE_TOML)
    env = dict(os.environ, PM_COURSE_DIR=str(tmp / "course"), PM_EXERCISES=str(exercises),
               PM_COURSE_CONFIG=str(tmp / "course.toml"))
    book = gradebook(tmp / "gradebook.csv")
    week1 = _zip(tmp / "week1.zip", [
        ("nunezjose_LATE_101_9101_averaging.ipynb", solved("02_averaging"), (2025, 3, 5, 10, 0, 0)),
        ("obrienzoe_102_9102_averaging.ipynb", solved("02_averaging"), (2025, 3, 2, 12, 0, 0)),
        ("studenttest_999_9199_averaging.ipynb", solved("02_averaging"), (2025, 3, 2, 12, 0, 0)),
    ])
    week2 = _zip(tmp / "week2.zip", [
        ("nunezjose_101_9201_subspace.ipynb", solved("03_subspace"), (2025, 3, 9, 12, 0, 0)),
        ("obrienzoe_LATE_102_9202_subspace.ipynb", solved("03_subspace"), (2025, 3, 12, 10, 0, 0)),
    ])
    sheet = moodle_worksheet(tmp / "Grades-PM-03_subspace-77.csv")
    for args in (("canvas", week1, "--roster", book), ("canvas", week2, "--roster", book),
                 ("moodle", moodle_zip(tmp / "moodle"), "--roster", sheet, "--assignment", "03_subspace")):
        proc = run(env, "collect", "--from", *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    graded = run(env, "grade", "--jobs", "2")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    return tmp, env, book, graded


def test_the_test_student_is_never_graded_and_names_come_from_the_roster(term):
    tmp, env, _, graded = term
    assert "Not graded: Canvas's test student (studenttest_999)." in graded.stdout, graded.stdout
    assert "Graded 6 notebooks" in graded.stdout, graded.stdout
    rows = list(csv.DictReader((tmp / "course" / "grades.csv").open(encoding="utf-8")))
    canvas = [r for r in rows if r["lms"] == "canvas"]
    assert {r["student_id"] for r in canvas} == {"nunezjose_101", "obrienzoe_102", "smithannmarie_103"}
    assert {r["name"] for r in canvas} == {"Núñez, José", "O'Brien, Zoë", "Smith, Ann Marie"}  # not "nunezjose"
    proc = run(env, "export", "--to", "csv", "-o", tmp / "plain.csv")
    assert proc.returncode == 0, proc.stderr
    names = {r["student_id"]: r["name"] for r in csv.DictReader((tmp / "plain.csv").open(encoding="utf-8"))}
    assert names["nunezjose_101"] == "Núñez, José"


def test_the_summary_shows_only_the_assignments_collected(term):
    *_, graded = term
    header = next(line for line in graded.stdout.splitlines() if line.startswith("student "))
    assert header.split() == ["student", "02_averaging", "03_subspace", "total"], header
    # out of the two collected: 6 + 3 (02_averaging's written answer, 2 points, awaits review)
    assert "nunezjose_101" in graded.stdout and "7/9" in graded.stdout


def test_the_course_file_fills_a_renamed_column_with_due_dates_per_assignment_and_student(term):
    tmp, env, book, _ = term
    out = tmp / "import.csv"
    # Canvas's download has no submission times (its entries are dated when the zip is made): a penalty is refused
    proc = run(env, "export", "--to", "canvas", book, "-o", out, "--late-penalty", "10")
    assert proc.returncode != 0 and not out.exists(), proc.stdout
    assert "cannot compute the late penalty" in proc.stderr and "nunezjose_101/02_averaging" in proc.stderr
    assert "Canvas's own Late Policy" in proc.stderr and "--times" in proc.stderr, proc.stderr
    times = tmp / "times.csv"  # the real times, e.g. from Canvas's submissions API
    times.write_text("student,assignment,submitted_at\nnunezjose_101,02_averaging,2025-03-05 10:00\n"
                     "102,03_subspace,2025-03-12 10:00\n")
    proc = run(env, "export", "--to", "canvas", book, "-o", out, "--late-penalty", "10", "--times", times)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert table(out) == [
        COLUMNS[:7],
        ["    Points Possible", "", "", "", "", "6", "3"],
        ["Núñez, José", "101", "S101", "jnunez", "Section A", "3.2", "3"],      # week 1: 2 days late; week 2 on time
        ["O'Brien, Zoë", "102", "S102", "zobrien", "Section A", "4", "3"],      # week 2 late by Canvas, not by her date
        ["Smith, Ann Marie", "103", "S103", "asmith", "Section B", "", ""],
    ]  # and no row for the test student
    assert "Núñez, José (101) 02_averaging: late 2 day(s), -20%: 4 -> 3.2 (submitted 2025-03-05 10:00, due" \
        " 2025-03-03 23:59)" in proc.stdout, proc.stdout
    assert proc.stdout.count(" day(s), -") == 1, proc.stdout  # nobody else is penalised
    assert "obrienzoe_102: 03_subspace due 2025-03-13 23:59 (extension)" in proc.stdout
    assert "left out: Canvas's test student Student, Test (999)" in proc.stdout


def test_a_gradebook_with_no_column_for_an_assignment_is_refused_naming_its_columns(term):
    tmp, env, book, _ = term
    (tmp / "bare.toml").write_text("")  # no canvas column named: 03_subspace has no "03_subspace (<id>)"
    out = tmp / "refused.csv"
    proc = run({**env, "PM_COURSE_CONFIG": str(tmp / "bare.toml")}, "export", "--to", "canvas", book, "-o", out)
    assert proc.returncode != 0 and not out.exists()
    assert "no gradebook column for 03_subspace" in proc.stderr, proc.stderr
    assert "02_averaging (4402); Exercise 3: Subspace (4403)" in proc.stderr and "--new-columns" in proc.stderr
    proc = run({**env, "PM_COURSE_CONFIG": str(tmp / "bare.toml")}, "export", "--to", "canvas", book, "-o", out,
               "--new-columns")
    assert proc.returncode == 0, proc.stderr
    assert table(out)[0] == [*COLUMNS[:6], "03_subspace"]  # asked for: a new assignment in Canvas
    # a course file that names a column the gradebook does not have
    (tmp / "typo.toml").write_text(COURSE_TOML.replace("Subspace (4403)", "Subspace (4430)"))
    proc = run({**env, "PM_COURSE_CONFIG": str(tmp / "typo.toml")}, "export", "--to", "canvas", book)
    assert proc.returncode != 0 and "canvas = 'Exercise 3: Subspace (4430)' is not a column of" in proc.stderr


def test_scores_are_rescaled_to_the_gradebooks_points_or_refused(term):
    tmp, env, _, _ = term
    book = gradebook(tmp / "gradebook-8.csv", points=("8", "3"))  # the assignment is out of 6 now
    out = tmp / "rescaled.csv"
    proc = run(env, "export", "--to", "canvas", book, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "Rescaled 02_averaging: the gradebook's '02_averaging (4402)' is out of 8 points, the assignment" \
        " out of 6" in proc.stdout, proc.stdout
    rows = table(out)
    # 4 autograded points of 6 (the written answer awaits review): 4 x 8/6
    assert rows[1][5:] == ["8", "3"] and rows[2][5] == "5.33" and rows[3][5] == "5.33", rows
    proc = run(env, "export", "--to", "canvas", book, "-o", tmp / "no.csv", "--no-rescale")
    assert proc.returncode != 0 and not (tmp / "no.csv").exists()
    assert f"{book}, row 2, column '02_averaging (4402)'" in proc.stderr and "out of 8" in proc.stderr


def test_semicolon_gradebooks_are_read_and_written_back_alike(term):
    tmp, env, _, _ = term
    book = gradebook(tmp / "gradebook-semicolons.csv", delimiter=";")
    out = tmp / "semicolons.csv"
    proc = run(env, "export", "--to", "canvas", book, "-o", out)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text(encoding="utf-8-sig")
    assert text.splitlines()[0] == ";".join(COLUMNS[:7])
    assert table(out, ";")[2] == ["Núñez, José", "101", "S101", "jnunez", "Section A", "4", "3"]


def test_a_broken_gradebook_is_named_by_file_row_and_column(term):
    tmp, env, _, _ = term
    no_id = gradebook(tmp / "no-id.csv", columns=[c for c in COLUMNS if c != "ID"],
                      rows=[(r[0], *r[2:]) for r in ROSTER])
    proc = run(env, "export", "--to", "canvas", no_id)
    assert proc.returncode != 0 and f"{no_id}: a Canvas gradebook without the column(s) 'ID'" in proc.stderr
    short = gradebook(tmp / "short.csv")
    lines = short.read_text(encoding="utf-8-sig").splitlines()
    lines[3] = lines[3].rsplit(",", 3)[0]  # O'Brien's row lost its last three fields
    short.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run(env, "export", "--to", "canvas", short)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"{short}, row 4: 6 fields, but the header has 9 columns (no value for column" \
           " 'Exercise 3: Subspace (4403)')" in proc.stderr, proc.stderr
    points = gradebook(tmp / "points.csv", points=("four", "3"))
    proc = run(env, "export", "--to", "canvas", points)
    assert proc.returncode != 0 and f"{points}, row 2, column '02_averaging (4402)'" in proc.stderr


def test_a_moodle_worksheet_is_rescaled_to_its_maximum_grade_or_refused(term):
    tmp, env, _, _ = term
    sheet = moodle_worksheet(tmp / "Grades-PM-03_subspace-77.csv")
    six = tmp / "Grades-PM-03_subspace-six.csv"
    six.write_text(sheet.read_text(encoding="utf-8").replace("3.00", "6.00"), encoding="utf-8")
    proc = run(env, "export", "--to", "moodle", six, "--assignment", "03_subspace", "-o", tmp / "six.csv")
    assert proc.returncode == 0, proc.stderr
    assert "Rescaled: the worksheet grades out of 6, the assignment is out of 3: scores x 6/3" in proc.stdout
    grade = next(i for i, c in enumerate(table(tmp / "six.csv")[0]) if c == "Grade")
    assert [r[grade] for r in table(tmp / "six.csv")[1:]] == ["6.00", "0.00", ""]
    proc = run(env, "export", "--to", "moodle", six, "-o", tmp / "no.csv", "--no-rescale")
    assert proc.returncode != 0 and not (tmp / "no.csv").exists()
    assert f"{six}, row 2, column 'Maximum Grade': the worksheet grades out of 6" in proc.stderr, proc.stderr
    edited = tmp / "Grades-PM-03_subspace-edited.csv"  # a row whose Identifier a spreadsheet rewrote
    edited.write_text(sheet.read_text(encoding="utf-8").replace("Participant 202", "202 Participant"), encoding="utf-8")
    proc = run(env, "export", "--to", "moodle", edited, "-o", tmp / "no.csv")
    assert proc.returncode != 0 and f"{edited}, row 3, column 'Identifier': '202 Participant'" in proc.stderr


def test_a_moodle_worksheet_of_another_assignment_is_refused_naming_both(term):
    tmp, env, _, _ = term
    sheet = moodle_worksheet(tmp / "Grades-PM-03_subspace-77.csv")
    proc = run(env, "export", "--to", "moodle", sheet, "--assignment", "02_averaging", "-o", tmp / "m.csv")
    assert proc.returncode != 0 and not (tmp / "m.csv").exists()
    assert "Grades-PM-03_subspace-77.csv is the worksheet of 03_subspace" in proc.stderr
    assert "not of --assignment 02_averaging" in proc.stderr
    # named in the course file by its Moodle name
    named = moodle_worksheet(tmp / "Grades-PM-Week 3 Subspace-78.csv")
    (tmp / "moodle.toml").write_text('[assignments.03_subspace]\nmoodle = "Week 3: Subspace"\n')
    proc = run({**env, "PM_COURSE_CONFIG": str(tmp / "moodle.toml")}, "export", "--to", "moodle", named,
               "--assignment", "02_averaging", "-o", tmp / "m.csv")
    assert proc.returncode != 0 and "is the worksheet of 03_subspace" in proc.stderr, proc.stderr


def test_grade_grades_only_what_is_new_or_changed(term, tmp_path):
    tmp, env, book, _ = term
    shutil.copytree(tmp / "course", tmp_path / "course")
    env = {**env, "PM_COURSE_DIR": str(tmp_path / "course")}
    again = run(env, "grade", "--jobs", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Graded 0 notebooks: nothing new or changed since the last run." in again.stdout, again.stdout
    assert "Unchanged since they were graded, kept: 6 notebooks" in again.stdout
    assert (tmp_path / "course" / "grades.csv").read_text() == (tmp / "course" / "grades.csv").read_text()
    # Zoë hands in week 2 again, blank this time: that notebook alone is graded
    week2 = _zip(tmp_path / "week2.zip", [
        ("nunezjose_101_9201_subspace.ipynb", solved("03_subspace"), (2025, 3, 9, 12, 0, 0)),
        ("obrienzoe_LATE_102_9203_subspace.ipynb", blank("03_subspace"), (2025, 3, 13, 10, 0, 0)),
    ])
    assert run(env, "collect", "--from", "canvas", week2, "--roster", book).returncode == 0
    proc = run(env, "grade", "--jobs", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Grading: 100%" in proc.stderr and " 1/1 [" in proc.stderr, proc.stderr[-1000:]
    assert "obrienzoe_102/03_subspace: 3/3 -> 0/3" in proc.stdout, proc.stdout
    assert "kept: 5 notebooks" in proc.stdout


def test_moodle_s_on_time_status_is_never_penalised_by_an_earlier_due_date_here():
    """Moodle's worksheet says "Submitted for grading" (no "late") from Moodle's own due date: a course file
    whose due date is earlier would penalise work the student was told came on time. Refused, naming it."""
    from datetime import datetime

    from pm_course.state.config import Settings
    from pm_course.state.course import CourseError
    from pm_course.lms.outcome import Late
    from pm_course.state.submissions import Entry

    def entry(late):
        e = Entry("nunezjose_201", "03_subspace", lms="moodle", lms_id="201", late=late,
                  submitted="2025-03-03 09:00")
        e.score, e.max_score = 3.0, 3.0
        return e

    late = Late(10.0, {"03_subspace": datetime(2025, 3, 2, 23, 59)}, Settings())
    with pytest.raises(CourseError, match=r"Moodle's worksheet says 1 submission\(s\) came on time .*"
                                          r"nunezjose_201/03_subspace \(submitted 2025-03-03 09:00, --due due"):
        late.check([entry(late=False)])
    late.check([entry(late=True)])  # Moodle says late too: the penalty is computed as before
    assert late.apply(entry(late=True))[0] == 2.7
    Late(None, {"03_subspace": datetime(2025, 3, 2, 23, 59)}, Settings()).check([entry(late=False)])  # no penalty
