"""nbgrader configuration: exercises/ is the source folder; everything generated lives in course/.

pm-course points it at its own course (pm_course.state.course.configure); nbgrader's own
apps (the formgrader) find the course folder as pm-course does when none is given.
"""
import os

from pm_course.state.course import default_folder

c = get_config()  # noqa: F821  (provided by nbgrader)

ROOT = os.path.dirname(os.path.abspath(__file__))
COURSE = str(default_folder())

c.CourseDirectory.root = COURSE
# nbgrader's folders are relative to the root; the sources stay in the repository.
c.CourseDirectory.source_directory = os.path.relpath(os.environ.get("PM_EXERCISES") or os.path.join(ROOT, "exercises"), COURSE)
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
# parallel graders (JOBS) take turns writing: wait for the lock rather than fail
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(COURSE, "gradebook.db") + "?timeout=60"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# Student code can loop forever: stop a cell after 10 s of CPU time (PM_GRADE_CELL_CPU), or six
# times that on the wall clock for code that waits, and go on from a new kernel that has run the
# earlier cells again (pm_course/sandbox/cell_limits.py): the limit counts the student's code, not the machine's load.
from pm_course.sandbox.cell_limits import CpuLimitedExecute, cell_limits  # noqa: E402

c.Execute.timeout = cell_limits()[0]
c.Execute.interrupt_on_timeout = True
# A loop that prints keeps the output channel busy after the interrupt: give
# up waiting for the rest of its output rather than failing the whole notebook.
c.Execute.raise_on_iopub_timeout = False
# Once the last cell has run, the kernel has nothing left to say (its probes are
# written, its output received) and its sandbox is thrown away: stop it at once
# rather than ask it to shut down and wait (0.2-0.4 s a notebook, and at times
# 2.5 s for a kernel that does not answer).
c.Execute.shutdown_kernel = "immediate"

# Keep at most a megabyte of each cell's output in the graded notebook and the
# feedback (nbgrader's LimitOutput counts lines, and one line can be huge).
from nbgrader.converters.autograde import Autograde  # noqa: E402
from nbgrader.preprocessors import Execute  # noqa: E402


class ExecuteWithOutputCap(CpuLimitedExecute):
    """nbgrader's Execute with CPU limits (pm_course/sandbox/cell_limits.py), keeping at most ``max_output_chars`` of output
    per cell."""

    max_output_chars = 1_000_000
    _chars = 0  # output kept so far for the running cell

    def output(self, outs, msg, display_id, cell_index):
        if not outs:
            self._chars = 0  # the first output of a cell
        room = self.max_output_chars - self._chars
        if room <= 0:
            return None  # already cut: drop the rest
        content = msg["content"]
        if msg["msg_type"] == "stream" and len(content["text"]) > room:  # the kernel sends printed text in batches
            cut = f"\n[output cut at {self.max_output_chars:,} characters by the grader]\n"
            msg = {**msg, "content": {**content, "text": content["text"][:room] + cut}}
        self._chars += len(str(msg["content"]))
        return super().output(outs, msg, display_id, cell_index)


# That megabyte is the limit: nbgrader's LimitOutput would also cut each cell's printed
# text at 1,000 lines (a few kilobytes), far below it.
c.LimitOutput.max_lines = -1

# Every student notebook runs in a sandboxed kernel (pm_course/sandbox/__init__.py).
from pm_course.sandbox import SandboxKernelManager  # noqa: E402

c.Execute.kernel_manager_class = SandboxKernelManager

# Feedback goes to students: no hidden test, nor any output that quotes one; a
# reason for every lost point; maths as MathML written into the page (no MathJax).
from pm_course.grading.feedback_page import FeedbackExporter, HideHiddenTests, WarningsAreNotFailures  # noqa: E402
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import GetGrades  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
c.GenerateFeedback.exporter_class = FeedbackExporter
c.HideHiddenTests.cell_timeout = c.Execute.timeout

# Each point judged on its own function: before the notebook runs, each test cell gets
# the instructor's versions of the functions judged above it (pm_course/grading/isolate.py).
# A test cell passes or fails on its assertions and errors, never on a warning
# (nbgrader fails any cell that wrote to stderr): stderr becomes a displayed
# warning once the cells have run, before the grades are saved.
from pm_course.grading.isolate import HandInstructorVersions  # noqa: E402

# No silent zero: a notebook whose cell metadata is gone, or that lost a test cell, is
# matched back to the assignment's cells before nbgrader overwrites them (pm_course/grading/repair.py).
from nbgrader.preprocessors import OverwriteCells  # noqa: E402
from pm_course.grading.repair import RestoreCells  # noqa: E402

c.Autograde.sanitize_preprocessors = [
    q for p in Autograde.class_traits()["sanitize_preprocessors"].default()
    for q in ((RestoreCells, OverwriteCells) if p is OverwriteCells else (p,))
]
c.Autograde.autograde_preprocessors = [
    q for p in Autograde.class_traits()["autograde_preprocessors"].default()
    for q in ((HandInstructorVersions, ExecuteWithOutputCap, WarningsAreNotFailures) if p is Execute else (p,))
]

# a written answer that no one has reviewed yet says so on the feedback page (after GetGrades)
from pm_course.grading.feedback_page import AwaitingReview  # noqa: E402

c.GenerateFeedback.preprocessors = [*c.GenerateFeedback.preprocessors, AwaitingReview]
