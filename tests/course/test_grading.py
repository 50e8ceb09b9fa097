"""Grading a real class: what students hand in is matched, every case gets a status, nothing is silent."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

import browser
import pm
from pm_course.grading import release
from pm_course.state import course, submissions

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

ROOT = Path(__file__).resolve().parents[2]

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
    assert release.test_cells_stand_alone(NAME) == []
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test-proj")
    borrowing = nbformat.v4.new_code_cell("assert Pi.shape == (7, 7), 'Pi is the projector'")
    borrowing.metadata["nbgrader"] = {"grade": True, "grade_id": "test-borrow", "locked": True, "points": 1,
                                      "schema_version": 3, "solution": False}
    nb.cells.insert(nb.cells.index(test) + 1, borrowing)
    fake = tmp_path / "exercises" / NAME
    fake.mkdir(parents=True)
    nbformat.write(nb, fake / NOTEBOOK)
    monkeypatch.setattr(course, "ROOT", tmp_path)
    problems = release.test_cells_stand_alone(NAME)
    assert problems == [f"{NAME}: test cell 'test-borrow' uses 'Pi', which only test cell 'test-proj' defines"]


def _proj(body=None, before=None):
    """An edit of the submission: extract_projector's solution replaced by ``body``, a cell inserted before it."""
    def edit(nb):
        i = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "proj")
        if body is not None:
            nb.cells[i].source = nb.cells[i].source.split("    ### BEGIN SOLUTION")[0] + body
        if before is not None:
            nb.cells.insert(i, nbformat.v4.new_code_cell(before))
        return nb
    return edit


def _rename(nb):
    proj = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "proj")
    proj.source = proj.source.replace("def extract_projector(", "def extract_projection(")
    return nb


SOLVED = "    U = np.asarray(U, dtype=float)\n    return U @ np.linalg.solve(U.T @ U, U.T)\n"
# a student's cell that prints the source of every cell run after it (hidden tests included)
ECHO = "get_ipython().input_transformers_cleanup.append(lambda lines: print(''.join(lines)) or lines)"
HONEST_MISTAKES = {
    # right, but numpy prints a RuntimeWarning on stderr: keeps the points
    "fay_warns": _proj("    np.log(np.zeros(1))  # divide by zero\n" + SOLVED),
    # a visible check fails (U U^T is no projector for columns that are not orthonormal)
    "gil_visible": _proj("    return U @ U.T\n"),
    # right for the shapes the visible checks use only (the identity otherwise): a hidden test fails
    "hal_hidden": _proj("    if np.shape(U) not in [(7, 3), (5, 1), (9, 4), (6, 5)]:\n        return np.eye(len(U))\n"
                        + SOLVED),
    # fools the kernel's comparisons: the grader, judging the probed values itself, finds them wrong
    "ivy_fooled": _proj("    return U @ U.T\n", before="import numpy as np\nnp.allclose = lambda *a, **k: True"),
    # the function renamed: the check cannot find it
    "jo_renamed": _rename,
    # loops forever: stopped at the cell timeout
    "kim_loops": _proj("    while True:\n        pass\n"),
    # prints every cell's source as it runs: the feedback must not show the hidden tests it printed
    "leo_echo": _proj(SOLVED, before=ECHO),
}


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
    for student, edit in HONEST_MISTAKES.items():  # each loses the points of test-proj for a reason of its own
        put(f"{student}/{NAME}/{NOTEBOOK}", edit(nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)))
    env = dict(os.environ, PM_COURSE_DIR=str(course))
    proc = pm.run([sys.executable, "-m", "pm_course", "grade", str(subs)],
                  env=env, capture_output=True, text=True, timeout=600)
    with open(course / "grades.csv") as f:
        rows = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}
    return proc, rows, course


def test_every_student_and_assignment_has_a_status(graded):
    proc, rows, _ = graded
    assert proc.returncode == 0, proc.stdout + proc.stderr   # students failing is not the grader failing
    assert rows[("ada", NAME)]["status"] == "graded" and float(rows[("ada", NAME)]["score"]) == POINTS
    assert rows[("bob", NAME)]["status"] == "graded" and float(rows[("bob", NAME)]["score"]) == POINTS
    assert rows[("cy", NAME)]["status"] == "could not be graded"
    assert rows[("cy", NAME)]["reason"].startswith("not a notebook") and rows[("cy", NAME)]["score"] == ""
    assert rows[("ed", NAME)]["status"] == "not submitted" and rows[("ed", NAME)]["score"] == ""
    assert rows[("ed", "02_averaging")]["status"] == "graded"
    assert {r["max_score"] for (s, a), r in rows.items() if a == NAME} == {"3"}


def test_grade_makes_the_student_versions_of_what_was_handed_in_only(graded):
    """Releasing all ten assignments took a new course 10 s: grade releases the two handed in."""
    course = graded[2]
    assert sorted(p.name for p in (course / "release").iterdir() if p.is_dir()) == ["02_averaging", NAME]


def test_renamed_and_unused_files_are_reported_and_a_summary_printed(graded):
    proc, rows, _ = graded
    assert f"bob/{NAME}: grading bob/{NAME}/subspace (2).ipynb as {NAME}/{NOTEBOOK}" in proc.stdout
    assert rows[("bob", NAME)]["reason"] == f"graded bob/{NAME}/subspace (2).ipynb as {NAME}/{NOTEBOOK}"
    assert rows[("ada", NAME)]["reason"] == ""
    assert f"di/{NAME}/{NOTEBOOK}.bak" in proc.stdout.split("Not used")[1]
    table = proc.stdout.split("\nstudent ")[1]
    assert "ada" in table and "3/3" in table and "failed" in table, proc.stdout
    assert f"cy/{NAME}: could not be graded: not a notebook" in proc.stdout


def page_text(course, student, grade_id=None):
    """What a student reads on their feedback page (the text, tags and escapes gone), or in one graded cell."""
    from bs4 import BeautifulSoup

    page = BeautifulSoup((course / "feedback" / student / NAME / NOTEBOOK.replace(".ipynb", ".html")).read_text(),
                         "html.parser")
    if grade_id:
        page = page.find("a", attrs={"name": grade_id}).find_parent("div", class_="cell")
    return page.get_text()


def test_a_warning_from_correct_code_costs_no_points(graded):
    """nbgrader fails a test cell that wrote to stderr: a numpy warning must not cost the points."""
    _, rows, course = graded
    assert float(rows[("fay_warns", NAME)]["score"]) == POINTS
    text = page_text(course, "fay_warns")
    assert "warning printed by your code" in text and "RuntimeWarning: divide by zero" in text, text
    assert "HiddenTestFailed" not in text and "AssertionError" not in text


LOST = {  # student -> what their feedback says about the points of test-proj
    "gil_visible": "AssertionError: for general U (7 x 3): vectors already in the span of U should be left unchanged",
    "hal_hidden": "HiddenTestFailed: a hidden test of extract_projector failed: for U of other shapes (6 x 2,"
                  " 10 x 3, 4 x 4), with columns neither orthogonal nor of length 1, (v_a + v_b) Pi is not v_a:"
                  f" 0 of {POINTS} points",
    "ivy_fooled": f"HiddenTestFailed: a hidden test of extract_projector found a wrong value: 0 of {POINTS} points",
    "jo_renamed": "NameError: extract_projector is not defined: the cell that defines it was deleted, renamed,"
                  " not run, or raised an error",
    "kim_loops": "TimeoutError: the cell used more than 10 s of CPU time and was stopped",
}


def test_every_lost_point_has_a_reason_a_student_can_act_on(graded):
    _, rows, course = graded
    assert {student: float(rows[(student, NAME)]["score"]) for student in LOST} == dict.fromkeys(LOST, 0)
    shown = {student: page_text(course, student, "test-proj") for student in LOST}
    assert {s: text for s, text in shown.items() if LOST[s] not in text} == {}
    assert {s: text for s, text in shown.items() if "Traceback" in text or "----> " in text} == {}


def test_feedback_does_not_repeat_hidden_tests_that_student_code_printed(graded):
    """A cell of the student's echoes every cell it runs: the graded notebook has the hidden tests in
    its outputs (the instructor's copy), the feedback shows a notice in their place."""
    from pm_course.grading import feedback_page as feedback

    _, rows, course = graded
    assert float(rows[("leo_echo", NAME)]["score"]) == POINTS
    nb = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    secret = set().union(*(feedback.secrets(c.source) for c in nb.cells))
    assert secret
    autograded = nbformat.read(course / "autograded" / "leo_echo" / NAME / NOTEBOOK, as_version=4)
    printed = "".join(o.get("text", "") for c in autograded.cells for o in c.get("outputs", []))
    assert any(line in printed for line in secret), "the echo printed no hidden test: nothing was tested"
    text = page_text(course, "leo_echo")
    assert not [line for line in secret if line in text]
    assert feedback.NOTICE.strip() in text


def test_feedback_pages_load_nothing_and_carry_their_maths_as_mathml(graded):
    """A page is sent alone: no script or stylesheet from a CDN or a folder beside it, and its maths
    written as MathML (no MathJax)."""
    import re

    _, _, course = graded
    page = (course / "feedback" / "ada" / NAME / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert re.findall(r"<(?:script|img)[^>]*\ssrc=\"(?!data:)[^\"]*\"|<link[^>]*\shref=\"[^\"]*\"", page) == []
    assert page.count("<math") > 10 and "tex-svg.js" not in page


@pytest.mark.browser
@browser.required("the feedback's browser test", browser.missing())
def test_feedback_pages_show_their_maths_offline_without_scripts(graded, tmp_path):
    """In headless Chromium with the network and scripts off, a feedback page's maths is laid out
    MathML, with no TeX left (and a screenshot of it is kept in _build/screenshots/ for a look)."""
    _, _, course = graded
    page = course / "feedback" / "fay_warns" / NAME / NOTEBOOK.replace(".ipynb", ".html")
    driver = browser.chrome(tmp_path, "1100,1900", "--force-prefers-color-scheme=light")
    try:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
        shown = browser.maths_offline(driver, page)
        assert shown["maths"] > 10 and shown["empty"] == 0 and shown["tex"] == [], shown
        shots = ROOT / "_build" / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(shots / "feedback-fay_warns.png"))
    finally:
        driver.quit()


def _graded_cell(source, grade_id, points):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id, "locked": True, "points": points,
                                 "schema_version": 3, "solution": False}
    return cell


GRADER_LINE = "_judged = {'double': None}  # pm-grader"  # what the grader puts at the top of a test cell


@pytest.fixture(scope="module")
def labelled():
    """A notebook run in a real kernel (IPython's own tracebacks), its test cells as the grader runs
    them (a quiet around each hidden region), before and after HideHiddenTests."""
    import copy

    from nbclient import NotebookClient

    from pm_course.grading import feedback_page as feedback
    from pm_course.grading import isolate

    setup = nbformat.v4.new_code_cell(
        "from attnlib.checks import judging\n"
        "def attend(x):\n    return x\n"
        "def double(x):\n    print('double was given', x)  # a student's print: shows the hidden input\n"
        "    return 2 * x if x < 5 else 0\n"
        "def half(x):\n    if x > 5:\n        raise ValueError(f'too large: {x}')\n    return x / 2\n"
        "def square(x):\n    return x * x\n" + ECHO)
    near = _graded_cell(f"{GRADER_LINE}\n"             # a visible check fails right before the hidden block
                        "with judging('attend'):\n"
                        "    assert attend(1) == 2, 'attend(1) should be 2'\n"
                        "    ### BEGIN HIDDEN TESTS\n"
                        "    assert attend(31) == 62, 'secret message'\n"
                        "    ### END HIDDEN TESTS\n"
                        "print('attend: all visible checks pass')\n", "test-attend", 2)
    hidden = _graded_cell(f"{GRADER_LINE}\n"           # the visible checks pass, a hidden test fails
                          "with judging('double'):\n"
                          "    assert double(1) == 2, 'double(1) should be 2'\n"
                          "    ### BEGIN HIDDEN TESTS\n"
                          "    assert double(3) == 6\n"
                          "    assert double(17) == 34, \\\n"
                          "        'for a larger number, double should still double it'\n"
                          "    ### END HIDDEN TESTS\n"
                          "print('double: all visible checks pass')\n", "test-double", 1)
    raises = _graded_cell("with judging('half'):\n"     # student code raises inside a hidden test
                          "    assert half(2) == 1, 'half(2) should be 1'\n"
                          "    ### BEGIN HIDDEN TESTS\n"
                          "    big = half(17)\n"
                          "    assert big == 8.5, 'for a number above 5, half should still halve it'\n"
                          "    ### END HIDDEN TESTS\n", "test-half", 1)
    grader_fails = _graded_cell("assert square(3) == 10, 'square(3) should be 10'  # pm-grader\n"
                                "### BEGIN HIDDEN TESTS\nassert square(4) == 16\n### END HIDDEN TESTS\n",
                                "test-square", 1)
    bare = _graded_cell("### BEGIN HIDDEN TESTS\nassert double(40) == 80, 'for 40, double should give 80'\n"
                        "### END HIDDEN TESTS\n", "test-bare", 1)  # no judging block to end the quiet
    after = nbformat.v4.new_code_cell("print('printed after the tests')")
    nb = nbformat.v4.new_notebook(cells=[setup, near, hidden, raises, grader_fails, bare, after])
    for cell in nb.cells[1:6]:
        cell.source = isolate.quiet_hidden_tests(cell.source)
    NotebookClient(nb, timeout=60, allow_errors=True).execute()
    executed = copy.deepcopy(nb)
    for cell in nb.cells[1:6]:  # as GetGrades leaves them: every check lost its points
        cell.metadata.nbgrader["score"] = 0
    feedback.HideHiddenTests().preprocess(nb, {})
    return executed, nb


def _errors(cell):
    return [o for o in cell.outputs if o.output_type == "error"]


def test_a_visible_check_that_fails_beside_the_hidden_block_says_its_own_message(labelled):
    executed, nb = labelled
    from pm_course.grading import feedback_page as feedback

    raw = feedback.ANSI.sub("", "\n".join(_errors(executed.cells[1])[0].traceback))
    assert "assert attend(31) == 62" in raw  # IPython quoted the hidden lines: the old rule called it hidden
    assert feedback.failing_line(_errors(executed.cells[1])[0].traceback) == 3  # the grader's line counts
    [error] = _errors(nb.cells[1])
    assert error.traceback == ["AssertionError: attend(1) should be 2"]


def test_a_hidden_test_that_fails_is_named_by_its_message_without_its_source(labelled):
    """The hidden check's own message names the case (never its source); an error raised by the
    student's code inside a hidden test is named by the check it was computing for."""
    _, nb = labelled
    [error] = _errors(nb.cells[2])
    assert error.traceback == ["HiddenTestFailed: a hidden test of double failed: for a larger number, double"
                               " should still double it: 0 of 1 points"]
    [error] = _errors(nb.cells[3])
    assert error.traceback == ["HiddenTestFailed: a hidden test of half failed (your code raised ValueError"
                               " there): for a number above 5, half should still halve it: 0 of 1 points"]


def test_what_student_code_prints_during_hidden_tests_is_not_shown(labelled):
    """double prints its argument: the visible check's input is shown, the hidden ones (3, 17) never
    leave the kernel; one line says something was held back, and later cells print again."""
    from attnlib.checks import HIDDEN_PRINTS

    executed, nb = labelled
    printed = "".join(o.get("text", "") for o in executed.cells[2].outputs)
    assert "double was given 1\n" in printed and HIDDEN_PRINTS in printed
    assert "given 3" not in printed and "given 17" not in printed
    assert "given 17" not in "".join(str(o) for o in nb.cells[2].outputs)
    # a hidden test that raised ended the quiet all the same, in a judging block or not (the echo
    # prints each cell's source first)
    assert "given 40" not in "".join(str(o) for o in executed.cells[5].outputs)
    assert "".join(o.get("text", "") for o in executed.cells[6].outputs).endswith("\nprinted after the tests\n")


def test_what_student_code_writes_to_a_stream_it_kept_aside_is_not_shown_either():
    """The quiet replaces sys.stdout while the hidden tests run; a student's function that writes to
    the stream it kept aside beforehand gets past it, into the cell's output between the grader's
    markers, and the feedback drops what is there."""
    from nbclient import NotebookClient

    from attnlib.checks import HIDDEN_BEGIN, HIDDEN_PRINTS
    from pm_course.grading import feedback_page as feedback
    from pm_course.grading import isolate

    setup = nbformat.v4.new_code_cell(
        "import sys\nfrom attnlib.checks import judging\n_kept = sys.stdout\n"
        "def double(x):\n    _kept.write(f'double was given {x}\\n')\n    return 2 * x\n")
    test = _graded_cell("with judging('double'):\n"
                        "    assert double(1) == 2, 'double(1) should be 2'\n"
                        "    ### BEGIN HIDDEN TESTS\n"
                        "    assert double(17) == 34, 'for a larger number, double should still double it'\n"
                        "    ### END HIDDEN TESTS\n"
                        "print('double: all visible checks pass')\n", "test-double", 1)
    test.source = isolate.quiet_hidden_tests(test.source)
    nb = nbformat.v4.new_notebook(cells=[setup, test])
    NotebookClient(nb, timeout=60).execute()
    printed = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert "double was given 17" in printed and HIDDEN_BEGIN in printed  # it got past the quiet
    test.metadata.nbgrader["score"] = 1
    feedback.HideHiddenTests().preprocess(nb, {})
    assert "".join(o.get("text", "") for o in nb.cells[1].outputs) == (
        f"double was given 1\n{HIDDEN_PRINTS}\ndouble: all visible checks pass\n")


def test_the_grader_lines_never_reach_the_student(labelled):
    """Removed from the source, outside the hidden region (a failure there is no hidden test's),
    and every output that quoted them (the echo printed each cell) replaced by a notice."""
    from pm_course.grading import feedback_page as feedback

    executed, nb = labelled
    assert feedback.failing_line(_errors(executed.cells[4])[0].traceback) == 1
    assert _errors(nb.cells[4])[0].traceback == ["AssertionError: square(3) should be 10"]
    shown = "\n".join(c.source for c in nb.cells) + "\n" + "\n".join(
        str(o) for c in nb.cells for o in c.outputs)
    printed = "\n".join(str(o) for c in executed.cells for o in c.outputs)
    for secret in ("# pm-grader", "attend(31) == 62", "double(17) == 34", "secret message", "_hidden("):
        assert secret in printed and secret not in shown, secret
    assert "HIDDEN TESTS" not in shown
    assert any(o.get("text") == feedback.NOTICE for c in nb.cells for o in c.outputs)


def test_grading_an_empty_or_missing_folder_fails_clearly(tmp_path):
    env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"))
    for target in (tmp_path / "nowhere", tmp_path):
        proc = pm.run([sys.executable, "-m", "pm_course", "grade", str(target)],
                      env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode != 0
        assert "is not a folder" in proc.stderr or "no submissions found" in proc.stderr, proc.stderr


def test_every_hidden_test_hands_its_values_to_the_grader():
    """A graded cell with hidden tests is judged in the grader's process only if it probes a value."""
    from pm_course.grading import hidden

    for name in course.assignment_names():
        nb = nbformat.read(next((ROOT / "exercises" / name).glob("*.ipynb")), as_version=4)
        with_hidden = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.cell_type == "code"
                       and c.metadata.get("nbgrader", {}).get("grade") and "### BEGIN HIDDEN TESTS" in c.source}
        probed = {cell for cell, _, _ in hidden.reference(name).values()}
        assert with_hidden and with_hidden == probed, (name, with_hidden ^ probed)


def test_the_grader_rejects_wrong_missing_and_unreadable_values(tmp_path):
    from pm_course.grading import hidden

    ref = hidden.reference(NAME)
    folder = tmp_path / "probes"
    folder.mkdir()
    for name, (_, want, _) in ref.items():
        np.save(folder / f"{name}.npy", want, allow_pickle=False)
    assert hidden.failures(NAME, folder) == {}
    np.save(folder / "proj-6x2.npy", ref["proj-6x2"][1] + 1e-3, allow_pickle=False)
    (folder / "proj-10x3.npy").unlink()
    assert set(hidden.failures(NAME, folder)["test-proj"]) == {
        "proj-6x2: wrong value", "proj-10x3: no value (the hidden test did not get that far)"}
    np.save(folder / "proj-6x2.npy", np.array([object()]), allow_pickle=True)   # a pickle is refused
    assert "proj-6x2: ValueError" in hidden.failures(NAME, folder)["test-proj"]


def _feedback_page(exporter_class, nb, **traits):
    """A feedback page made the way nbgrader makes it (template, paths, grades), by ``exporter_class``."""
    import copy

    import nbgrader

    here = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    exporter = exporter_class(template_name="feedback", extra_template_basedirs=[str(here / "templates")],
                              extra_template_paths=[str(here / "static" / "node_modules" / "bootstrap" / "dist" / "css")],
                              **traits)
    nb = copy.deepcopy(nb)
    for cell in nb.cells:  # what nbgrader's GetGrades adds
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") or meta.get("solution"):
            meta.update(score=meta.get("points", 0), comment="")
    resources = {"nbgrader": {"score": 3, "max_score": 3, "late_penalty": 0}}
    return exporter.from_notebook_node(nb, resources)[0]


def test_feedback_pages_are_nbconverts_made_cheaper():
    """Compiled templates are reused, and the page is that of nbconvert's HTMLExporter (up to its
    second pass, which only re-serialises it here, the ids it draws at random, and MathJax's loader);
    with MathML on (the default), the maths is MathML and nothing loads MathJax."""
    import re
    from unittest import mock

    import jinja2
    from bs4 import BeautifulSoup, Comment
    from nbconvert.exporters import HTMLExporter

    from pm_course.grading import feedback_page as feedback

    nb = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    compile_ = jinja2.Environment.compile
    feedback.COMPILED.clear()  # as in a process that made no page yet (this one may have graded already)
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
        soup = BeautifulSoup(page, "html.parser")
        for script in soup.find_all("script"):  # how MathJax is loaded differs (a local copy, not a CDN)
            if "mathjax" in (script.get("src", "") + script.get("type", "") + script.text).lower():
                script.decompose()
        for comment in soup.find_all(string=lambda s: isinstance(s, Comment) and "mathjax" in s.lower()):
            comment.extract()
        for policy in soup.find_all("meta", attrs={"http-equiv": "Content-Security-Policy"}):  # ours: no script
            policy.decompose()
        head = re.sub(r">\s+<", "><", str(soup.head))  # the blank lines the loaders left
        return head + re.sub(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", "<id>", str(soup.body))
    assert same(first) == same(second)
    assert same(_feedback_page(feedback.FeedbackExporter, nb, mathml=False)) == same(reference)
    assert "cdnjs" in reference and "cdnjs" not in first and "<script" not in same(first)
    assert feedback.CSP in first and "Content-Security-Policy" not in reference
    assert reference.count("<math") == 0 and first.count("<math") > 10
    assert "Test cell" in first and "extract_projector" in first


def test_feedback_pages_still_get_alt_text_for_images():
    """An image without alt text takes HTMLExporter's way, second pass included."""
    from pm_course.grading import feedback_page as feedback

    nb = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell('<img src="data:image/png;base64,AAAA">'))
    page = _feedback_page(feedback.FeedbackExporter, nb)
    assert 'alt="No description has been provided for this image"' in page


def test_the_gradebook_engine_is_made_once_per_process(tmp_path):
    """nbgrader opens the gradebook about ten times per notebook: the grader keeps one engine
    (and its compiled statements), and a gradebook closed and opened again still works."""
    code = """
from pm_course.state import course
from nbgrader.api import Gradebook
url = course.api(course.Course(course.default_folder())).coursedir.db_url
with Gradebook(url) as first:
    first.add_student("ada")
with Gradebook(url) as second:
    assert second.engine is first.engine, "a new engine for every gradebook"
    assert [s.id for s in second.students] == ["ada"]
course.worker_start()
with Gradebook(url) as third:
    assert third.engine is not first.engine, "a worker must not use the engine of the process it was forked from"
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course")), timeout=120)
    assert proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_a_new_gradebook_is_stamped_with_the_revision_alembic_names_without_running_it(tmp_path):
    """nbgrader asks the `alembic` command for the schema's newest revision (3 s a course); the grader
    reads it from the migration scripts: the same revision, and the command is never run."""
    import nbgrader.dbutil

    with nbgrader.dbutil._temp_alembic_ini("sqlite://") as ini:  # what nbgrader itself would run
        heads = subprocess.run([str(Path(sys.executable).parent / "alembic"), "-c", ini, "heads"],
                               capture_output=True, text=True, timeout=120, check=True).stdout
    assert course.alembic_head() == heads.split()[0]
    code = """
import sqlite3, subprocess
from pm_course.state import course
from nbgrader.api import Gradebook
def refuse(*args, **kwargs):
    raise AssertionError(f"a command was run: {args}")
subprocess.check_output = subprocess.run = subprocess.Popen = refuse
url = course.api(course.Course(course.default_folder())).coursedir.db_url
with Gradebook(url):
    pass
print(sqlite3.connect(url.removeprefix("sqlite:///").split("?")[0]).execute("select version_num from alembic_version").fetchall())
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course")), timeout=120)
    assert proc.stdout.strip() == str([(heads.split()[0],)]), proc.stderr[-2000:]


def test_jobs_grade_the_same_as_one_at_a_time(tmp_path):
    """JOBS=2 writes the gradebook from two processes, longest notebooks first: the grades are those of JOBS=1."""
    subs = tmp_path / "class"
    solved = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    release_like = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    proj = next(c for c in release_like.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "proj")
    proj.source = proj.source.split("### BEGIN SOLUTION")[0] + "return U @ U.T\n"
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
        proc = pm.run([sys.executable, "-m", "pm_course", "grade", str(subs)],
                      env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0 and f"Grading {jobs} notebook(s) at a time" in proc.stdout, proc.stdout
        grades[jobs] = (tmp_path / f"course{jobs}" / "grades.csv").read_text()
    assert grades["1"] == grades["2"]
    assert grades["1"].count(f"{NAME},graded,,3,3") == 2 and grades["1"].count(f"{NAME},graded,lost points: test-proj 0/3,0,3") == 2
    # its 6 autograded points of 8; the written answer (2 points) awaits review
    assert "s1,05_two_heads,graded,lost points: why-fail not reviewed yet,6,8" in grades["1"], grades["1"]
    assert "s2,05_two_heads,could not be graded,not a notebook" in grades["1"], grades["1"]


# A detector of exercise 6 that also tries large scores, where exponentials of unshifted (or
# wrongly shifted) scores overflow, as exercises 1, 2, 4 and 5 teach: a right one.
LARGE_SCORES_DETECTOR = """
rng = np.random.default_rng(0)
for scale in (1.0, 1000.0):   # scores of the usual size, and large ones
    for _ in range(3):
        scores = scale * rng.standard_normal((T, T))
        if not np.allclose(f(scores), softmax(scores, where=attnlib.causal_mask(T))):
            return True
return False
"""


def _run_whole_test_cell(name, gid, ns):
    """Run test cell ``gid`` (visible and hidden checks) in ``ns`` as the grader does; the values it probed."""
    from test_exercises import notebook

    from attnlib import checks
    from pm_course.grading import isolate

    probed = {}
    ns["probe"] = lambda key, value, judge=None: probed.__setitem__(key, np.asarray(value))
    test = next(c for c in notebook(name).cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)
    checks._offer(isolate.instructor_source(notebook(name), gid))
    try:
        with np.errstate(all="ignore"):
            exec(compile(test.source, f"<{name}:{gid}>", "exec"), ns)
    finally:
        __import__("attnlib.grader").grader._offered = None
    return probed


def test_a_detector_that_also_tries_large_scores_keeps_its_point():
    """Exercise 6's hidden test holds up an implementation it calls right: that one must be right
    for any finite scores, or a careful detector is marked wrong. The whole test cell is run on the
    detector, and its probed value judged as the grader judges it."""
    from test_exercises import solution_cell, solved_namespace, with_wrong_answer

    from pm_course.grading import hidden

    name, target, gid = "06_debug_head", "detects_causal_bug", "test-detect-causal"
    ns = dict(solved_namespace(name))
    exec(with_wrong_answer(solution_cell(name, target).source, target, LARGE_SCORES_DETECTOR), ns)
    assert ns[target](lambda S: np.full(S.shape, np.nan)), "the detector flags nothing: nothing was tested"
    probed = _run_whole_test_cell(name, gid, ns)
    cell, want, _ = hidden.reference(name)["detect-causal"]
    assert cell == gid and np.array_equal(probed["detect-causal"], want)


FLOAT32_WEIGHTS = """
return softmax(np.asarray(scores, dtype=np.float32), axis=-1, where=attnlib.causal_mask(scores.shape[-1]))
"""


def test_an_ungraded_cell_does_not_contradict_a_float32_answer_that_keeps_full_marks():
    """Exercise 6: causal weights computed in float32 keep every point (visible checks, hidden checks,
    the grader's judgement of the probed values); the ungraded cell that assembles the repaired layer
    must then agree that it is right, not say "a fix above is off"."""
    from test_exercises import notebook, solution_cell, solved_namespace, with_wrong_answer

    from pm_course.grading import hidden

    name, target, gid = "06_debug_head", "fixed_causal_weights", "test-fix-causal"
    ns = dict(solved_namespace(name))
    exec(with_wrong_answer(solution_cell(name, target).source, target, FLOAT32_WEIGHTS), ns)
    assert ns[target](np.zeros((3, 3))).dtype == np.float32
    probed = _run_whole_test_cell(name, gid, ns)
    assert probed and hidden.failures(name, _saved(probed)).get(gid) is None
    layer = next(c for c in notebook(name).cells if c.metadata.get("nbgrader", {}).get("grade_id") == "layer")
    exec(compile(layer.source, f"<{name}:layer>", "exec"), ns)   # raises "a fix above is off" if it disagrees


def _saved(probed):
    """The probed values as the kernel saves them, in a folder for :func:`pm_course.grading.hidden.failures`."""
    import tempfile

    folder = Path(tempfile.mkdtemp())
    for key, value in probed.items():
        np.save(folder / f"{key}.npy", value, allow_pickle=False)
    return folder


def test_every_hidden_check_carries_a_message_that_names_its_case():
    """A hidden check that fails is named to the student by its message: every one has one, and no
    message quotes its own check's code."""
    import ast

    from pm_course.grading import feedback_page as feedback

    bare = []
    for name in course.assignment_names():
        nb = nbformat.read(next((ROOT / "exercises" / name).glob("*.ipynb")), as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code" or "### BEGIN HIDDEN TESTS" not in cell.source:
                continue
            span = feedback.hidden_span(cell.source)
            checks = [n for n in ast.walk(ast.parse(cell.source)) if isinstance(n, ast.Assert) and n.lineno in span]
            told = {first: message for first, _, message in feedback.hidden_cases(cell.source)}
            gid = cell.metadata["nbgrader"]["grade_id"]
            bare += [f"{name}/{gid} line {n.lineno}" for n in checks if n.lineno not in told]
            visible = "".join(line for i, line in enumerate(cell.source.splitlines(True), 1) if i not in span)
            code = {ast.unparse(n.test) for n in checks} - {c for c in map(ast.unparse, (
                n.test for n in checks)) if c in visible}   # what the visible checks show already
            assert not [m for m in told.values() if any(c in m for c in code)], (name, gid)
    assert bare == []


def test_no_output_block_of_a_feedback_page_is_empty():
    """A widget's view needs a kernel (it would be an empty block): a line says what it was; printed
    text that is empty, and displays with nothing to show, go. Checked on the page itself."""
    from bs4 import BeautifulSoup
    from nbformat.v4 import new_output

    from pm_course.grading import feedback_page as feedback

    nb = nbformat.read(ROOT / "exercises" / NAME / NOTEBOOK, as_version=4)
    cell = nbformat.v4.new_code_cell("interact(f, x=(0, 1))")
    cell.outputs = [new_output("display_data", data={"text/plain": "interactive(children=(FloatSlider(...",
                                                     feedback.WIDGET: {"model_id": "0" * 32, "version_major": 2,
                                                                       "version_minor": 0}}),
                    new_output("stream", name="stdout", text=""),
                    new_output("display_data", data={"text/plain": ""}),
                    new_output("stream", name="stdout", text="kept\n")]
    nb.cells.insert(3, cell)
    feedback.HideHiddenTests().preprocess(nb, {})
    assert [o.get("text") for o in nb.cells[3].outputs] == [feedback.WIDGET_NOTICE, "kept\n"]
    page = BeautifulSoup(_feedback_page(feedback.FeedbackExporter, nb), "html.parser")
    areas = page.select("div.output_area")
    assert areas and [str(a)[:200] for a in areas if not a.get_text(strip=True) and not a.find(["img", "svg"])] == []
