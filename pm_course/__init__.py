"""The course tools: from the exercises to an LMS's gradebook, on top of nbgrader.

One command, ``pm-course`` (:mod:`pm_course.cli`), over folders that are its layers, lowest
first; a module imports from its own folder and lower ones only (tests/course/test_imports.py):

=====================  =========================================================
``state/``             the course object (:mod:`.state.course`: its folder, every path in it,
                       nbgrader's API), its course file (:mod:`.state.config`), its lock and
                       whole-file writes (:mod:`.state.files`), the manifest
                       (:mod:`.state.submissions`), grades.csv (:mod:`.state.grades_csv`), the
                       fingerprints, the history, the written answers' records
                       (:mod:`.state.written`), what was sent to each LMS cell
                       (:mod:`.state.lms_cells`), the feedback pages on disk
``lms/``               Canvas's and Moodle's files and names (:mod:`.lms`), their APIs
                       (:mod:`.lms.canvas`, :mod:`.lms.moodle`), and what export and push
                       both send: the late policy, the comment, the page (:mod:`.lms.outcome`)
``sandbox/``           the bubblewrap kernels that run student code, their warm template
                       and the cells' CPU limits
``grading/``           what nbgrader runs: the student versions' release and checks, each
                       point judged on its own function, hidden tests, repairs, the
                       feedback pages
``steps/``             the commands: collect, grade, review (and status), export,
                       feedback, push, book
:mod:`.student`        the learner's blank copies (``make exercises``)
:mod:`.jupyter_mode`   JupyterLab with or without nbgrader's instructor tools
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
