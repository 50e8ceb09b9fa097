"""JupyterLab in a real browser: a student's has none of nbgrader's instructor tools, an instructor's has them.

Starts ``jupyter lab`` from this environment twice, with the configuration
``pm_course/jupyter_mode.py`` writes for each mode (read before the
environment's own, so the result does not depend on the mode the environment
is in), on a free port of 127.0.0.1 with a token and a temporary root folder
holding one exercise notebook; opens that notebook in headless Chromium and
looks for the Nbgrader menu, the Validate button, the Create Assignment
sidebar, nbgrader's commands and plugins, and the Formgrader's page on the
server. Screenshots: _build/screenshots/jupyterlab-<mode>.png.

Needs no built book, only Debian's chromium + chromium-driver: skips with the
reason when they are missing, except under CI=true, where that is a failure.
"""
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import browser as browser_mod
import pytest

ROOT = Path(__file__).resolve().parents[3]
SHOTS = Path(os.environ.get("PM_SCREENSHOTS", ROOT / "_build" / "screenshots"))
JUPYTER = Path(sys.executable).parent / "jupyter"
NOTEBOOK = ROOT / "exercises" / "01_copying" / "copying.ipynb"
MODES = ("student", "instructor")


pytestmark = [pytest.mark.browser, browser_mod.required("the JupyterLab browser test", browser_mod.missing())]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url):
    """The HTTP status of a GET (an error status is an answer too); None while nothing listens."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code
    except urllib.error.URLError:
        return None


@contextlib.contextmanager
def _servers(tmp):
    """One ``jupyter lab`` per mode, started together (each takes seconds); yields {mode: (url, token)}."""
    from pm_course import jupyter_mode

    servers, procs = {}, []
    try:
        for mode in MODES:
            home = tmp / mode
            (home / "root").mkdir(parents=True)
            shutil.copy(NOTEBOOK, home / "root")
            jupyter_mode.configure(mode, home / "etc")
            port, token = _free_port(), secrets.token_hex(16)
            env = dict(os.environ, JUPYTER_CONFIG_PATH=str(home / "etc"),
                       # not the user's own settings, workspaces or runtime files
                       JUPYTER_CONFIG_DIR=str(home / "user"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
            log = (home / "server.log").open("w")
            procs.append(subprocess.Popen(
                [str(JUPYTER), "lab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
                 "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                 f"--ServerApp.root_dir={home / 'root'}", "--LabApp.expose_app_in_browser=True",
                 "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                 *(["--allow-root"] if os.geteuid() == 0 else [])],  # CI machines often run tests as root
                env=env, stdout=log, stderr=subprocess.STDOUT))
            servers[mode] = (f"http://127.0.0.1:{port}", token)
        deadline = time.monotonic() + 60
        for (mode, (url, token)), proc in zip(servers.items(), procs):
            while _get(f"{url}/api/status?token={token}") != 200:
                assert proc.poll() is None, f"jupyter lab ({mode}) exited: {(tmp / mode / 'server.log').read_text()[-2000:]}"
                assert time.monotonic() < deadline, f"jupyter lab ({mode}) did not start in 60 s"
                time.sleep(0.3)
        yield servers
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    with _servers(tmp_path_factory.mktemp("jupyterlab")) as found:
        yield found


browser = browser_mod.browser_fixture("1400,900")


# Once JupyterLab has restored its layout and the notebook's toolbar is drawn: what of nbgrader is there.
# Where the tools are expected (the instructor's), their menu, toolbar button and sidebar widget are
# waited for (up to a minute: on a busy machine a plugin draws them seconds after the toolbar); a
# student's page is looked at a second after its toolbar, and its list of plugins and commands, complete
# once the layout is restored, shows whether nbgrader's extension was loaded at all.
NBGRADER_IN_PAGE = """
    const [expected, done] = [arguments[0], arguments[arguments.length - 1]];
    const look = () => ({
        menus: [...document.querySelectorAll('.lm-MenuBar-itemLabel')].map(e => e.textContent)
            .filter(t => /nbgrader/i.test(t)),
        validate: document.querySelectorAll('.validate-button').length,
        createAssignment: document.querySelectorAll('#nbgrader-create_assignemnt, .nbgrader-CreateAssignmentWidget').length,
        commands: jupyterapp.commands.listCommands().filter(c => c.startsWith('nbgrader:')),
        plugins: jupyterapp.listPlugins().filter(p => p.startsWith('@jupyter/nbgrader')),
    });
    const wait = (n) => {
        const app = window.jupyterapp;
        if (!app) return n > 600 ? done('JupyterLab never started') : setTimeout(() => wait(n + 1), 100);
        app.restored.then(() => {
            const ready = () => document.querySelector('.jp-NotebookPanel-toolbar .jp-Toolbar-item')
                && document.querySelector('.jp-Notebook .jp-Cell');
            const drawn = () => { const seen = look();
                return seen.menus.length && seen.validate && seen.createAssignment; };
            const settle = (m) => {
                if (!ready()) return m > 600 ? done('the notebook never opened') : setTimeout(() => settle(m + 1), 100);
                if (expected && !drawn() && m < 600) return setTimeout(() => settle(m + 1), 100);
                setTimeout(() => done(look()), 1000);
            };
            settle(0);
        }, (e) => done(String(e)));
    };
    wait(0);"""


@pytest.mark.parametrize("mode", MODES)
def test_nbgrader_tools_only_for_the_instructor(mode, servers, browser):
    url, token = servers[mode]
    browser.get(f"{url}/lab/tree/{NOTEBOOK.name}?token={token}")
    browser.set_script_timeout(150)  # JupyterLab's start, the notebook, and the tools: a minute each at most
    found = browser.execute_async_script(NBGRADER_IN_PAGE, mode == "instructor")
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / f"jupyterlab-{mode}.png"))
    assert isinstance(found, dict), found
    found["formgrader page"] = _get(f"{url}/formgrader?token={token}")
    if mode == "student":
        assert not (found["menus"] or found["validate"] or found["createAssignment"] or found["commands"]
                    or found["plugins"]), f"a student's JupyterLab shows nbgrader's tools: {found}"
        assert found["formgrader page"] == 404, found
    else:  # the same look finds them where they are: the test above can fail
        assert found["menus"] and found["validate"] and found["createAssignment"], found
        assert len(found["plugins"]) >= 6 and "nbgrader:open-formgrader" in found["commands"], found
        assert found["formgrader page"] == 200, found
