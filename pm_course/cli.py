"""``pm-course``: the course from the exercises to the LMS's gradebook, one subcommand per step.

    pm-course assignments                                   # student versions, in course/release/
    pm-course collect --from canvas submissions.zip --roster gradebook.csv
    pm-course grade [--student S] [--assignment A] [--jobs N]
    pm-course export --to canvas gradebook.csv              # the file Canvas imports
    pm-course feedback                                      # each page packed as the LMS takes it
    pm-course book                                          # the course edition of the site

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
  pm-course assignments                       release the student versions (course/release/)
  pm-course collect --from canvas A1.zip --roster gradebook.csv
  pm-course grade                             grade what was collected
  pm-course export --to canvas gradebook.csv  course/export/canvas-grades.csv, for Grades > Import
  pm-course feedback                          course/export/feedback-canvas-<assignment>.zip, for Re-upload submissions
"""


def _date(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date and time like 2025-03-01 or '2025-03-01 23:59'")


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of percent per day (e.g. 10)") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{value:g}% per day: expected 0 to 100")
    return value


def _late_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--late-penalty", type=_percent, metavar="PERCENT_PER_DAY", default=None,
                        help="take this percent of the score per day late (default: no penalty; late work is"
                             " marked all the same, and every penalty is printed)")
    parser.add_argument("--due", type=_date, metavar="DATETIME", default=None,
                        help="the deadline, to count the days late from the submission times (e.g. '2025-03-01"
                             " 23:59'); without it, work the LMS marked late counts as one day late")


def parser() -> argparse.ArgumentParser:
    """The command line: one subparser per step of the course."""
    top = argparse.ArgumentParser(prog="pm-course", description="The course from the exercises to the LMS's gradebook, one subcommand per step.",
                                  epilog=LMS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--course", type=Path, metavar="DIR", default=None,
                     help="the course folder, where everything generated goes (default: $PM_COURSE_DIR, else"
                          " course/ in the repository)")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("assignments", help="check the exercises' test cells and release the student versions",
                   description="Check that each test cell stands alone and judges its own function, then release"
                               " the student versions with nbgrader (course/release/<assignment>/).")

    p = sub.add_parser("collect", help="bring submissions in from a folder, a Canvas zip or a Moodle zip",
                       description="Copy submissions into the course folder, matching each file to a student and an"
                                   " assignment's notebook whatever the LMS did to its name; the newest upload wins,"
                                   " every file not used is listed with the reason.")
    p.add_argument("--from", dest="source", required=True, choices=("canvas", "moodle", "folder"),
                   help="canvas: Download Submissions (a flat zip); moodle: Download all submissions (a zip of"
                        " folders); folder: DIR/<student>/<assignment>/<notebook>.ipynb")
    p.add_argument("path", type=Path, metavar="PATH", help="the zip the LMS gave, or the folder")
    p.add_argument("--roster", type=Path, metavar="FILE", default=None,
                   help="the LMS's gradebook export (Canvas) or grading worksheet (Moodle): its students who"
                        " submitted nothing get a row too")
    p.add_argument("--assignment", metavar="A", default=None,
                   help="the assignment the zip is for (a Canvas or Moodle download is one assignment's);"
                        " default: inferred from each notebook's name")

    p = sub.add_parser("grade", help="grade what was collected, each notebook in a sandbox",
                       description="Grade the collected notebooks (each in its own sandboxed kernel), write"
                                   " course/grades.csv and the feedback pages, with a progress bar. An assignment"
                                   " whose source changed is released again and regraded, and changed scores are"
                                   " printed.")
    p.add_argument("submissions", type=Path, nargs="?", metavar="DIR", default=None,
                   help="collect DIR/<student>/<assignment>/<notebook>.ipynb first (as collect --from folder)")
    p.add_argument("--student", action="append", metavar="S", default=None,
                   help="regrade only this student (repeat for more); the other rows of grades.csv are kept")
    p.add_argument("--assignment", action="append", metavar="A", default=None,
                   help="regrade only this assignment (repeat for more)")
    p.add_argument("--jobs", type=int, metavar="N", default=None,
                   help="notebooks graded at once (default: $PM_GRADE_JOBS, else the number of cores)")

    p = sub.add_parser("export", help="write the grades as an LMS imports them",
                       description="Write the grades for an LMS: Canvas's gradebook import (from its own export as"
                                   " the template), Moodle's grading worksheet filled in, or a plain CSV.")
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
                        " grades name)")
    _late_options(p)

    p = sub.add_parser("feedback", help="pack each feedback page as the LMS takes it back",
                       description="Pack the feedback pages, one zip per assignment: for Canvas's Re-upload"
                                   " submissions, each page named with the download's <name>_<user id>_<submission"
                                   " id>_ prefix (Canvas attaches it to that submission as a comment); for Moodle, in"
                                   " the download's folder layout. Each page stands alone: its maths is MathML, it"
                                   " loads nothing. Pages of work no longer graded are removed; Canvas's test"
                                   " student gets none.")
    p.add_argument("-o", "--output", type=Path, metavar="OUT", default=None,
                   help="the folder to write to (default: course/export/)")
    _late_options(p)

    sub.add_parser("book", help="build the course edition of the site (no solutions, no hidden tests)",
                   description="Build the course edition of the site into course/book: the chapters, and the"
                               " exercises as students get them.")
    return top


def main(argv: list[str] | None = None) -> None:
    """Run ``pm-course`` with ``argv`` (default: the command line)."""
    args = parser().parse_args(argv)
    if args.course is not None:  # read when the modules load: set before importing them
        os.environ["PM_COURSE_DIR"] = str(args.course.resolve())
    if args.command == "assignments":
        from .assignments import assignments

        assignments()
    elif args.command == "collect":
        from .collect import collect

        collect(args.source, args.path, roster=args.roster, assignment=args.assignment)
    elif args.command == "grade":
        from .grade import grade

        grade(args.submissions.resolve() if args.submissions else None, students=args.student,
              assignments=args.assignment, n_jobs=args.jobs)
    elif args.command == "export":
        from .export import Late, export

        export(args.to, args.template, args.output, Late(args.late_penalty, args.due), args.assignment)
    elif args.command == "feedback":
        from .export import Late, pack_feedback

        pack_feedback(args.output, Late(args.late_penalty, args.due))
    elif args.command == "book":
        from .book import book

        book()


if __name__ == "__main__":
    main(sys.argv[1:])
