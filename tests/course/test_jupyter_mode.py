"""A student's JupyterLab has none of nbgrader's instructor tools; an instructor's has them all.

Read the way JupyterLab and Jupyter Server read their configuration, against
the plugins and server extensions nbgrader ships (so a new one cannot slip
through). tests/book/site/test_jupyterlab.py checks the same in a real browser.
"""
import json
import os
import pkgutil
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
from pm_course import jupyter_mode  # noqa: E402


def shipped_lab_plugins():
    """Every plugin id in nbgrader's built JupyterLab extension, as installed here."""
    from jupyter_core.paths import jupyter_path

    name = jupyter_mode.lab_extension()
    static = next(Path(p) / name / "static" for p in jupyter_path("labextensions") if (Path(p) / name).is_dir())
    ids = {m for js in static.glob("*.js") for m in re.findall(rf'"({re.escape(name)}:[\w.-]+)"', js.read_text())}
    # the ones known today, so that a change in how the bundle is written cannot make this list empty
    assert {f"{name}:{p}" for p in ("menu", "formgrader", "create-assignment", "validate-assignment",
                                    "course-list", "assignment-list")} <= ids, ids
    return ids


def shipped_server_extensions():
    import nbgrader.server_extensions

    return {f"nbgrader.server_extensions.{m.name}" for m in pkgutil.iter_modules(nbgrader.server_extensions.__path__)
            if m.ispkg and not m.name.startswith("_")}


@pytest.fixture
def config(tmp_path, monkeypatch):
    """Write a mode into a config folder that JupyterLab then reads first, over one in the
    other mode (so the result cannot come from the environment's own config, whichever
    mode that is in), and not the user's own config."""
    def write(mode):
        etc, below = tmp_path / mode, tmp_path / "below"
        jupyter_mode.configure({"student": "instructor", "instructor": "student"}[mode], below)
        jupyter_mode.configure(mode, etc)
        monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "user"))
        monkeypatch.setenv("JUPYTER_CONFIG_PATH", os.pathsep.join([str(etc), str(below)]))
        return [etc, below]
    return write


def lab_disabled(plugin):
    """JupyterLab's own rule (PageConfig.Extension.isDisabled): the plugin's id or its package is listed."""
    from jupyter_core.paths import jupyter_path
    from jupyterlab_server.config import get_page_config

    # what the server hands the page: the list of disabled ids and packages
    disabled = set(get_page_config(jupyter_path("labextensions"))["disabledExtensions"])
    return plugin in disabled or plugin.split(":")[0] in disabled


def server_enabled(folders):
    from jupyter_server.extension.config import ExtensionConfigManager

    # those folders first, then the environment's, where nbgrader's own file enables them
    read = [*map(str, folders), str(Path(sys.prefix) / "etc" / "jupyter")]
    return ExtensionConfigManager(read_config_path=read).get_jpserver_extensions()


def test_a_student_has_no_nbgrader_plugin_and_no_nbgrader_server_extension(config):
    etc = config("student")
    assert not [p for p in sorted(shipped_lab_plugins()) if not lab_disabled(p)]
    assert lab_disabled(jupyter_mode.NEWS_PLUGIN), "a student's JupyterLab asks about Jupyter news"
    enabled = server_enabled(etc)
    assert not [e for e in sorted(shipped_server_extensions()) if enabled.get(e, False)]


def test_an_instructor_has_every_nbgrader_plugin_and_server_extension(config):
    etc = config("instructor")
    assert not [p for p in sorted(shipped_lab_plugins()) if lab_disabled(p)]
    assert not lab_disabled(jupyter_mode.NEWS_PLUGIN)
    enabled = server_enabled(etc)
    assert all(enabled.get(e) for e in shipped_server_extensions()), enabled


def test_switching_modes_keeps_other_settings(tmp_path):
    page = tmp_path / "labconfig" / "page_config.json"
    page.parent.mkdir()
    page.write_text(json.dumps({"disabledExtensions": ["@jupyterlab/some-extension"], "other": 1}))
    jupyter_mode.configure("student", tmp_path)
    jupyter_mode.configure("instructor", tmp_path)
    data = json.loads(page.read_text())
    assert data["other"] == 1 and data["disabledExtensions"]["@jupyterlab/some-extension"] is True
    with pytest.raises(ValueError, match="student"):
        jupyter_mode.configure("teacher", tmp_path)
