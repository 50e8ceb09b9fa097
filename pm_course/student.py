"""Student versions of the exercises: the blank notebooks a learner works in.

    python -m pm_course.student [DEST]      # default: my-exercises/ (make exercises)

Writes DEST/<assignment>/<notebook>.ipynb for every assignment in exercises/,
and never overwrites a notebook that is already there: that is the learner's
work. The self-study site's download button gives the same notebooks
(_ext/pm_student_downloads.py).
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "exercises"


@functools.cache
def _preprocessors() -> list:
    """``nbgrader generate_assignment``'s own preprocessors, configured by nbgrader_config.py,
    less the one that writes the gradebook (a learner has none).

    So the student version is the one ``make assignments`` releases: solutions
    replaced by nbgrader's stubs, hidden tests and outputs cleared, graded cells
    locked and checksummed, nbgrader's cell metadata kept.
    """
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import SaveCells
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    classes = GenerateAssignment(config=config).preprocessors
    return [cls(config=config) for cls in classes if cls is not SaveCells]


def student_version(source: Path) -> nbformat.NotebookNode:
    """The student version of one source notebook (solutions and hidden tests included)."""
    nb = nbformat.read(source, as_version=4)
    resources = {"metadata": {"path": str(Path(source).parent)}}
    for preprocessor in _preprocessors():
        nb, resources = preprocessor.preprocess(nb, resources)
    return nb


def sources() -> list[Path]:
    """Every assignment's source notebook, as exercises/<assignment>/<notebook>.ipynb."""
    return sorted(p for p in EXERCISES.glob("*/*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def write_exercises(dest: Path) -> tuple[list[Path], list[Path]]:
    """Write the student version of every exercise under ``dest``; keep any notebook already there.

    Returns the notebooks written and those kept.
    """
    written, kept = [], []
    for source in sources():
        out = dest / source.parent.name / source.name
        if out.exists():
            kept.append(out)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        nb = student_version(source)
        # written under a temporary name first: an interrupted run leaves no half notebook
        # that the next run would then keep
        partial = out.with_name(out.name + ".partial")
        nbformat.write(nb, partial)
        partial.replace(out)
        written.append(out)
    return written, kept


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        sys.exit(__doc__)
    dest = Path(argv[0] if argv else ROOT / "my-exercises").resolve()
    written, kept = write_exercises(dest)
    for path in written:
        print(f"  new:  {path}")
    for path in kept:
        print(f"  kept: {path} (already there, left as it was; rename it to get a fresh copy)")
    print(f"Your exercises: {dest}  (open them with: .venv/bin/jupyter lab {dest})")


if __name__ == "__main__":
    main(sys.argv[1:])
