"""An instructor's slips refused or undone exactly, and the work a student ran graded (issue 40, items 4 and 5).

- a download whose notebooks are mostly another assignment's (by their cells, not their names) is refused,
  naming that assignment and the command to run instead; one student's wrong file is not;
- after ``collect --undo``, ``grade`` regrades every row whose collected notebook is not what was graded, so
  undo-then-grade gives back the very rows (and reviews) of before; status and export say so until then;
- a source whose points moved on a written cell sends its reviews back to review (or rescales them, asked),
  saying the source changed, never blaming the student.
"""
import csv
import os
import sys

import nbformat
import pytest

from conftest import MARCH, LATER, _zip, solved, blank
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

A, B = "02_averaging", "03_subspace"
ROOT_EXERCISES = __import__("pathlib").Path(__file__).resolve().parents[2] / "exercises"


def run(env, *args, timeout=900):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=timeout)


def files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def rows(course):
    with (course / "grades.csv").open(newline="", encoding="utf-8") as f:
        return {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}


def env_of(tmp_path, exercises):
    return dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"), PM_EXERCISES=str(exercises))


def test_a_download_mostly_of_another_assignment_is_refused_naming_it_and_the_command(tmp_path, two_assignments):
    env = env_of(tmp_path, two_assignments)
    course = tmp_path / "course"
    first = _zip(tmp_path / "week3.zip", [(f"s{i}_10{i}_900{i}_subspace.ipynb", solved(B), MARCH) for i in range(4)])
    assert run(env, "collect", "--from", "canvas", first).returncode == 0
    before = files(course)
    # last week's flag from the shell history on this week's download: three averaging notebooks (one named
    # like the other assignment's) and one student who uploaded subspace.ipynb here
    week2 = _zip(tmp_path / "week2.zip", [
        ("s0_100_9100_averaging.ipynb", solved(A), LATER),
        ("s1_101_9101_subspace.ipynb", solved(A), LATER),      # named like 03_subspace's: its cells are 02's
        ("s2_102_9102_averaging.ipynb", blank(A), LATER),
        ("s3_103_9103_subspace.ipynb", solved(B), LATER)])     # the one student's wrong upload
    proc = run(env, "collect", "--from", "canvas", week2, "--assignment", B)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    says = proc.stderr
    assert f"{week2}: refused: most of its notebooks are another assignment's: 3 of 4 students' are {A}'s" \
        " (by their graded cells, whatever their file names), 1 03_subspace's (s3_103)" in says, says
    assert "replace 4 notebook(s) already collected for 03_subspace" in says, says
    assert f"run instead: pm-course collect --from canvas {week2} --assignment {A}" in says, says
    assert files(course) == before  # nothing changed
    # the command it names works: the three are 02_averaging's, the stray subspace notebook is named
    proc = run(env, "collect", "--from", "canvas", week2, "--assignment", A)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"s3_103/{A}: could not be graded: submitted {B}'s notebook (subspace.ipynb), not {A}'s" in proc.stdout
    # a download where only one student uploaded the wrong file is collected, and that student is named
    one_wrong = _zip(tmp_path / "week3-again.zip", [
        ("s0_100_9200_subspace-1.ipynb", solved(B), LATER), ("s1_101_9201_subspace-1.ipynb", solved(B), LATER),
        ("s2_102_9202_subspace-1.ipynb", solved(A), LATER)])
    proc = run(env, "collect", "--from", "canvas", one_wrong, "--assignment", B)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"s2_102/{B}: could not be graded: submitted {A}'s notebook (subspace-1.ipynb), not {B}'s" in proc.stdout


CELL = "why-average"
STUDENTS = {"nunezjose_101": "alpha_a = 1/(2 + (n-2)e^{-beta}): two scores are beta, the rest 0.",
            "obrienzoe_102": "Both weights tend to one half.",
            "smithann_103": "The denominator is 2e^beta + n - 2."}


def written(text):
    """The instructor's notebook (all code right) with ``text`` as the written answer."""
    nb = nbformat.reads(solved(A).decode(), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == CELL)
    cell.source = f"**Your answer.**\n\n{text}"
    return nbformat.writes(nb).encode()


def review_all(env, course, points):
    """Fill the review sheet with ``points`` by student and apply it."""
    assert run(env, "review", A).returncode == 0
    path = course / "review" / f"{A}.csv"
    with path.open(newline="", encoding="utf-8-sig") as f:
        sheet = list(csv.DictReader(f))
    for row in sheet:
        row.update(points=points[row["student_id"]], comment=f"{points[row['student_id']]} points")
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(sheet[0]))
        writer.writeheader()
        writer.writerows(sheet)
    proc = run(env, "review", A, "--apply", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    """02_averaging collected from Canvas for three students, graded, and their written answers reviewed."""
    import shutil
    from conftest import ROOT

    tmp = tmp_path_factory.mktemp("slips")
    exercises = tmp / "exercises"
    shutil.copytree(ROOT / "exercises" / A, exercises / A)
    shutil.copytree(ROOT / "exercises" / B, exercises / B)
    env = env_of(tmp, exercises)
    download = _zip(tmp / "week2.zip", [(f"{s}_90{i}_averaging.ipynb", written(t), MARCH)
                                        for i, (s, t) in enumerate(STUDENTS.items())])
    for args in (("collect", "--from", "canvas", download, "--assignment", A), ("grade", "--jobs", "2")):
        proc = run(env, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    review_all(env, tmp / "course", {"nunezjose_101": "2", "obrienzoe_102": "1.5", "smithann_103": "1"})
    got = rows(tmp / "course")
    assert [got[(s, A)]["score"] for s in STUDENTS] == ["6", "5.5", "5"], got
    return tmp, exercises


def copy_of(reviewed, tmp_path, *, own_exercises=False):
    """The reviewed course (and, when asked, its exercises) copied, so that a test may change them: its env."""
    import shutil

    tmp, exercises = reviewed
    shutil.copytree(tmp / "course", tmp_path / "course")
    if own_exercises:
        shutil.copytree(exercises, tmp_path / "exercises")
        exercises = tmp_path / "exercises"
    return env_of(tmp_path, exercises), tmp_path / "course"


def test_undo_then_grade_gives_back_the_very_rows_and_reviews(reviewed, tmp_path):
    env, course = copy_of(reviewed, tmp_path)
    earlier = rows(course)
    # a download in which one student's notebook is another assignment's (below the refusal's "mostly"): it
    # is collected, and that student's graded and reviewed work is replaced by "could not be graded"
    slip = _zip(tmp_path / "slip.zip", [("nunezjose_101_9300_averaging.ipynb", solved(B), LATER),
                                        ("obrienzoe_102_9301_averaging.ipynb", written(STUDENTS["obrienzoe_102"]),
                                         LATER),
                                        ("smithann_103_9302_averaging.ipynb", written(STUDENTS["smithann_103"]),
                                         LATER)])
    proc = run(env, "collect", "--from", "canvas", slip, "--assignment", A)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run(env, "grade", "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {k[0]: r["status"] for k, r in rows(course).items()} == {
        "nunezjose_101": "could not be graded", "obrienzoe_102": "graded", "smithann_103": "graded"}
    undone = run(env, "collect", "--undo")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    status = run(env, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    for s in ("nunezjose_101",):
        assert f"out of date: {s}: its collected notebook is not the one that could not be graded" in status.stdout, \
            status.stdout
    export = run(env, "export", "--to", "csv", "-o", tmp_path / "out.csv")
    assert export.returncode != 0 and "1 row(s) would be written from out-of-date state" in export.stderr, \
        export.stdout + export.stderr
    proc = run(env, "grade", "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Graded 1 notebooks" in proc.stdout, proc.stdout
    assert rows(course) == earlier  # every column: scores, reasons, reviews
    assert "out of date" not in run(env, "status").stdout
    assert run(env, "export", "--to", "csv", "-o", tmp_path / "out.csv").returncode == 0


# --- item 5: grade what the student ran ---------------------------------------------------
def with_cells(name, edit):
    """The instructor's notebook of ``name`` changed by ``edit(nb)`` (which returns nothing)."""
    nb = nbformat.reads(solved(name).decode(), as_version=4)
    edit(nb)
    return nbformat.writes(nb).encode()


def rewritten_below(nb):
    """The answer cell copied below itself: the first copy is wrong (run first), the copy right (run last)."""
    i = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "proj")
    right = nbformat.from_dict(dict(nb.cells[i]))
    right.id, right.execution_count = "rewritten", 9
    nb.cells[i].source = nb.cells[i].source.replace("return U @ np.linalg.solve(U.T @ U, U.T)", "return U @ U.T")
    nb.cells[i].execution_count = 3
    nb.cells.insert(i + 1, right)


def test_duplicated_cells_keep_the_copy_executed_last_else_the_last():
    from pm_course.state.submissions import drop_duplicate_cells

    nb = nbformat.reads(with_cells(B, rewritten_below), as_version=4)
    notes = drop_duplicate_cells(nb)
    [proj] = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "proj"]
    assert "U.T @ U" in proj.source and proj.execution_count == 9
    assert notes == ["cell 'proj' was there 2 times: graded the one executed last (execution count 9), copy 2 of 2"]
    # the copy run last is above: it is kept (and stays where the assignment has the cell)
    nb = nbformat.reads(with_cells(B, rewritten_below), as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if c.get("id") == "rewritten")
    nb.cells[i - 1].execution_count, nb.cells[i].execution_count = 12, 4
    assert drop_duplicate_cells(nb) == ["cell 'proj' was there 2 times: graded the one executed last (execution"
                                        " count 12), copy 1 of 2"]
    assert "U @ U.T" in next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "proj")
    # none was run: the last in the notebook
    nb = nbformat.reads(with_cells(B, rewritten_below), as_version=4)
    for cell in nb.cells:
        cell.execution_count = None if cell.cell_type == "code" else cell.get("execution_count")
    assert drop_duplicate_cells(nb) == ["cell 'proj' was there 2 times: graded the last one (none was executed),"
                                        " copy 2 of 2"]
    order = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert order.index("proj") < order.index("test-proj")  # the tests below still run after it


def zipped(*files):
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in files:
            z.writestr(name, data)
    return buffer.getvalue()


def big(name):
    """The instructor's notebook with 51 MB of saved output (over the 50 MB limit): a printed line, many times."""
    import json

    nb = json.loads(solved(name))
    cell = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "compare")
    cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ("x" * 80 + "\n") * (51 * 2**20 // 81)}]
    return json.dumps(nb).encode()


def odd_class(tmp_path):
    """03_subspace from Canvas as a class of unusual hand-ins brings it."""
    import zipfile

    copy = with_cells(B, lambda nb: None)
    download = tmp_path / "odd.zip"
    with zipfile.ZipFile(download, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in [
            ("dup_201_9201_subspace.ipynb", with_cells(B, rewritten_below)),
            ("twonb_202_9202_subspace.ipynb", blank(B)),               # the release, untouched
            ("twonb_202_9202_Copy of subspace.ipynb", copy),           # the finished copy
            ("both_203_9203_subspace.ipynb", copy),
            ("both_203_9203_subspace_final.ipynb", with_cells(B, rewritten_below)),
            ("zipped_204_9204_subspace.zip", zipped(("work/subspace.ipynb", copy),
                                                    ("__MACOSX/work/._subspace.ipynb", b"\0\0"))),
            ("big_205_9205_subspace.ipynb", big(B)),
            ("script_206_9206_subspace.py", b"def extract_projector(U):\n    return U\n"),
            ("link_207_9207_subspace.url", b"[InternetShortcut]\nURL=https://colab.research.google.com/drive/1AbC\n"),
            ("twozips_208_9208_subspace.zip", zipped(("a.ipynb", copy), ("b.ipynb", copy))),
        ]:
            z.writestr(zipfile.ZipInfo(name, date_time=MARCH), data)
    return download


def test_a_download_of_unusual_hand_ins_grades_what_each_student_ran(tmp_path, two_assignments):
    env = env_of(tmp_path, two_assignments)
    course = tmp_path / "course"
    roster = tmp_path / "gradebook.csv"
    with roster.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{B} (502)"])
        w.writerow(["    Points Possible", "", "", "", "", "3"])
        for i, who in enumerate(("dup", "twonb", "both", "zipped", "big", "script", "link", "twozips", "none")):
            w.writerow([who, str(201 + i), "", "", "A", ""])
    proc = run(env, "collect", "--from", "canvas", odd_class(tmp_path), "--assignment", B, "--roster", roster)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run(env, "grade", "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {k[0].split("_")[0]: r for k, r in rows(course).items()}
    assert {s: (r["status"], r["score"]) for s, r in got.items()} == {
        "dup": ("graded", "3"), "twonb": ("graded", "3"), "zipped": ("graded", "3"), "big": ("graded", "3"),
        "both": ("could not be graded", ""), "script": ("could not be graded", ""),
        "link": ("could not be graded", ""), "twozips": ("could not be graded", ""),
        "none": ("not submitted", "")}, got
    assert "cell 'proj' was there 2 times: graded the one executed last (execution count 9)" in got["dup"]["reason"]
    assert "graded Copy of subspace.ipynb as 03_subspace/subspace.ipynb, not subspace.ipynb (the blank notebook as" \
        " released)" in got["twonb"]["reason"], got["twonb"]
    assert "unpacked subspace.ipynb from zipped_204_9204_subspace.zip" in got["zipped"]["reason"], got["zipped"]
    assert "its saved outputs were stripped before grading (the notebook is 52 MB, over the 50 MB limit" \
        in got["big"]["reason"], got["big"]
    assert f"both_203/{B}: could not be graded: two notebooks, subspace.ipynb and subspace_final.ipynb" in proc.stdout
    assert got["both"]["reason"] == (
        "two notebooks, subspace.ipynb and subspace_final.ipynb, both hold work: choose the"
        " one to grade with pm-course collect --choose both_203 03_subspace FILE (FILE one of subspace.ipynb,"
        " subspace_final.ipynb)"), got["both"]
    assert got["script"]["reason"].startswith("submitted subspace.py, a Python script, not the notebook: it cannot"
                                              " be graded"), got["script"]
    assert got["link"]["reason"].startswith("submitted a link (https://colab.research.google.com/drive/1AbC) in"
                                            " subspace.url, not the notebook"), got["link"]
    assert got["twozips"]["reason"].startswith("submitted subspace.zip, a zip holding 2 notebooks (a.ipynb,"
                                               " b.ipynb), not one"), got["twozips"]
    status = run(env, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert next(line.split() for line in status.stdout.splitlines() if line.startswith(B)) == \
        [B, "8", "4", "4", "0", "0"], status.stdout
    # each student who handed in something that cannot be graded gets a page saying why
    proc = run(env, "feedback", "-o", tmp_path / "packed")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import zipfile
    with zipfile.ZipFile(tmp_path / "packed" / f"feedback-canvas-{B}.zip") as z:
        pages = {n.split("_")[0]: z.read(n).decode() for n in z.namelist()}
    assert "none" not in pages and {"script", "link", "both", "twozips"} <= set(pages), sorted(pages)
    assert "you submitted subspace.py, a Python script, not the notebook" in pages["script"]
    assert "colab.research.google.com" in pages["link"] and "pm-course" not in pages["both"]
    assert "you handed in two notebooks, subspace.ipynb and subspace_final.ipynb, that both hold work" in pages["both"]
    # the instructor chooses: that notebook is graded, both named
    proc = run(env, "collect", "--choose", "both_203", B, "nope.ipynb")
    assert proc.returncode != 0 and "not one of the notebooks handed in (subspace.ipynb, subspace_final.ipynb)" \
        in proc.stderr, proc.stderr
    proc = run(env, "collect", "--choose", "both_203", B, "subspace_final.ipynb")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run(env, "grade", "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    both = rows(course)[("both_203", B)]
    assert (both["status"], both["score"]) == ("graded", "3"), both
    assert both["reason"].startswith("graded subspace_final.ipynb, chosen by the instructor (handed in with"
                                     " subspace.ipynb); cell 'proj' was there 2 times"), both


def move_points(exercises, cell, points):
    """The instructor moves a written cell's points in the source (nothing else changes)."""
    path = exercises / A / "averaging.ipynb"
    nb = nbformat.read(path, as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == cell).metadata["nbgrader"][
        "points"] = points
    nbformat.write(nb, path)


@pytest.mark.parametrize("rescale", [False, True], ids=["back-to-review", "rescaled"])
def test_points_moved_in_the_source_send_reviews_back_naming_the_source_not_the_student(reviewed, tmp_path,
                                                                                        rescale):
    env, course = copy_of(reviewed, tmp_path, own_exercises=True)
    move_points(tmp_path / "exercises", CELL, 3)
    proc = run(env, "grade", "--jobs", "2", *(["--rescale-reviews"] if rescale else []))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Source changed since its release: 02_averaging" in proc.stdout, proc.stdout
    got = {k[0]: r for k, r in rows(course).items()}
    for s, r in got.items():
        assert "nbgrader metadata" not in r["reason"] and "put back" not in r["reason"], r  # not the student's doing
        assert r["max_score"] == "7" and r["written_max"] == "3", r
    moved = f"the source's points for '{CELL}' changed from 2 to 3"
    if rescale:
        assert {s: (r["score"], r["written_score"], r["awaiting_review"]) for s, r in got.items()} == {
            "nunezjose_101": ("7", "3", "0"), "obrienzoe_102": ("6.25", "2.25", "0"), "smithann_103": ("5.5", "1.5", "0")}
        assert f"{moved}: its review rescaled from 1.5 of 2 to 2.25 of 3" in got["obrienzoe_102"]["reason"], got
    else:
        assert {s: (r["score"], r["awaiting_review"]) for s, r in got.items()} == {
            "nunezjose_101": ("4", "1"), "obrienzoe_102": ("4", "1"), "smithann_103": ("4", "1")}, got
        assert f"{moved}: its review (1.5 of 2) awaits review again" in got["obrienzoe_102"]["reason"], got
        assert f"{CELL} not reviewed yet" in got["obrienzoe_102"]["reason"], got
    assert all(moved in r["reason"] for r in got.values()), got
    # a student who did edit the cell's metadata is still told so (their notebook is not any release's)
    from pm_course.grading import repair
    nb = nbformat.reads(written("x"), as_version=4)
    ref = nbformat.reads(written("x"), as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == CELL).metadata["nbgrader"][
        "points"] = 5
    earlier = nbformat.reads(written("x"), as_version=4)
    assert repair.repair(nb, ref, A, [earlier]) == [
        f"the nbgrader metadata of answer cell '{CELL}' was changed: put back"]


def test_two_notebooks_the_one_with_work_or_the_newer_upload_both_named(tmp_path, monkeypatch, two_assignments):
    from pm_course.steps import collect

    monkeypatch.setenv("PM_EXERCISES", str(two_assignments))
    finished, rewritten = with_cells(B, lambda nb: None), with_cells(B, rewritten_below)
    download = _zip(tmp_path / "two.zip", [
        ("ann_301_9301_subspace.ipynb", finished, MARCH),          # uploaded again: -1 is the newer
        ("ann_301_9301_subspace-1.ipynb", rewritten, MARCH),
        ("bo_302_9302_subspace.ipynb", finished, MARCH),           # the newer upload is the blank release
        ("bo_302_9302_subspace-1.ipynb", blank(B), MARCH),
        ("cy_303_9303_Copy of subspace.ipynb", finished, MARCH),   # a blank beside the finished copy
        ("cy_303_9303_subspace.ipynb", blank(B), MARCH)])
    found, chosen = collect.from_zip(download, "canvas", B, {})
    by = {e.student: e for e in found.entries}
    assert chosen[("ann_301", B)].filename == "ann_301_9301_subspace-1.ipynb"
    assert by["ann_301"].reason == ("graded subspace-1.ipynb as 03_subspace/subspace.ipynb, the newest upload"
                                    " (subspace.ipynb: older)")
    assert by["bo_302"].reason == ("graded subspace-1.ipynb as 03_subspace/subspace.ipynb, the newest upload, which"
                                   " is blank as released; an older one, subspace.ipynb, holds work (pm-course"
                                   " collect --choose grades it)")
    assert chosen[("cy_303", B)].filename == "cy_303_9303_Copy of subspace.ipynb"
    assert by["cy_303"].reason == ("graded Copy of subspace.ipynb as 03_subspace/subspace.ipynb, not subspace.ipynb"
                                   " (the blank notebook as released)")
    assert found.why_unused["cy_303_9303_subspace.ipynb"] == \
        "not graded: cy_303's cy_303_9303_Copy of subspace.ipynb is graded"


def test_a_blank_copy_of_an_earlier_release_beside_the_finished_notebook_is_blank(tmp_path):
    """The prompt was fixed after release: a student's untouched notebook of the first release is still blank
    (only solution cells and cells the student added are work), so the finished copy is graded, no choice asked."""
    import shutil

    from pm_course.state import submissions

    exercises = tmp_path / "exercises"
    shutil.copytree(ROOT_EXERCISES / B, exercises / B)
    env = env_of(tmp_path, exercises)
    assert run(env, "assignments").returncode == 0
    path = next((exercises / B).glob("*.ipynb"))
    first_release = (tmp_path / "course" / "release" / B / path.name).read_bytes()
    nb = nbformat.read(path, as_version=4)
    prompt = next(c for c in nb.cells if c.cell_type == "markdown")
    prompt.source += "\n\n(Fixed after release: a clearer prompt.)"
    nbformat.write(nb, path)
    assert run(env, "assignments").returncode == 0
    download = _zip(tmp_path / "week3.zip", [("ada_301_9301_subspace.ipynb", first_release, MARCH),
                                             ("ada_301_9301_Copy of subspace.ipynb", solved(B), LATER)])
    proc = run(env, "collect", "--from", "canvas", download, "--assignment", B)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [entry] = [e for e in submissions.read_manifest(tmp_path / "course" / "submissions.csv") if e.student == "ada_301"]
    assert entry.status == "graded" and "Copy of subspace.ipynb" in entry.source, (entry.status, entry.reason)
