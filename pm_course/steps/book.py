"""The course edition of the site (``pm-course book``): the chapters, and the exercises as students get them."""
from __future__ import annotations

import shutil
import subprocess

from pm_course.grading.release import assignments
from pm_course.state.course import BIN, ROOT, Course

# what the course edition copies from the repository
KEEP = ("_config.yml", "_toc.yml", "intro.md", "bibliography.md", "references.bib", "chapters", "_static", "_ext",
        "api.md", "guides")


def book(course: Course) -> None:
    """Build the course edition into ``course/book``: the site with student versions of the exercises.

    No solutions, no hidden tests: the exercise pages and their downloads are
    the notebooks ``pm-course assignments`` releases.
    """
    import yaml

    assignments(course)
    src = course.book_src
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    for name in KEEP:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name)
        elif path.exists():
            shutil.copy(path, src / name)
    shutil.copytree(course.release, src / "exercises", ignore=shutil.ignore_patterns(".source-sha256"))
    config = yaml.safe_load((src / "_config.yml").read_text())
    config["title"] += " (course edition)"
    # Student versions stop at their first unfilled cell, so nothing is executed
    # here: chapters keep the outputs that nbval checks, exercises show none.
    config["execute"]["execute_notebooks"] = "off"
    # The exercises here are student versions already: their downloads need no swap.
    config["sphinx"]["config"]["pm_student_downloads"] = []
    (src / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    subprocess.run([str(BIN / "jupyter-book"), "build", str(src), "--all", "--path-output",
                    str(course.book)], check=True)
    print(f"Course edition: {course.book / '_build' / 'html' / 'index.html'}")
