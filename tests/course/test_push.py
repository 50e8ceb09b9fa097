"""pm-course push against a Canvas and a Moodle on 127.0.0.1 (tests/course/lms_server.py): the real canvasapi and
requests talk to them; every fault is injected by the server, never mocked inside pm_course.

The class is conftest's: 03_subspace (3 points) collected from Canvas (José 101 solved, Zoë 102 a blank notebook,
Ann Marie 103 nothing, the test student 999) and from Moodle (participants 201, 202, 203), graded once.
"""
import json
import os
import re
import shutil
import sys

import pytest
from conftest import MOODLE_ROSTER, canvas_gradebook, canvas_zips, moodle_worksheet, moodle_zip
from lms_server import FakeLMS
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

pytest.importorskip("canvasapi")
TOKEN = "secret-token-123"


def run(env, *args, timeout=600):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=timeout)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, two_assignments):
    """A course folder with 03_subspace collected from both LMSs and graded (copied afresh for each test)."""
    tmp = tmp_path_factory.mktemp("push")
    env = dict(os.environ, PM_COURSE_DIR=str(tmp / "course"), PM_EXERCISES=str(two_assignments))
    zips = canvas_zips(tmp / "downloads")
    for args in (("collect", "--from", "canvas", zips["03_subspace"], "--roster", canvas_gradebook(tmp / "gb.csv")),
                 ("collect", "--from", "moodle", moodle_zip(tmp / "downloads"), "--assignment", "03_subspace",
                  "--roster", moodle_worksheet(tmp / "Grades-PM-03_subspace-77.csv")),
                 ("grade", "--jobs", "2")):
        proc = run(env, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp, env


@pytest.fixture
def course(graded, tmp_path):
    """(env, course folder, lms): a copy of the graded course, a server, and a course file pointing at it."""
    tmp, env = graded
    folder = tmp_path / "course"
    shutil.copytree(tmp / "course", folder)
    participants = {int(p): name for p, name, _ in MOODLE_ROSTER}  # Moodle's names, as its worksheet has them
    with FakeLMS(TOKEN, canvas_users=(101, 102, 103, 999), moodle_participants=participants) as lms:
        config = tmp_path / "course.toml"
        config.write_text(f'timezone = "UTC"\n[canvas]\nurl = "{lms.url}"\ncourse = 1\n[moodle]\nurl = "{lms.url}"\n'
                          'course = 1\n[assignments.03_subspace]\ncanvas = "03_subspace (502)"\nmoodle_id = 77\n')
        yield dict(env, PM_COURSE_DIR=str(folder), PM_COURSE_CONFIG=str(config), CANVAS_API_TOKEN=TOKEN,
                   MOODLE_TOKEN=TOKEN, PM_PUSH_BACKOFF="0.01"), folder, lms


def push(env, *extra, to="canvas"):
    return run(env, "push", "--to", to, "--assignment", "03_subspace", *extra)


def writes(lms):
    return [entry for entry in lms.log if entry[0] == "PUT" or b"save_grades" in entry[3]]


def test_preview_writes_nothing_and_apply_writes_exactly_it(course):
    env, folder, lms = course
    preview = push(env)
    assert preview.returncode == 0, preview.stdout + preview.stderr
    out = preview.stdout
    assert "nunezjose_101" in out and "(none) -> 3, comment and feedback page" in out, out
    assert "obrienzoe_102" in out and "(none) -> 0" in out, out
    assert "smithannmarie_103" in out and "skipped: nothing submitted" in out, out
    assert "999" not in out  # the test student: never pushed, never listed
    assert "2 to write" in out and "Nothing was written to Canvas" in out, out
    assert not writes(lms), "a preview wrote to the LMS"
    applied = push(env, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert lms.canvas["101"].score == 3 and lms.canvas["102"].score == 0 and lms.canvas["103"].score is None
    assert lms.canvas["999"].score is None and not lms.canvas["999"].comments
    texts = [c["text"] for c in lms.canvas["101"].comments if "text" in c]
    assert texts and "3 of 3 points" in texts[0], texts
    pages = [c for c in lms.canvas["101"].comments if "file" in c]
    assert len(pages) == 1 and pages[0]["file"] == "feedback-subspace.html"
    page = pages[0]["body"].decode()
    assert "3 of 3 points" in page and "<script" not in page.lower()
    assert "Pushed 2 grade(s)" in applied.stdout
    # the grade on the gradebook's own scale: posted_grade strings, exactly what the preview said
    puts = [dict(__import__("urllib.parse").parse.parse_qsl(b.decode())) for m, p, q, b in lms.log if m == "PUT"]
    assert {p.get("submission[posted_grade]") for p in puts} >= {"3", "0"}
    again = push(env)
    assert again.returncode == 0 and "0 to write, 2 unchanged" in again.stdout, again.stdout


def test_a_grade_edited_in_the_lms_is_kept_unless_asked(course):
    env, folder, lms = course
    assert push(env).returncode == 0 and push(env, "--apply").returncode == 0
    lms.edit("102", 2.5)          # the instructor fixed Zoë's grade in SpeedGrader
    lms.edit("101", excused=True)  # and excused José
    # a regrade would change nothing here: the kept cells are listed, nothing is written
    preview = push(env)
    assert "2.5: kept, changed in the LMS since pm-course's last push (pushed 0)" in preview.stdout, preview.stdout
    assert "EX: kept, excused in the LMS" in preview.stdout, preview.stdout
    before = len(writes(lms))
    applied = push(env, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert len(writes(lms)) == before and lms.canvas["102"].score == 2.5 and lms.canvas["101"].excused
    preview = push(env, "--overwrite-lms-edits")
    assert "2.5 -> 0" in preview.stdout and "EX: kept" in preview.stdout, preview.stdout


def test_apply_refuses_when_the_lms_changed_since_the_preview_naming_who(course):
    env, folder, lms = course
    assert push(env).returncode == 0
    lms.edit("101", 1.0)  # someone else grades José between the preview and --apply
    applied = push(env, "--apply")
    assert applied.returncode != 0
    assert "nunezjose_101" in applied.stderr and "Nothing was written" in applied.stderr, applied.stderr
    assert not writes(lms) and lms.canvas["102"].score is None


def test_apply_without_a_preview_is_refused(course):
    env, folder, lms = course
    applied = push(env, "--apply")
    assert applied.returncode != 0 and "no preview" in applied.stderr, applied.stderr
    assert not writes(lms)


@pytest.mark.parametrize("code", [429, 403])
def test_rate_limits_are_waited_out(course, code):
    env, folder, lms = course
    assert push(env).returncode == 0
    lms.rate_limit(3, code)  # the next three requests: 429 (or Canvas's older 403) with X-Rate-Limit-Remaining
    applied = push(env, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert applied.stdout.count("rate limited") == 3, applied.stdout
    assert lms.canvas["101"].score == 3 and lms.canvas["102"].score == 0
    # each student's comment once: a rate-limited request did nothing, and was sent again, not twice
    assert [len([c for c in lms.canvas[u].comments if "text" in c]) for u in ("101", "102")] == [1, 1]


def test_a_cut_connection_leaves_a_journal_and_the_next_apply_finishes_exactly_the_rest(course):
    env, folder, lms = course
    assert push(env).returncode == 0
    lms.cut_after(3)  # José's grade and page, Zoë's grade; then the connection fails as her page is attached
    first = push(env, "--apply")
    assert first.returncode != 0 and "run the same push --apply again" in first.stderr, first.stdout + first.stderr
    assert lms.canvas["101"].score == 3 and lms.canvas["102"].score == 0
    assert not [c for c in lms.canvas["102"].comments if "file" in c]
    assert (folder / "export" / "push" / "canvas-03_subspace.journal.json").is_file()
    lms.cut_after(None)
    second = push(env, "--apply")  # only Zoë's page is missing: it writes that, and nothing twice
    assert second.returncode == 0, second.stdout + second.stderr
    assert lms.canvas["102"].score == 0
    for uid in ("101", "102"):  # one grade comment and one page each: nothing written twice
        assert len([c for c in lms.canvas[uid].comments if "text" in c]) == 1, lms.canvas[uid].comments
        assert len([c for c in lms.canvas[uid].comments if "file" in c]) == 1, lms.canvas[uid].comments
    assert not (folder / "export" / "push" / "canvas-03_subspace.journal.json").exists()


def test_a_write_the_lms_did_not_keep_is_reported_not_counted(course):
    env, folder, lms = course
    assert push(env).returncode == 0
    lms.forget("102")  # answers 200 to Zoë's grade, keeps nothing
    applied = push(env, "--apply")
    assert applied.returncode != 0
    assert "obrienzoe_102: Canvas answered but kept no grade, not 0" in applied.stderr, applied.stderr
    assert lms.canvas["101"].score == 3
    record = json.loads((folder / "export" / "pushed.json").read_text())
    assert "102" not in record["canvas"]["03_subspace"] and "101" in record["canvas"]["03_subspace"]


def test_a_manually_posted_assignment_is_said(course):
    env, folder, lms = course
    lms.assignment["post_manually"] = True
    preview = push(env)
    assert "posts this assignment's grades manually" in preview.stdout and "push never posts" in preview.stdout


def test_rescaled_to_the_lms_s_points(course):
    env, folder, lms = course
    lms.assignment["points_possible"] = 10
    preview = push(env)
    assert "scores x 10/3" in preview.stdout and "(none) -> 10," in preview.stdout, preview.stdout


@pytest.mark.parametrize("blind", [False, True], ids=["blind marking off (Moodle's default)", "blind marking"])
def test_moodle_grade_comment_and_page_in_one_call_by_participant(course, blind):
    """Moodle gives the participant number (recordid) only under blind marking: otherwise each student is its
    user, found by full name among the assignment's participants."""
    env, folder, lms = course
    lms.blind_marking = blind
    preview = push(env, to="moodle")
    assert preview.returncode == 0, preview.stdout + preview.stderr
    applied = push(env, "--apply", to="moodle")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    # participant 201 (José, solved) is user 1201 in Moodle; 202 handed in a blank notebook
    assert lms.moodle["1201"].score == 3 and lms.moodle["1202"].score == 0 and lms.moodle["1203"].score is None
    assert [c["file"] for c in lms.moodle["1201"].comments if "file" in c] == ["feedback-subspace.html"]
    lms.edit("202", 1.5, moodle=True)
    preview = push(env, to="moodle")
    assert "1.5: kept" in preview.stdout, preview.stdout


def test_the_token_is_never_written_and_never_taken_from_the_command_line_or_course_file(course, tmp_path):
    env, folder, lms = course
    assert push(env).returncode == 0 and push(env, "--apply").returncode == 0
    for path in folder.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    no_token = {k: v for k, v in env.items() if k != "CANVAS_API_TOKEN"}
    refused = push(no_token)
    assert refused.returncode != 0 and "CANVAS_API_TOKEN" in refused.stderr and "New access token" in refused.stderr
    bad = push(dict(env, CANVAS_API_TOKEN="wrong"))
    assert bad.returncode != 0 and "refused the token" in bad.stderr and "wrong" not in bad.stderr + bad.stdout
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    assert push(no_token, "--token-file", token_file).returncode == 0
    config = env["PM_COURSE_CONFIG"]
    with open(config, "a") as f:
        f.write("")
    text = open(config).read().replace("course = 1\n[moodle]", f'course = 1\ntoken = "{TOKEN}"\n[moodle]', 1)
    with open(config, "w") as f:
        f.write(text)
    refused = push(env)
    assert refused.returncode != 0 and "does not belong in the course file" in refused.stderr, refused.stderr
    assert TOKEN not in refused.stderr


def test_the_guide_s_push_walkthrough_runs_against_the_lms(course, tmp_path):
    """guides/instructors.md's push block, run as written: preview, apply, an edit in SpeedGrader kept, a
    resubmission collected, graded and pushed again."""
    import re
    import shlex
    from pathlib import Path

    from conftest import _zip, solved

    env, folder, lms = course
    guide = (Path(__file__).resolve().parents[2] / "guides" / "instructors.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"^```bash\n(.*?)^```", guide, re.S | re.M) if "pm-course push" in b)
    commands = [shlex.split(line, comments=True) for line in block.replace("\\\n", " ").splitlines()
                if line.startswith("pm-course ")]
    assert [a[1] for a in commands] == ["push", "push", "collect", "grade", "push", "push"], commands
    canvas_gradebook(tmp_path / "gradebook.csv")
    _zip(tmp_path / "resubmission.zip", [("obrienzoe_102_9002_subspace-2.ipynb", solved("03_subspace"),
                                          (2025, 3, 3, 9, 0, 0))])
    applied = 0
    for argv in commands:
        proc = pm.run([sys.executable, "-m", "pm_course", *argv[1:]], cwd=tmp_path, env=env,
                      capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"`{shlex.join(argv)}`:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        if "--apply" in argv:
            applied += 1
            if applied == 1:
                assert (lms.canvas["101"].score, lms.canvas["102"].score) == (3, 0)
                lms.edit("101", 2.0)  # the instructor takes a point off José in SpeedGrader
        elif argv[1] == "push" and applied == 1:
            assert "2: kept, changed in the LMS" in proc.stdout and "0 -> 3" in proc.stdout, proc.stdout
    assert (lms.canvas["101"].score, lms.canvas["102"].score) == (2.0, 3)
    assert len([c for c in lms.canvas["102"].comments if "file" in c]) == 2  # a page for each graded version


def test_rows_out_of_date_are_refused_as_export_refuses_them(course, tmp_path):
    from conftest import _zip, solved

    env, folder, lms = course
    _zip(tmp_path / "resubmission.zip", [("obrienzoe_102_9002_subspace-2.ipynb", solved("03_subspace"),
                                          (2025, 3, 3, 9, 0, 0))])
    collected = run(env, "collect", "--from", "canvas", tmp_path / "resubmission.zip", "--assignment", "03_subspace")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    refused = push(env)  # Zoë's new notebook is not graded yet
    assert refused.returncode != 0 and "obrienzoe_102" in refused.stderr and "out-of-date" in refused.stderr, \
        refused.stderr
    assert not writes(lms)


def test_a_hand_edit_back_to_an_earlier_pushed_grade_is_kept(course):
    """Only the last value pushed is pm-course's: an instructor who puts back an earlier one (a late penalty
    waived in SpeedGrader) made it theirs."""
    env, folder, lms = course
    assert push(env).returncode == 0 and push(env, "--apply").returncode == 0      # José 3 of 3
    lms.assignment["points_possible"] = 10                                         # the column now out of 10
    assert push(env).returncode == 0 and push(env, "--apply").returncode == 0      # José 10
    lms.edit("101", 3)                                                             # put back to 3 by hand
    preview = push(env)
    assert "3: kept, changed in the LMS since pm-course's last push (pushed 10)" in preview.stdout, preview.stdout
    assert push(env, "--apply").returncode == 0 and lms.canvas["101"].score == 3


def test_a_graded_student_missing_from_the_lms_is_named_as_not_pushed(course):
    env, folder, lms = course
    del lms.canvas["102"]  # Zoë (graded 0 of 3) is not in the Canvas course
    preview = push(env)
    assert "skipped: not a student of this assignment in Canvas (graded 0: NOT PUSHED)" in preview.stdout, \
        preview.stdout
    applied = push(env, "--apply")
    assert applied.returncode != 0 and lms.canvas["101"].score == 3, applied.stdout + applied.stderr
    assert "graded but not pushed (1): obrienzoe_102 (graded 0)" in applied.stderr, applied.stderr


def test_a_token_on_the_command_line_is_refused_without_repeating_it(course):
    env, folder, lms = course
    for args in (("--token", TOKEN), (f"--token={TOKEN}",), ("--token",)):
        refused = push(env, *args)
        assert refused.returncode != 0 and "never taken from the command line" in refused.stderr, refused.stderr
        assert TOKEN not in refused.stdout + refused.stderr
    assert not writes(lms)


def test_an_unreachable_lms_is_named_with_its_address(course, tmp_path):
    env, folder, lms = course
    config = tmp_path / "elsewhere.toml"
    config.write_text(open(env["PM_COURSE_CONFIG"]).read().replace(lms.url, "http://127.0.0.1:9", 1))
    refused = push(dict(env, PM_COURSE_CONFIG=str(config)))
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "could not reach Canvas at http://127.0.0.1:9 ([canvas] url in" in refused.stderr, refused.stderr
    assert "Nothing was written" in refused.stderr and "--apply again" not in refused.stderr


def test_a_retry_after_a_grade_not_kept_posts_the_comment_once(course):
    env, folder, lms = course
    assert push(env).returncode == 0
    lms.forget("102")
    assert push(env, "--apply").returncode != 0
    lms._forget.clear()
    again = push(env, "--apply")
    assert again.returncode == 0, again.stdout + again.stderr
    assert lms.canvas["102"].score == 0
    assert len([c for c in lms.canvas["102"].comments if "text" in c]) == 1, lms.canvas["102"].comments
    assert len([c for c in lms.canvas["102"].comments if "file" in c]) == 1, lms.canvas["102"].comments


def test_a_new_preview_after_a_cut_finishes_without_posting_twice(course):
    env, folder, lms = course
    assert push(env).returncode == 0
    lms.cut_after(3)  # José's grade and page, Zoë's grade and comment; her page is cut
    assert push(env, "--apply").returncode != 0
    lms.cut_after(None)
    preview = push(env)
    assert "finishes an interrupted push: the grade and comment are in" in preview.stdout, preview.stdout
    applied = push(env, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    for uid in ("101", "102"):
        assert len([c for c in lms.canvas[uid].comments if "text" in c]) == 1, lms.canvas[uid].comments
        assert len([c for c in lms.canvas[uid].comments if "file" in c]) == 1, lms.canvas[uid].comments


def test_apply_with_other_options_than_the_preview_names_them(course):
    env, folder, lms = course
    assert push(env).returncode == 0
    refused = push(env, "--apply", "--overwrite-lms-edits")
    assert refused.returncode != 0 and "overwrite-lms-edits: False in the preview, True now" in refused.stderr, \
        refused.stderr
    assert not writes(lms)
    assert push(env, "--apply").returncode == 0
    again = push(env, "--apply")
    assert again.returncode != 0 and "the last --apply finished it" in again.stderr, again.stderr


def test_an_assignment_without_points_in_the_lms_is_said(course):
    env, folder, lms = course
    lms.assignment["points_possible"] = None
    preview = push(env)
    assert preview.returncode == 0 and "sets no points: grades go as 03_subspace's points (out of 3)" in \
        preview.stdout, preview.stdout


def test_canvas_s_late_policy_is_canvas_s_own_deduction_not_an_edit(course):
    """Canvas keeps entered_score (what push wrote) and score = entered_score - points_deducted: push compares
    the first, attaches the page, and a second push finds nothing to do; a TA's later edit is still an edit."""
    env, folder, lms = course
    lms.late_policy = 10  # percent of the 3 points per late day
    lms.canvas["101"].days_late = 1
    preview = push(env)
    assert preview.returncode == 0, preview.stdout + preview.stderr
    applied = push(env, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert lms.canvas["101"].score == 3, "push wrote the grade itself, Canvas deducts on its own"
    assert [c["file"] for c in lms.canvas["101"].comments if "file" in c] == ["feedback-subspace.html"]
    again = push(env)
    assert again.returncode == 0 and "0 to write, 2 unchanged" in again.stdout, again.stdout
    assert "Late Policy takes off 0.3" in again.stdout, again.stdout
    lms.edit("101", 2)  # a TA's grade: kept, as any edit in the LMS
    lms.canvas["101"].days_late = 1
    kept = push(env)
    assert "2: kept, changed in the LMS" in kept.stdout, kept.stdout


def test_two_late_policies_at_once_are_refused(course):
    env, folder, lms = course
    lms.late_policy = 10
    config = env["PM_COURSE_CONFIG"]
    text = open(config).read()
    open(config, "w").write("late_penalty = 5\n" + text)
    preview = push(env)
    assert preview.returncode != 0
    said = preview.stdout + preview.stderr
    assert "two late policies" in said and "Canvas's Late Policy deducts 10%" in said and "5% per day" in said, said
    assert not writes(lms)


def test_the_preview_names_the_lms_assignment_and_apply_refuses_another(course):
    """A wrong id in the course file would send the grades into another assignment, rescaled to its points."""
    env, folder, lms = course
    preview = push(env)
    assert 'Canvas: 03_subspace -> Canvas assignment "03_subspace" (id 502, out of 3 points)' in preview.stdout
    lms.assignment.update(name="Quiz 7: Softmax", points_possible=10)  # what id 502 really is
    preview = push(env)
    assert 'Canvas assignment "Quiz 7: Softmax" (id 502, out of 10 points) is not the column' in preview.stdout, \
        preview.stdout
    applied = push(env, "--apply")
    assert applied.returncode != 0 and "Nothing was written" in applied.stdout + applied.stderr
    assert not writes(lms)


def test_a_column_renamed_in_canvas_keeps_what_was_exported_as_pm_course_s(course, tmp_path):
    """Exported values are keyed by the Canvas assignment's id: after the column is renamed (and the course file
    with it), the exported grade is still pm-course's, so a regrade (0 -> 3) reaches Canvas."""
    from conftest import _zip, solved

    env, folder, lms = course
    exported = run(env, "export", "--to", "canvas", canvas_gradebook(tmp_path / "gradebook.csv"))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    lms.edit("102", 0)  # the CSV imported: Zoë's 0 is in Canvas
    config = env["PM_COURSE_CONFIG"]
    text = open(config).read().replace('canvas = "03_subspace (502)"', 'canvas = "Exercise 3: Subspaces (502)"')
    open(config, "w").write(text)
    lms.assignment["name"] = "Exercise 3: Subspaces"  # renamed in Canvas
    _zip(tmp_path / "resubmission.zip", [("obrienzoe_102_9002_subspace-2.ipynb", solved("03_subspace"),
                                          (2025, 3, 3, 9, 0, 0))])
    for args in (("collect", "--from", "canvas", tmp_path / "resubmission.zip", "--assignment", "03_subspace"),
                 ("grade",)):
        proc = run(env, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    preview = push(env)
    assert preview.returncode == 0, preview.stdout + preview.stderr
    assert "0 -> 3, comment and feedback page" in preview.stdout, preview.stdout


def test_two_moodle_participants_of_one_name_are_refused_up_front(course):
    env, folder, lms = course
    lms.participants["204"] = ("1204", "José Núñez")  # another José Núñez takes the course
    lms.moodle["1204"] = type(lms.moodle["1201"])()
    preview = push(env, to="moodle")
    said = preview.stdout + preview.stderr
    assert preview.returncode != 0 and "cannot be told apart" in said and "1201, 1204" in said, said
    assert not writes(lms)


@pytest.mark.parametrize("said", ['dropped = ["obrienzoe_102"]\n', "[canvas]\nunlisted = \"other section\"\n"],
                         ids=["a dropped student", "one section's Canvas course"])
def test_a_student_the_lms_no_longer_lists_is_said_once_then_push_finishes(course, said):
    """Said once in the course file (dropped, or a course file for one section's LMS course), a student the
    LMS does not list is listed plainly, and push exits 0 when everything it can push is pushed."""
    env, folder, lms = course
    del lms.canvas["102"]  # Zoë is not in this Canvas course
    config = env["PM_COURSE_CONFIG"]
    text = open(config).read()
    if said.startswith("dropped"):
        text = said + text
    else:
        text = text.replace("[canvas]\n", said)
    open(config, "w").write(text)
    preview = push(env)
    assert preview.returncode == 0, preview.stdout + preview.stderr
    expected = "dropped the course" if said.startswith("dropped") else "another section's"
    assert re.search(f"obrienzoe_102 +skipped: {expected}", preview.stdout) and "NOT PUSHED" not in preview.stdout, \
        preview.stdout
    applied = push(env, "--apply")
    assert applied.returncode == 0 and lms.canvas["101"].score == 3, applied.stdout + applied.stderr


def test_partial_grades_are_said_in_the_preview_and_the_comment_and_a_blank_is_not_called_reviewed():
    from pm_course.lms.outcome import comment
    from pm_course.steps.push import Plan, Row, show
    from pm_course.state.submissions import Entry

    def entry(score, written, waiting):
        e = Entry("ada_1", "02_averaging", status="graded", written_score=written, written_max="2",
                  awaiting_review=waiting)
        e.score, e.max_score = score, 6.0
        return e

    waiting = comment(entry(4.0, "0", "1"), 4.0, "")
    assert "4 of 6 points so far (a partial grade" in waiting and "1 written answer(s) await" in waiting, waiting
    blank = comment(entry(0.0, "0", "0"), 0.0, "")
    assert "reviewed by your instructor" not in blank and "written answers 0 of 2 points" in blank, blank
    reviewed = comment(entry(6.0, "2", "0"), 6.0, "")
    assert "6 of 6 points, graded automatically, written answers reviewed by your instructor" in reviewed
    plan = Plan("canvas", "02_averaging", rows=[Row("ada_1", "1", "Ada", "write", new="4", partial=1),
                                                Row("bo_2", "2", "Bo", "write", new="6"),
                                                Row("cy_3", "3", "Cy", "skip", why="nothing submitted")])
    shown = show(plan)
    assert "1 of 2 grades are partial (written answers awaiting review" in shown, shown
    assert "[partial: 1 written answer(s) await review]" in shown, shown


def test_ctrl_c_during_apply_says_what_is_done_and_the_next_apply_finishes(course):
    import signal
    import subprocess
    import time

    env, folder, lms = course
    assert push(env).returncode == 0
    lms.slow_after(1, 20)  # the second write waits: Ctrl-C comes then
    proc = subprocess.Popen([sys.executable, "-m", "pm_course", "push", "--to", "canvas", "--assignment",
                             "03_subspace", "--apply"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    while len(writes(lms)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "Traceback" not in out + err, out + err
    assert "push stopped (interrupted)" in err and "run the same push --apply again" in err, err
    lms.slow_after(10**6, 0)
    finished = push(env, "--apply")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert (lms.canvas["101"].score, lms.canvas["102"].score) == (3, 0)
    for uid in ("101", "102"):
        assert len([c for c in lms.canvas[uid].comments if "text" in c]) == 1, lms.canvas[uid].comments


def test_a_rate_limit_that_outlasts_every_retry_is_named_as_such(course):
    env, folder, lms = course
    lms.rate_limit(1000)
    preview = push(env)
    said = preview.stdout + preview.stderr
    assert preview.returncode != 0 and "rate-limiting this token" in said and "could not reach" not in said, said
    assert "Wait a few minutes" in said and "Nothing was written" in said, said


def test_a_moodle_course_the_token_cannot_see_is_named_as_the_course(course):
    env, folder, lms = course
    config = env["PM_COURSE_CONFIG"]
    text = open(config).read().replace("[moodle]\nurl", "[moodle]\n#\nurl")
    text = text.replace('course = 1\n[assignments', 'course = 2\n[assignments')
    open(config, "w").write(text)
    preview = push(env, to="moodle")
    said = preview.stdout + preview.stderr
    assert preview.returncode != 0 and "Moodle shows this token no course 2" in said, said
    assert "No access rights in course context" in said and "moodle_id" not in said, said


def test_status_into_a_closed_pipe_ends_quietly(course):
    import subprocess

    env, folder, lms = course
    read, write = os.pipe()
    os.close(read)  # `| head` that has read what it wanted: every write to the pipe fails
    try:
        proc = subprocess.run([sys.executable, "-m", "pm_course", "status"], env=env, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr


def test_a_retry_posts_the_current_comment_when_it_changed_since_the_one_posted(course, tmp_path):
    """The journal keeps which comment was posted (its hash), not only that one was: a retry whose comment
    changed since (a submission time given, the same grade) posts the new one."""
    env, folder, lms = course
    assert push(env).returncode == 0
    lms.forget("102")
    assert push(env, "--apply").returncode != 0  # the grade not kept; the first comment is in
    lms._forget.clear()
    times = tmp_path / "times.csv"
    times.write_text("student,assignment,submitted_at\nobrienzoe_102,03_subspace,2025-03-03 09:00\n")
    options = ("--times", times, "--due", "03_subspace=2025-03-02 23:59")
    assert push(env, *options).returncode == 0
    again = push(env, "--apply", *options)
    assert again.returncode == 0, again.stdout + again.stderr
    texts = [c["text"] for c in lms.canvas["102"].comments if "text" in c]
    assert len(texts) == 2 and "submitted late" not in texts[0] and "submitted late (1 day)" in texts[1], texts
    assert lms.canvas["102"].score == 0
