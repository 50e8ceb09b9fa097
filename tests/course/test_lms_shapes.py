"""The LMS's other shapes: a Moodle assignment graded with a scale, a Canvas group assignment; and what status
and grade say of Canvas's test student and of students who handed in nothing.

Every class here is built here (03_subspace: 3 points, one test cell), graded
through ``pm-course`` as an instructor runs it.
"""
import csv
import json
import os
import shutil
import sys
import zipfile

import pytest

from conftest import MARCH, _zip, blank, solved
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

NAME, NOTEBOOK = "03_subspace", "subspace.ipynb"
SCALE = ["Not yet competent", "Competent", "Excellent"]
MOODLE_SCALE_COLUMNS = ["Identifier", "Full name", "Email address", "Status", "Grade", "Scale",
                        "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
                        "Feedback comments"]


def run(env, *args):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
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


# --- a Moodle assignment graded with a scale ------------------------------------------------------
def scale_worksheet(path, scale_text="Not yet competent,Competent,Excellent"):
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(MOODLE_SCALE_COLUMNS)
        for pid, name, status in (("501", "Ada Lovelace", "Submitted for grading"),
                                  ("502", "Grace Hopper", "Submitted for grading"),
                                  ("503", "Alan Turing", "No submission")):
            w.writerow([f"Participant {pid}", name, f"{pid}@example.org", status, "", scale_text, "Yes",
                        "-" if "No" in status else "Sunday, 2 March 2025, 2:00 PM", "-", ""])
    return path


def course_file(path, text):
    path.write_text('timezone = "UTC"\n' + text, encoding="utf-8")
    return path


PER_ASSIGNMENT = f"""
[assignments.{NAME}]
scale = ["Not yet competent", "Competent", "Excellent"]
scale_thresholds = [0, 0.5, 0.85]
"""


@pytest.fixture(scope="module")
def moodle_class(tmp_path_factory, two_assignments):
    tmp = tmp_path_factory.mktemp("moodle-scale")
    env = environment(tmp, two_assignments)
    worksheet = scale_worksheet(tmp / f"Grades-PM-{NAME}-77.csv")
    download = _zip(tmp / "moodle.zip", [
        ("Ada Lovelace_501_assignsubmission_file_/subspace.ipynb", solved(NAME), MARCH),
        ("Grace Hopper_502_assignsubmission_file_/subspace.ipynb", blank(NAME), MARCH)])
    ok(run(env, "collect", "--from", "moodle", download, "--roster", worksheet, "--assignment", NAME))
    ok(run(env, "grade", "--jobs", "2"))
    return tmp, two_assignments, worksheet


def grades_of(path):
    return {r["Identifier"]: r for r in rows(path)}


def test_a_scale_worksheet_is_refused_naming_its_items_until_the_course_file_maps_points(moodle_class):
    tmp, exercises, worksheet = moodle_class
    out = tmp / "filled.csv"
    proc = run(environment(tmp, exercises, course_file(tmp / "course.toml", "")), "export", "--to", "moodle",
               worksheet, "--assignment", NAME, "-o", out)
    assert proc.returncode != 0 and not out.exists(), proc.stdout + proc.stderr
    for item in SCALE:
        assert f'"{item}"' in proc.stderr, proc.stderr
    assert "scale_thresholds" in proc.stderr and f"[assignments.{NAME}]" in proc.stderr, proc.stderr


def test_points_become_the_scales_items_by_the_course_files_thresholds(moodle_class):
    tmp, exercises, worksheet = moodle_class
    out = tmp / "filled.csv"
    env = environment(tmp, exercises, course_file(tmp / "course.toml", PER_ASSIGNMENT))
    proc = ok(run(env, "export", "--to", "moodle", worksheet, "--assignment", NAME, "-o", out))
    filled = grades_of(out)
    assert filled["Participant 501"]["Grade"] == "Excellent", filled  # 3 of 3
    assert filled["Participant 502"]["Grade"] == "Not yet competent", filled  # 0 of 3
    assert filled["Participant 503"]["Grade"] == "", filled  # nothing submitted: Moodle keeps what it has
    assert all(r["Grade"] in SCALE + [""] for r in filled.values())  # never a number
    assert "On the course's scale: Excellent." in filled["Participant 501"]["Feedback comments"]
    assert list(rows(out)[0]) == MOODLE_SCALE_COLUMNS  # every column kept, Scale included
    assert "1 Excellent" in proc.stdout and "1 Not yet competent" in proc.stdout, proc.stdout
    # the course-wide keys do the same
    env = environment(tmp, exercises, course_file(tmp / "course2.toml", 'scale = ["Not yet competent",'
                                                  ' "Competent", "Excellent"]\nscale_thresholds = [0, 0.5, 0.85]\n'))
    ok(run(env, "export", "--to", "moodle", worksheet, "--assignment", NAME, "-o", tmp / "filled2.csv"))
    assert grades_of(tmp / "filled2.csv")["Participant 501"]["Grade"] == "Excellent"


def test_an_item_the_instructor_set_in_moodle_is_kept(moodle_class):
    tmp, exercises, _ = moodle_class
    env = environment(tmp, exercises, course_file(tmp / "course.toml", PER_ASSIGNMENT))
    edited = scale_worksheet(tmp / f"Grades-PM-{NAME}-78.csv")
    table = rows(edited)
    table[1]["Grade"] = "Competent"  # Grace, raised by hand in Moodle
    table[0]["Grade"] = "Excellent"  # Ada, as pm-course exported it
    with edited.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, MOODLE_SCALE_COLUMNS)
        writer.writeheader()
        writer.writerows(table)
    proc = ok(run(env, "export", "--to", "moodle", edited, "--assignment", NAME, "-o", tmp / "again.csv"))
    again = grades_of(tmp / "again.csv")
    assert again["Participant 502"]["Grade"] == "Competent" and again["Participant 501"]["Grade"] == "Excellent"
    assert "Grace Hopper (Participant 502): 'Competent' in the LMS" in proc.stdout, proc.stdout


def test_a_scale_with_other_items_is_refused_naming_both(moodle_class):
    tmp, exercises, _ = moodle_class
    other = scale_worksheet(tmp / f"Grades-PM-{NAME}-79.csv", "Fail,Pass")
    env = environment(tmp, exercises, course_file(tmp / "course.toml", PER_ASSIGNMENT))
    proc = run(env, "export", "--to", "moodle", other, "--assignment", NAME, "-o", tmp / "no.csv")
    assert proc.returncode != 0 and not (tmp / "no.csv").exists()
    assert '"Fail", "Pass"' in proc.stderr and "'Excellent'" in proc.stderr, proc.stderr


@pytest.mark.parametrize("text, says", [
    ('scale = ["Fail", "Pass"]\n', "scale_thresholds is missing"),
    ('scale = ["Fail", "Pass"]\nscale_thresholds = [0]\n', "one number per item"),
    ('scale = ["Fail", "Pass"]\nscale_thresholds = [0.2, 0.5]\n', "the first 0"),
    ('scale = ["Fail", "Pass", "Good"]\nscale_thresholds = [0, 0.7, 0.5]\n', "larger than the one before"),
    ('scale = ["Pass"]\nscale_thresholds = [0]\n', "at least two"),
])
def test_a_bad_scale_in_the_course_file_is_named(tmp_path, two_assignments, monkeypatch, text, says):
    from pm_course.state import config
    from pm_course.state.course import CourseError

    monkeypatch.setenv("PM_EXERCISES", str(two_assignments))
    path = course_file(tmp_path / "course.toml", f"[assignments.{NAME}]\n{text}")
    with pytest.raises(CourseError, match="scale") as err:
        config.load(path)
    assert says in str(err.value) and f"[assignments.{NAME}]" in str(err.value), err.value


def test_the_thresholds_give_each_fraction_its_item():
    from pm_course.state.config import Scale

    scale = Scale(tuple(SCALE), (0.0, 0.5, 0.85))
    assert [scale.item(p, 20) for p in (0, 9.99, 10, 16.99, 17, 20)] == [
        SCALE[0], SCALE[0], SCALE[1], SCALE[1], SCALE[2], SCALE[2]]


# --- a Canvas group assignment -----------------------------------------------------------------------
TEAM = [("Curie, Marie", "411"), ("Noether, Emmy", "412"), ("Franklin, Rosalind", "413"), ("Meitner, Lise", "414"),
        ("Student, Test", "999")]
GROUPS = {"411": "Project Group 1", "412": "Project Group 1", "413": "Project Group 2", "414": "Project Group 2",
          "999": "Project Group 2"}


def canvas_groups_export(path):
    """Canvas's export of a group set: a row per student, the students in no group without a group_name."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["name", "canvas_user_id", "user_id", "login_id", "sections", "group_name", "canvas_group_id",
                    "group_id"])
        for name, uid in TEAM:
            w.writerow([" ".join(reversed(name.split(", "))), uid, f"S{uid}", f"u{uid}", "Section A", GROUPS[uid],
                        "71" if GROUPS[uid].endswith("1") else "72", ""])
        w.writerow(["Hedy Lamarr", "415", "S415", "u415", "Section A", "", "", ""])
    return path


@pytest.fixture(scope="module")
def group_download(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("groups")
    book = gradebook(tmp / "gradebook.csv", TEAM)
    download = _zip(tmp / "project.zip", [  # one entry per group, named by the group and the member who handed in
        ("projectgroup1_411_9411_subspace.ipynb", solved(NAME), MARCH),
        ("projectgroup2_LATE_414_9414_subspace.ipynb", blank(NAME), MARCH)])
    return tmp, book, download


def manifest(tmp):
    return {r["student_id"]: r for r in rows(tmp / "course" / "submissions.csv")}


def test_a_group_download_without_the_groups_is_refused_with_the_instruction(group_download, two_assignments):
    tmp, book, download = group_download
    env = environment(tmp / "without", two_assignments)
    proc = run(env, "collect", "--from", "canvas", download, "--roster", book, "--assignment", NAME)
    assert proc.returncode != 0, proc.stdout
    assert "group assignment" in proc.stderr and "--groups FILE" in proc.stderr and "projectgroup1" in proc.stderr
    assert "group,student" in proc.stderr and "Nothing was collected" in proc.stderr, proc.stderr
    assert not (tmp / "without" / "course" / "submissions.csv").exists()


def test_each_member_is_graded_with_the_groups_work_from_canvas_groups_export(group_download, two_assignments):
    tmp, book, download = group_download
    env = environment(tmp / "export", two_assignments)
    groups = canvas_groups_export(tmp / "groups.csv")
    proc = ok(run(env, "collect", "--from", "canvas", download, "--roster", book, "--assignment", NAME,
                  "--groups", groups))
    assert "Project Group 1" in proc.stdout, proc.stdout
    got = manifest(tmp / "export")
    assert {s: (r["status"], r["late"]) for s, r in got.items()} == {
        "curiemarie_411": ("graded", ""), "noetheremmy_412": ("graded", ""),
        "franklinrosalind_413": ("graded", "late"), "meitnerlise_414": ("graded", "late")}, got
    assert "handed in by Curie, Marie" in got["noetheremmy_412"]["reason"], got
    ok(run(env, "grade", "--jobs", "2"))
    graded = {r["student_id"]: r for r in rows(tmp / "export" / "course" / "grades.csv")}
    assert {s: r["score"] for s, r in graded.items()} == {
        "curiemarie_411": "3", "noetheremmy_412": "3", "franklinrosalind_413": "0", "meitnerlise_414": "0"}, graded
    ok(run(env, "export", "--to", "canvas", book, "-o", tmp / "import.csv"))
    scores = {r["ID"]: r[f"{NAME} (502)"] for r in rows(tmp / "import.csv") if r["ID"]}
    assert scores == {"411": "3", "412": "3", "413": "0", "414": "0"}, scores
    ok(run(env, "feedback"))
    with zipfile.ZipFile(tmp / "export" / "course" / "export" / f"feedback-canvas-{NAME}.zip") as z:
        names = sorted(z.namelist())
    assert names == ["projectgroup1_411_9411_feedback-subspace.html", "projectgroup1_412_9411_feedback-subspace.html",
                     "projectgroup2_LATE_413_9414_feedback-subspace.html",
                     "projectgroup2_LATE_414_9414_feedback-subspace.html"], names


def test_a_two_column_groups_file_does_the_same(group_download, two_assignments):
    tmp, book, download = group_download
    env = environment(tmp / "two", two_assignments)
    groups = tmp / "two-columns.csv"
    groups.write_text("group,student\nProject Group 1,curiemarie_411\nProject Group 1,Emmy Noether\n"
                      "Project Group 2,413\nProject Group 2,\"Meitner, Lise\"\n", encoding="utf-8")
    ok(run(env, "collect", "--from", "canvas", download, "--roster", book, "--assignment", NAME, "--groups", groups))
    assert sorted(manifest(tmp / "two")) == ["curiemarie_411", "franklinrosalind_413", "meitnerlise_414",
                                             "noetheremmy_412"]


def test_a_group_not_in_the_groups_file_or_a_student_not_found_is_refused(group_download, two_assignments):
    tmp, book, download = group_download
    env = environment(tmp / "bad", two_assignments)
    groups = tmp / "one-group.csv"
    groups.write_text("group,student\nProject Group 1,411\nProject Group 1,412\n", encoding="utf-8")
    proc = run(env, "collect", "--from", "canvas", download, "--roster", book, "--assignment", NAME, "--groups", groups)
    assert proc.returncode != 0 and "projectgroup2" in proc.stderr and "Project Group 1" in proc.stderr, proc.stderr
    groups.write_text("group,student\nProject Group 1,Ada Nobody\n", encoding="utf-8")
    proc = run(env, "collect", "--from", "canvas", download, "--roster", book, "--assignment", NAME, "--groups", groups)
    assert proc.returncode != 0 and "row 2" in proc.stderr and "'Ada Nobody' is not a student" in proc.stderr
    assert not (tmp / "bad" / "course" / "submissions.csv").exists()


def test_a_class_whose_file_names_keep_accents_is_not_taken_for_groups(tmp_path, two_assignments):
    """Most names of the roster are not the files' as written (Canvas may keep accented letters): no group."""
    book = gradebook(tmp_path / "gradebook.csv", [("Núñez, José", "601"), ("Øvergård, Åse", "602"),
                                                  ("Lê, Thị", "603")])
    download = _zip(tmp_path / "week3.zip", [("núñezjosé_601_9601_subspace.ipynb", solved(NAME), MARCH),
                                             ("øvergårdåse_602_9602_subspace.ipynb", solved(NAME), MARCH),
                                             ("lêthị_603_9603_subspace.ipynb", solved(NAME), MARCH)])
    env = environment(tmp_path, two_assignments)
    ok(run(env, "collect", "--from", "canvas", download, "--roster", book, "--assignment", NAME))
    from pm_course.lms import student_id

    assert sorted(manifest(tmp_path)) == sorted(student_id(n, i) for n, i in (("Núñez, José", "601"),
                                                                               ("Øvergård, Åse", "602"),
                                                                               ("Lê, Thị", "603")))
