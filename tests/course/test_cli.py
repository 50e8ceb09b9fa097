"""``pm-course``: one command, installed as a console script, whose every option has a help text."""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pm_course import cli

SUBCOMMANDS = ("init", "assignments", "collect", "grade", "export", "feedback", "book")
SUBCOMMANDS += ("review", "status")


def _subparsers(parser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_the_console_script_is_installed_and_lists_every_subcommand():
    exe = shutil.which("pm-course", path=str(Path(sys.executable).parent))
    assert exe, "pm-course is not installed beside this Python (pip install -e .)"
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for name in SUBCOMMANDS:
        assert name in proc.stdout, name
    assert "--course" in proc.stdout and "--config" in proc.stdout


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_describes_every_option(name, capsys):
    parser = _subparsers(cli.parser())[name]
    assert parser.description, name
    for action in parser._actions:
        assert action.help, f"{name}: {action.option_strings or action.dest} has no help"
    with pytest.raises(SystemExit) as done:
        cli.main([name, "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    for action in parser._actions:
        for flag in action.option_strings:
            assert flag in shown, (name, flag)
        if not action.option_strings:
            assert (action.metavar or action.dest) in shown, (name, action.dest)


def test_the_options_the_issue_names_are_there():
    sub = _subparsers(cli.parser())
    flags = {name: {f for a in p._actions for f in a.option_strings} for name, p in sub.items()}
    assert {"--from", "--roster", "--assignment"} <= flags["collect"]
    assert {"--student", "--assignment", "--jobs"} <= flags["grade"]
    assert {"--to", "-o", "--late-penalty", "--due", "--new-columns", "--no-rescale"} <= flags["export"]
    assert "--all" in flags["grade"]


@pytest.mark.parametrize("argv, says", [
    (["collect", "--from", "blackboard", "x.zip"], "invalid choice"),
    (["export", "--to", "canvas", "--late-penalty", "lots"], "not a number"),
    (["export", "--to", "canvas", "--late-penalty", "120"], "expected 0 to 100"),
    (["export", "--to", "csv", "--due", "01_copying=next week"], "not a date"),
    (["export", "--to", "csv", "--due", "2025-03-03 23:59"], "--due 01_copying='2025-03-03 23:59'"),
])
def test_bad_options_are_named(argv, says, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 2 and says in capsys.readouterr().err


def test_no_sys_path_edits_anywhere_in_the_repository():
    root = Path(__file__).resolve().parents[2]
    files = subprocess.run(["git", "ls-files", "*.py", "*.cfg", "nbgrader_config.py", "binder/*"], cwd=root,
                           capture_output=True, text=True, check=True).stdout.split()
    files = [f for f in files if (root / f).is_file()]
    edits = [f for f in files if "sys.path." + "insert" in (root / f).read_text(errors="replace")
             or "sys.path." + "append" in (root / f).read_text(errors="replace")]
    assert edits == []
