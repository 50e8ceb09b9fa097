"""Each feedback page packed as its LMS takes it back (``pm-course feedback``).

The pages themselves are made when a notebook is graded
(:mod:`pm_course.grading.feedback_page`); this step reads them, puts the LMS
comment's text at their top (:mod:`pm_course.lms.outcome`, as ``push`` does),
and packs them, one zip per LMS and assignment.
"""
from __future__ import annotations

import io
import re
import shutil
import zipfile
from pathlib import Path

from pm_course import lms
from pm_course.lms.outcome import Late, comment, fresh, notice_page, with_summary
from pm_course.state import files as state
from pm_course.state import submissions
from pm_course.state.course import Course, expected_notebooks
from pm_course.state.grades_csv import entries as grades
from pm_course.state.pages import is_test_student, remove_stale
from pm_course.state.submissions import GRADED, MISSING


def canvas_prefix(source: str) -> str | None:
    """The ``<name>_[LATE_]<user id>_<submission id>_`` prefix of a Canvas download's file name (None if not one).

    Canvas's "Re-upload submissions" attaches a file to the submission its
    name's user id and submission id point to.

    >>> canvas_prefix("nunezjose_LATE_101_9001_subspace-1.ipynb")
    'nunezjose_LATE_101_9001_'
    """
    found = re.match(lms.CANVAS_NAME, Path(source).name)
    return found.group(0)[: found.start("file_id")] if found else None


def _write_zip(path: Path, files: list[tuple[str, str]]) -> None:
    """Write a zip whole, then put it in place: an interrupted run leaves the old zip, never half a new one."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files:
            z.writestr(name, text)
    state.write_bytes(path, buffer.getvalue())


def pack_feedback(course: Course, out: Path | None = None, late: Late | None = None, force: bool = False
                  ) -> list[Path]:
    """Pack each student's feedback page as their LMS takes it back; the zips written.

    - Canvas: ``feedback-canvas-<assignment>.zip``, for the assignment's
      "Re-upload submissions": each page named with the download's
      ``<name>_<user id>_<submission id>_`` prefix (as collect recorded it), so
      that Canvas attaches it to that student's submission as a comment.
    - Moodle: ``feedback-moodle-<assignment>.zip``, one folder per student as in
      the download (``<Full name>_<participant id>_assignsubmission_file_/``), to
      upload with "Upload multiple feedback files in a zip".
    - A folder: ``course/feedback/`` is already one folder per student.

    Each page stands alone (its maths is MathML, it loads nothing) and opens
    with the summary the LMS comment would carry. A zip is made whole from
    grades.csv each time: a student whose row is no longer graded has no page
    in it (and no page left in ``course/feedback/``), and Canvas's test
    student gets none. A student who handed in another file in place of the
    notebook gets a page saying so.
    """
    late = late or Late.of(course.settings)
    out = out or course.export
    collected = {(e.student, e.assignment): e for e in submissions.read_manifest(course.manifest)}
    entries = grades(course.grades)
    late.check_extensions({e.student for e in entries})
    entries = fresh(course, entries, force, "feedback")  # no page of work since collected again, undone or changed
    for e in entries:  # what the manifest says of the student's work now (not submitted, could not be graded)
        now = collected.get((e.student, e.assignment))
        if now is not None and now.status != GRADED and e.status == GRADED:
            e.status, e.reason = now.status, now.reason
    late.check(entries)
    removed = remove_stale(course, entries)
    sources = {key: e.source for key, e in collected.items()}
    made, missing, skipped, zips = [], [], [], {}
    for e in sorted(entries, key=lambda e: (e.assignment, e.student)):
        if not e.lms or is_test_student(e):
            continue
        stem = Path(expected_notebooks()[e.assignment]).stem
        src = sources.get((e.student, e.assignment), "")
        if e.status == GRADED:
            page = course.page(e.student, e.assignment)
            if not page.is_file():
                missing.append(f"{e.student}/{e.assignment}")
                continue
            final, note = late.apply(e)
            text = with_summary(page.read_text(encoding="utf-8"), comment(e, final, note))
        elif src and e.status in (MISSING, submissions.FAILED):  # handed in, nothing graded: say why
            # (not "not graded yet" nor a machine error: those are the instructor's to fix, never a page)
            text = notice_page(e, comment(e, None, ""))
        else:
            continue
        if e.lms == "canvas":
            prefix = canvas_prefix(src)
            if prefix is None:
                skipped.append(f"{e.student}/{e.assignment}")
                continue
            named = re.match(lms.CANVAS_NAME, Path(src).name)
            if e.lms_id and named["student_id"] != e.lms_id:  # a group's upload: each member's own user id
                prefix = prefix[:named.start("student_id")] + e.lms_id + prefix[named.end("student_id"):]
            name = f"{prefix}feedback-{stem}.html"
        else:
            folder = src.split("/")[0] if "/" in src else f"{e.name}_{e.lms_id}_assignsubmission_file_"
            name = f"{folder}/{stem}.html"
        zips.setdefault((e.lms, e.assignment), []).append((name, text))
    for (kind, assignment), pages in sorted(zips.items()):
        path = out / f"feedback-{kind}-{assignment}.zip"
        _write_zip(path, pages)
        made.append(path)
    for kind in lms.LMSS:  # a zip left from an earlier run for an assignment with no page now
        for assignment in expected_notebooks():
            old = out / f"feedback-{kind}-{assignment}.zip"
            if (kind, assignment) not in zips and old.is_file():
                old.unlink()
                print(f"  removed {old}: no feedback page for {assignment} now")
    legacy = out / "feedback-canvas"  # the folder per student of earlier versions: its pages may be stale
    if legacy.is_dir() and {p.name for p in legacy.iterdir()} <= {*expected_notebooks(), "mathjax"}:
        shutil.rmtree(legacy)
        print(f"  removed {legacy} (a folder per student, from an earlier version): the zips replace it")
    for path in made:
        what = "Assignment > Re-upload submissions" if "-canvas-" in path.name else \
            "Assignment > Grading action > Upload multiple feedback files in a zip"
        print(f"Feedback: {path} ({what})")
    if removed:
        print(f"  removed {len(removed)} feedback page(s) of work no longer graded: {', '.join(removed)}")
    if missing:
        print(f"  no feedback page (grade again to make it): {', '.join(missing)}")
    if skipped:
        print(f"  not packed (no Canvas download file name was recorded; collect from Canvas's zip):"
              f" {', '.join(skipped)}")
    if not made:
        print(f"No LMS feedback to pack: students collected from a folder have theirs in {course.feedback}")
    return made
