"""No mistake loses work: an empty, wrong or damaged zip changes nothing, and `collect --undo` puts work back.

Everything runs through ``pm-course`` on Canvas and Moodle downloads as they
come (conftest.py); "changes nothing" is checked byte for byte over the whole
course folder.
"""
import json
import os
import sys
import zipfile

import pytest

from conftest import MARCH, LATER, _zip, blank, canvas_gradebook, canvas_zips, moodle_worksheet, solved
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check


def run(course, exercises, *args):
    env = dict(os.environ, PM_COURSE_DIR=str(course), PM_EXERCISES=str(exercises))
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=300)


def files(folder, skip=()):
    """Every file under ``folder`` and its bytes (the folders in ``skip`` left out)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.relative_to(folder).parts[0] not in skip and p.name != ".lock"}


@pytest.fixture
def collected(tmp_path, two_assignments):
    """A course that collected 03_subspace from Canvas (two notebooks) and 02_averaging (one)."""
    course, zips = tmp_path / "course", canvas_zips(tmp_path / "downloads")
    gradebook = canvas_gradebook(tmp_path / "gradebook.csv")
    for name in ("03_subspace", "02_averaging"):
        proc = run(course, two_assignments, "collect", "--from", "canvas", zips[name], "--roster", gradebook)
        assert proc.returncode == 0, proc.stderr
    assert len(list((course / "submitted").rglob("*.ipynb"))) == 3
    return course, zips, gradebook


def refused(course, exercises, *args):
    """Run a collection that must be refused: the error, after checking that nothing in the course changed."""
    before = files(course)
    proc = run(course, exercises, "collect", *args)
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    assert files(course) == before, "a refused collection changed the course folder"
    return proc.stderr


def test_an_empty_zip_or_one_without_a_notebook_changes_nothing(tmp_path, two_assignments, collected):
    course, _, gradebook = collected
    empty = _zip(tmp_path / "empty.zip", [])
    says = refused(course, two_assignments, "--from", "canvas", empty, "--assignment", "03_subspace",
                   "--roster", gradebook)
    assert "empty.zip: refused: no notebook of 03_subspace" in says and "holds no file" in says, says
    assert "would replace the 2 notebook(s) collected for 03_subspace with nothing" in says, says
    pdf_only = _zip(tmp_path / "pdfs.zip", [("nunezjose_101_9001_subspace.pdf", b"%PDF-1.4", MARCH)])
    says = refused(course, two_assignments, "--from", "canvas", pdf_only, "--assignment", "03_subspace")
    assert "nunezjose_101_9001_subspace.pdf (not a notebook (.pdf))" in says, says
    says = refused(course, two_assignments, "--from", "moodle", empty, "--assignment", "02_averaging")
    assert "would replace the 1 notebook(s) collected for 02_averaging with nothing" in says, says


def test_another_assignments_zip_is_refused_naming_the_assignment(tmp_path, two_assignments, collected):
    course, zips, gradebook = collected
    says = refused(course, two_assignments, "--from", "canvas", zips["02_averaging"], "--assignment", "03_subspace",
                   "--roster", gradebook)
    assert "refused: its notebooks are 02_averaging's (by their graded cells), not 03_subspace's" in says, says
    assert "nunezjose_101_9101_averaging.ipynb" in says and "--assignment 02_averaging" in says, says
    # Moodle, with the files renamed as the assignment's: the cells decide, not the names
    moodle = _zip(tmp_path / "moodle.zip", [
        ("José Núñez_201_assignsubmission_file_/subspace.ipynb", solved("02_averaging"), LATER),
        ("Zoë O'Brien_202_assignsubmission_file_/subspace.ipynb", blank("02_averaging"), LATER)])
    says = refused(course, two_assignments, "--from", "moodle", moodle, "--assignment", "03_subspace",
                   "--roster", moodle_worksheet(tmp_path / "worksheet.csv"))
    assert "its notebooks are 02_averaging's" in says and "subspace.ipynb" in says, says


def test_one_students_wrong_notebook_is_named_and_an_older_right_one_is_graded(tmp_path, two_assignments):
    course = tmp_path / "course"
    download = _zip(tmp_path / "submissions.zip", [
        ("nunezjose_101_9001_subspace.ipynb", solved("03_subspace"), MARCH),
        ("nunezjose_101_9001_subspace-1.ipynb", solved("02_averaging"), LATER),  # the wrong file, uploaded last
        ("obrienzoe_102_9002_subspace.ipynb", blank("02_averaging"), MARCH),     # only the wrong file
        ("smithann_103_9003_averaging.ipynb", solved("03_subspace"), MARCH),     # the right cells, a wrong name
    ])
    proc = run(course, two_assignments, "collect", "--from", "canvas", download, "--assignment", "03_subspace")
    assert proc.returncode == 0, proc.stderr
    assert "obrienzoe_102/03_subspace: could not be graded: submitted 02_averaging's notebook (subspace.ipynb)," \
           " not 03_subspace's" in proc.stdout, proc.stdout
    assert "nunezjose_101_9001_subspace-1.ipynb: 02_averaging's notebook (its graded cells are 02_averaging's)" \
        in proc.stdout, proc.stdout
    stored = {p.relative_to(course / "submitted").as_posix(): json.loads(p.read_text())
              for p in (course / "submitted").rglob("*.ipynb")}
    assert stored == {"nunezjose_101/03_subspace/subspace.ipynb": json.loads(solved("03_subspace")),
                      "smithann_103/03_subspace/subspace.ipynb": json.loads(solved("03_subspace"))}
    # without --assignment the cells say which assignment a file is, whatever its name
    again = tmp_path / "again"
    proc = run(again, two_assignments, "collect", "--from", "canvas", _zip(tmp_path / "named.zip", [
        ("nunezjose_101_9001_subspace.ipynb", solved("02_averaging"), MARCH)]))
    assert proc.returncode == 0, proc.stderr
    assert "(02_averaging)" in proc.stdout and "graded cells are 02_averaging's" in proc.stdout, proc.stdout
    assert (again / "submitted" / "nunezjose_101" / "02_averaging" / "averaging.ipynb").is_file()


def damaged_crc(path):
    """A Canvas zip whose second notebook has one byte changed: its CRC no longer matches."""
    _zip(path, [("nunezjose_101_9001_subspace.ipynb", solved("03_subspace"), MARCH),
                ("obrienzoe_102_9002_subspace.ipynb", solved("03_subspace"), MARCH)])
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("obrienzoe_102_9002_subspace.ipynb")
    raw = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    raw[start + 100] ^= 0x01  # stored (not compressed): the data itself, in the middle of the JSON
    path.write_bytes(bytes(raw))
    return path


def test_a_damaged_zip_is_named_and_changes_nothing(tmp_path, two_assignments, collected):
    course, zips, _ = collected
    says = refused(course, two_assignments, "--from", "canvas", damaged_crc(tmp_path / "crc.zip"),
                   "--assignment", "03_subspace")
    assert "crc.zip: obrienzoe_102_9002_subspace.ipynb is damaged (Bad CRC-32" in says, says
    whole = zips["03_subspace"].read_bytes()
    (tmp_path / "cut.zip").write_bytes(whole[: len(whole) // 2])  # a download that stopped half way
    says = refused(course, two_assignments, "--from", "canvas", tmp_path / "cut.zip", "--assignment", "03_subspace")
    assert "cut.zip: not a zip file, or a damaged one" in says, says
    (tmp_path / "page.zip").write_text("<html>Session expired</html>")  # what a browser saves on a bad day
    says = refused(course, two_assignments, "--from", "moodle", tmp_path / "page.zip", "--assignment", "03_subspace")
    assert "page.zip: not a zip file" in says and "download the submissions" in says, says


def test_undo_puts_back_what_each_collection_replaced(tmp_path, two_assignments):
    course, zips = tmp_path / "course", canvas_zips(tmp_path / "downloads")
    proc = run(course, two_assignments, "collect", "--undo")
    assert proc.returncode != 0 and "nothing to undo" in proc.stderr, proc.stderr
    assert run(course, two_assignments, "collect", "--from", "canvas", zips["03_subspace"]).returncode == 0
    first = files(course, skip=("history",))
    # the next download holds one student only, and --replace asks for it to replace the whole collection:
    # the other's collected notebook goes (into the history)
    partial = _zip(tmp_path / "partial.zip", [("obrienzoe_102_9002_subspace.ipynb", solved("03_subspace"), LATER)])
    proc = run(course, two_assignments, "collect", "--from", "canvas", partial, "--assignment", "03_subspace",
               "--replace")
    assert proc.returncode == 0, proc.stderr
    assert f"What was collected before for 03_subspace is kept in {course / 'history'}/" in proc.stdout, proc.stdout
    second = files(course, skip=("history",))
    assert "submitted/nunezjose_101/03_subspace/subspace.ipynb" not in second and second != first
    proc = run(course, two_assignments, "collect", "--undo")
    assert proc.returncode == 0, proc.stderr
    assert f"Undid `pm-course collect --from canvas {partial} --assignment 03_subspace --replace`" in proc.stdout, \
        proc.stdout
    assert "restored 03_subspace as it was before (2 collected notebook(s))" in proc.stdout, proc.stdout
    assert files(course, skip=("history",)) == first
    kept = [p for p in (course / "history" / "undone").rglob("*.ipynb")]
    # what the undone collection brought in
    assert [json.loads(p.read_text()) for p in kept] == [json.loads(solved("03_subspace"))]
    proc = run(course, two_assignments, "collect", "--undo")  # and the first collection too: back to nothing
    assert proc.returncode == 0 and "(0 collected notebook(s))" in proc.stdout, proc.stdout
    assert files(course, skip=("history",)) == {}
    assert len(list((course / "history" / "undone").rglob("*.ipynb"))) == 3  # nothing deleted without a copy
    proc = run(course, two_assignments, "collect", "--undo")
    assert proc.returncode != 0 and "nothing to undo" in proc.stderr, proc.stderr


def test_undo_and_a_source_do_not_mix(tmp_path, two_assignments):
    proc = run(tmp_path / "course", two_assignments, "collect", "--undo", "--from", "canvas", tmp_path / "x.zip")
    assert proc.returncode == 2 and "--undo takes no other argument" in proc.stderr, proc.stderr
    proc = run(tmp_path / "course", two_assignments, "collect", tmp_path / "x.zip")
    assert proc.returncode == 2 and "--from and PATH are required" in proc.stderr, proc.stderr
