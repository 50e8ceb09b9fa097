"""The commands of a term, one module each (above every other layer; :mod:`pm_course.cli` composes them):
collect, grade, review (and status), export, feedback, push, book. A step imports no other step.
"""
