"""The course tools: from the exercises to an LMS's gradebook, on top of nbgrader.

One command, ``pm-course`` (:mod:`pm_course.cli`), with a module per concept:

=====================  =========================================================
:mod:`.course`         the course folder, nbgrader's API, the assignments' facts
:mod:`.config`         the course file, ``course.toml``: due dates, columns, extensions
:mod:`.assignments`    student versions (``generate_assignment``) and their checks
:mod:`.submissions`    what students handed in, matched to the assignments
:mod:`.collect`        submissions from a folder, a Canvas or a Moodle download
:mod:`.lms`            rosters, gradebooks and worksheets of Canvas and Moodle
:mod:`.grade`          grading (JOBS at a time), grades.csv, regrading
:mod:`.export`         grades and feedback out, as an LMS takes them back
:mod:`.review`         written answers scored by a person, kept across regrades
:mod:`.sandbox`        the bubblewrap kernels that run student code
:mod:`.isolate`        each point judged on its own function
:mod:`.hidden`         hidden tests judged in the grader's own process
:mod:`.feedback`       feedback pages without the hidden tests, a reason per lost point
:mod:`.student`        the learner's blank copies (``make exercises``)
:mod:`.jupyter_mode`   JupyterLab with or without nbgrader's instructor tools
:mod:`.book`           the course edition of the site
=====================  =========================================================

This package is the instructor's: students import :mod:`attnlib`, and the
grading sandbox shows them that alone (this package stays out of its sight).
"""
import sys

# jsonschema, which nbformat imports, loads its optional IRI format checker from rfc3987-syntax
# (installed with jupyter-events) where it can: three Earley parsers built on import, 2 of the
# 2.7 s every pm-course command took to start. Notebook schemas check no IRI, so the checker is
# left out here (jsonschema skips it as when the package is missing); a process that loaded it
# already keeps it.
sys.modules.setdefault("rfc3987_syntax", None)
