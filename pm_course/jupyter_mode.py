"""A student's or an instructor's JupyterLab: nbgrader's instructor tools off or on.

    python -m pm_course.jupyter_mode student       # make install (the default)
    python -m pm_course.jupyter_mode instructor    # make instructor
    python -m pm_course.jupyter_mode MODE ETC_DIR  # write into another config folder (tests)

nbgrader installs, for everyone, a JupyterLab extension (the Nbgrader menu and
Formgrader, the Create Assignment sidebar, the Validate button, the Course and
Assignment lists) and the server extensions behind it. A student needs none of
them: grading goes through nbgrader's Python API (make grade), which uses
neither. So the student mode disables, in this environment's own config folder
(<venv>/etc/jupyter), the whole lab extension (every plugin of the package,
including any a later nbgrader adds) and every server extension nbgrader
enables; the instructor mode enables them again. Other settings in those files
are kept.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

MODES = ("student", "instructor")
# JupyterLab's "Would you like to receive official Jupyter news?" prompt: a student is not asked
NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
ETC = Path(sys.prefix) / "etc" / "jupyter"


def lab_extension() -> str:
    """The name of nbgrader's JupyterLab extension (its package: disabling it disables every plugin)."""
    import nbgrader

    return nbgrader._jupyter_labextension_paths()[0]["dest"]


def server_extensions() -> list[str]:
    """The server extensions nbgrader enables when it is installed (its own config file)."""
    shipped = ETC / "jupyter_server_config.d" / "nbgrader.json"
    if not shipped.exists():
        sys.exit(f"{shipped} is missing: is nbgrader installed in this environment ({sys.prefix})?")
    return sorted(json.loads(shipped.read_text())["ServerApp"]["jpserver_extensions"])


def _update(path: Path, change) -> None:
    data = json.loads(path.read_text()) if path.exists() and path.stat().st_size else {}
    change(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def configure(mode: str, etc: Path = ETC) -> None:
    """Write ``mode``'s JupyterLab page config and server config under ``etc``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    student = mode == "student"

    def lab(data):
        disabled = data.get("disabledExtensions", {})
        if isinstance(disabled, list):  # JupyterLab accepts a list too
            disabled = {name: True for name in disabled}
        # an explicit False, not a removal: it must win over a lower config level that says True
        disabled[lab_extension()] = student
        disabled[NEWS_PLUGIN] = student
        data["disabledExtensions"] = disabled

    def server(data):
        enabled = data.setdefault("ServerApp", {}).setdefault("jpserver_extensions", {})
        # the main file is read after jupyter_server_config.d/, where nbgrader enables them
        enabled.update({name: not student for name in server_extensions()})

    _update(etc / "labconfig" / "page_config.json", lab)
    _update(etc / "jupyter_server_config.json", server)


def main(argv: list[str]) -> None:
    if not 1 <= len(argv) <= 2 or argv[0] not in MODES:
        sys.exit(__doc__)
    etc = Path(argv[1]) if len(argv) == 2 else ETC
    configure(argv[0], etc)
    tools = "hidden" if argv[0] == "student" else "shown"
    print(f"JupyterLab for {'a student' if argv[0] == 'student' else 'an instructor'}: "
          f"nbgrader's instructor tools {tools} ({etc}); restart jupyter lab to see the change")


if __name__ == "__main__":
    main(sys.argv[1:])
