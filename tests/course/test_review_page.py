"""The reviewer sees everything a student wrote, and nothing else: the review sheet and page of written answers.

One assignment (02_averaging, whose written answer ``why-average`` is worth 2
points), five students from a Canvas zip, graded once:

- ada pasted a photo of her derivation (a cell attachment) and wrote maths;
  her cell also carries an HTML "attachment" and one that is not base64;
- bob split his answer over the answer cell and a markdown cell he added below;
- cy deleted the answer cell (the next cell is the next question's prompt);
- dee left the answer cell as released and wrote the answer in a cell below it;
- eve wrote an ordinary answer.

The page shows ada's picture inline and her maths typeset (MathML, as the
feedback pages), bob's answer whole, "no answer" for cy (never the next
question's text) and dee's answer awaiting review.
"""
import base64
import csv
import os
import re
import shutil
import sys

import nbformat
import pytest

from conftest import MARCH, ROOT, _zip, solved
import pm

pytestmark = pytest.mark.grading  # grades a class or starts kernels: not in make check

NAME, NOTEBOOK, CELL = "02_averaging", "averaging.ipynb", "why-average"
# a 1x1 PNG, as JupyterLab stores a pasted picture
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()
EVIL = base64.b64encode(b"<script>alert('reviewer')</script>").decode()
ADA = "The scores are $\\beta$ and $0$, so $\\alpha_a = e^\\beta/(2e^\\beta + n - 2)$.\n\n" \
      "![derivation.png](attachment:derivation.png) ![page](attachment:page.html) ![bad](attachment:bad.png)"
BOB_FIRST = "Both keys a and b score beta; the n - 2 others score 0."
BOB_SECOND = "So each of the two gets e^beta / (2 e^beta + n - 2), which tends to one half."
DEE = "Dividing by the sum: alpha_a = 1/(2 + (n-2) e^(-beta))."
EVE = "Half each, in the limit."
GRADEBOOK = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{NAME} (501)"],
             ["    Points Possible", "", "", "", "", "6"],
             *[[f"{n}, Student", str(i), "", "", "A", ""] for i, n in
               ((301, "Ada"), (302, "Bob"), (303, "Cy"), (304, "Dee"), (305, "Eve"))]]


def run(env, *args):
    return pm.run([sys.executable, "-m", "pm_course", *map(str, args)], env=env, capture_output=True,
                  text=True, timeout=900)


def notebook(change):
    """The instructor's notebook (all code right); ``change(nb, index of the written cell)`` makes it a student's."""
    nb = nbformat.reads(solved(NAME).decode(), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == CELL)
    change(nb, at)
    return nbformat.writes(nb).encode()


def ada(nb, at):
    nb.cells[at].source = f"**Your answer.**\n\n{ADA}"
    nb.cells[at]["attachments"] = {"derivation.png": {"image/png": PNG}, "page.html": {"text/html": EVIL},
                                   "bad.png": {"image/png": "not base64 \" onerror=\"alert(1)"}}


def bob(nb, at):
    nb.cells[at].source = f"**Your answer.**\n\n{BOB_FIRST}"
    nb.cells.insert(at + 1, nbformat.v4.new_markdown_cell(BOB_SECOND))


def cy(nb, at):
    del nb.cells[at]


def dee(release):
    def change(nb, at):
        nb.cells[at] = release  # as released: "YOUR ANSWER HERE", with its checksum
        nb.cells.insert(at + 1, nbformat.v4.new_markdown_cell(DEE))
    return change


def eve(nb, at):
    nb.cells[at].source = f"**Your answer.**\n\n{EVE}"


def articles(page):
    """Each student's part of the review page, by student id."""
    return {m.group(1): m.group(0) for m in re.finditer(r"<article aria-label=\"(\w+), [^\"]+\">.*?</article>", page,
                                                          re.S)}


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review-page")
    exercises = tmp / "exercises"
    shutil.copytree(ROOT / "exercises" / NAME, exercises / NAME)
    env = dict(os.environ, PM_COURSE_DIR=str(tmp / "course"), PM_EXERCISES=str(exercises))
    proc = run(env, "assignments")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    released = nbformat.read(tmp / "course" / "release" / NAME / NOTEBOOK, as_version=4)
    release_cell = next(c for c in released.cells if c.metadata.get("nbgrader", {}).get("grade_id") == CELL)
    gradebook = tmp / "gradebook.csv"
    with gradebook.open("w", newline="", encoding="utf-8-sig") as f:
        csv.writer(f).writerows(GRADEBOOK)
    files = [(f"{who}student_{301 + i}_{9301 + i}_{NOTEBOOK}", notebook(change), MARCH)
             for i, (who, change) in enumerate((("ada", ada), ("bob", bob), ("cy", cy), ("dee", dee(release_cell)),
                                                 ("eve", eve)))]
    for args in (("collect", "--from", "canvas", _zip(tmp / "week2.zip", files), "--roster", gradebook,
                  "--assignment", NAME), ("grade", "--jobs", "2"), ("review", NAME)):
        proc = run(env, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    with (tmp / "course" / "review" / f"{NAME}.csv").open(newline="", encoding="utf-8-sig") as f:
        sheet = {r["student_id"].split("_")[0]: r for r in csv.DictReader(f)}
    with (tmp / "course" / "grades.csv").open(newline="", encoding="utf-8") as f:
        grades = {r["student_id"].split("_")[0]: r for r in csv.DictReader(f)}
    page = (tmp / "course" / "review" / f"{NAME}.html").read_text(encoding="utf-8")
    return sheet, grades, {k.split("_")[0]: v for k, v in articles(page).items()}, page


def test_a_pasted_picture_is_shown_inline_and_nothing_else_of_the_attachments(reviewed):
    _, _, shown, page = reviewed
    assert f'src="data:image/png;base64,{PNG}"' in shown["adastudent"], shown["adastudent"]
    assert EVIL not in page and "text/html" not in page.split("</style>", 1)[1]  # not an image: not on the page
    assert "onerror" not in page and "<script" not in page and "alert(" not in page
    assert "Content-Security-Policy" in page and "img-src data:" in page  # and the page loads nothing


def test_maths_is_typeset_as_in_the_feedback_pages(reviewed):
    _, _, shown, page = reviewed
    answer = shown["adastudent"].split("<details>")[0]  # the rendered answer, before its text as written
    assert answer.count("<math") == 3 and "\\beta" not in answer, answer
    prompt = page.split("<h3>The question</h3>")[1].split("<h3>")[0]
    assert "<math" in prompt and "$" not in prompt.split("<details>")[0], prompt


def test_an_answer_split_over_two_cells_is_one_answer(reviewed):
    sheet, grades, shown, _ = reviewed
    assert sheet["bobstudent"]["answer"] == f"{BOB_FIRST}\n\n{BOB_SECOND}"
    assert BOB_FIRST in shown["bobstudent"] and BOB_SECOND in shown["bobstudent"]
    assert "(written in 2 cells)" in shown["bobstudent"]
    assert grades["bobstudent"]["awaiting_review"] == "1"


def test_a_deleted_answer_cell_is_no_answer_never_the_next_cells_text(reviewed):
    sheet, grades, shown, _ = reviewed
    assert sheet["cystudent"]["answer"] == "" and sheet["cystudent"]["points"] == "0", sheet["cystudent"]
    assert "(no answer: the answer cell is gone)" in shown["cystudent"], shown["cystudent"]
    assert "How fast" not in shown["cystudent"] and "2.3" not in shown["cystudent"]
    row = grades["cystudent"]
    assert (row["written_score"], row["written_max"], row["awaiting_review"]) == ("0", "2", "0"), row
    assert "written answer 'why-average' is missing" in row["reason"], row


def test_an_answer_written_below_the_untouched_cell_awaits_review(reviewed):
    sheet, grades, shown, _ = reviewed
    assert sheet["deestudent"]["answer"] == DEE and sheet["deestudent"]["points"] == "", sheet["deestudent"]
    assert DEE in shown["deestudent"] and "awaiting review" in shown["deestudent"]
    assert grades["deestudent"]["awaiting_review"] == "1", grades["deestudent"]


def test_an_ordinary_answer_is_as_before(reviewed):
    sheet, _, shown, _ = reviewed
    assert sheet["evestudent"]["answer"] == EVE and EVE in shown["evestudent"]
    assert "(written in" not in shown["evestudent"]
