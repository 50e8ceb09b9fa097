"""The chapters' question boxes are numbered by chapter ("Question 2.1").

A two-chapter book built with the site's own extension and configuration:
without _ext/pm_questions.py, the second chapter's first box would be
"Question 3" (numbered straight through the book, as before).
"""
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import pm_questions  # _ext/, on pytest's pythonpath (pyproject.toml)

ROOT = Path(__file__).resolve().parents[2]


def test_the_book_names_its_boxes_questions_and_keeps_solutions_plain():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    assert config["local_extensions"].get("pm_questions") == "_ext"
    assert config["config"]["numfig_format"]["exercise"] == "Question %s"
    assert config["config"]["exercise_style"] == "solution_follow_exercise"


def test_chapter_of():
    assert pm_questions.chapter_of("chapters/02_multihead") == 2
    assert pm_questions.chapter_of("chapters/15_plays_induction") == 15
    assert pm_questions.chapter_of("exercises/01_copying/copying") is None
    assert pm_questions.chapter_of("glossary") is None


def _page(n, extra=""):
    return f"""# Chapter {n}

:::{{exercise}}
:label: q-{n}-one
One?
:::

:::{{solution}} q-{n}-one
:class: dropdown
Yes.
:::

:::{{exercise}}
:label: q-{n}-two
Two?
:::

{extra}
"""


@pytest.mark.book
def test_a_small_book_numbers_its_questions_by_chapter(tmp_path):
    (tmp_path / "chapters").mkdir()
    (tmp_path / "exercises").mkdir()
    (tmp_path / "conf.py").write_text(
        "extensions = ['myst_parser', 'sphinx_exercise', 'pm_questions']\n"
        "myst_enable_extensions = ['colon_fence']\nnumfig = True\n"
        "numfig_format = {'exercise': 'Question %s'}\n"
        "exercise_style = 'solution_follow_exercise'\n")
    (tmp_path / "index.md").write_text(
        "# Book\n\n```{toctree}\nchapters/01_a\nchapters/02_b\nexercises/ex\n```\n")
    (tmp_path / "chapters" / "01_a.md").write_text(_page(1))
    (tmp_path / "chapters" / "02_b.md").write_text(_page(2, "See {numref}`q-2-two` and {numref}`q-1-one`."))
    (tmp_path / "exercises" / "ex.md").write_text("# Exercise 1: an exercise notebook\n")
    run = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", "-W", "-n",
                          str(tmp_path), str(tmp_path / "_build")], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "_ext")})  # where Sphinx finds pm_questions
    assert run.returncode == 0, run.stderr
    html = (tmp_path / "_build" / "chapters" / "02_b.html").read_text()
    text = re.sub(r"<[^>]+>", " ", html)
    assert "Question 2.1" in text and "Question 2.2" in text
    assert "Question 3" not in text, "numbered straight through the book"
    assert "Question 1.1" in text  # the cross-reference to chapter 1's box
    assert not re.search(r"Exercise \d+\.\d+|Solution to", text)
