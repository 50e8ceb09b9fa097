"""What nbgrader runs for pm-course (above ``state/``, ``lms/`` and ``sandbox/``): the student versions' release
and its checks (:mod:`~pm_course.grading.release`), each test cell judging its own function
(:mod:`~pm_course.grading.isolate`), the hidden tests' probes (:mod:`~pm_course.grading.hidden`), a damaged
notebook matched back to its cells (:mod:`~pm_course.grading.repair`), and the feedback pages made
(:mod:`~pm_course.grading.feedback_page`).
"""
