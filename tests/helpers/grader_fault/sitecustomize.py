"""A bug in the grader's own code, injected for tests/course/test_machine_faults.py.

On ``PYTHONPATH`` with ``PM_TEST_GRADER_FAULT=<student>``, ``pm-course grade``
raises while grading that student's notebooks, where
``PM_TEST_GRADER_FAULT_IN`` says: ``judge`` (the default), in the judge of the
hidden tests, after nbgrader has graded the notebook and written the
gradebook; ``preprocessor``, in one of the grader's nbgrader steps
(:class:`pm_course.grading.isolate.HandInstructorVersions`), inside nbgrader's
autograde. Any other program started with this ``PYTHONPATH`` (a kernel,
another command) is left alone.
"""
import os
import sys

_student = os.environ.get("PM_TEST_GRADER_FAULT")
if _student and sys.argv[1:2] == ["grade"]:
    _message = f"injected: the grader's own bug, grading {_student}"
    if os.environ.get("PM_TEST_GRADER_FAULT_IN", "judge") == "preprocessor":
        import pm_course.grading.isolate as _isolate

        _preprocess = _isolate.HandInstructorVersions.preprocess

        def preprocess(self, nb, resources):
            if resources.get("nbgrader", {}).get("student") == _student:
                raise RuntimeError(_message)
            return _preprocess(self, nb, resources)

        _isolate.HandInstructorVersions.preprocess = preprocess
    else:
        import pm_course.grading.hidden as _hidden

        _judge = _hidden.failures

        def failures(assignment, folder):
            if folder.parent.name == _student:
                raise RuntimeError(_message)
            return _judge(assignment, folder)

        _hidden.failures = failures
