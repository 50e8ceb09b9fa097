"""Submissions into the course's layout, from a folder, a Canvas or a Moodle download (``pm-course collect``).

Each source is read where it is and copied, never moved or changed:

- ``folder DIR``: ``DIR/<student>/<assignment>/<notebook>.ipynb`` (matched by
  :func:`pm_course.state.submissions.match`);
- ``canvas ZIP``: Canvas's "Download Submissions", one flat zip per
  assignment. The assignment is the one ``--assignment`` names, or else
  the one whose graded cells the notebook has (their nbgrader ids), or else
  inferred from the file's name (``copying-1.ipynb`` is ``01_copying``'s
  notebook);
- ``moodle ZIP``: Moodle's "Download all submissions", a folder per student.

A Canvas group assignment's download names each entry by the group and the
member who handed it in: with ``--groups FILE`` each group's upload is every
member's; without it, it is refused (:func:`_group_work`).

File names are parsed as nbgrader's ``FileNameCollectorPlugin`` parses them
(:func:`file_name_fields`; the regular expressions are in :mod:`pm_course.lms`).
For each student and assignment the newest upload wins (the highest ``-N``
or ``(N)``, then the latest time in the zip); every other file is listed
with the reason it was not used. A roster (``--roster``: the LMS's gradebook export or grading
worksheet) gives a row to the students who submitted nothing, and Moodle's
worksheet gives each submission's real time ("Last modified (submission)")
and late status. A zip's entry dates are never taken as submission times
(an LMS dates every entry when the zip is made): a Canvas download says only
which work is late (its ``LATE_`` or ``late_`` mark).

What was found goes to ``course/submitted/<student>/<assignment>/<notebook>.ipynb``
(what nbgrader grades) and the manifest ``course/submissions.csv``. A
collection adds: it replaces, per student, what it brings (each student
replaced is printed), and the students not in it keep their work (a second
section's download beside the first); ``--replace`` replaces everything
collected for the assignment from that LMS (or folders).

No mistake loses work: the whole zip is read (every CRC checked) and every
notebook matched before anything changes. A damaged zip, one with no notebook
of the assignment, or one whose notebooks are another assignment's (by their
graded cells, :func:`belongs_elsewhere`) is refused and changes nothing; a
single student's notebook of another assignment is "could not be graded",
saying whose. What a collection replaces is first copied to
``course/history/`` (:mod:`pm_course.state.history`), and ``collect --undo`` puts
it back.
"""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import zipfile
from pathlib import Path, PurePosixPath

from pm_course.state import history
from pm_course import lms
from pm_course.state import files as state
from pm_course.state import submissions
from pm_course.state.course import Course, CourseError, exercises_dir, expected_notebooks, source_notebook
from pm_course.state.submissions import FAILED, GRADED, MISSING, Class, Entry

SOURCES = ("folder", "canvas", "moodle")
MAX_BYTES = 50 * 2**20  # a notebook larger than this is graded with its saved outputs stripped
MAX_READ = 20 * MAX_BYTES  # a file larger than this is listed, not read (a zip bomb's share of memory)
LINK = re.compile(r"https?://[^\s\"'<>]+")  # a link handed in for the notebook (a .url, .webloc, .txt)


def file_name_fields(regexp: str, name: str) -> dict | None:
    """The fields of a file's name, as nbgrader's ``FileNameCollectorPlugin.collect`` reads them.

    None when ``name`` is not a notebook (its extension is not ``.ipynb``) or
    ``regexp`` (which names the groups ``student_id`` and ``file_id``) does not
    match its beginning; else the match's named groups. The same rule as
    nbgrader's plugin (``tests/course/test_collect.py`` checks that they agree
    name by name), without importing nbgrader, which takes most of a
    ``collect``'s CPU time: about 0.3 s of 0.4, for every assignment collected.

    >>> file_name_fields(lms.CANVAS_NAME, "lovelaceada_1001_9001_copying.ipynb")["student_id"]
    '1001'
    >>> file_name_fields(lms.CANVAS_NAME, "lovelaceada_1001_9001_notes.pdf") is None
    True
    """
    if os.path.splitext(name)[1] != ".ipynb":  # the plugin's valid_ext test
        return None
    match = re.match(regexp, name)
    if not match or not match.groups():
        return None
    return match.groupdict()


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
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:  # truncated, or not a zip at all
        raise CourseError(f"{zip_path}: not a zip file, or a damaged one ({err}): download the submissions from"
                          " the LMS again; nothing was changed") from None
    with archive:
        members = archive.infolist()
    bad = [m.filename for m in members if m.filename.startswith(("/", "\\")) or "\\" in m.filename
           or ":" in PurePosixPath(m.filename).parts[0] or ".." in PurePosixPath(m.filename).parts]
    if bad:
        raise CourseError(f"{zip_path}: refused: entries with an absolute path or '..' would be written outside"
                          f" the course folder: {bad[:5]}")
    return [m for m in members if not m.is_dir() and not submissions._ignored(Path(m.filename))]


def read_zip(zip_path: Path) -> dict[str, bytes]:
    """Every file of a zip read in full (CRC checked), by name: a damaged one stops the collection.

    Files larger than :data:`MAX_READ` are left out (they are listed, not read); a notebook larger than
    :data:`MAX_BYTES` is read, and graded without its saved outputs (:func:`_prepare`).

    Raises
    ------
    CourseError
        Naming the zip and the damaged file (a bad CRC, a truncated or unreadable entry).
    """
    import zlib

    members = safe_members(zip_path)
    contents = {}
    with zipfile.ZipFile(zip_path) as archive:
        for member in members:
            if member.file_size > MAX_READ:
                continue
            try:
                contents[member.filename] = archive.read(member)
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError,
                    ValueError) as err:
                raise CourseError(f"{zip_path}: {member.filename} is damaged ({err}): download the submissions"
                                  " from the LMS again; nothing was changed") from None
    return contents


def _source_ids() -> dict[str, frozenset]:
    """Each assignment's graded and solution cell ids (grade_id), from its source notebook."""
    stamps = tuple((p, p.stat().st_mtime_ns) for p in sorted(exercises_dir().glob("*/*.ipynb")))
    return _ids_of_sources(exercises_dir(), stamps)


@functools.lru_cache(maxsize=8)
def _ids_of_sources(root: Path, stamps: tuple) -> dict[str, frozenset]:
    return {a: frozenset(graded_ids(source_notebook(a).read_bytes())) for a in expected_notebooks()}


def graded_ids(data: bytes | Path | None) -> set[str]:
    """The grade_ids of a notebook's graded and solution cells (empty when it has none, or is no notebook)."""
    try:
        nb = json.loads(data.read_bytes() if isinstance(data, Path) else data or b"")
        cells = nb["cells"]
        return {c["metadata"]["nbgrader"]["grade_id"] for c in cells
                if isinstance(c.get("metadata", {}).get("nbgrader"), dict)
                and (c["metadata"]["nbgrader"].get("grade") or c["metadata"]["nbgrader"].get("solution"))
                and isinstance(c["metadata"]["nbgrader"].get("grade_id"), str)}
    except (ValueError, TypeError, KeyError, AttributeError, OSError):
        return set()


def owner(data: bytes | Path | None) -> str | None:
    """The assignment a notebook is, by its graded cells' ids (not its name); None when no id is known.

    The assignment whose source shares the most graded and solution cell ids
    with the notebook (a notebook whose metadata was stripped has none: it is
    matched back to its cells when graded, :mod:`pm_course.grading.repair`).
    """
    ids = graded_ids(data)
    shared = {a: len(ids & source) for a, source in _source_ids().items()}
    best = max(shared, key=lambda a: (shared[a], a), default=None)
    return best if best is not None and shared[best] > 0 else None


def belongs_elsewhere(data: bytes | Path | None, assignment: str) -> str | None:
    """The other assignment a notebook is, when its cells say it is not ``assignment``'s (else None)."""
    ids = graded_ids(data)
    mine = len(ids & _source_ids().get(assignment, frozenset()))
    other = owner(data)
    return other if other not in (None, assignment) and len(ids & _source_ids()[other]) > mine else None


def _refuse_anonymous(zip_path: Path) -> None:
    """Refuse Canvas's download of an assignment graded anonymously: its file names say no student."""
    anonymous = sorted(m.filename for m in safe_members(zip_path) if re.match(lms.CANVAS_ANONYMOUS, m.filename))
    if anonymous:
        raise CourseError(
            f"{zip_path} is Canvas's download of an assignment graded anonymously ({len(anonymous)} file(s) named"
            f" anon_<anonymous id>_..., e.g. {anonymous[0]}): it says no student's name or Canvas id, and no"
            " gradebook export gives the anonymous ids, so no grade could reach the right student. Nothing was"
            " collected. In Canvas, turn off 'Graders cannot view student names' in the assignment's settings"
            " (or wait until its grades are posted), then Download Submissions again: that zip names each file"
            " <name>_<user id>_<submission id>_..., which pm-course collect --from canvas reads.")


def from_zip(zip_path: Path, source: str, assignment: str | None, ids: dict[str, str],
             contents: dict[str, bytes] | None = None, course: Course | None = None) -> tuple[Class, dict]:
    """Match a Canvas or Moodle zip's files to students and assignments.

    Parameters
    ----------
    zip_path : Path
        The LMS's download.
    source : {"canvas", "moodle"}
        Which LMS made it.
    assignment : str or None
        The assignment every notebook in the zip is for; None: inferred from each notebook's graded
        cells, else its file's name.
    ids : dict
        LMS id -> course student id, for students already known (kept, so that an id never changes).
    contents : dict, optional
        The zip's files as :func:`read_zip` read them (default: read here).
    course : Course, optional
        The course whose student versions tell a blank notebook (default: the sources' alone).

    Returns
    -------
    (Class, dict)
        The entries and the files not used (with ``why_unused``), and the
        zip member of each graded entry, by (student, assignment).
    """
    expected = expected_notebooks()
    by_stem = {submissions.normal(Path(nb).stem): a for a, nb in expected.items()}
    regexp = lms.CANVAS_NAME if source == "canvas" else lms.MOODLE_NAME
    found, candidates, foreign, others = Class(), {}, {}, {}
    contents = read_zip(zip_path) if contents is None else contents
    if source == "canvas":
        _refuse_anonymous(zip_path)
    origin = {}  # a notebook unpacked from a student's zip -> that zip's name in the download
    for member in safe_members(zip_path):
        name = member.filename
        parsed = file_name_fields(regexp, name)
        if parsed is None and Path(name).suffix.lower() == ".zip" and re.match(regexp, name):
            inner = _one_notebook(contents.get(name))  # a zip holding exactly the notebook: unpacked
            if isinstance(inner, tuple):
                parsed = {**re.match(regexp, name).groupdict(), "file_id": inner[0]}
                member, name = _unpacked(member, inner, contents, origin)
        if parsed is None:
            found.why_unused[name] = (f"not a notebook ({Path(name).suffix or 'no extension'})"
                                      if Path(name).suffix != ".ipynb" else f"not named the way {source.title()} names submissions")
            other = re.match(regexp, name) or (re.match(lms.CANVAS_ONLINE, name) if source == "canvas" else None)
            if other and Path(name).suffix != ".ipynb":  # a student's file in place of the notebook, maybe
                others.setdefault(other["student_id"], []).append((member, other.groupdict()))
            continue
        original = Path(parsed["file_id"]).name
        if member.file_size > MAX_READ:
            found.why_unused[name] = f"larger than {MAX_READ // 2**20} MB: not read"
            continue
        by_name = by_stem.get(submissions.normal(Path(original).stem))
        by_cells = owner(contents.get(name))
        # the cells decide, not the name; --assignment decides which assignment is collected
        target = assignment or by_cells or by_name
        if target is None:
            found.why_unused[name] = f"not an assignment's notebook ({original}): pass --assignment if it is"
            continue
        display = parsed.get("last_first") or parsed.get("full_name") or ""
        student = ids.setdefault(parsed["student_id"], lms.student_id(display, parsed["student_id"]))
        elsewhere = belongs_elsewhere(contents.get(name), target)
        if elsewhere:
            found.why_unused[name] = (f"{elsewhere}'s notebook (its graded cells are {elsewhere}'s), not"
                                      f" {target}'s")
            found.foreign[name] = elsewhere
            found.foreign_students[(student, target)] = elsewhere
            foreign.setdefault((student, target), (member, parsed, elsewhere))
            continue
        if by_name and by_name != target and not assignment:
            found.warnings.append(f"{student}/{target}: {name} is named like {by_name}'s notebook, but its"
                                  f" graded cells are {target}'s: collected as {target}")
        key = (submissions.normal(Path(original).stem) == submissions.normal(Path(expected[target]).stem),
               submissions.resubmission(Path(original).stem), int(parsed.get("submission_id") or 0), member.date_time)
        candidates.setdefault((student, target), []).append((key, member, parsed))
    chosen = {}
    for (student, target), options in sorted(candidates.items()):
        options.sort(key=lambda o: o[0])
        pick, why, others_ = _choose(options, target, contents, course)
        if len(options) > 1:  # what collect --choose may grade in place of the one picked here
            found.choices[(student, target)] = {Path(o[2]["file_id"]).name: (
                origin.get(o[1].filename, o[1].filename), contents.get(o[1].filename)) for o in options}
        key, member, parsed = pick or options[-1]
        original = Path(parsed["file_id"]).name
        where = origin.get(member.filename, member.filename)
        # never the zip entry's date: an LMS dates every entry when the zip is made (Moodle's real time
        # comes from its worksheet, :func:`_add_roster`; Canvas's download has none)
        entry = Entry(student, target, name=(parsed.get("full_name") or parsed.get("last_first") or "").strip(),
                      lms=source, lms_id=parsed["student_id"], late=bool(parsed.get("late")), source=where)
        if why == TWO:  # both hold work: the instructor chooses (collect --choose), nothing is guessed
            names = sorted(Path(o[2]["file_id"]).name for o in options)
            entry.status = FAILED
            entry.reason = (f"two notebooks, {' and '.join(names)}, both hold work: choose the"
                            f" one to grade with pm-course collect --choose {student} {target} FILE (FILE one of"
                            f" {', '.join(names)})")
            for _, other, _ in options:
                found.why_unused[origin.get(other.filename, other.filename)] = (
                    f"one of two notebooks of {student} that both hold work (pm-course collect --choose)")
            found.entries.append(entry)
            continue
        notes = []
        if where != member.filename:
            notes.append(f"unpacked {original} from {Path(where).name}")
        if original != expected[target]:
            notes.append(f"graded {original} as {target}/{expected[target]}")
            found.warnings.append(f"{student}/{target}: grading {where} as {target}/{expected[target]}")
        if why and notes and notes[-1].startswith(f"graded {original} as ") and why.startswith(f"graded {original}"):
            notes[-1] += why[len(f"graded {original}"):]  # one sentence: what was graded, as what, and not what
        elif why:
            notes.append(why)
        entry.reason = "; ".join(notes)
        newest = len({submissions.normal(Path(o[2]["file_id"]).stem) for o in options}) == 1
        for _, older, _ in others_:
            found.why_unused[origin.get(older.filename, older.filename)] = (
                f"an older upload: {student}'s newest, {where}, is graded" if newest
                else f"not graded: {student}'s {where} is graded")
        found.entries.append(entry)
        chosen[(student, target)] = member
    for (student, target), (member, parsed, elsewhere) in sorted(foreign.items(), key=lambda kv: kv[0]):
        if (student, target) not in chosen:  # nothing of the assignment's own: the student sent the wrong file
            display = (parsed.get("full_name") or parsed.get("last_first") or "").strip()
            found.entries.append(Entry(
                student, target, status=FAILED, name=display, lms=source, lms_id=parsed["student_id"],
                late=bool(parsed.get("late")), source=member.filename,
                reason=f"submitted {elsewhere}'s notebook ({Path(parsed['file_id']).name}), not {target}'s"))
    named = {e.assignment for e in found.entries}
    _other_files(found, others, assignment or (named.pop() if len(named) == 1 else None), ids, source, contents)
    return found, chosen


TWO = "two notebooks"  # what :func:`_choose` says when two notebooks of one submission both hold work


def _choose(options: list, target: str, contents: dict, course: Course | None = None) -> tuple:
    """Which of a student's notebooks for ``target`` is graded: (the option, why, the others).

    ``options`` are sorted oldest first. Re-uploads of one name (Canvas's
    ``-N``, a browser's ``(N)``): the newest, as always (``why`` is "" unless
    an older one holds work and the newest is blank: then it says so, and
    ``collect --choose`` grades the older). Notebooks of different names (a
    blank ``copying.ipynb`` beside the finished ``Copy of copying.ipynb``):
    the one that is not the blank release, both named in ``why``; when two
    of different names hold work, none: ``why`` is :data:`TWO` (the
    instructor chooses).
    """
    if len(options) == 1:
        return options[0], "", []
    file = lambda o: Path(o[2]["file_id"]).name  # noqa: E731
    family = lambda opts: {submissions.normal(Path(file(o)).stem) for o in opts}  # noqa: E731
    work = [o for o in options if holds_work(contents.get(o[1].filename), target, course)]
    if len(family(options)) == 1 or not work:  # one name uploaded again (or nothing but blanks): the newest
        pick, rest = options[-1], options[:-1]
        if work and pick not in work:
            return pick, (f"graded {file(pick)}, the newest upload, which is blank as released; an older one,"
                          f" {file(work[-1])}, holds work (pm-course collect --choose grades it)"), rest
        return pick, f"graded {file(pick)}, the newest upload ({', '.join(map(file, rest))}: older)", rest
    if len(family(work)) > 1:
        return None, TWO, options  # copying.ipynb and "Copy of copying.ipynb", both with answers
    pick = work[-1]
    rest = [o for o in options if o is not pick]
    blank = [file(o) for o in rest if o not in work]
    older = [file(o) for o in rest if o in work]
    why = f"graded {file(pick)}" + (f", not {', '.join(blank)} (the blank notebook as released)" if blank else "") \
        + (f"; {', '.join(older)}: an older upload" if older else "")
    return pick, why, rest


def holds_work(data: bytes | None, assignment: str, course: Course | None = None) -> bool:
    """Whether a notebook holds anything the student wrote: a cell that is not the assignment's blank release.

    Only what a student writes counts: the solution cells and the cells they added (no nbgrader metadata).
    The instructor's own cells (prompts, checks, locked cells) never do, so a blank copy of an earlier
    release whose prompt was fixed since is blank too. Compared by the cells' text (whitespace aside;
    outputs, metadata and ids never count): a cell is the release's when its text is one of a student
    version's cells, this release's or an earlier one's (``course/release-history``), or a solution cell
    left as released (``raise NotImplementedError()``, "YOUR ANSWER HERE"). Unreadable: True (never dropped
    as blank).
    """
    try:
        cells = json.loads(data or b"")["cells"]
        texts = set()
        for c in cells:
            meta = (c.get("metadata") or {}).get("nbgrader") or {}
            if meta and not meta.get("solution"):
                continue  # the instructor's cell: a prompt, a check, a locked cell
            texts.add(_plain("".join(c["source"]) if isinstance(c["source"], list) else c["source"]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return True
    return bool(texts - _released_texts(course, assignment) - {""})


STUB_LINES = re.compile(r"^\s*(# YOUR CODE HERE|raise NotImplementedError\(\)|YOUR ANSWER HERE)\s*$", re.M)
HIDDEN_TESTS = re.compile(r"[ \t]*### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS[^\n]*\n?", re.S)


def _plain(text: str) -> str:
    """A cell's text as :func:`holds_work` compares it: no stub lines, no hidden tests, spaces collapsed."""
    return " ".join(STUB_LINES.sub("", HIDDEN_TESTS.sub("", text)).split())


def _released_texts(course: Course | None, assignment: str) -> frozenset:
    """Every cell text of the assignment's student versions, this one and those released before (solutions and
    hidden tests out), as :func:`_plain`."""
    paths = [source_notebook(assignment)]
    if course is not None:
        paths.append(course.release / assignment / expected_notebooks()[assignment])  # nbgrader's own, if made
        paths += sorted((course.release_history / assignment).glob("*.ipynb"))  # what earlier classes were given
    return _texts_of(tuple((p, p.stat().st_mtime_ns, p.stat().st_size) for p in paths if p.is_file()))


@functools.lru_cache(maxsize=32)
def _texts_of(stamps: tuple) -> frozenset:
    """:func:`_released_texts` of these versions of the files (read once per version, not per student)."""
    from pm_course.state.written import SOLUTION

    out = set()
    for path, _, _ in stamps:
        for cell in json.loads(path.read_bytes())["cells"]:
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            out.add(_plain(SOLUTION.sub("", HIDDEN_TESTS.sub("", text))))
    return frozenset(out)


def _one_notebook(data: bytes | None):
    """The one notebook a student's zip holds: (its name, its bytes); else why not (a sentence)."""
    import io

    try:
        with zipfile.ZipFile(io.BytesIO(data or b"")) as inner:
            notebooks = [m for m in inner.infolist() if not m.is_dir() and m.filename.lower().endswith(".ipynb")
                         and not submissions._ignored(Path(m.filename)) and "__MACOSX" not in m.filename
                         and not PurePosixPath(m.filename).name.startswith("._")]
            if len(notebooks) != 1 or notebooks[0].file_size > MAX_READ:
                names = ", ".join(PurePosixPath(m.filename).name for m in notebooks[:4])
                return f"a zip holding {len(notebooks)} notebooks{f' ({names})' if names else ''}, not one"
            return PurePosixPath(notebooks[0].filename).name, inner.read(notebooks[0])
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError, NotImplementedError) as err:
        return f"a damaged zip ({type(err).__name__})"


def _unpacked(member, inner: tuple, contents: dict, origin: dict):
    """The notebook of a student's zip as if it were the download's own file: (its member, its name)."""
    name = f"{member.filename}/{inner[0]}"
    info = zipfile.ZipInfo(name, date_time=member.date_time)
    info.file_size = len(inner[1])
    contents[name] = inner[1]
    origin[name] = member.filename
    return info, name


def _cannot_be_graded(names: list[str], files: list, contents: dict, assignment: str) -> str:
    """Why what a student handed in in place of the notebook cannot be graded (what they read, in grades.csv)."""
    notebook = expected_notebooks()[assignment]
    for (member, parsed) in files:
        data = contents.get(member.filename) or b""
        suffix = Path(member.filename).suffix.lower()
        link = LINK.search(data[:100_000].decode("utf-8", "replace")) if suffix in (
            ".url", ".webloc", ".txt", ".html", ".htm", ".desktop", "") else None
        if link:
            return (f"submitted a link ({link.group(0)[:120]}) in {Path(parsed['file_id']).name}, not the notebook:"
                    f" a link cannot be graded (what it points to can change after the deadline); submit {notebook}"
                    " (in Colab: File > Download > Download .ipynb)")
        if suffix == ".py":
            return (f"submitted {Path(parsed['file_id']).name}, a Python script, not the notebook: it cannot be"
                    f" graded; submit {notebook} (Jupyter: File > Download)")
        if suffix == ".zip":
            why = _one_notebook(data)
            if isinstance(why, str):
                return f"submitted {Path(parsed['file_id']).name}, {why}: it cannot be graded; submit {notebook}"
    return f"submitted {', '.join(names)}, not a notebook: it cannot be graded; submit {notebook}"


def _other_files(found: Class, others: dict, assignment: str | None, ids: dict, source: str,
                 contents: dict | None = None) -> None:
    """A student who handed in files but no notebook: "could not be graded", naming what they handed in
    instead and why it cannot be graded (a script, a link, a zip of several notebooks, a PDF), so that the
    student reads "you submitted report.pdf, not a notebook", not "no notebook was submitted"."""
    if assignment is None:
        return
    have = {e.lms_id for e in found.entries if e.assignment == assignment}
    for lms_id, files in sorted(others.items()):
        if lms_id in have:
            continue
        member, parsed = max(files, key=lambda f: f[0].date_time)
        display = parsed.get("last_first") or parsed.get("full_name") or ""
        names = sorted({Path(p["file_id"]).name for _, p in files})
        found.entries.append(Entry(ids.setdefault(lms_id, lms.student_id(display, lms_id)), assignment,
                                   status=FAILED, reason=_cannot_be_graded(names, files, contents or {}, assignment),
                                   name=display.strip(), lms=source, lms_id=lms_id,
                                   late=bool(parsed.get("late")), source=member.filename))


def _read_notebook(data: bytes | Path):
    """The notebook in ``data``, each graded cell once; (notebook, notes) or (None, why).

    A graded cell that is there more than once is kept as the copy the
    student executed last (:func:`pm_course.state.submissions.drop_duplicate_cells`);
    a notebook larger than :data:`MAX_BYTES` loses its saved outputs (the
    grader runs the code again: outputs never change a grade). Each is a note.
    """
    import nbformat

    try:
        raw = data.read_bytes() if isinstance(data, Path) else data
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except Exception as err:  # noqa: BLE001 -- any unreadable file
        return None, f"not a notebook ({type(err).__name__}: {err})"[:200]
    notes = submissions.drop_duplicate_cells(nb)
    if len(raw) > MAX_BYTES:
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        notes.append(f"its saved outputs were stripped before grading (the notebook is {len(raw) / 2**20:.0f} MB,"
                     f" over the {MAX_BYTES // 2**20} MB limit; the grader runs the code again: outputs never"
                     " change a grade)")
    return nb, notes


def _prepare(found: Class, data: dict) -> dict:
    """Read every notebook to be stored before anything is written: (notebook, notes) by (student, assignment).

    A file that is no notebook makes its entry "could not be graded", with the reason; what reading
    changed (a duplicated cell, outputs stripped) is added to the entry's reason.
    """
    ready = {}
    for entry in found.entries:
        key = (entry.student, entry.assignment)
        if entry.status == GRADED and key in data:
            nb, notes = _read_notebook(data[key])
            if nb is None:
                entry.status, entry.reason = FAILED, notes
            else:
                ready[key] = (nb, notes)
                entry.reason = "; ".join(r for r in (entry.reason, *notes) if r)
    return ready


def _mark_foreign(found: Class, path: Path) -> None:
    """A folder's notebook whose graded cells are another assignment's is not graded as this one."""
    for entry in found.entries:
        other = belongs_elsewhere(entry.file, entry.assignment) if entry.file else None
        if other:
            rel = str(entry.file.relative_to(path))
            found.foreign[rel] = other
            found.foreign_students[(entry.student, entry.assignment)] = other
            entry.status, entry.file = FAILED, None
            entry.reason = f"submitted {other}'s notebook ({rel}), not {entry.assignment}'s"


def _refuse_losing_work(found: Class, ready: dict, data: dict, covered: set, old: list, path: Path,
                        source: str = "folder") -> None:
    """Stop (changing nothing) a collection that would replace collected work with another assignment's or nothing."""
    what = ", ".join(sorted(covered))
    had = sum(1 for e in old if e.assignment in covered and e.status == GRADED)
    losing = f"; collecting it would replace the {had} notebook(s) collected for {what} with" if had else ""
    if found.foreign and not any(owner(data[k]) == k[1] for k in ready):
        others = sorted(set(found.foreign.values()))
        files = sorted(found.foreign)
        raise CourseError(
            f"{path}: refused: its notebooks are {' and '.join(others)}'s (by their graded cells), not {what}'s:"
            f" {', '.join(files[:3])}{f' and {len(files) - 3} more' if len(files) > 3 else ''}"
            f"{losing and losing + ' notebooks of another assignment'}. Collect it with --assignment {others[0]}."
            " Nothing was changed.")
    for target in sorted(covered):  # mostly another assignment's: a slip of --assignment, not students' mistakes
        own = sorted(s for (s, a) in ready if a == target and owner(data[(s, a)]) == target)
        strays = {s: other for (s, a), other in found.foreign_students.items() if a == target and s not in own}
        if not strays or len(strays) <= len(own):
            continue
        counts: dict[str, int] = {}
        for other in strays.values():
            counts[other] = counts.get(other, 0) + 1
        other = max(counts, key=lambda a: (counts[a], a))
        had_target = sum(1 for e in old if e.assignment == target and e.status == GRADED)
        instead = f"pm-course collect --from {source} {path} --assignment {other}" if source != "folder" else None
        raise CourseError(
            f"{path}: refused: most of its notebooks are another assignment's: {len(strays)} of"
            f" {len(strays) + len(own)} students' are {other}'s (by their graded cells, whatever their file names),"
            f" {len(own)} {target}'s ({', '.join(own) or 'none'}). Collected as {target}, it would mark"
            f" {len(strays)} student(s) 'could not be graded'"
            f"{f' and replace {had_target} notebook(s) already collected for {target}' if had_target else ''}."
            f" Nothing was changed."
            + (f" If it is {other}'s download, run instead: {instead}" if instead else ""))
    if not ready:
        seen = sorted(found.why_unused)
        listed = (f"its files: {', '.join(f'{n} ({found.why_unused[n]})' for n in seen[:5])}"
                  f"{f' and {len(seen) - 5} more' if len(seen) > 5 else ''}" if seen else "it holds no file")
        raise CourseError(f"{path}: refused: no notebook of {what} could be collected from it ({listed})"
                          f"{losing and losing + ' nothing'}. Nothing was changed.")


def _store(course: Course, entry: Entry, data: bytes | Path, nb, notes: list[str]) -> None:
    """Copy an entry's notebook to nbgrader's submitted folder (only nbgrader's copy loses duplicated cells)."""
    import nbformat

    dest = course.submitted / entry.student / entry.assignment
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    name = expected_notebooks()[entry.assignment]
    for note in notes:
        print(f"  {entry.student}/{entry.assignment}: {name}: {note}")
    if notes or not isinstance(data, Path):
        nbformat.write(nb, dest / name)
    else:
        shutil.copy(data, dest / name)  # copied, never moved


def collect(course: Course, source: str, path: Path, roster: Path | None = None, assignment: str | None = None,
            replace: bool = False, groups: Path | None = None) -> list[Entry]:
    """Collect submissions into the course folder; print what was used, renamed and left out.

    Parameters
    ----------
    course : Course
        The course whose folder receives them.
    source : {"folder", "canvas", "moodle"}
        Where they come from.
    path : Path
        The folder, or the LMS's zip.
    roster : Path, optional
        The LMS's gradebook export (Canvas) or grading worksheet (Moodle): its
        students who submitted nothing get a row ("not submitted").
    assignment : str, optional
        The assignment a zip is for (a Canvas or Moodle download is one assignment's).
    replace : bool
        Replace everything collected before for the assignments covered (from the same LMS);
        default: add, replacing per student (students not in this download keep their work).
    groups : Path, optional
        A Canvas group assignment's groups (Canvas's groups export, or ``group,student``): each group's
        submission is every member's (:func:`_group_work`); without it, a group download is refused.

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
    if groups is not None and source != "canvas":
        raise CourseError("--groups goes with --from canvas (a Canvas group assignment's download)")
    path = path.resolve()
    old = submissions.read_manifest(course.manifest)
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
        teams = lms.read_groups(groups, people) if groups is not None else None
        contents = read_zip(path)  # all of it, before anything changes: a damaged file stops here
        found, members = from_zip(path, source, assignment, ids, contents, course)
        if source == "canvas":
            _group_work(found, members, teams, people, ids, path)
        covered = {assignment} if assignment else {e.assignment for e in found.entries}
        if not covered:
            raise CourseError(f"{path}: refused: no notebook of an assignment in it (expected"
                              f" {sorted(expected.values())}, or pass --assignment); nothing was changed")
        data = {k: contents[m.filename] for k, m in members.items()}
        unused = found.why_unused
        keep = set() if replace else {(e.student, e.assignment) for e in old if e.lms == source}
        _add_roster(found, people, covered, ids, source, keep)
        _no_one_shared(found, people, old, source, path)
    if source == "folder":
        _mark_foreign(found, path)
    ready = _prepare(found, data)
    _refuse_losing_work(found, ready, data, covered, old, path, source)
    command = f"pm-course collect --from {source} {path}" + (f" --assignment {assignment}" if assignment else "") \
        + (" --replace" if replace else "")
    kept = history.save(course, covered, command)  # what this collection replaces is kept: `collect --undo` puts it back
    _keep_choices(course, found)
    for entry in found.entries:
        if (entry.student, entry.assignment) in ready:
            _store(course, entry, data[(entry.student, entry.assignment)], *ready[(entry.student, entry.assignment)])
    lms_name = "" if source == "folder" else source
    mine = {(e.student, e.assignment) for e in found.entries}
    # a download adds: it replaces, per student, what it brings (--replace: all the assignment's collection)
    replaced = [e for e in old if e.assignment in covered and e.lms == lms_name
                and (replace or (e.student, e.assignment) in mine)]
    new = {(e.student, e.assignment) for e in found.entries if e.status == GRADED}
    for e in replaced + found.entries:  # what an earlier collection found for these assignments goes
        if (e.student, e.assignment) not in new:
            shutil.rmtree(course.submitted / e.student / e.assignment, ignore_errors=True)
    entries = [e for e in old if e not in replaced] + found.entries
    submissions.write_manifest(entries, course.manifest)
    _report(found, unused, covered, source, path)
    had = sorted(f"{e.student}/{e.assignment}" for e in replaced if e.status != MISSING)
    if had:
        print(f"Replaced what was collected before for {len(had)} student(s): {', '.join(had)}")
    kept_students = sorted({e.student for e in old if e.assignment in covered and e not in replaced
                            and e.status != MISSING})
    if kept_students:
        print(f"Kept as collected before (not in this download): {len(kept_students)} student(s)"
              f" of {', '.join(sorted(covered))}")
    if any(kept.glob("submitted/*/*")):
        print(f"What was collected before for {', '.join(sorted(covered))} is kept in {kept}"
              " (pm-course collect --undo puts it back).")
    return entries


def _name_part(entry: Entry) -> str | None:
    """The ``<lastfirst>`` of a Canvas entry's file (a group's name in a group assignment's download), folded
    (:func:`pm_course.lms.slug`: Canvas may keep accented letters there)."""
    found = re.match(lms.CANVAS_NAME, Path(entry.source).name) if entry.source else None
    return lms.slug(found["last_first"]) if found else None


def _group_work(found: Class, members: dict, groups: lms.Groups | None, people: list, ids: dict,
                path: Path) -> None:
    """A Canvas group assignment's download: each group's submission becomes every member's (``--groups``).

    Canvas names a group's files by the group (``projectgroup1_<user id>_...``),
    with the id of the member who handed it in: without the groups, the other
    members would be "not submitted". Without ``groups``, such a download is
    refused with the instruction.
    """
    roster = {p.lms_id: p for p in people}
    handed = [e for e in found.entries if _name_part(e)]
    named_group = [e for e in handed if lms.looks_like_group(_name_part(e), e.lms_id, people)]
    # a roster whose names are not the files' (for most of them: a download named by groups, whatever they are called)
    other_name = [e for e in handed if e.lms_id in roster and lms.slug(roster[e.lms_id].name) != _name_part(e)]
    if len(other_name) >= 2 and 2 * len(other_name) >= len(handed):
        named_group += [e for e in other_name if e not in named_group]
    if groups is None:
        if named_group:
            names = sorted({_name_part(e) for e in named_group})
            raise CourseError(
                f"{path}: a Canvas group assignment's download: its files are named by group, not by student"
                f" ({', '.join(names[:4])}{' ...' if len(names) > 4 else ''}), each handed in by one member, so every"
                " other member would be \"not submitted\". Give the groups with --groups FILE: Canvas's groups export"
                " (People > Groups, the group set's menu > Export) or a CSV of two columns group,student (the"
                " student's course id as in course/grades.csv, Canvas user id, or name as the roster has it)."
                " Nothing was collected.")
        return
    unknown = sorted({_name_part(e) for e in named_group if _name_part(e) not in groups.members})
    if unknown:
        raise CourseError(f"{path}: the group(s) {', '.join(unknown)} are not in {groups.path.name} (its groups:"
                          f" {', '.join(sorted(groups.names.values()))}): export the group set this assignment uses"
                          " again from Canvas. Nothing was collected.")
    for entry in [e for e in found.entries if _name_part(e) in groups.members]:
        key = _name_part(entry)
        group, team = groups.names[key], [p for p in groups.members[key] if not lms.is_test_student(p.name)]
        known = roster.get(entry.lms_id) or next((p for p in team if p.lms_id == entry.lms_id), None)
        if known is not None and known.name and ids.get(entry.lms_id) == lms.student_id(key, entry.lms_id):
            # from_zip named the submitter after the group: the student's own id, as the roster would give it
            ids[entry.lms_id] = lms.student_id(known.name, entry.lms_id)
            if (entry.student, entry.assignment) in members:
                members[(ids[entry.lms_id], entry.assignment)] = members.pop((entry.student, entry.assignment))
            entry.student = ids[entry.lms_id]
        submitter = (known.name if known is not None and known.name else entry.student)
        entry.name = known.name if known is not None and known.name else entry.name
        said = f"group work: {group}'s submission, handed in by {submitter}"
        if all(p.lms_id != entry.lms_id for p in team):
            found.warnings.append(f"{entry.student}/{entry.assignment}: handed in {group}'s work but is not in"
                                  f" {group} in {groups.path.name}: graded with the group")
        entry.reason = "; ".join(r for r in (entry.reason, said) if r)
        others = []
        for person in team:
            if person.lms_id == entry.lms_id:
                continue
            name = (roster.get(person.lms_id) or person).name
            student = ids.setdefault(person.lms_id, lms.student_id(name or "student", person.lms_id))
            if any(e.student == student and e.assignment == entry.assignment for e in found.entries):
                continue  # their own entry in the download
            found.entries.append(Entry(student, entry.assignment, status=entry.status, reason=entry.reason,
                                       name=name, lms="canvas", lms_id=person.lms_id, late=entry.late,
                                       source=entry.source))
            if (entry.student, entry.assignment) in members:
                members[(student, entry.assignment)] = members[(entry.student, entry.assignment)]
            others.append(student)
        found.warnings.append(f"{group}: {entry.student}'s upload is the group's work, graded for each member"
                              f" ({', '.join([entry.student, *others])})")


def _keep_choices(course: Course, found: Class) -> None:
    """Keep each student's notebooks handed in together (``course/history/choices/<student>/<assignment>/``)."""
    for (student, assignment), files in found.choices.items():
        dest = course.choices / student / assignment
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        index = {}
        for i, (name, (where, data)) in enumerate(sorted(files.items())):
            if data is not None:
                (dest / f"{i}.ipynb").write_bytes(data)
                index[name] = {"file": f"{i}.ipynb", "source": where}
        state.write_text(dest / "choices.json", json.dumps(index, indent=1, sort_keys=True) + "\n")


def choose(course: Course, student: str, assignment: str, name: str) -> Entry:
    """Grade ``name``, one of the notebooks ``student`` handed in together for ``assignment`` (``collect --choose``).

    Kept by :func:`_keep_choices` when the collection found several; what is
    collected now is kept in the history first (``collect --undo`` puts it back).

    Raises
    ------
    CourseError
        When the student handed in no such notebook for the assignment (naming those there are).
    """
    entries = submissions.read_manifest(course.manifest)
    entry = next((e for e in entries if (e.student, e.assignment) == (student, assignment)), None)
    folder = course.choices / student / assignment
    index = json.loads((folder / "choices.json").read_text()) if (folder / "choices.json").is_file() else {}
    if entry is None or not index:
        raise CourseError(f"collect --choose {student} {assignment}: {student} handed in no two notebooks for"
                          f" {assignment} in the last collection (nothing to choose from); nothing was changed")
    if name not in index:
        raise CourseError(f"collect --choose {student} {assignment} {name!r}: not one of the notebooks handed in"
                          f" ({', '.join(sorted(index))}); nothing was changed")
    nb, notes = _read_notebook(folder / index[name]["file"])
    if nb is None:
        raise CourseError(f"collect --choose: {name} cannot be graded: {notes}; nothing was changed")
    kept = history.save(course, {assignment}, f"pm-course collect --choose {student} {assignment} {name}")
    entry.status, entry.source = GRADED, index[name]["source"]
    others = ", ".join(sorted(n for n in index if n != name))
    entry.reason = "; ".join([f"graded {name}, chosen by the instructor (handed in with {others})", *notes])
    _store(course, entry, folder / index[name]["file"], nb, notes)
    submissions.write_manifest(entries, course.manifest)
    print(f"{student}/{assignment}: {name} will be graded (pm-course grade); what was collected before is kept"
          f" in {kept} (pm-course collect --undo puts it back).")
    return entry


def _no_one_shared(found: Class, people: list, old: list, source: str, path: Path) -> None:
    """Say so when a download shares no student with its roster, or with what is collected from its LMS."""
    ids = {e.lms_id for e in found.entries}
    if people and ids and not ids & {p.lms_id for p in people}:
        found.warnings.append(f"{path.name} shares no student with the roster: is it this course's download,"
                              " and the roster this course's gradebook?")
    before = {e.lms_id for e in old if e.lms == source and e.status != MISSING}
    if before and ids and not ids & before:
        found.warnings.append(f"{path.name} shares no student with what was collected from {source.title()}"
                              " before (another section?): added beside it, nobody's work replaced")


def _add_roster(found: Class, people: list, covered: set, ids: dict, source: str, keep: set = frozenset()) -> None:
    """Give each roster student a row for each collected assignment they did not submit; note who is not on it.

    A student of ``keep`` (collected before, from another section's download) keeps that row.
    """
    have = {(e.lms_id, e.assignment) for e in found.entries}
    on_roster = {p.lms_id for p in people}
    for person in people:
        for a in sorted(covered):
            if (person.lms_id, a) not in have and (ids[person.lms_id], a) not in keep:
                found.entries.append(Entry(ids[person.lms_id], a, status=MISSING, name=person.name, lms=source,
                                           lms_id=person.lms_id, late=person.late, submitted=person.submitted))
        for e in found.entries:  # the worksheet's word on lateness and time, where the zip has none
            if e.lms_id == person.lms_id and source == "moodle":  # the real time, not the zip's
                e.late, e.submitted = e.late or person.late, person.submitted
            if e.lms_id == person.lms_id:  # the roster's name ("Núñez, José"), not the zip's ("nunezjose")
                e.name = person.name or e.name
    if people:
        for e in found.entries:
            if e.lms_id not in on_roster and lms.is_test_student(e.name or e.student.rsplit("_", 1)[0]):
                found.warnings.append(f"{e.student}/{e.assignment}: Canvas's test student: collected, never graded"
                                      " nor exported")
            elif e.lms_id not in on_roster:
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
