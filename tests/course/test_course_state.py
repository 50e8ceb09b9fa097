"""A term that cannot lie: lateness from where the LMS keeps it, sections added, one writer at a time.

One assignment (03_subspace, 3 points, quick to grade), through ``pm-course`` as
an instructor runs it:

- Canvas, two sections downloaded apart (José and Zoë in section A, Ann Marie in
  section B, whose older Canvas writes ``late_`` in lowercase); the course file
  sets ``late_penalty = 10``, which Canvas's download (no submission times)
  cannot honour; a re-download a week later, its entries dated anew, changes
  nobody's lateness.
- Moodle, its worksheet giving the real times ("Last modified (submission)"):
  the course file's penalty reaches the worksheet and the feedback page alike.
- The course folder's lock: a second writer waits or (``--no-wait``) refuses;
  two ``grade`` commands at once lose nothing.
"""
import csv
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

from conftest import ROOT, _zip, blank, solved
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

A = "03_subspace"
GRADEBOOK = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{A} (502)", "Current Score"]
ROSTER = [("Núñez, José", "101"), ("O'Brien, Zoë", "102"), ("Smith, Ann Marie", "103")]
CANVAS_TOML = f"""\
timezone = "America/Chicago"
late_penalty = 10
[assignments.{A}]
due = 2025-03-03T23:59:00
"""
MOODLE_COLUMNS = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                  "Grade can be changed", "Last modified (submission)", "Last modified (grade)", "Feedback comments"]


def run(env, *args, timeout=600):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=timeout)


def gradebook(path):
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(GRADEBOOK)
        w.writerow(["    Points Possible", "", "", "", "", "3", "(read only)"])
        for name, uid in ROSTER:
            w.writerow([name, uid, f"S{uid}", "", "Section A" if uid != "103" else "Section B", "", ""])
    return path


def section_a(path, when):
    """Section A's download, every entry dated ``when`` (the moment Canvas made the zip)."""
    return _zip(path, [("nunezjose_LATE_101_9001_subspace.ipynb", solved(A), when),
                       ("obrienzoe_102_9002_subspace.ipynb", blank(A), when)])


def rows(path):
    return {(r["student_id"], r["assignment"]): r for r in csv.DictReader(path.open(encoding="utf-8"))}


@pytest.fixture(scope="module")
def exercises(tmp_path_factory):
    dest = tmp_path_factory.mktemp("exercises")
    shutil.copytree(ROOT / "exercises" / A, dest / A)
    return dest


@pytest.fixture(scope="module")
def canvas(tmp_path_factory, exercises):
    """Section A collected and graded, then section B collected beside it and graded."""
    tmp = tmp_path_factory.mktemp("canvas-state")
    (tmp / "course.toml").write_text(CANVAS_TOML)
    env = dict(os.environ, PM_COURSE_DIR=str(tmp / "course"), PM_EXERCISES=str(exercises),
               PM_COURSE_CONFIG=str(tmp / "course.toml"))
    book = gradebook(tmp / "gradebook.csv")
    first = run(env, "collect", "--from", "canvas", section_a(tmp / "a.zip", (2025, 3, 20, 9, 0, 0)),
                "--roster", book)
    assert first.returncode == 0, first.stdout + first.stderr
    second = run(env, "collect", "--from", "canvas",
                 _zip(tmp / "b.zip", [("smithannmarie_late_103_9003_subspace.ipynb", solved(A),
                                       (2025, 3, 20, 9, 5, 0))]), "--roster", book)
    assert second.returncode == 0, second.stdout + second.stderr
    graded = run(env, "grade", "--jobs", "2")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    return tmp, env, book, second, graded


def test_a_second_sections_download_is_added_beside_the_first(canvas):
    tmp, env, _, second, graded = canvas
    assert "Replaced" not in second.stdout, second.stdout  # nobody of section A is touched
    assert "Kept as collected before (not in this download): 2 student(s)" in second.stdout, second.stdout
    got = rows(tmp / "course" / "grades.csv")
    assert {k[0]: r["score"] for k, r in got.items()} == {"nunezjose_101": "3", "obrienzoe_102": "0",
                                                          "smithannmarie_103": "3"}
    assert "Graded 3 notebooks of 3 students." in graded.stdout, graded.stdout
    # lowercase late_ (older Canvas) is read like LATE_
    assert {k[0] for k, r in got.items() if r["late"] == "late"} == {"nunezjose_101", "smithannmarie_103"}


def test_a_canvas_penalty_is_refused_and_zip_dates_are_never_submission_times(canvas, tmp_path):
    tmp, env, book, *_ = canvas
    # every entry of the zip is dated 20 March, 16 days after the due date: were the dates read, all would be late
    manifest = rows(tmp / "course" / "submissions.csv")
    assert {r["submitted"] for r in manifest.values()} == {""}, manifest
    out = tmp_path / "import.csv"
    refused = run(env, "export", "--to", "canvas", book, "-o", out)  # late_penalty = 10 in the course file
    assert refused.returncode != 0 and not out.exists(), refused.stdout
    assert "cannot compute the late penalty (10% per day, late_penalty in course.toml)" in refused.stderr
    assert "nunezjose_101/03_subspace (marked late by Canvas, which gave no submission time)" in refused.stderr
    assert "smithannmarie_103/03_subspace" in refused.stderr and "obrienzoe_102" not in refused.stderr
    assert "Canvas's own Late Policy" in refused.stderr, refused.stderr
    # the flag overrides the course file for export and feedback alike
    plain = run(env, "export", "--to", "canvas", book, "-o", out, "--late-penalty", "0")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    first = out.read_text(encoding="utf-8")
    assert '"Núñez, José",101,S101,,Section A,3\n' in first, first
    fb = run(env, "feedback", "-o", tmp_path / "fb")
    assert fb.returncode != 0 and "cannot compute the late penalty" in fb.stderr, fb.stdout
    # a re-download a week later: every entry dated anew; same notebooks, same lateness, same import
    redo = run(env, "collect", "--from", "canvas", section_a(tmp_path / "again.zip", (2025, 3, 27, 9, 0, 0)),
               "--roster", book)
    assert redo.returncode == 0, redo.stdout + redo.stderr
    assert "Replaced what was collected before for 2 student(s): nunezjose_101/03_subspace," \
        " obrienzoe_102/03_subspace" in redo.stdout, redo.stdout
    assert run(env, "grade").returncode == 0
    assert rows(tmp / "course" / "submissions.csv") == manifest
    again = run(env, "export", "--to", "canvas", book, "-o", out, "--late-penalty", "0")
    assert again.returncode == 0 and out.read_text(encoding="utf-8") == first, again.stdout + again.stderr


def moodle_worksheet(path):
    """Moodle's worksheet: José 10 hours late by its own times, Zoë on time."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(MOODLE_COLUMNS)
        w.writerow(["Participant 201", "José Núñez", "jose@example.org", "Submitted for grading - 10 hours late",
                    "", "3.00", "Yes", "Tuesday, 4 March 2025, 10:00 AM", "-", ""])
        w.writerow(["Participant 202", "Zoë O'Brien", "zoe@example.org", "Submitted for grading", "", "3.00", "Yes",
                    "Monday, 3 March 2025, 9:00 PM", "-", ""])
    return path


def test_moodle_lateness_comes_from_its_worksheet_and_one_penalty_reaches_export_and_feedback(exercises, tmp_path):
    (tmp_path / "course.toml").write_text(CANVAS_TOML)
    env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"), PM_EXERCISES=str(exercises),
               PM_COURSE_CONFIG=str(tmp_path / "course.toml"))
    sheet = moodle_worksheet(tmp_path / f"Grades-PM-{A}-77.csv")
    later = (2025, 4, 1, 8, 0, 0)  # the zip's dates: a month late for everyone, were they read
    download = _zip(tmp_path / "moodle.zip", [
        ("José Núñez_201_assignsubmission_file_/subspace.ipynb", solved(A), later),
        ("Zoë O'Brien_202_assignsubmission_file_/subspace.ipynb", solved(A), later)])
    collected = run(env, "collect", "--from", "moodle", download, "--assignment", A, "--roster", sheet)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert run(env, "grade", "--jobs", "2").returncode == 0
    out = tmp_path / "filled.csv"
    proc = run(env, "export", "--to", "moodle", sheet, "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    filled = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [r["Grade"] for r in filled] == ["2.70", "3.00"]  # José: 1 day late (10 hours), -10%
    assert "late 1 day(s), -10%: 3 -> 2.7 (submitted 2025-03-04 10:00, due 2025-03-03 23:59)" in proc.stdout
    assert "late penalty leaves 2.7 of 3 points" in filled[0]["Feedback comments"]
    packed = run(env, "feedback", "-o", tmp_path / "fb")
    assert packed.returncode == 0, packed.stdout + packed.stderr
    with zipfile.ZipFile(tmp_path / "fb" / f"feedback-moodle-{A}.zip") as z:
        page = z.read("José Núñez_201_assignsubmission_file_/subspace.html").decode()
        other = z.read("Zoë O'Brien_202_assignsubmission_file_/subspace.html").decode()
    assert "the late penalty leaves 2.7 of 3 points" in page and "submitted late" not in other


def test_the_course_file_refuses_a_mistyped_extension_an_early_one_and_warns_without_a_time_zone(canvas, tmp_path):
    tmp, env, book, *_ = canvas
    toml = tmp_path / "course.toml"
    toml.write_text(CANVAS_TOML + "[extensions.nunezjose_110]\n03_subspace = 2025-03-06T23:59:00\n")
    proc = run({**env, "PM_COURSE_CONFIG": str(toml)}, "export", "--to", "csv", "-o", tmp_path / "x.csv",
               "--late-penalty", "0")
    assert proc.returncode != 0 and not (tmp_path / "x.csv").exists()
    assert "[extensions.nunezjose_110]: no student 'nunezjose_110' in the class" in proc.stderr, proc.stderr
    toml.write_text(CANVAS_TOML + "[extensions.nunezjose_101]\n03_subspace = 2025-03-02T23:59:00\n")
    proc = run({**env, "PM_COURSE_CONFIG": str(toml)}, "status")
    assert proc.returncode != 0 and "[extensions.nunezjose_101]: 03_subspace = 2025-03-02 23:59 is earlier than" \
        " 03_subspace's due date (2025-03-03 23:59)" in proc.stderr, proc.stderr
    toml.write_text(CANVAS_TOML.replace('timezone = "America/Chicago"\n', ""))
    proc = run({**env, "PM_COURSE_CONFIG": str(toml), "TZ": "Europe/Paris"}, "status")
    assert proc.returncode == 0, proc.stderr
    assert "no timezone: due dates and submission times are read in this machine's time zone," \
        " Europe/Paris" in proc.stderr, proc.stderr


def _wait_for_holder(course, proc, what):
    for _ in range(600):
        holder = course / ".lock-holder"
        if holder.is_file() and what in holder.read_text():
            return holder.read_text()
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"{what} never took the lock")


def test_one_writer_at_a_time_two_grades_lose_nothing(canvas, tmp_path):
    tmp, env, book, *_ = canvas
    shutil.copytree(tmp / "course", tmp_path / "course")
    course = tmp_path / "course"
    env = {**env, "PM_COURSE_DIR": str(course)}
    before = rows(course / "grades.csv")
    cmd = [sys.executable, "-m", "pm_course", "grade", "--all", "--jobs", "1"]
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    holder = _wait_for_holder(course, first, "pm-course grade")
    assert f"process {first.pid}" in holder
    # a writer that will not wait is refused, naming the holder, and changes nothing
    out = tmp_path / "refused.csv"
    refused = run(env, "export", "--to", "csv", "-o", out, "--late-penalty", "0", "--no-wait")
    assert refused.returncode != 0 and not out.exists()
    assert f"is in use by pm-course grade (process {first.pid}" in refused.stderr, refused.stderr
    # a second grade waits, saying for whom, then grades: both finish and no row is lost
    second = run(env, "grade", "--all", "--jobs", "1")
    out1, err1 = first.communicate(timeout=600)
    assert first.returncode == 0, out1 + err1
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"Waiting for the course folder {course}: in use by pm-course grade (process {first.pid}" \
        in second.stderr, second.stderr
    assert rows(course / "grades.csv") == before
    assert not (course / ".lock-holder").exists()


def test_status_takes_the_lock_to_write_and_reads_only_while_another_command_holds_it(canvas, tmp_path):
    """status brings grades.csv up to date with reviews (a write): it holds the lock for that; while another
    command holds it, status neither waits nor writes, and says so."""
    import fcntl

    tmp, env, *_ = canvas
    course = tmp_path / "course"
    shutil.copytree(tmp / "course", course)
    env = {**env, "PM_COURSE_DIR": str(course)}
    before = {p: p.read_bytes() for p in course.rglob("*") if p.is_file()}
    fd = os.open(course / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a grade holding the folder
        (course / ".lock-holder").write_text("pm-course grade (process 4242, since 2025-03-04 10:00:00)\n")
        held = run(env, "status", timeout=60)
        assert held.returncode == 0, held.stdout + held.stderr
        assert "(read only: the course folder is in use by pm-course grade (process 4242" in held.stdout, held.stdout
        assert held.stdout.startswith("assignment") and f"\n{A} " in held.stdout, held.stdout
    finally:
        os.close(fd)
    (course / ".lock-holder").unlink()
    assert {p: p.read_bytes() for p in course.rglob("*") if p.is_file()} == before  # nothing written
    free = run(env, "status")
    assert free.returncode == 0 and "read only" not in free.stdout, free.stdout + free.stderr
    assert not (course / ".lock-holder").exists()  # taken and given back
    nothing = run({**env, "PM_COURSE_DIR": str(tmp_path / "none" / "course")}, "status")
    assert nothing.returncode != 0 and "nothing collected yet" in nothing.stderr, nothing.stdout + nothing.stderr
    assert not (tmp_path / "none").exists()  # a status where nothing was collected makes no course folder


def test_the_lms_own_values_and_an_instructors_edit_in_the_lms_are_kept(canvas, tmp_path):
    tmp, env, book, *_ = canvas
    shutil.copytree(tmp / "course", tmp_path / "course")
    env = {**env, "PM_COURSE_DIR": str(tmp_path / "course")}
    out = tmp_path / "import.csv"
    assert run(env, "export", "--to", "canvas", book, "-o", out, "--late-penalty", "0").returncode == 0
    # imported; then in Canvas José is excused (EX) and Zoë's 0 is changed to 1.5 in SpeedGrader
    edited = tmp_path / "gradebook-now.csv"
    cells = {"101": "EX", "102": "1.5", "103": "3"}
    table = list(csv.reader(book.open(encoding="utf-8")))
    for row in table[2:]:
        row[GRADEBOOK.index(f"{A} (502)")] = cells[row[1]]
    with edited.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(table)
    assert [r["03_subspace (502)"] for r in csv.DictReader(edited.open(encoding="utf-8"))][1:] == ["EX", "1.5", "3"]
    proc = run(env, "export", "--to", "canvas", edited, "-o", out, "--late-penalty", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {r["ID"]: r["03_subspace (502)"] for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert got == {"": "3", "101": "EX", "102": "1.5", "103": "3"}, got
    assert "Núñez, José (101) 03_subspace (502): 'EX'" in proc.stdout, proc.stdout
    assert "O'Brien, Zoë (102) 03_subspace (502): 1.5 in the LMS (pm-course exported 0), pm-course's 0" in proc.stdout
    assert "--overwrite-lms-edits replaces them" in proc.stdout
    proc = run(env, "export", "--to", "canvas", edited, "-o", out, "--late-penalty", "0", "--overwrite-lms-edits")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {r["ID"]: r["03_subspace (502)"] for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert got == {"": "3", "101": "EX", "102": "0", "103": "3"}, got  # EX stays: not a grade to replace


def test_a_resubmission_not_graded_yet_and_an_undone_collect_stop_export_and_feedback(canvas, tmp_path):
    """José hands in again (blank this time): until it is graded, grades.csv's 3 is not his work's score; after
    it is graded and the collection undone, the 0 graded is not the collected work's either."""
    tmp, env, book, *_ = canvas
    course = tmp_path / "course"
    shutil.copytree(tmp / "course", course)
    env = {**env, "PM_COURSE_DIR": str(course)}
    redo = run(env, "collect", "--from", "canvas", _zip(tmp_path / "again.zip", [
        ("nunezjose_LATE_101_9041_subspace.ipynb", blank(A), (2025, 3, 21, 9, 0, 0))]), "--roster", book)
    assert redo.returncode == 0, redo.stdout + redo.stderr
    why = "nunezjose_101/03_subspace (collected again since it was graded (a resubmission): grade again)"
    status = run(env, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"{A}:\n  out of date: nunezjose_101: collected again since it was graded" in status.stdout, status.stdout
    assert "1 row(s) out of date: export and feedback refuse them" in status.stdout, status.stdout
    out = tmp_path / "import.csv"
    refused = run(env, "export", "--to", "canvas", book, "-o", out, "--late-penalty", "0")
    assert refused.returncode != 0 and not out.exists(), refused.stdout + refused.stderr
    assert f"export refused: 1 row(s) would be written from out-of-date state: {why}" in refused.stderr
    assert "obrienzoe_102" not in refused.stderr and "smithannmarie_103" not in refused.stderr, refused.stderr
    refused = run(env, "feedback", "-o", tmp_path / "fb", "--late-penalty", "0")
    assert refused.returncode != 0 and not (tmp_path / "fb").exists(), refused.stdout + refused.stderr
    assert f"feedback refused: 1 row(s) would be written from out-of-date state: {why}" in refused.stderr
    # --force writes the others and leaves José's old 3 out (a blank cell, not a score of other work)
    forced = run(env, "export", "--to", "canvas", book, "-o", out, "--late-penalty", "0", "--force")
    assert forced.returncode == 0 and f"Left out (out of date; --force): {why}" in forced.stdout, forced.stdout
    got = {r["ID"]: r[f"{A} (502)"] for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert got == {"": "3", "101": "", "102": "0", "103": "3"}, got
    assert run(env, "grade", "--jobs", "1").returncode == 0
    assert rows(course / "grades.csv")[("nunezjose_101", A)]["score"] == "0"
    assert "out of date" not in run(env, "status").stdout
    # the collection undone: the first notebook (worth 3) is collected again, grades.csv still says the blank's 0
    undone = run(env, "collect", "--undo")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    refused = run(env, "export", "--to", "canvas", book, "-o", out, "--late-penalty", "0")
    assert refused.returncode != 0 and "nunezjose_101/03_subspace (collected again since it was graded" \
        in refused.stderr, refused.stdout + refused.stderr
    assert "nunezjose_101: collected again since it was graded" in run(env, "status").stdout
    assert run(env, "grade", "--jobs", "1").returncode == 0
    assert rows(course / "grades.csv")[("nunezjose_101", A)]["score"] == "3"
    assert run(env, "feedback", "-o", tmp_path / "fb", "--late-penalty", "0").returncode == 0


@pytest.fixture
def full_disk(tmp_path):
    """A small tmpfs (this test runs as root), unmounted afterwards."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk):
    """Fill ``disk`` to the last byte; the filler's path."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_fails_loudly_reaches_no_student_and_is_retried(canvas, full_disk, tmp_path):
    tmp, env, book, *_ = canvas
    course = full_disk / "course"
    shutil.copytree(tmp / "course", course)
    env = {**env, "PM_COURSE_DIR": str(course)}
    before = (course / "grades.csv").read_text()
    # José and Zoë hand in again (Zoë's now right): two notebooks to grade
    redo = run(env, "collect", "--from", "canvas", _zip(tmp_path / "again.zip", [
        ("nunezjose_LATE_101_9011_subspace.ipynb", blank(A), (2025, 3, 21, 9, 0, 0)),
        ("obrienzoe_102_9012_subspace.ipynb", solved(A), (2025, 3, 21, 9, 0, 0))]), "--roster", book)
    assert redo.returncode == 0, redo.stdout + redo.stderr
    filler = fill(full_disk)
    proc = run(env, "grade", "--jobs", "1")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "machine error" in proc.stderr and "No space left on device" in proc.stdout + proc.stderr, proc.stderr
    now = (course / "grades.csv").read_text()
    # where the disk ran out decides which: grades.csv as before, or the two rows "not graded (machine error)"
    assert now == before or {(k[0], r["status"]) for k, r in rows(course / "grades.csv").items()
                             if r["status"] != "graded"} == {("nunezjose_101", "not graded (machine error)"),
                                                             ("obrienzoe_102", "not graded (machine error)")}, now
    assert not list(course.rglob("*.part")), "a half-written file was left"
    pages = [p.read_text(errors="replace") for p in (course / "feedback").rglob("*.html")]
    assert pages and not [p for p in pages if "No space left" in p or "machine error" in p]
    filler.unlink()
    again = run(env, "grade", "--jobs", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Graded 2 notebooks" in again.stdout, again.stdout  # retried: both resubmissions
    got = rows(course / "grades.csv")
    assert (got[("nunezjose_101", A)]["score"], got[("obrienzoe_102", A)]["score"]) == ("0", "3")


def test_ctrl_c_during_grade_keeps_the_notebooks_graded(canvas, tmp_path):
    """Ctrl-C while the third notebook (a slow one) is graded: the two graded are kept, the third is not
    graded yet, and the next grade grades it alone."""
    import signal

    import nbformat

    tmp, env, book, *_ = canvas
    course = tmp_path / "course"
    shutil.copytree(tmp / "course", course)
    env = {**env, "PM_COURSE_DIR": str(course)}
    slow = nbformat.reads(solved(A).decode(), as_version=4)
    slow.cells.insert(1, nbformat.v4.new_code_cell("import time\ntime.sleep(8)"))
    download = _zip(tmp_path / "slow.zip", [("smithannmarie_103_9033_subspace.ipynb", nbformat.writes(slow).encode(),
                                             (2025, 3, 3, 9, 0, 0))])
    assert run(env, "collect", "--from", "canvas", download, "--roster", book).returncode == 0
    log = tmp_path / "grade.log"
    done = [course / "feedback" / s / A / "subspace.html" for s in ("nunezjose_101", "obrienzoe_102")]  # made last
    started = time.time()
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "pm_course", "grade", "--all", "--jobs", "1"], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)
        for _ in range(3000):  # two of three done (the students in order): the slow one is being graded
            # the progress bar redraws at most every 0.5 s, so it may skip "2/3": the two new pages tell too
            if " 2/3 [" in log.read_text() or all(p.is_file() and p.stat().st_mtime > started for p in done):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0, out + log.read_text()
    assert "Interrupted: 2 notebook(s) graded and kept, 1 not graded yet" in log.read_text(), log.read_text()
    got = rows(course / "grades.csv")
    assert {k[0]: r["status"] for k, r in got.items()} == {
        "nunezjose_101": "graded", "obrienzoe_102": "graded", "smithannmarie_103": "not graded yet"}
    assert (got[("nunezjose_101", A)]["score"], got[("obrienzoe_102", A)]["score"]) == ("3", "0")
    assert not (course / "feedback" / "smithannmarie_103" / A).exists()  # no page of an old score
    rest = run(env, "grade", "--jobs", "1")
    assert rest.returncode == 0, rest.stdout + rest.stderr
    assert "Graded 1 notebooks" in rest.stdout and "kept: 2 notebooks" in rest.stdout, rest.stdout
    assert rows(course / "grades.csv")[("smithannmarie_103", A)]["score"] == "3"


ATTACK = ("<script>document.title = 'ran: script'</script>\n\n"
          "<img src=\"x\" onerror=\"document.title = 'ran: onerror'\"> my answer")


def attacking(name):
    """A right notebook with a markdown cell of the student's that holds a script, and an HTML output that does."""
    import nbformat

    nb = nbformat.reads(solved(name).decode(), as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(ATTACK))
    code = nbformat.v4.new_code_cell("from IPython.display import HTML\n"
                                     "HTML(\"<img src=x onerror=\\\"document.title = 'ran: output'\\\">\")")
    nb.cells.insert(2, code)
    return nbformat.writes(nb).encode()


@pytest.mark.browser
@pytest.mark.skipif(__import__("browser").missing() is not None, reason="no headless Chromium here")
def test_a_students_script_is_inert_in_the_feedback_page(canvas, tmp_path):
    import browser

    tmp, env, book, *_ = canvas
    shutil.copytree(tmp / "course", tmp_path / "course")
    env = {**env, "PM_COURSE_DIR": str(tmp_path / "course")}
    download = _zip(tmp_path / "attack.zip", [("nunezjose_101_9021_subspace.ipynb", attacking(A), (2025, 3, 3, 9, 0, 0))])
    assert run(env, "collect", "--from", "canvas", download, "--roster", book).returncode == 0
    graded = run(env, "grade", "--jobs", "1")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    packed = run(env, "feedback", "-o", tmp_path / "out", "--late-penalty", "0")
    assert packed.returncode == 0, packed.stdout + packed.stderr
    with zipfile.ZipFile(tmp_path / "out" / f"feedback-canvas-{A}.zip") as z:
        text = z.read("nunezjose_101_9021_feedback-subspace.html").decode()
    page = tmp_path / "page.html"
    page.write_text(text, encoding="utf-8")
    assert "Content-Security-Policy" in text and "<script>document" not in text
    assert not re.search(r"<[^>]*\sonerror\s*=", text), "an element kept its onerror handler"
    assert "my answer" in text  # the answer is there, as text
    for leak in (str(ROOT), str(tmp_path / "course"), str(exercises_dir_of(env))):
        assert leak not in text, leak
    # without the defences the same answer runs (the check can see an attack): a bare page of it
    bare = tmp_path / "bare.html"
    bare.write_text(f"<!DOCTYPE html><html><head><title>page</title></head><body>{ATTACK}</body></html>")
    driver = browser.chrome(tmp_path / "profile", "900,900")
    try:
        driver.get(bare.as_uri())
        time.sleep(0.5)
        assert driver.title.startswith("ran:"), driver.title
        driver.get(page.as_uri())
        time.sleep(0.5)
        title = driver.title
        assert not title.startswith("ran:"), title
        assert "my answer" in driver.find_element("tag name", "body").text
    finally:
        driver.quit()


def exercises_dir_of(env):
    return env["PM_EXERCISES"]


def test_canvas_s_late_deduction_in_its_gradebook_file_is_not_taken_for_an_edit(canvas, tmp_path):
    """Canvas's gradebook file shows a late grade less its Late Policy's deduction (José: 3 exported, 2.7 shown):
    that is pm-course's grade at work in Canvas, so a later export writes pm-course's grade again, saying so."""
    tmp, env, book, *_ = canvas
    shutil.copytree(tmp / "course", tmp_path / "course")
    env = {**env, "PM_COURSE_DIR": str(tmp_path / "course")}
    out = tmp_path / "import.csv"
    assert run(env, "export", "--to", "canvas", book, "-o", out, "--late-penalty", "0").returncode == 0
    first = {r["ID"]: r["03_subspace (502)"] for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert first["101"] == "3", first
    now = tmp_path / "gradebook-now.csv"
    table = list(csv.reader(book.open(encoding="utf-8")))
    for row in table[2:]:
        row[GRADEBOOK.index(f"{A} (502)")] = {"101": "2.7", "102": "0.5"}.get(row[1], first.get(row[1], ""))
    with now.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(table)
    proc = run(env, "export", "--to", "canvas", now, "-o", out, "--late-penalty", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {r["ID"]: r["03_subspace (502)"] for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert got["101"] == "3", (got, proc.stdout)  # late: Canvas's deduction, pm-course's grade goes in again
    assert got["102"] == "0.5", got  # on time: an edit in Canvas, kept
    assert "Taken as Canvas's Late Policy at work (1 late cell(s)" in proc.stdout, proc.stdout
