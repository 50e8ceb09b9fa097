"""What each collection replaced, kept, so that ``pm-course collect --undo`` can put it back.

Before a collection changes anything it copies what it is about to replace
into ``course/history/<time>-<assignments>/``: the collected notebooks of the
assignments it covers (``submitted/<student>/<assignment>/``), the manifest
``submissions.csv``, and ``info.json`` (when, which
assignments, the command). :func:`undo` restores the newest of these; what it
replaces goes to ``course/history/undone/<time>-<assignments>/`` first, so an
undo loses nothing either. Nothing here deletes a file that has no copy.
"""
from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

from pm_course.state.course import Course, CourseError

FILES = ("submissions.csv",)  # the course's record of what was collected


def _label(assignments) -> str:
    names = sorted(assignments)
    return "+".join(names) if len(names) <= 3 else f"{len(names)}-assignments"


def _copy_state(course: Course, dest: Path, assignments) -> int:
    """Copy the course's collected notebooks of ``assignments`` and its manifest into ``dest``; notebooks copied."""
    dest.mkdir(parents=True)
    for name in FILES:
        if (course.folder / name).is_file():
            shutil.copy2(course.folder / name, dest / name)
    count = 0
    for folder in sorted(course.submitted.glob("*/*")) if course.submitted.is_dir() else ():
        if folder.is_dir() and folder.name in assignments:
            shutil.copytree(folder, dest / "submitted" / folder.parent.name / folder.name)
            count += sum(1 for _ in folder.glob("*.ipynb"))
    return count


def save(course: Course, assignments, command: str) -> Path:
    """Keep a copy of what a collection of ``assignments`` is about to replace; the folder it went to."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    dest = course.history / f"{stamp}-{_label(assignments)}"
    count = _copy_state(course, dest, assignments)
    info = {"when": datetime.now().isoformat(sep=" ", timespec="seconds"), "assignments": sorted(assignments),
            "command": command, "notebooks": count}
    (dest / "info.json").write_text(json.dumps(info, indent=1) + "\n")
    return dest


def saved(course: Course) -> list[Path]:
    """The copies :func:`save` kept, oldest first (what undo would restore is the last)."""
    if not course.history.is_dir():
        return []
    return sorted(p for p in course.history.iterdir() if p.is_dir() and (p / "info.json").is_file())


def undo(course: Course) -> str:
    """Restore what the last collection replaced; a sentence saying what was restored.

    Raises
    ------
    CourseError
        When no collection was recorded (nothing to undo).
    """
    kept = saved(course)
    if not kept:
        raise CourseError(f"nothing to undo: no collection is recorded in {course.history}")
    last = kept[-1]
    info = json.loads((last / "info.json").read_text())
    assignments = set(info["assignments"])
    # what the undone collection brought in is kept too
    aside = course.undone / last.name
    moved = _copy_state(course, aside, assignments)
    (aside / "info.json").write_text(json.dumps({**info, "undone": datetime.now().isoformat(
        sep=" ", timespec="seconds"), "notebooks": moved}, indent=1) + "\n")
    submitted = course.submitted
    for folder in sorted(submitted.glob("*/*")) if submitted.is_dir() else ():
        if folder.is_dir() and folder.name in assignments:
            shutil.rmtree(folder)
    for student in sorted(submitted.iterdir()) if submitted.is_dir() else ():
        if student.is_dir() and not any(student.iterdir()):
            student.rmdir()
    if (last / "submitted").is_dir():
        shutil.copytree(last / "submitted", submitted, dirs_exist_ok=True)
    for name in FILES:
        if (last / name).is_file():
            shutil.copy2(last / name, course.folder / name)
        else:  # there was none before that collection (its copy is in ``aside``)
            (course.folder / name).unlink(missing_ok=True)
    shutil.rmtree(last)  # its files are the course's again
    return (f"Undid `{info['command']}` ({info['when']}): restored {', '.join(sorted(assignments))} as it was"
            f" before ({info['notebooks']} collected notebook(s)). What that collection had brought in"
            f" ({moved} notebook(s)) is kept in {aside}.\nRun pm-course grade to grade the restored work.")

