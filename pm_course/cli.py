"""``pm-course``: the course from the exercises to the LMS's gradebook, one subcommand per step.

    pm-course assignments                                   # student versions, in course/release/
    pm-course collect --from canvas submissions.zip --roster gradebook.csv
    pm-course collect --undo                                # put back what the last collect replaced
    pm-course collect --choose STUDENT ASSIGNMENT FILE      # which of two notebooks handed in is graded
    pm-course grade [--student S] [--assignment A] [--jobs N]
    pm-course review ASSIGNMENT [--apply SHEET]             # score the written answers
    pm-course export --to canvas gradebook.csv              # the file Canvas imports
    pm-course feedback                                      # each page packed as the LMS takes it
    pm-course push --to canvas --assignment A [--apply]     # grades and pages into the LMS: a preview, then --apply
    pm-course book                                          # the course edition of the site
    pm-course status                                        # per assignment: graded, failed, to review

Everything generated goes to the course folder (``course/`` at the repository's
root, or ``--course DIR``, or ``$PM_COURSE_DIR``); what students handed in is
copied, never moved or changed.
"""
from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path

LMS_HELP = """\
A term with an LMS:
  pm-course init                              course.toml: time zone, due dates, gradebook columns, extensions
  pm-course assignments                       release the student versions (course/release/)
  pm-course collect --from canvas A1.zip --roster gradebook.csv
  pm-course grade                             grade what was collected
  pm-course review 02_averaging               course/review/02_averaging.csv (and .html): score the written answers
  pm-course review 02_averaging --apply course/review/02_averaging.csv
  pm-course export --to canvas gradebook.csv  course/export/canvas-grades.csv, for Grades > Import
  pm-course feedback                          course/export/feedback-canvas-<assignment>.zip, for Re-upload submissions
  pm-course push --to canvas --assignment 02_averaging [--apply]
                                              or, through the LMS's API: a preview, then --apply writes it
  pm-course status                            per assignment: submissions, graded, failed, awaiting review

The course file (course.toml at the repository's root, or --config FILE) says what
the LMS cannot: the time zone, the late policy (late_penalty = 10: percent per day,
for export and feedback alike), each assignment's due date and gradebook column
([assignments.<name>] due, canvas, moodle), and students' own due dates
([extensions.<student id>]). A Canvas download has no submission times: use
Canvas's own Late Policy (or give the times with --times). grade grades only what is new or changed (--all:
everything). export refuses an assignment with no gradebook column (--new-columns
makes one), rescales to the gradebook's points (--no-rescale refuses), counts days
late from each assignment's due date and each student's extension, and leaves out
Canvas's test student.

The course folder is one state: each writing command locks it (a second one waits,
or refuses with --no-wait) and writes each file whole; status lists what is not
graded and what is out of date, which export and feedback refuse (--force: the rest).
Where the sandbox cannot start, grade says why (bwrap's error, the cause and its fix); the last
resort, PM_GRADE_UNSAFE=1 (make grade UNSAFE=1; PM_GRADE_UNSAFE=unconfined in batch use with CI
set), runs student code unconfined, as you, with the same grades. A machine fault (sandbox or
kernel not started, a full disk, the grader's own error) leaves the student's row as it was,
makes grade exit non-zero naming the notebook, and is graded by the next grade.
"""


def _due(text: str) -> tuple[str, datetime]:
    """``ASSIGNMENT=DATETIME`` (``--due 01_copying='2025-03-03 23:59'``): one assignment's deadline."""
    name, eq, when = text.partition("=")
    if not eq or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: --due names its assignment now: --due 01_copying='2025-03-03"
                                         " 23:59' (repeat it for more; course.toml keeps them for the term)")
    try:
        return name.strip(), datetime.fromisoformat(when.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{when!r} is not a date and time like 2025-03-01 or '2025-03-01 23:59'"
                                         ) from None


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of percent per day (e.g. 10)") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{value:g}% per day: expected 0 to 100")
    return value


class _NoToken(argparse.Action):
    """``--token``: refused without repeating its value (a token on the command line stays in the shell's history
    and the process list)."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error("a token is never taken from the command line (it would stay in the shell's history and the"
                     " process list): set $CANVAS_API_TOKEN or $MOODLE_TOKEN, or pass --token-file FILE")


def _late_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true",
                        help="write the rows that are up to date when some are not (a resubmission not graded yet,"
                             " an undone collection, a stale page), listing those left out (default: refuse,"
                             " naming each; pm-course status lists them)")
    parser.add_argument("--late-penalty", type=_percent, metavar="PERCENT_PER_DAY", default=None,
                        help="take this percent of the score per day late, any part of a day counting as a day"
                             " (default: the course file's late_penalty, else none; late work is marked all the"
                             " same, and every penalty is printed). Refused where the days cannot be counted: a"
                             " Canvas download has no submission times (use Canvas's Late Policy, or --times)")
    parser.add_argument("--times", type=Path, metavar="CSV", default=None,
                        help="real submission times, a CSV of student, assignment, submitted_at (student: the"
                             " course's id or the LMS's), e.g. from Canvas's submissions API")
    parser.add_argument("--due", type=_due, action="append", metavar="ASSIGNMENT=DATETIME", default=None,
                        help="one assignment's deadline for this run, e.g. --due 01_copying='2025-03-03 23:59'"
                             " (repeat for more), in place of course.toml's; days late count from each"
                             " assignment's own due date (and each student's extension); without one, work the"
                             " LMS marked late counts as one day late")


def parser() -> argparse.ArgumentParser:
    """The command line: one subparser per step of the course."""
    top = argparse.ArgumentParser(prog="pm-course", description="The course from the exercises to the LMS's gradebook, one subcommand per step.",
                                  epilog=LMS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--config", type=Path, metavar="FILE", default=None,
                     help="the course file (default: course.toml in the repository): time zone, due dates,"
                          " gradebook columns, extensions; pm-course init writes one")
    top.add_argument("--course", type=Path, metavar="DIR", default=None,
                     help="the course folder, where everything generated goes (default: $PM_COURSE_DIR, else"
                          " course/ in the repository)")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wait = argparse.ArgumentParser(add_help=False)
    wait.add_argument("--no-wait", action="store_true",
                      help="refuse at once when another pm-course command is writing the course folder (default:"
                           " wait for it, saying which command it is)")

    sub.add_parser("init", help="write a commented course file (course.toml) listing the assignments",
                   description="Write course.toml (or --config FILE) with every key commented out: the time zone,"
                               " each assignment's due date and gradebook column, students' extensions. An"
                               " existing file is never replaced.")

    sub.add_parser("assignments", parents=[wait], help="check the exercises' test cells and release the student versions",
                   description="Check that each test cell stands alone and judges its own function, then release"
                               " the student versions with nbgrader (course/release/<assignment>/).")

    p = sub.add_parser("collect", parents=[wait], help="bring submissions in from a folder, a Canvas zip or a Moodle zip",
                       description="Copy submissions into the course folder, matching each file to a student and an"
                                   " assignment's notebook whatever the LMS did to its name; the newest upload wins,"
                                   " every file not used is listed with the reason. A collection that would replace"
                                   " collected work with nothing or with another assignment's notebooks, or a damaged"
                                   " zip, is refused and changes nothing; each collection keeps a copy of what it"
                                   " replaces, which --undo puts back.")
    p.add_argument("--from", dest="source", default=None, choices=("canvas", "moodle", "folder"),
                   help="canvas: Download Submissions (a flat zip); moodle: Download all submissions (a zip of"
                        " folders); folder: DIR/<student>/<assignment>/<notebook>.ipynb (required, but for --undo)")
    p.add_argument("path", type=Path, nargs="?", metavar="PATH", default=None,
                   help="the zip the LMS gave, or the folder")
    p.add_argument("--roster", type=Path, metavar="FILE", default=None,
                   help="the LMS's gradebook export (Canvas) or grading worksheet (Moodle): its students who"
                        " submitted nothing get a row too")
    p.add_argument("--assignment", metavar="A", default=None,
                   help="the assignment the zip is for (a Canvas or Moodle download is one assignment's);"
                        " default: inferred from each notebook's graded cells, else its name")
    p.add_argument("--replace", action="store_true",
                   help="replace everything collected for the assignment from this LMS (default: add, replacing"
                        " only the students in this download, each printed; the others keep their work)")
    p.add_argument("--groups", type=Path, metavar="FILE", default=None,
                   help="a Canvas group assignment: who is in which group (Canvas's groups export, or a CSV of"
                        " two columns group,student); each group's submission is graded for every member")
    p.add_argument("--undo", action="store_true",
                   help="put back what the last collection replaced (each collection keeps a copy in"
                        " course/history/; what the undone one brought in is kept in course/history/undone/)")
    p.add_argument("--choose", nargs=3, metavar=("STUDENT", "ASSIGNMENT", "FILE"), default=None,
                   help="grade FILE, one of the notebooks a student handed in together (collect keeps them in"
                        " course/history/choices/ and names them where two hold work: 'could not be graded: two"
                        " notebooks'); --undo puts back what was collected before")

    p = sub.add_parser("grade", parents=[wait], help="grade what was collected, each notebook in a sandbox",
                       description="Grade the collected notebooks (each in its own sandboxed kernel), write"
                                   " course/grades.csv and the feedback pages, with a progress bar. Only what is"
                                   " new or changed since the last run is graded (the notebook's or its"
                                   " assignment's source's SHA-256; --all: everything). An assignment"
                                   " whose source changed is released again and regraded, and changed scores are"
                                   " printed. Canvas's test student is never graded. Where the sandbox cannot start it"
                                   " says why and refuses unless PM_GRADE_UNSAFE=1 (make grade UNSAFE=1;"
                                   " PM_GRADE_UNSAFE=unconfined in batch use). A machine fault leaves the"
                                   " student's row as it was and makes grade exit non-zero; the next grade"
                                   " grades it.")
    p.add_argument("submissions", type=Path, nargs="?", metavar="DIR", default=None,
                   help="collect DIR/<student>/<assignment>/<notebook>.ipynb first (as collect --from folder)")
    p.add_argument("--student", action="append", metavar="S", default=None,
                   help="regrade only this student (repeat for more); the other rows of grades.csv are kept")
    p.add_argument("--assignment", action="append", metavar="A", default=None,
                   help="regrade only this assignment (repeat for more)")
    p.add_argument("--jobs", type=int, metavar="N", default=None,
                   help="notebooks graded at once (default: $PM_GRADE_JOBS, else the number of cores)")
    p.add_argument("--rescale-reviews", action="store_true",
                   help="where the assignment's source changed a written answer's points since it was reviewed,"
                        " scale the review to the new points (1.5 of 2 -> 2.25 of 3); default: that review goes"
                        " back to awaiting review (pm-course review ASSIGNMENT), its reason naming the change")
    p.add_argument("--all", dest="everything", action="store_true",
                   help="regrade every notebook collected (default: only those new or changed since the last"
                        " run, and those of an assignment whose source changed)")

    p = sub.add_parser("export", parents=[wait], help="write the grades as an LMS imports them",
                       description="Write the grades for an LMS: Canvas's gradebook import (from its own export as"
                                   " the template), Moodle's grading worksheet filled in, or a plain CSV. Each"
                                   " assignment fills the gradebook column the course file names (canvas = ...) or"
                                   " its own '<name> (<id>)'; one with neither is refused (--new-columns makes"
                                   " one). Scores are rescaled to the gradebook's Points Possible (or the"
                                   " worksheet's Maximum Grade) where it differs, each rescaling printed"
                                   " (--no-rescale refuses). Days late count from each assignment's due date and"
                                   " each student's extension, in the course file's time zone. Canvas's test"
                                   " student is left out; comma or semicolon files are written back alike.")
    p.add_argument("--to", required=True, choices=("canvas", "moodle", "csv"),
                   help="canvas: gradebook import; moodle: grading worksheet; csv: grades.csv with the late policy")
    p.add_argument("template", type=Path, nargs="?", metavar="TEMPLATE", default=None,
                   help="the LMS's own file: Canvas's gradebook export, or Moodle's grading worksheet (not"
                        " needed for csv); it is read, never changed")
    p.add_argument("-o", "--output", type=Path, metavar="OUT", default=None,
                   help="where to write (default: course/export/canvas-grades.csv, moodle-<assignment>.csv or"
                        " grades.csv)")
    p.add_argument("--assignment", metavar="A", default=None,
                   help="the assignment a Moodle worksheet is for (default: the one its file name or the"
                        " grades name); refused when the worksheet's file name names another")
    p.add_argument("--new-columns", action="store_true",
                   help="Canvas: give an assignment with no gradebook column a new one (a new assignment in"
                        " Canvas); default: refuse, naming the gradebook's columns")
    p.add_argument("--overwrite-lms-edits", action="store_true",
                   help="replace a gradebook value changed in the LMS since pm-course's last export (default: the"
                        " LMS's value is kept and listed; EX, complete and other non-numbers are always kept)")
    p.add_argument("--no-rescale", action="store_true",
                   help="refuse when the gradebook's points differ from the assignment's (default: rescale"
                        " the scores to the gradebook's points, printing each rescaling)")
    _late_options(p)

    p = sub.add_parser("feedback", parents=[wait], help="pack each feedback page as the LMS takes it back",
                       description="Pack the feedback pages, one zip per assignment: for Canvas's Re-upload"
                                   " submissions, each page named with the download's <name>_<user id>_<submission"
                                   " id>_ prefix (Canvas attaches it to that submission as a comment); for Moodle, in"
                                   " the download's folder layout. Each page stands alone: its maths is MathML, it"
                                   " loads nothing. Pages of work no longer graded are removed; Canvas's test"
                                   " student gets none.")
    p.add_argument("-o", "--output", type=Path, metavar="OUT", default=None,
                   help="the folder to write to (default: course/export/)")
    _late_options(p)

    p = sub.add_parser("push", parents=[wait], allow_abbrev=False,
                       help="grades, comments and feedback pages into Canvas or Moodle (API)",
                       description="Send one assignment's grades (on the LMS's points), comments and feedback pages"
                                   " to Canvas (canvasapi) or Moodle (web services). Without --apply: read the LMS"
                                   " and print what would change, student by student, saving that preview; with"
                                   " --apply: write exactly the preview (refused, naming who, if the LMS or the"
                                   " grades changed since), reading each grade back. A grade changed in the LMS"
                                   " since pm-course last put one there, and an excusal, are kept. Rate limits are"
                                   " waited out; an interrupted --apply is finished by the next. The course file's"
                                   " [canvas] or [moodle] table says where (url, course); the token comes from"
                                   " $CANVAS_API_TOKEN / $MOODLE_TOKEN or --token-file, never the command line.")
    p.add_argument("--to", required=True, choices=("canvas", "moodle"), help="the LMS")
    p.add_argument("--assignment", required=True, metavar="A", help="the assignment to push")
    p.add_argument("--apply", action="store_true", help="write the saved preview (default: preview only)")
    p.add_argument("--token-file", type=Path, metavar="FILE", default=None,
                   help="read the API token from FILE (default: $CANVAS_API_TOKEN or $MOODLE_TOKEN)")
    p.add_argument("--token", nargs="?", action=_NoToken, help=argparse.SUPPRESS)
    p.add_argument("--overwrite-lms-edits", action="store_true",
                   help="replace a grade changed in the LMS since pm-course last put one there (default: keep"
                        " and list it; an excusal is always kept)")
    _late_options(p)

    p = sub.add_parser("review", parents=[wait], help="score the written answers: a sheet to fill in, then --apply it",
                       description="Write course/review/ASSIGNMENT.csv (student_id, cell, max_points, points,"
                                   " comment, answer: one row per student and written answer; points empty until"
                                   " reviewed) and ASSIGNMENT.html (the answers beside the model answer and its"
                                   " rubric). With --apply, record a filled-in sheet's points and comments as"
                                   " nbgrader manual grades (the formgrader's own fields), then update grades.csv"
                                   " and the feedback pages. A regrade keeps a review while the answer is"
                                   " unchanged; a changed answer awaits review again.")
    p.add_argument("assignment", metavar="ASSIGNMENT", help="the assignment whose written answers to review")
    p.add_argument("--apply", type=Path, metavar="SHEET", default=None,
                   help="record this filled-in sheet (checked first: a bad row names its row and column, and"
                        " nothing is recorded)")

    sub.add_parser("status", help="per assignment: submissions, graded, could not be graded, awaiting review",
                   description="For each assignment collected: the submissions, how many were graded, could not"
                               " be graded or are not graded yet, and the written answers awaiting review (from"
                               " the gradebook: reviews from the formgrader count too).")

    sub.add_parser("book", parents=[wait], help="build the course edition of the site (no solutions, no hidden tests)",
                   description="Build the course edition of the site into course/book: the chapters, and the"
                               " exercises as students get them.")
    return top


def main(argv: list[str] | None = None) -> None:
    """Run ``pm-course`` with ``argv`` (default: the command line).

    The course (:class:`pm_course.state.course.Course`) is made here, once: its folder from ``--course``, else
    ``$PM_COURSE_DIR``, else ``course/``; its settings from ``--config``, else ``$PM_COURSE_CONFIG``, else
    ``course.toml``. Every command is handed it.
    """
    args = parser().parse_args(argv)
    from pm_course.state import config

    if args.command == "init":
        config.init(args.config)
        return
    from pm_course.state.course import Course, default_folder, forget

    # a mistake in the course file stops every command, naming it
    course = Course(args.course or default_folder(), settings=config.load(args.config))
    try:
        _command(course, args)
    finally:
        forget(course)  # its gradebook's connections closed (in a process that runs more than one command)


def _command(course, args: argparse.Namespace) -> None:
    """Run the command ``args`` names on ``course``: status, or a command that writes (the lock held)."""
    from pm_course.state.course import CourseError
    from pm_course.state.files import lock

    if args.command == "status":
        from pm_course.steps.review import status

        # status first brings grades.csv and the pages up to date with reviews entered since: a write, so it
        # takes the lock; while another command holds it, status reads only (and says so) rather than wait
        try:
            if not course.folder.is_dir():  # nothing collected: status says so, and makes no course folder
                text = status(course, update=False)
            with lock(course, "pm-course status", wait=False):
                text = status(course)
        except CourseError as err:
            if "is in use by" not in str(err):
                raise
            from pm_course.state.files import holder

            text = status(course, update=False) + (f"\n(read only: the course folder is in use by"
                                                    f" {holder(course) or 'another pm-course command'}; reviews"
                                                    " entered since the last command are not counted yet)")
        try:
            print(text)
            sys.stdout.flush()
        except BrokenPipeError:  # `pm-course status | head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return

    with lock(course, f"pm-course {args.command}", wait=not args.no_wait):
        try:
            _run(course, args)
        except BrokenPipeError:  # `pm-course ... | head`: stdout closed while the command ran
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to write there
            raise CourseError(f"pm-course {args.command} stopped: its output was closed (a closed pipe). Every"
                              " file of the course folder is as before or as after (none is half-written); what"
                              " was not finished, the next command finishes or pm-course status lists.") from None
        except OSError as err:  # the machine's (a full disk): each file is whole, as before or as after
            raise CourseError(f"pm-course {args.command} stopped: machine error: {err}. Every file of the course"
                              " folder is as before or as after (none is half-written); fix it and run the"
                              " command again.") from None


def _run(course, args: argparse.Namespace) -> None:
    """Run a command that writes ``course``'s folder (its lock held)."""
    if args.command == "assignments":
        from pm_course.grading.release import assignments

        assignments(course)
    elif args.command == "collect":
        from pm_course.steps.collect import collect

        if args.undo:
            if args.source or args.path or args.roster or args.assignment or args.replace or args.groups or args.choose:
                parser().error("collect --undo takes no other argument (it undoes the last collection)")
            from pm_course.state.history import undo

            print(undo(course))
        elif args.choose:
            if args.source or args.path or args.roster or args.assignment or args.replace:
                parser().error("collect --choose STUDENT ASSIGNMENT FILE takes no other argument")
            from pm_course.steps.collect import choose

            choose(course, *args.choose)
        elif args.source is None or args.path is None:
            parser().error("collect: --from and PATH are required (or --undo)")
        else:
            collect(course, args.source, args.path, roster=args.roster, assignment=args.assignment, replace=args.replace,
                    groups=args.groups)
    elif args.command == "grade":
        from pm_course.steps.grade import grade

        if args.submissions:  # the steps stand apart: the command line composes them
            from pm_course.steps.collect import collect

            collect(course, "folder", args.submissions.resolve())
        grade(course, None, students=args.student, assignments=args.assignment, n_jobs=args.jobs,
              everything=args.everything, rescale_reviews=args.rescale_reviews)
    elif args.command == "export":
        from pm_course.lms.outcome import Late
        from pm_course.steps.export import export
        from pm_course.state.written import sync

        sync(course)  # reviews entered since (review --apply, nbgrader's formgrader) reach grades.csv and the pages

        export(course, args.to, args.template, args.output, Late.of(course.settings, args.late_penalty, args.due,
                                                                    args.times), args.assignment,
               new_columns=args.new_columns, rescale=not args.no_rescale,
               overwrite_lms_edits=args.overwrite_lms_edits, force=args.force)
    elif args.command == "feedback":
        from pm_course.lms.outcome import Late
        from pm_course.steps.feedback import pack_feedback
        from pm_course.state.written import sync

        sync(course)

        pack_feedback(course, args.output, Late.of(course.settings, args.late_penalty, args.due, args.times),
                      force=args.force)
    elif args.command == "push":
        from pm_course.lms.outcome import Late
        from pm_course.steps.push import push
        from pm_course.state.written import sync

        sync(course)
        push(course, args.to, args.assignment, apply=args.apply, overwrite_lms_edits=args.overwrite_lms_edits,
             token_file=args.token_file, late=Late.of(course.settings, args.late_penalty, args.due, args.times),
             force=args.force)
    elif args.command == "review":
        from pm_course.steps import review

        if args.apply is not None:
            review.apply(course, args.assignment, args.apply)
        else:
            review.write_sheet(course, args.assignment)
    elif args.command == "book":
        from pm_course.steps.book import book

        book(course)


if __name__ == "__main__":
    main(sys.argv[1:])
