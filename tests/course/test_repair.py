"""No silent zero: notebooks that lost their metadata or a test cell are matched back and graded, or named.

The matching itself is checked on each assignment's notebook without a kernel;
one Canvas download is then graded through ``pm-course`` (real kernels in the
sandbox: four notebooks, one of which is never run).
"""
import copy
import csv
import os
import sys

import nbformat
import pytest

from conftest import ASSIGNMENTS, LATER, ROOT, MARCH, _zip, answered, canvas_gradebook
from pm_course.grading import repair
from pm_course.steps.grade import _why
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check


def cells(nb):
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


@pytest.fixture
def reference(monkeypatch, two_assignments):
    """The student version of an assignment (metadata, no hidden tests), as course/release/ has it."""
    monkeypatch.setenv("PM_EXERCISES", str(two_assignments))
    return lambda name: nbformat.reads(answered(name), as_version=4)


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_stripped_metadata_is_matched_back_to_every_cell(reference, name):
    ref = reference(name)
    nb = nbformat.reads(answered(name, strip_metadata=True), as_version=4)
    assert not any(cells(nb))
    notes = repair.repair(nb, ref, name)
    assert cells(nb) == cells(ref)  # every cell got its own id back, in place
    for mine, theirs in zip(nb.cells, ref.cells):
        assert mine.metadata.get("nbgrader") == theirs.metadata.get("nbgrader")
    assert len(notes) == 1 and notes[0].startswith(f"matched {sum(map(bool, cells(ref)))} cell(s) back to {name}'s")
    assert "its nbgrader metadata was gone" in notes[0]


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "exercises").iterdir() if p.is_dir()))
def test_every_exercise_answered_or_not_is_matched_back_whole(name):
    ref = nbformat.reads(answered(name), as_version=4)
    for unanswered in (False, True):
        nb = nbformat.reads(answered(name, strip_metadata=True, unanswered=unanswered), as_version=4)
        repair.repair(nb, ref, name)
        assert cells(nb) == cells(ref), (name, unanswered)


def test_a_written_answer_is_found_below_its_prompt_past_a_scratch_cell(reference):
    ref = reference("02_averaging")
    nb = nbformat.reads(answered("02_averaging", strip_metadata=True), as_version=4)
    at = cells(ref).index("why-average")
    nb.cells.insert(at, nbformat.v4.new_code_cell("print(average_query)  # trying things"))
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("My notes"))  # free text elsewhere is not the answer
    repair.repair(nb, ref, "02_averaging")
    answer = nb.cells[cells(nb).index("why-average")]
    assert answer.source == ref.cells[at].source and cells(nb)[0] is None


def test_a_deleted_or_edited_test_cell_is_put_back_with_a_note(reference):
    ref = reference("02_averaging")
    nb = nbformat.reads(answered("02_averaging", drop=("test-avgw",), edit={"test-avgq": "pass  # sorry"}),
                        as_version=4)
    notes = repair.repair(nb, ref, "02_averaging")
    assert cells(nb) == cells(ref)
    restored = nb.cells[cells(nb).index("test-avgw")]
    assert restored.source == ref.cells[cells(ref).index("test-avgw")].source
    assert notes == ["test cell 'test-avgw' (2 points) was missing: put back from 02_averaging",
                     "test cell 'test-avgq' (2 points) was edited: graded as 02_averaging has it"]
    # stripped and deleted at once, and a cell id that is none of the assignment's
    nb = nbformat.reads(answered("03_subspace", strip_metadata=True, drop=("test-proj",)), as_version=4)
    nb.cells[cells(ref := reference("03_subspace")).index("setup")].metadata["nbgrader"] = \
        {**ref.cells[cells(ref).index("setup")].metadata["nbgrader"], "grade_id": "setup-mine"}
    notes = repair.repair(nb, ref, "03_subspace")
    assert cells(nb) == cells(ref)
    assert notes[-1] == "test cell 'test-proj' (3 points) was missing: put back from 03_subspace", notes


def test_a_test_cell_made_ungraded_is_graded_again(reference):
    ref = reference("03_subspace")
    nb = nbformat.reads(answered("03_subspace"), as_version=4)
    test = nb.cells[cells(nb).index("test-proj")]
    test.metadata["nbgrader"].update(grade=False, locked=False, points=0)
    assert repair.repair(nb, ref, "03_subspace") == [
        "the nbgrader metadata of test cell 'test-proj' (3 points) was changed: put back"]
    assert test.metadata["nbgrader"] == ref.cells[cells(ref).index("test-proj")].metadata["nbgrader"]


def test_a_notebook_that_cannot_be_matched_is_refused_naming_what_is_missing(reference):
    nb = nbformat.reads(answered("02_averaging", strip_metadata=True,
                                 rename={"average_query": "q", "averaging_weight": "w"}), as_version=4)
    with pytest.raises(repair.Unmatched, match="metadata is gone and none of its cells could be matched to"
                                               " 02_averaging's .no cell defines average_query, averaging_weight"):
        repair.repair(nb, reference("02_averaging"), "02_averaging")
    # another assignment's notebook, stripped: none of this one's answers in it
    nb = nbformat.reads(answered("03_subspace", strip_metadata=True), as_version=4)
    with pytest.raises(repair.Unmatched, match="02_averaging"):
        repair.repair(nb, reference("02_averaging"), "02_averaging")


def test_an_intact_notebook_is_left_as_it_is(reference):
    nb = nbformat.reads(answered("02_averaging"), as_version=4)
    before = copy.deepcopy(nb)
    assert repair.repair(nb, reference("02_averaging"), "02_averaging") == []
    assert nb == before


# what nbgrader 0.9.6 logged when a test cell's grade_id was changed (hidden lines cut from this copy)
NBGRADER_LOG = """\
$ nbgrader autograde 03_subspace dan
[INFO] Sanitizing /course/submitted/dan/03_subspace/subspace.ipynb
[WARNING] Cell 'test-projX' does not exist in the database
[ERROR] Traceback (most recent call last):
      File ".../nbgrader/nbgraderformat/v3.py", line 68, in validate_cell
        raise ValidationError("nbgrader cell does not have a grade_id: {}".format(cell.source))
    jsonschema.exceptions.ValidationError: nbgrader cell does not have a grade_id: with judging("extract_projector"):
        cases = [("orthonormal A (7 x 3)", A_orth, basis[:, 3:])]

[ERROR] Notebook failed to validate; the nbgrader metadata may be corrupted.
[ERROR] There was an error processing assignment: /course/submitted/dan/03_subspace
[ERROR] Traceback (most recent call last):
      File ".../nbgrader/converters/base.py", line 390, in convert_notebooks
    nbgrader.nbgraderformat.common.ValidationError: Notebook failed to validate; the nbgrader metadata may be corrupted.
[ERROR] There was an error processing assignment '03_subspace' for student 'dan'
[ERROR] Please see the the above traceback for details on the specific errors on the above failures.
Traceback (most recent call last):
nbgrader.coursedir.NbGraderException: Please see the the above traceback
"""


def test_a_failure_inside_nbgrader_is_named_by_its_cause():
    why = _why(NBGRADER_LOG)
    assert why.startswith("its cell(s) 'test-projX' are not the assignment's"), why
    assert "ValidationError: nbgrader cell does not have a grade_id" in why, why
    assert "Notebook failed to validate" in why and "There was an error processing" not in why, why
    assert "orthonormal" not in why  # a cell's source beyond its first line is never quoted


def run(env, *args):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=900)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, two_assignments):
    tmp = tmp_path_factory.mktemp("repair")
    env = dict(os.environ, PM_COURSE_DIR=str(tmp / "course"), PM_EXERCISES=str(two_assignments))
    download = _zip(tmp / "submissions-02.zip", [
        ("nunezjose_101_9101_averaging.ipynb", answered("02_averaging", strip_metadata=True), MARCH),
        ("obrienzoe_102_9102_averaging.ipynb",
         answered("02_averaging", drop=("test-avgw",), edit={"test-avgq": "pass  # too slow"}), MARCH),
        ("smithannmarie_103_9103_averaging.ipynb", answered(
            "02_averaging", strip_metadata=True, rename={"average_query": "q", "averaging_weight": "w"}), LATER),
        ("studentlate_104_9104_averaging.ipynb", answered("02_averaging", unanswered=True), LATER),
    ])
    proc = run(env, "collect", "--from", "canvas", download, "--assignment", "02_averaging",
               "--roster", canvas_gradebook(tmp / "gradebook.csv"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run(env, "grade", "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with (tmp / "course" / "grades.csv").open(newline="", encoding="utf-8") as f:
        return proc, {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == "02_averaging"}


def test_stripped_metadata_is_graded_to_full_points_with_a_note(graded):
    _, rows = graded
    row = rows["nunezjose_101"]
    # every autograded point (4 of 6): the written answer (2 points) awaits review
    assert (row["status"], row["score"], row["max_score"]) == ("graded", "4", "6"), row
    assert "matched 8 cell(s) back to 02_averaging's by their content (its nbgrader metadata was gone)" \
        in row["reason"], row


def test_a_deleted_test_cell_is_put_back_and_earns_its_points(graded):
    _, rows = graded
    row = rows["obrienzoe_102"]
    assert (row["status"], row["score"]) == ("graded", "4"), row
    assert "test cell 'test-avgw' (2 points) was missing: put back from 02_averaging" in row["reason"], row
    assert "test cell 'test-avgq' (2 points) was edited: graded as 02_averaging has it" in row["reason"], row


def test_an_unmatchable_notebook_is_not_a_silent_zero(graded):
    proc, rows = graded
    row = rows["smithannmarie_103"]
    assert (row["status"], row["score"]) == ("could not be graded", ""), row
    assert "no cell defines average_query, averaging_weight" in row["reason"], row
    assert "smithannmarie_103/02_averaging: could not be graded: its nbgrader metadata is gone" in proc.stdout


def test_every_score_below_full_has_a_reason(graded):
    _, rows = graded
    assert rows["studentlate_104"]["score"] == "0"
    assert rows["studentlate_104"]["reason"] == \
        "lost points: test-avgq 0/2, test-avgw 0/2, why-average not reviewed yet"
    below = [r for r in rows.values() if r["status"] == "graded" and float(r["score"]) < float(r["max_score"])]
    assert below and all(r["reason"] for r in below)
