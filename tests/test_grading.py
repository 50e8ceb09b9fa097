"""Grading a real class: what students hand in is matched, every case gets a status, nothing is silent."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import course as course_mod  # noqa: E402
import submissions  # noqa: E402

NAME, NOTEBOOK, POINTS = "03_subspace", "subspace.ipynb", 3


def test_names_from_downloads_and_copies_are_recognised():
    for name in ("subspace (2)", "Subspace", "subspace-Copy1", "SUBSPACE (12)", "subspace copy"):
        assert submissions.normal(name) == "subspace", name
    assert submissions.normal("subspace_solution") != "subspace"


def test_matching_finds_the_one_file_meant_and_lists_the_rest(tmp_path):
    def put(rel, text="{}"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)

    put("ada/03_subspace/subspace.ipynb")
    put("ada/03_subspace/notes.txt")
    put("bob/03_subspace/subspace (1).ipynb")
    put("cy/Subspace.ipynb")                                  # beside the folder, not in it
    put("di/03_subspace/my work.ipynb")                        # the only notebook in the folder
    put("ed/03_subspace/subspace (1).ipynb")
    put("ed/03_subspace/subspace-Copy1.ipynb")                 # two candidates: which one?
    put("fay/02_averaging/averaging.ipynb")                    # did not hand in 03
    found = submissions.match(tmp_path, {"02_averaging": "averaging.ipynb", NAME: NOTEBOOK})
    by = {(e.student, e.assignment): e for e in found.entries}
    assert by[("ada", NAME)].file.name == NOTEBOOK and by[("ada", NAME)].status == "graded"
    assert by[("bob", NAME)].file.name == "subspace (1).ipynb"
    assert by[("cy", NAME)].file == tmp_path / "cy/Subspace.ipynb"
    assert by[("di", NAME)].file.name == "my work.ipynb"
    assert by[("ed", NAME)].status == "could not be graded" and "several candidates" in by[("ed", NAME)].reason
    assert by[("fay", NAME)].status == "not submitted" and by[("fay", "02_averaging")].file is not None
    assert by[("ada", "02_averaging")].status == "not submitted"
    assert [p.relative_to(tmp_path) for p in found.unused] == [Path("ada/03_subspace/notes.txt")]
    assert len(found.warnings) == 3  # bob, cy and di are graded under another name
    assert by[("cy", NAME)].reason == f"graded cy/Subspace.ipynb as {NAME}/{NOTEBOOK}"
    assert by[("ada", NAME)].reason == ""


def test_a_test_cell_that_borrows_from_another_is_refused(tmp_path, monkeypatch):
    nb = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    assert course_mod.test_cells_stand_alone(NAME) == []
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test-proj")
    borrowing = nbformat.v4.new_code_cell("assert M.shape == (7, 7), 'M is the projector'")
    borrowing.metadata["nbgrader"] = {"grade": True, "grade_id": "test-borrow", "locked": True, "points": 1,
                                      "schema_version": 3, "solution": False}
    nb.cells.insert(nb.cells.index(test) + 1, borrowing)
    fake = tmp_path / "exercises" / NAME
    fake.mkdir(parents=True)
    nbformat.write(nb, fake / NOTEBOOK)
    monkeypatch.setattr(course_mod, "ROOT", tmp_path)
    problems = course_mod.test_cells_stand_alone(NAME)
    assert problems == [f"{NAME}: test cell 'test-borrow' uses 'M', which only test cell 'test-proj' defines"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course, subs = tmp_path_factory.mktemp("course"), tmp_path_factory.mktemp("class")
    solved = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)

    def put(rel, nb=None, text=None):
        (subs / rel).parent.mkdir(parents=True, exist_ok=True)
        if nb is not None:
            nbformat.write(nb, subs / rel)
        else:
            (subs / rel).write_text(text)

    put(f"ada/{NAME}/{NOTEBOOK}", solved)
    put(f"bob/{NAME}/subspace (2).ipynb", solved)              # a browser download
    put(f"cy/{NAME}/{NOTEBOOK}", text="%PDF-1.4 this is not a notebook")
    put(f"di/{NAME}/{NOTEBOOK}", solved)
    put(f"di/{NAME}/{NOTEBOOK}.bak", text="an old copy")         # not used: listed
    put("ed/02_averaging/averaging.ipynb", nbformat.read(ROOT / "exercises/02_averaging/averaging.ipynb", 4))
    env = dict(os.environ, PM_COURSE_DIR=str(course))
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "course.py"), "grade", str(subs)],
                          env=env, capture_output=True, text=True, timeout=600)
    with open(course / "grades.csv") as f:
        rows = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}
    return proc, rows


def test_every_student_and_assignment_has_a_status(graded):
    proc, rows = graded
    assert proc.returncode == 0, proc.stdout + proc.stderr   # students failing is not the grader failing
    assert rows[("ada", NAME)]["status"] == "graded" and float(rows[("ada", NAME)]["score"]) == POINTS
    assert rows[("bob", NAME)]["status"] == "graded" and float(rows[("bob", NAME)]["score"]) == POINTS
    assert rows[("cy", NAME)]["status"] == "could not be graded"
    assert rows[("cy", NAME)]["reason"].startswith("not a notebook") and rows[("cy", NAME)]["score"] == ""
    assert rows[("ed", NAME)]["status"] == "not submitted" and rows[("ed", NAME)]["score"] == ""
    assert rows[("ed", "02_averaging")]["status"] == "graded"
    assert {r["max_score"] for (s, a), r in rows.items() if a == NAME} == {"3"}


def test_renamed_and_unused_files_are_reported_and_a_summary_printed(graded):
    proc, rows = graded
    assert f"bob/{NAME}: grading bob/{NAME}/subspace (2).ipynb as {NAME}/{NOTEBOOK}" in proc.stdout
    assert rows[("bob", NAME)]["reason"] == f"graded bob/{NAME}/subspace (2).ipynb as {NAME}/{NOTEBOOK}"
    assert rows[("ada", NAME)]["reason"] == ""
    assert f"di/{NAME}/{NOTEBOOK}.bak" in proc.stdout.split("Not used")[1]
    table = proc.stdout.split("\nstudent ")[1]
    assert "ada" in table and "3/3" in table and "failed" in table, proc.stdout
    assert f"cy/{NAME}: could not be graded: not a notebook" in proc.stdout


def test_grading_an_empty_or_missing_folder_fails_clearly(tmp_path):
    env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"))
    for target in (tmp_path / "nowhere", tmp_path):
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "course.py"), "grade", str(target)],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode != 0
        assert "is not a folder" in proc.stderr or "no submissions found" in proc.stderr, proc.stderr


def test_every_hidden_test_hands_its_values_to_the_grader():
    """A graded cell with hidden tests is judged in the grader's process only if it probes a value."""
    import hidden

    for name in course_mod.assignment_names():
        nb = nbformat.read(next((ROOT / "exercises" / name).glob("*.ipynb")), as_version=4)
        with_hidden = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.cell_type == "code"
                       and c.metadata.get("nbgrader", {}).get("grade") and "### BEGIN HIDDEN TESTS" in c.source}
        probed = {cell for cell, _, _ in hidden.reference(name).values()}
        assert with_hidden and with_hidden == probed, (name, with_hidden ^ probed)


def test_the_grader_rejects_wrong_missing_and_unreadable_values(tmp_path):
    import hidden

    ref = hidden.reference(NAME)
    folder = tmp_path / "probes"
    folder.mkdir()
    for name, (_, want, _) in ref.items():
        np.save(folder / f"{name}.npy", want, allow_pickle=False)
    assert hidden.failures(NAME, folder) == {}
    np.save(folder / "proj-skew.npy", ref["proj-skew"][1] + 1e-3, allow_pickle=False)
    (folder / "proj-orth.npy").unlink()
    assert set(hidden.failures(NAME, folder)["test-proj"]) == {
        "proj-skew: wrong value", "proj-orth: no value (the hidden test did not get that far)"}
    np.save(folder / "proj-skew.npy", np.array([object()]), allow_pickle=True)   # a pickle is refused
    assert "proj-skew: ValueError" in hidden.failures(NAME, folder)["test-proj"]


def _feedback_page(exporter_class, nb):
    """A feedback page made the way nbgrader makes it (template, paths, grades), by ``exporter_class``."""
    import copy

    import nbgrader

    here = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    exporter = exporter_class(template_name="feedback", extra_template_basedirs=[str(here / "templates")],
                              extra_template_paths=[str(here / "static" / "node_modules" / "bootstrap" / "dist" / "css")])
    nb = copy.deepcopy(nb)
    for cell in nb.cells:  # what nbgrader's GetGrades adds
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") or meta.get("solution"):
            meta.update(score=meta.get("points", 0), comment="")
    resources = {"nbgrader": {"score": 3, "max_score": 3, "late_penalty": 0}}
    return exporter.from_notebook_node(nb, resources)[0]


def test_feedback_pages_are_nbconverts_made_cheaper():
    """Compiled templates are reused, and the page is that of nbconvert's HTMLExporter (up to its
    second pass, which only re-serialises it here, and the ids it draws at random)."""
    import re
    from unittest import mock

    import jinja2
    from bs4 import BeautifulSoup
    from nbconvert.exporters import HTMLExporter

    import feedback

    nb = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    compile_ = jinja2.Environment.compile
    with mock.patch.object(jinja2.Environment, "compile", autospec=True, side_effect=compile_) as compiled:
        first = _feedback_page(feedback.FeedbackExporter, nb)
        assert compiled.call_count > 0
        compiled.reset_mock()
        second = _feedback_page(feedback.FeedbackExporter, nb)
        assert compiled.call_count == 0, f"{compiled.call_count} templates compiled again"
    with mock.patch("nbconvert.exporters.html.BeautifulSoup", wraps=BeautifulSoup) as parsed:
        reference = _feedback_page(HTMLExporter, nb)
        assert parsed.call_count == 1
        parsed.reset_mock()
        _feedback_page(feedback.FeedbackExporter, nb)
        assert parsed.call_count == 0, "the page was parsed a second time for nothing"

    def same(page):
        return re.sub(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", "<id>", str(BeautifulSoup(page, "html.parser")))
    assert same(first) == same(second) == same(reference)
    assert "Test cell" in first and "extract_projector" in first


def test_feedback_pages_still_get_alt_text_for_images():
    """An image without alt text takes HTMLExporter's way, second pass included."""
    import feedback

    nb = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell('<img src="data:image/png;base64,AAAA">'))
    page = _feedback_page(feedback.FeedbackExporter, nb)
    assert 'alt="No description has been provided for this image"' in page


def test_the_gradebook_engine_is_made_once_per_process(tmp_path):
    """nbgrader opens the gradebook about ten times per notebook: the grader keeps one engine
    (and its compiled statements), and a gradebook closed and opened again still works."""
    code = """
import course
from nbgrader.api import Gradebook
url = course.api().coursedir.db_url
with Gradebook(url) as first:
    first.add_student("ada")
with Gradebook(url) as second:
    assert second.engine is first.engine, "a new engine for every gradebook"
    assert [s.id for s in second.students] == ["ada"]
course._worker_start()
with Gradebook(url) as third:
    assert third.engine is not first.engine, "a worker must not use the engine of the process it was forked from"
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "scripts", capture_output=True, text=True,
                          env=dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course")), timeout=120)
    assert proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_jobs_grade_the_same_as_one_at_a_time(tmp_path):
    """JOBS=2 writes the gradebook from two processes, longest notebooks first: the grades are those of JOBS=1."""
    subs = tmp_path / "class"
    solved = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    release_like = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    proj = next(c for c in release_like.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "proj")
    proj.source = proj.source.split("### BEGIN SOLUTION")[0] + "return A @ A.T\n"
    for i in range(4):
        dest = subs / f"s{i}" / NAME / NOTEBOOK
        dest.parent.mkdir(parents=True)
        nbformat.write(solved if i % 2 else release_like, dest)
    two_heads = next((ROOT / "exercises" / "05_two_heads").glob("*.ipynb"))  # graded before 03, which is shorter
    (subs / "s1" / "05_two_heads").mkdir()
    (subs / "s1" / "05_two_heads" / two_heads.name).write_text(two_heads.read_text())
    (subs / "s2" / "05_two_heads").mkdir()
    (subs / "s2" / "05_two_heads" / two_heads.name).write_text("not a notebook")
    grades = {}
    for jobs in ("1", "2"):
        env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / f"course{jobs}"), PM_GRADE_JOBS=jobs)
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "course.py"), "grade", str(subs)],
                              env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0 and f"Grading {jobs} notebook(s) at a time" in proc.stdout, proc.stdout
        grades[jobs] = (tmp_path / f"course{jobs}" / "grades.csv").read_text()
    assert grades["1"] == grades["2"]
    assert grades["1"].count(f"{NAME},graded,,3,3") == 2 and grades["1"].count(f"{NAME},graded,,0,3") == 2
    assert "s1,05_two_heads,graded,,6,6" in grades["1"], grades["1"]
    assert "s2,05_two_heads,could not be graded,not a notebook" in grades["1"], grades["1"]
