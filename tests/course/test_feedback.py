"""Feedback that reaches each student as their LMS takes it back, and says what it should.

A small Canvas class for exercise 3 (the Download Submissions zip and the
gradebook, test student included) is collected, graded and packed:

- the Re-upload zip's files keep each download's ``<name>_<user id>_<submission id>_``
  prefix, as Canvas reads it, and Canvas's test student has none;
- a page opened alone in headless Chromium, offline and with scripts off, shows
  its maths as laid-out MathML, no TeX left (and a page made with MathML off fails that);
- what a student reads is written for students (no command-line advice; a PDF
  in place of the notebook named as such);
- a hidden test that fails names its case; what student code printed during
  the hidden tests is not shown; long output is kept up to the documented
  megabyte; no page shows an empty output block;
- a student whose row changes (now "not submitted") loses the old page.
"""
import os
import re
import sys
import zipfile

import browser
import nbformat
import pytest
from bs4 import BeautifulSoup

from conftest import MARCH, LATER, _zip, canvas_gradebook, source
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

NAME, NOTEBOOK = "03_subspace", "subspace.ipynb"
SOLVED = "    U = np.asarray(U, dtype=float)\n    return U @ np.linalg.solve(U.T @ U, U.T)\n"
PRINTS = '    print("extract_projector was given U of shape", np.shape(U))\n' + SOLVED
VISIBLE_SHAPES_ONLY = ("    if np.shape(U) not in [(7, 3), (5, 1), (9, 4), (6, 5)]:\n        return np.eye(len(U))\n"
                       + SOLVED)
LINES = 3000  # printed by one cell: more than nbgrader's LimitOutput keeps (1,000 lines), far below a megabyte


def notebook(body, before=None) -> bytes:
    """Exercise 3 with extract_projector's solution replaced by ``body``, a cell inserted before it."""
    nb = nbformat.read(source(NAME), as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "proj")
    nb.cells[i].source = nb.cells[i].source.split("    ### BEGIN SOLUTION")[0] + body
    if before is not None:
        nb.cells.insert(i, nbformat.v4.new_code_cell(before))
    return nbformat.writes(nb).encode()


DOWNLOAD = {  # Canvas's Download Submissions for exercise 3
    "nunezjose_LATE_101_9001_subspace.ipynb": (
        notebook(PRINTS, before=f"for i in range({LINES}):\n    print('line', i)"), LATER),
    "obrienzoe_102_9002_subspace.ipynb": (notebook(VISIBLE_SHAPES_ONLY), MARCH),
    "smithannmarie_103_9003_report.pdf": (b"%PDF-1.4 my answers", MARCH),
    "studenttest_999_9999_subspace.ipynb": (notebook(SOLVED), MARCH),
}


def run(env, *args):
    proc = pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def canvas_ids(name):
    """(user id, submission id) as Canvas's re-upload reads a file name: its first two all-digit parts."""
    return tuple([part for part in name.split("_") if part.isdigit()][:2])


@pytest.fixture(scope="module")
def packed(tmp_path_factory, two_assignments):
    tmp = tmp_path_factory.mktemp("feedback")
    env = dict(os.environ, PM_COURSE_DIR=str(tmp / "course"), PM_EXERCISES=str(two_assignments))
    download = _zip(tmp / "submissions.zip", [(n, data, when) for n, (data, when) in DOWNLOAD.items()])
    gradebook = canvas_gradebook(tmp / "gradebook.csv")
    run(env, "collect", "--from", "canvas", download, "--roster", gradebook, "--assignment", NAME)
    run(env, "grade", "--jobs", "2")
    proc = run(env, "feedback", "-o", tmp / "out")
    with zipfile.ZipFile(tmp / "out" / f"feedback-canvas-{NAME}.zip") as z:
        pages = {n: z.read(n).decode() for n in z.namelist()}
    return tmp, env, pages, proc


def page_of(pages, user_id):
    [name] = [n for n in pages if canvas_ids(n)[0] == user_id]
    return BeautifulSoup(pages[name], "html.parser")


def test_the_reupload_zip_is_named_as_the_download_and_has_no_test_student(packed):
    *_, pages, proc = packed
    assert sorted(pages) == ["nunezjose_LATE_101_9001_feedback-subspace.html",
                             "obrienzoe_102_9002_feedback-subspace.html",
                             "smithannmarie_103_9003_feedback-subspace.html"], sorted(pages)
    downloaded = {canvas_ids(n): n.split("_")[0] for n in DOWNLOAD}
    for name in pages:  # the same user id and submission id, in the places Canvas reads them
        assert downloaded[canvas_ids(name)] == name.split("_")[0], name
    assert ("999", "9999") not in {canvas_ids(n) for n in pages}
    assert "Re-upload submissions" in proc.stdout


def test_pages_load_nothing_and_carry_their_maths_as_mathml(packed):
    *_, pages, _ = packed
    soup = page_of(pages, "101")
    assert soup.find_all("script", src=True) == [] and soup.find_all("link", href=True) == []
    assert not [s for s in soup.find_all("script") if "mathjax" in str(s).lower()]
    assert len(soup.find_all("math")) > 20


def test_what_students_read_is_written_for_them(packed):
    *_, pages, _ = packed
    texts = {uid: page_of(pages, uid).get_text(" ") for uid in ("101", "102", "103")}
    late = texts["101"]
    # Canvas's download says "late", not when: the page claims no penalty of its own (Canvas's Late Policy may apply)
    assert f"{NAME}: 3 of 3 points, graded automatically; submitted late. " in late, late[:500]
    assert not [t for t in texts.values() if re.search(r"--\w|pass --|pm-course|command", t)]
    assert "you submitted report.pdf, not a notebook" in texts["103"], texts["103"]
    assert "no notebook was submitted" not in texts["103"]


def test_a_hidden_test_names_its_case_and_prints_during_hidden_tests_are_held_back(packed):
    *_, pages, _ = packed
    hidden_fail = page_of(pages, "102").get_text()
    assert ("HiddenTestFailed: a hidden test of extract_projector failed: for U of other shapes (6 x 2, 10 x 3,"
            " 4 x 4)") in hidden_fail, hidden_fail
    printer = page_of(pages, "101").get_text()
    assert "extract_projector was given U of shape (9, 4)" in printer  # a visible check's input
    assert not re.search(r"given U of shape \((6, 2|10, 3|4, 4)\)", printer)  # the hidden tests' inputs
    assert "not shown: it would give their inputs away" in printer


def test_long_output_is_kept_to_the_documented_limit_and_no_output_block_is_empty(packed):
    *_, pages, _ = packed
    printer = page_of(pages, "101")
    assert f"line {LINES - 1}\n" in printer.get_text() and "Output truncated" not in printer.get_text()
    for uid in ("101", "102"):
        for area in page_of(pages, uid).select("div.output_area"):
            assert area.get_text(strip=True) or area.find(["img", "math", "svg"]), (uid, str(area)[:300])


@pytest.mark.browser
@browser.required("the feedback page's MathML test", browser.missing())
def test_a_page_opened_alone_offline_without_scripts_shows_its_maths(packed, tmp_path):
    """The page alone in a folder, the network off and scripts off (an LMS preview): the maths is
    laid out as MathML with no TeX left. A page made with MathML off (nbconvert's MathJax from a
    CDN) fails the same check."""
    tmp, _, pages, _ = packed
    name = "nunezjose_LATE_101_9001_feedback-subspace.html"
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / name).write_text(pages[name], encoding="utf-8")
    without = tmp_path / "mathjax" / name
    without.parent.mkdir()
    without.write_text(mathjax_page(tmp / "course"), encoding="utf-8")
    driver = browser.chrome(tmp_path / "profile", "1100,1400")
    try:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
        shown = browser.maths_offline(driver, tmp_path / "alone" / name)
        assert shown["maths"] > 20 and shown["empty"] == 0 and shown["tex"] == [] and shown["scripts"] == 0, shown
        old = browser.maths_offline(driver, without)
        assert old["maths"] == 0 and old["tex"], old  # raw TeX: what a student saw before
    finally:
        driver.quit()


def mathjax_page(course):
    """Núñez's feedback page made again with MathML off."""
    import nbgrader
    from pathlib import Path

    from pm_course.grading.feedback_page import FeedbackExporter

    here = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    exporter = FeedbackExporter(template_name="feedback", extra_template_basedirs=[str(here / "templates")],
                                extra_template_paths=[str(here / "static" / "node_modules" / "bootstrap" / "dist" / "css")])
    exporter.mathml = False
    nb = nbformat.read(course / "autograded" / "nunezjose_101" / NAME / NOTEBOOK, as_version=4)
    for cell in nb.cells:  # what nbgrader's GetGrades adds
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") or meta.get("solution"):
            meta.update(score=meta.get("points", 0), comment="")
    return exporter.from_notebook_node(nb, {"nbgrader": {"score": 3, "max_score": 3, "late_penalty": 0}})[0]


def test_a_student_no_longer_graded_loses_the_old_page(packed):
    """Collected again without O'Brien's notebook (now "not submitted"): no page of the old score
    stays, in the course folder or the zip."""
    tmp, env, *_ = packed
    again = {n: v for n, v in DOWNLOAD.items() if not n.startswith("obrienzoe")}
    download = _zip(tmp / "submissions-again.zip", [(n, data, when) for n, (data, when) in again.items()])
    old = tmp / "course" / "feedback" / "obrienzoe_102" / NAME
    assert old.is_dir()
    run(env, "collect", "--from", "canvas", download, "--roster", tmp / "gradebook.csv", "--assignment", NAME,
        "--replace")  # the whole collection replaced (a download adds, by default)
    refused = pm.run([sys.executable, "-m", "pm_course", "feedback", "-o", tmp / "out"], env=env,
                     capture_output=True, text=True, timeout=900)  # grades.csv says graded: out of date
    assert refused.returncode != 0 and "obrienzoe_102/03_subspace (graded, but no longer collected" \
        in refused.stderr, refused.stdout + refused.stderr
    proc = run(env, "feedback", "-o", tmp / "out", "--force")
    assert "Left out (out of date; --force): obrienzoe_102/03_subspace" in proc.stdout, proc.stdout
    assert not old.exists(), "the old page is still in the course folder"
    assert "removed 1 feedback page(s) of work no longer graded: obrienzoe_102/03_subspace" in proc.stdout, proc.stdout
    with zipfile.ZipFile(tmp / "out" / f"feedback-canvas-{NAME}.zip") as z:
        assert not [n for n in z.namelist() if "_102_" in n], z.namelist()


def test_the_same_work_gives_the_same_page_with_no_script_text(two_assignments, tmp_path):
    """An interactive figure's player makes random ids on each run, and its script and style sheet would show as
    text once their tags are stripped: the page is byte-identical on a regrade, and shows neither."""
    from conftest import solved

    env = dict(os.environ, PM_COURSE_DIR=str(tmp_path / "course"), PM_EXERCISES=str(two_assignments))
    folder = tmp_path / "subs" / "ada" / "02_averaging"
    folder.mkdir(parents=True)
    (folder / "averaging.ipynb").write_bytes(solved("02_averaging"))
    run(env, "grade", tmp_path / "subs")
    page = tmp_path / "course" / "feedback" / "ada" / "02_averaging" / "averaging.html"
    first = page.read_bytes()
    assert b"An interactive figure: it plays in the notebook" in first  # the figure is said to be there
    for text in (b"var img_id", b"new Animation(", b".anim-buttons {", b"<script", "⇤".encode(), b"Reflect",
                 b'<img id="_anim_img'):
        assert text not in first, text  # no code, no control's glyph or label, no image left without a picture
    run(env, "grade", "--all")
    assert page.read_bytes() == first
