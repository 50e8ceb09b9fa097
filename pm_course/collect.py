"""Submissions into the course's layout, from a folder, a Canvas or a Moodle download (``pm-course collect``).

Each source is read where it is and copied, never moved or changed:

- ``folder DIR``: ``DIR/<student>/<assignment>/<notebook>.ipynb`` (matched by
  :func:`pm_course.submissions.match`);
- ``canvas ZIP``: Canvas's "Download Submissions", one flat zip per
  assignment. The assignment is the one ``--assignment`` names, or else
  inferred from each file's name (``copying-1.ipynb`` is ``01_copying``'s
  notebook);
- ``moodle ZIP``: Moodle's "Download all submissions", a folder per student.

File names are parsed with nbgrader's ``FileNameCollectorPlugin`` (the
regular expressions are in :mod:`pm_course.lms`). For each student and
assignment the newest upload wins (the highest ``-N`` or ``(N)``, then the
latest time in the zip); every other file is listed with the reason it was
not used. A roster (``--roster``: the LMS's gradebook export or grading
worksheet) gives a row to the students who submitted nothing.

What was found goes to ``course/submitted/<student>/<assignment>/<notebook>.ipynb``
(what nbgrader grades) and the manifest ``course/submissions.csv``; collecting
an assignment again from the same LMS (or folders) replaces what the last
collection found for it, and nothing else.
"""
from __future__ import annotations

import logging
import re
import shutil
import zipfile
from datetime import datetime
from pathlib import Path, PurePosixPath

from . import lms, submissions
from .course import COURSE, CourseError, expected_notebooks
from .submissions import FAILED, GRADED, MISSING, Class, Entry

SOURCES = ("folder", "canvas", "moodle")
MANIFEST = COURSE / "submissions.csv"
SOURCES_SEEN = COURSE / "collected-from.txt"  # the folders the grader hides from student code
MAX_BYTES = 50 * 2**20  # a notebook larger than this is listed, not read


def _plugin(regexp: str):
    """nbgrader's file-name collector for one LMS's names (notebooks only), quiet about names it does not match."""
    from nbgrader.plugins import FileNameCollectorPlugin

    plugin = FileNameCollectorPlugin(named_regexp=regexp, valid_ext=[".ipynb"])
    plugin.log = logging.getLogger("pm_course.collect")
    plugin.log.addHandler(logging.NullHandler())
    plugin.log.propagate = False
    return plugin


def safe_members(zip_path: Path) -> list[zipfile.ZipInfo]:
    """The files of a zip, after refusing the whole zip if any entry points outside it.

    Raises
    ------
    CourseError
        When ``zip_path`` is not a zip, or an entry has an absolute path, a
        drive letter or ``..`` (no LMS writes those: the zip was tampered with).
    """
    if not zip_path.is_file():
        raise CourseError(f"{zip_path}: no such file")
    try:
        archive = zipfile.ZipFile(zip_path)
    except zipfile.BadZipFile:
        raise CourseError(f"{zip_path}: not a zip file (download the submissions from the LMS again)") from None
    with archive:
        members = archive.infolist()
    bad = [m.filename for m in members if m.filename.startswith(("/", "\\")) or "\\" in m.filename
           or ":" in PurePosixPath(m.filename).parts[0] or ".." in PurePosixPath(m.filename).parts]
    if bad:
        raise CourseError(f"{zip_path}: refused: entries with an absolute path or '..' would be written outside"
                          f" the course folder: {bad[:5]}")
    return [m for m in members if not m.is_dir() and not submissions._ignored(Path(m.filename))]


def _when(member: zipfile.ZipInfo) -> str:
    return datetime(*member.date_time).isoformat(sep=" ")


def from_zip(zip_path: Path, source: str, assignment: str | None, ids: dict[str, str]) -> tuple[Class, dict]:
    """Match a Canvas or Moodle zip's files to students and assignments.

    Parameters
    ----------
    zip_path : Path
        The LMS's download.
    source : {"canvas", "moodle"}
        Which LMS made it.
    assignment : str or None
        The assignment every notebook in the zip is for; None: inferred from each file's name.
    ids : dict
        LMS id -> course student id, for students already known (kept, so that an id never changes).

    Returns
    -------
    (Class, dict)
        The entries and the files not used (with ``why_unused``), and the
        zip member of each graded entry, by (student, assignment).
    """
    expected = expected_notebooks()
    by_stem = {submissions.normal(Path(nb).stem): a for a, nb in expected.items()}
    plugin = _plugin(lms.CANVAS_NAME if source == "canvas" else lms.MOODLE_NAME)
    found, candidates, others = Class(), {}, {}
    for member in safe_members(zip_path):
        name = member.filename
        parsed = plugin.collect(name)
        if parsed is None:
            found.why_unused[name] = (f"not a notebook ({Path(name).suffix or 'no extension'})"
                                      if Path(name).suffix != ".ipynb" else f"not named the way {source.title()} names submissions")
            other = re.match(lms.CANVAS_NAME if source == "canvas" else lms.MOODLE_NAME, name)
            if other and Path(name).suffix != ".ipynb":  # a student's file in place of the notebook, maybe
                others.setdefault(other["student_id"], []).append((member, other.groupdict()))
            continue
        original = Path(parsed["file_id"]).name
        target = assignment or by_stem.get(submissions.normal(Path(original).stem))
        if target is None:
            found.why_unused[name] = f"not an assignment's notebook ({original}): pass --assignment if it is"
            continue
        if member.file_size > MAX_BYTES:
            found.why_unused[name] = f"larger than {MAX_BYTES // 2**20} MB"
            continue
        display = parsed.get("last_first") or parsed.get("full_name") or ""
        student = ids.setdefault(parsed["student_id"], lms.student_id(display, parsed["student_id"]))
        key = (submissions.normal(Path(original).stem) == submissions.normal(Path(expected[target]).stem),
               submissions.resubmission(Path(original).stem), int(parsed.get("submission_id") or 0), member.date_time)
        candidates.setdefault((student, target), []).append((key, member, parsed))
    chosen = {}
    for (student, target), options in sorted(candidates.items()):
        options.sort(key=lambda o: o[0])
        key, member, parsed = options[-1]
        original = Path(parsed["file_id"]).name
        entry = Entry(student, target, name=(parsed.get("full_name") or parsed.get("last_first") or "").strip(),
                      lms=source, lms_id=parsed["student_id"], late=bool(parsed.get("late")),
                      submitted=_when(member), source=member.filename)
        if original != expected[target]:
            entry.reason = f"graded {original} as {target}/{expected[target]}"
            found.warnings.append(f"{student}/{target}: grading {member.filename} as {target}/{expected[target]}")
        for _, older, _ in options[:-1]:
            found.why_unused[older.filename] = f"an older upload: {student}'s newest, {member.filename}, is graded"
        found.entries.append(entry)
        chosen[(student, target)] = member
    named = {e.assignment for e in found.entries}
    _other_files(found, others, assignment or (named.pop() if len(named) == 1 else None), ids, source)
    return found, chosen


def _other_files(found: Class, others: dict, assignment: str | None, ids: dict, source: str) -> None:
    """A student who handed in files but no notebook: "not submitted", naming what they handed in instead
    (so that the student reads "you submitted report.pdf, not a notebook", not "no notebook was submitted")."""
    if assignment is None:
        return
    have = {e.lms_id for e in found.entries if e.assignment == assignment}
    for lms_id, files in sorted(others.items()):
        if lms_id in have:
            continue
        member, parsed = max(files, key=lambda f: f[0].date_time)
        display = parsed.get("last_first") or parsed.get("full_name") or ""
        names = ", ".join(sorted({Path(p["file_id"]).name for _, p in files}))
        found.entries.append(Entry(ids.setdefault(lms_id, lms.student_id(display, lms_id)), assignment,
                                   status=MISSING, reason=f"submitted {names}, not a notebook",
                                   name=display.strip(), lms=source, lms_id=lms_id,
                                   late=bool(parsed.get("late")), submitted=_when(member), source=member.filename))


def _read_notebook(data: bytes | Path):
    """The notebook in ``data``, with duplicated graded cells dropped; (notebook, dropped ids) or (None, why)."""
    import nbformat

    from .grade import drop_duplicate_cells

    try:
        text = data.read_text(encoding="utf-8") if isinstance(data, Path) else data.decode("utf-8")
        nb = nbformat.reads(text, as_version=4)
    except Exception as err:  # noqa: BLE001 -- any unreadable file
        return None, f"not a notebook ({type(err).__name__}: {err})"[:200]
    return nb, drop_duplicate_cells(nb)


def _store(entry: Entry, data: bytes | Path) -> None:
    """Copy an entry's notebook to nbgrader's submitted folder (only nbgrader's copy loses duplicated cells)."""
    import nbformat

    nb, dropped = _read_notebook(data)
    if nb is None:
        entry.status, entry.reason = FAILED, dropped
        return
    dest = COURSE / "submitted" / entry.student / entry.assignment
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    name = expected_notebooks()[entry.assignment]
    for gid in dropped:
        print(f"  {entry.student}/{entry.assignment}: dropped a duplicate of cell {gid!r} in {name}")
    if dropped or not isinstance(data, Path):
        nbformat.write(nb, dest / name)
    else:
        shutil.copy(data, dest / name)  # copied, never moved


def collect(source: str, path: Path, roster: Path | None = None, assignment: str | None = None) -> list[Entry]:
    """Collect submissions into the course folder; print what was used, renamed and left out.

    Parameters
    ----------
    source : {"folder", "canvas", "moodle"}
        Where they come from.
    path : Path
        The folder, or the LMS's zip.
    roster : Path, optional
        The LMS's gradebook export (Canvas) or grading worksheet (Moodle): its
        students who submitted nothing get a row ("not submitted").
    assignment : str, optional
        The assignment a zip is for (a Canvas or Moodle download is one assignment's).

    Returns
    -------
    list of Entry
        The whole manifest after this collection.
    """
    if source not in SOURCES:
        raise CourseError(f"--from must be one of {SOURCES}, not {source!r}")
    expected = expected_notebooks()
    if assignment is not None and assignment not in expected:
        raise CourseError(f"--assignment {assignment!r} is not an assignment: expected one of {sorted(expected)}")
    if source == "folder" and roster is not None:
        raise CourseError("--roster goes with --from canvas or --from moodle (a folder names its students itself)")
    path = path.resolve()
    old = submissions.read_manifest(MANIFEST)
    if source == "folder":
        if not path.is_dir():
            raise CourseError(f"SUBMISSIONS={path} is not a folder")
        found = submissions.match(path, expected)
        if not any(e.file for e in found.entries):
            raise CourseError(f"no submissions found: expected {path}/<student>/<assignment>/<notebook>.ipynb"
                              f" with <assignment> one of {sorted(expected)}")
        covered = set(expected)
        data = {(e.student, e.assignment): e.file for e in found.entries if e.file}
        unused = {str(p.relative_to(path)): "not matched to an assignment's notebook" for p in found.unused}
    else:
        ids = {e.lms_id: e.student for e in old if e.lms == source and e.lms_id}
        people = lms.roster(roster, source) if roster else []
        for person in people:
            ids.setdefault(person.lms_id, lms.student_id(person.name, person.lms_id))
        found, members = from_zip(path, source, assignment, ids)
        covered = {assignment} if assignment else {e.assignment for e in found.entries}
        if not covered:
            raise CourseError(f"{path}: no notebook of an assignment found (expected {sorted(expected.values())},"
                              " or pass --assignment)")
        with zipfile.ZipFile(path) as archive:
            data = {k: archive.read(m) for k, m in members.items()}
        unused = found.why_unused
        _add_roster(found, people, covered, ids, source)
    for entry in found.entries:
        if entry.status == GRADED and (entry.student, entry.assignment) in data:
            _store(entry, data[(entry.student, entry.assignment)])
    lms_name = "" if source == "folder" else source
    replaced = [e for e in old if e.assignment in covered and e.lms == lms_name]
    new = {(e.student, e.assignment) for e in found.entries if e.status == GRADED}
    for e in replaced + found.entries:  # what an earlier collection found for these assignments goes
        if (e.student, e.assignment) not in new:
            shutil.rmtree(COURSE / "submitted" / e.student / e.assignment, ignore_errors=True)
    entries = [e for e in old if e not in replaced] + found.entries
    submissions.write_manifest(entries, MANIFEST)
    seen = set(SOURCES_SEEN.read_text().splitlines()) if SOURCES_SEEN.is_file() else set()
    SOURCES_SEEN.write_text("".join(f"{p}\n" for p in sorted(seen | {str(path if path.is_dir() else path.parent)})))
    _report(found, unused, covered, source, path)
    return entries


def _add_roster(found: Class, people: list, covered: set, ids: dict, source: str) -> None:
    """Give each roster student a row for each collected assignment they did not submit; note who is not on it."""
    have = {(e.lms_id, e.assignment) for e in found.entries}
    on_roster = {p.lms_id for p in people}
    for person in people:
        for a in sorted(covered):
            if (person.lms_id, a) not in have:
                found.entries.append(Entry(ids[person.lms_id], a, status=MISSING, name=person.name, lms=source,
                                           lms_id=person.lms_id, late=person.late, submitted=person.submitted))
        for e in found.entries:  # the worksheet's word on lateness and time, where the zip has none
            if e.lms_id == person.lms_id and source == "moodle":
                e.late = e.late or person.late
                e.name = person.name or e.name
    if people:
        for e in found.entries:
            if e.lms_id not in on_roster:
                found.warnings.append(f"{e.student}/{e.assignment}: {source.title()} id {e.lms_id} is not on the"
                                      " roster (graded all the same)")


def _report(found: Class, unused: dict, covered: set, source: str, path: Path) -> None:
    for warning in found.warnings:
        print(f"  note: {warning}")
    got = [e for e in found.entries if e.status == GRADED]
    late = sum(e.late for e in got)
    print(f"Collected {len(got)} notebooks of {len({e.student for e in got})} students from {path}"
          f" ({', '.join(sorted(covered))}){f'; {late} late' if late else ''}.")
    for e in found.entries:
        if e.status == FAILED:
            print(f"  {e.student}/{e.assignment}: could not be graded: {e.reason}")
    missing = sorted(f"{e.student}/{e.assignment}" for e in found.entries if e.status == MISSING)
    if missing and source != "folder":
        print(f"Not submitted: {', '.join(missing)}")
    if unused:
        print("Not used (not matched to an assignment's notebook):" if source == "folder" else "Not used:")
        for name, why in sorted(unused.items()):
            print(f"  {name}" + ("" if source == "folder" else f": {why}"))
