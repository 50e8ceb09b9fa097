"""``pip install '.[course]'`` in a new virtual environment gives a pm-course that runs.

The package's own dependencies (attnlib's) and the ``course`` extra of
pyproject.toml must carry everything pm_course imports: the package is built
from a copy of the repository's sources (the files pyproject.toml packages)
and installed as an instructor would, then ``pm-course --help`` and
``pm-course init`` run in an empty folder. PyTorch is never among them.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # a new environment, pip install from the registry's files: a minute or more


def test_the_course_extra_gives_a_working_pm_course(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for name in ("attnlib", "pm_course"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{src}[course]"],
                         capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stderr[-3000:]
    pm_course = str(venv / "bin" / "pm-course")

    helped = subprocess.run([pm_course, "--help"], capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0, helped.stderr
    for command in ("init", "assignments", "collect", "grade", "export", "push"):
        assert command in helped.stdout

    empty = tmp_path / "empty"
    empty.mkdir()
    init = subprocess.run([pm_course, "init"], cwd=empty, capture_output=True, text=True, timeout=120)
    assert init.returncode == 0, init.stdout + init.stderr
    assert [p.name for p in empty.iterdir()] == ["course.toml"]
    assert "# late_penalty" in (empty / "course.toml").read_text()
    assert str(empty / "course.toml") in init.stdout

    torch = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True, timeout=120)
    assert torch.returncode != 0, "PyTorch came with pm-course: it is the tests' reference, never a dependency"
