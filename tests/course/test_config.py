"""The course file (course.toml): written by ``pm-course init``, every mistake in it named, due dates per
assignment and per student, read in the course's time zone."""
import os
import sys
from datetime import datetime

import pytest

from pm_course.state import config
from pm_course.lms.outcome import Late
from pm_course.state.submissions import Entry
import pm


def run(tmp_path, exercises, *args):
    env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"), PM_EXERCISES=str(exercises))
    env.pop("PM_COURSE_CONFIG", None)
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=120)


@pytest.fixture
def exercises(monkeypatch, two_assignments):
    monkeypatch.setenv("PM_EXERCISES", str(two_assignments))
    monkeypatch.delenv("PM_COURSE_CONFIG", raising=False)
    return two_assignments


def test_init_writes_a_commented_file_listing_the_assignments_and_never_replaces_one(tmp_path, exercises):
    path = tmp_path / "course.toml"
    proc = run(tmp_path, exercises, "--config", path, "init")
    assert proc.returncode == 0, proc.stderr
    text = path.read_text()
    assert "[assignments.02_averaging]" in text and "[assignments.03_subspace]" in text
    assert "# timezone" in text and "# due =" in text and "# canvas =" in text and "[extensions" in text
    assert config.load(path).assignments["03_subspace"] == config.Assignment()  # all commented out: nothing set
    path.write_text(text + "\n# mine\n")
    proc = run(tmp_path, exercises, "--config", path, "init")
    assert proc.returncode != 0 and "exists already" in proc.stderr and str(path) in proc.stderr
    assert path.read_text().endswith("# mine\n")


@pytest.mark.parametrize("toml, says", [
    ('timezone = "UTC"\ngrace = 3\n', "unknown key(s) grace"),
    ('[assignments.02_averaging]\ndeu = 2025-03-03T23:59:00\n', "[assignments.02_averaging]: unknown key(s) deu"),
    ('[assignments.02_averagin]\ndue = 2025-03-03T23:59:00\n', "'02_averagin' is not an assignment"),
    ('[assignments.02_averaging]\ndue = "March 3rd"\n', "[assignments.02_averaging] due = 'March 3rd' is not a date"),
    ('[assignments.02_averaging]\ndue = 5\n', "due = 5 is not a date"),
    ('timezone = "America/Chicgo"\n', "'America/Chicgo' is not a time zone"),
    ('[extensions.ada_1]\n03_subspac = 2025-03-03T23:59:00\n', "[extensions.ada_1]: '03_subspac' is not an assignment"),
    ('[assignments.02_averaging]\ncanvas = "A (1)"\n[assignments.03_subspace]\ncanvas = "A (1)"\n',
     "two assignments fill the same Canvas column: A (1)"),
    ("[assignments.02_averaging\n", "not a TOML file"),
])
def test_each_mistake_in_the_course_file_is_named_with_the_file(tmp_path, exercises, toml, says):
    path = tmp_path / "course.toml"
    path.write_text(toml)
    proc = run(tmp_path, exercises, "--config", path, "export", "--to", "csv")
    assert proc.returncode != 0 and says in proc.stderr and str(path) in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_missing_config_given_on_the_command_line_is_an_error(tmp_path, exercises):
    proc = run(tmp_path, exercises, "--config", tmp_path / "nope.toml", "export", "--to", "csv")
    assert proc.returncode != 0 and "nope.toml: no such file" in proc.stderr


def test_due_on_the_command_line_names_one_assignment(tmp_path, exercises):
    proc = run(tmp_path, exercises, "export", "--to", "csv", "--due", "2025-03-03")
    assert proc.returncode == 2 and "--due 01_copying='2025-03-03 23:59'" in proc.stderr
    proc = run(tmp_path, exercises, "export", "--to", "csv", "--due", "04_noisy_keys=2025-03-03")
    assert proc.returncode != 0 and "'04_noisy_keys' is not an assignment" in proc.stderr


def _entry(student, assignment, submitted, late=False):
    e = Entry(student, assignment, submitted=submitted, late=late)
    e.score, e.max_score = 4.0, 4.0
    return e


def test_days_late_count_from_each_assignments_due_date_and_each_students_extension(tmp_path, exercises):
    path = tmp_path / "course.toml"
    path.write_text('[assignments.02_averaging]\ndue = 2025-03-03T23:59:00\n'
                    '[assignments.03_subspace]\ndue = 2025-03-10\n'            # a date alone: the end of the day
                    '[extensions.zoe_2]\n03_subspace = "2025-03-13 23:59"\n')
    late = Late(10, {}, config.load(path))
    week1 = _entry("ada_1", "02_averaging", "2025-03-05 10:00:00", late=True)
    assert late.apply(week1) == (3.2, "late 2 day(s), -20%: 4 -> 3.2 (submitted 2025-03-05 10:00, due"
                                      " 2025-03-03 23:59)")
    assert late.apply(_entry("ada_1", "03_subspace", "2025-03-09 12:00:00")) == (4.0, "")   # week 2, on time
    assert late.apply(_entry("ada_1", "03_subspace", "2025-03-10 23:59:30")) == (4.0, "")   # by the end of the day
    assert late.apply(_entry("zoe_2", "03_subspace", "2025-03-12 10:00:00", late=True)) == (4.0, "")  # extension
    assert late.apply(_entry("ada_1", "03_subspace", "2025-03-12 10:00:00"))[0] == 3.2
    # Moodle's worksheet gives its time in words
    assert late.apply(_entry("ada_1", "02_averaging", "Wednesday, 5 March 2025, 10:00 AM"))[0] == 3.2
    # --due for one run replaces the course file's date of that assignment only
    given = Late.of(config.Settings(), 10, [("02_averaging", datetime(2025, 3, 6, 23, 59))])
    assert given.apply(week1) == (4.0, "")
    # with no due date, work the LMS marked late is marked late, and its days are not guessed
    assert Late(10).apply(week1) == (4.0, "late (marked late by the folder; no due date for 02_averaging); no"
                                          " penalty applied here")
    assert Late(10).days(week1)[0] is None


def test_the_time_zone_reads_the_lms_times_against_a_due_date_with_an_offset(tmp_path, exercises):
    path = tmp_path / "course.toml"
    body = '[assignments.02_averaging]\ndue = 2025-03-03T23:59:00-06:00\n'  # 23:59 in Chicago
    path.write_text('timezone = "Europe/Paris"\n' + body)
    paris = Late(10, {}, config.load(path))
    on_time = _entry("ada_1", "02_averaging", "2025-03-04 05:30:00")  # Paris time: 22:30 in Chicago
    assert paris.apply(on_time) == (4.0, "")
    path.write_text(body)  # no time zone: the LMS's times are read as the due date's own
    assert Late(10, {}, config.load(path)).apply(on_time)[0] == 3.6


def test_a_canvas_export_with_nothing_from_canvas_says_so(tmp_path, exercises):
    course = tmp_path / "course"
    course.mkdir()
    (course / "grades.csv").write_text("student_id,assignment,status,reason,score,max_score,late,submitted,name,lms,"
                                       "lms_id\nada,02_averaging,graded,,4,4,,,,,\n")  # graded from a folder
    book = tmp_path / "gradebook.csv"
    book.write_text("Student,ID,SIS User ID,SIS Login ID,Section,02_averaging (1)\nAda,1,,,A,\n")
    proc = run(tmp_path, exercises, "export", "--to", "canvas", book)
    assert proc.returncode != 0 and "nothing collected from Canvas is in grades.csv" in proc.stderr, proc.stderr


def test_a_penalty_that_cannot_be_counted_is_refused_and_a_mostly_late_class_is_warned(tmp_path, exercises, capsys):
    path = tmp_path / "course.toml"
    path.write_text('late_penalty = 10\n[assignments.02_averaging]\ndue = 2025-03-03T23:59:00\n')
    late = Late(10, {}, config.load(path), origin="late_penalty in course.toml")
    canvas = _entry("ada_1", "02_averaging", "", late=True)
    canvas.lms, canvas.status = "canvas", "graded"
    with pytest.raises(SystemExit, match=r"ada_1/02_averaging \(marked late by Canvas, which gave no submission"
                                         r" time\).*Canvas's own Late Policy"):
        late.check([canvas])
    Late(None, {}, config.load(path)).check([canvas])  # no penalty asked: nothing to refuse
    # three of four submissions of a class late by their real times: a due date or time zone to check
    times = ["2025-03-05 10:00:00", "2025-03-04 01:00:00", "2025-03-06 09:00:00", "2025-03-03 20:00:00"]
    entries = [_entry(f"s_{i}", "02_averaging", t) for i, t in enumerate(times)]
    for e in entries:
        e.status = "graded"
    late.check(entries)
    assert "warning: 3 of 4 graded submissions of 02_averaging are late" in capsys.readouterr().out
    entries[0].submitted = "2025-03-03 12:00:00"  # two of four: not most
    late.check(entries)
    assert "warning" not in capsys.readouterr().out
