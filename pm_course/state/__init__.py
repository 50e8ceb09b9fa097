"""The course and its state, the lowest layer: the course object (:mod:`~pm_course.state.course`), its course
file (:mod:`~pm_course.state.config`), its lock and whole-file writes (:mod:`~pm_course.state.files`), and each file
of the course folder the steps read and write (the manifest, grades.csv, the fingerprints, the history, the
written answers' records, the values sent to the LMSs, the feedback pages on disk). Nothing here imports a
step, an LMS's client or the sandbox.
"""
