"""A student's feedback page on disk: what every page declares, and which pages must go.

What ``export``, ``push``, ``review`` and ``feedback`` need of the pages
without making one: they read and pack the pages that :mod:`pm_course.grading.feedback_page`
(nbconvert's exporter, which takes about a second to import) made when the
work was graded.
"""
from __future__ import annotations

import shutil

from pm_course.state.course import Course

# a page runs nothing and loads nothing: its styles are inline, its images data: URLs
CSP = ('<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; script-src \'none\';'
       ' style-src \'unsafe-inline\'; img-src data:; font-src data:">')


def is_test_student(entry) -> bool:
    """Canvas's test student ("Student, Test"; ``studenttest_...`` in its download): given no feedback page."""
    from pm_course.state.submissions import is_test_student as named_test_student

    return named_test_student(entry.name or entry.student.rsplit("_", 1)[0])


def remove_stale(course: Course, entries) -> list[str]:
    """Remove the feedback pages of every row that is not graded now (or is Canvas's test student).

    A page is made when a notebook is graded; when the row changes (the work
    is no longer submitted, or could not be graded this time), its old page
    would tell the student an old score. Returns ``student/assignment`` of each removed.
    """
    from pm_course.state.submissions import GRADED

    removed = []
    for e in entries:
        folder = course.feedback / e.student / e.assignment
        if (e.status != GRADED or is_test_student(e)) and folder.is_dir():
            shutil.rmtree(folder)
            removed.append(f"{e.student}/{e.assignment}")
    return removed
