"""The book's address comes from one setting (``repository: url`` in _config.yml).

Every notebook's install cell is the one ``pm_address`` writes for that setting; the cell
installs from the address when there is one and, when there is none, stops with how to
install attnlib from a local copy; the site's buttons, the introduction and the PDF's
colophon follow the setting.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

import pm_address  # _ext

ROOT = Path(__file__).resolve().parents[2]


def test_the_address_is_written_in_one_place():
    url = pm_address.setting()
    assert url, "_config.yml sets no repository: url (this book has one)"
    elsewhere = [str(p.relative_to(ROOT)) for p in
                 [*ROOT.glob("*.md"), *ROOT.glob("guides/*.md"), *ROOT.glob("chapters/*.md"), *ROOT.glob("*.yml")]
                 if url in p.read_text() and p.name != "_config.yml"]
    assert not elsewhere, f"the address is written out in {elsewhere}: take it from the setting"
    config = (ROOT / "_config.yml").read_text()
    assert config.count(url) == 1, "_config.yml writes the address more than once"


@pytest.mark.parametrize("path", pm_address.book_notebooks(), ids=lambda p: p.stem)
def test_every_install_cell_follows_the_setting(path):
    cells = nbformat.read(path, as_version=4).cells
    i = pm_address.install_cell_index(cells)
    assert i is not None, f"{path.name} has no install cell"
    assert "remove-cell" in cells[i].metadata.get("tags", []), "the install cell shows on the page"
    assert cells[i].source == pm_address.install_cell(pm_address.setting()), \
        f"{path.name}'s install cell is not the one for the book's address: run `python _ext/pm_address.py`"


def _run_without_attnlib(source, monkeypatch):
    """Run an install cell in a kernel where ``import attnlib`` fails; the %pip calls it makes."""
    monkeypatch.setitem(sys.modules, "attnlib", None)  # import attnlib -> ImportError
    calls = []
    shell = SimpleNamespace(run_line_magic=lambda magic, line: calls.append((magic, line)))
    exec(compile(source, "install-cell", "exec"), {"get_ipython": lambda: shell})
    return calls


def test_with_an_address_the_cell_pip_installs_from_it(monkeypatch):
    calls = _run_without_attnlib(pm_address.install_cell("https://example.org/a/book"), monkeypatch)
    assert calls == [("pip", "install -q git+https://example.org/a/book")]


def test_without_an_address_the_cell_says_how_to_install_locally(monkeypatch):
    with pytest.raises(ImportError, match=r"make install.*pip install -e"):
        _run_without_attnlib(pm_address.install_cell(""), monkeypatch)


def test_with_attnlib_installed_the_cell_does_nothing():
    calls = []
    shell = SimpleNamespace(run_line_magic=lambda *a: calls.append(a))
    for url in ("https://example.org/a/book", ""):
        exec(pm_address.install_cell(url), {"get_ipython": lambda: shell})
    assert calls == []


def _configured(url):
    """What pm_address makes of a configuration whose address is ``url``."""
    config = SimpleNamespace(
        html_theme_options={"repository_url": url, "use_repository_button": False, "use_issues_button": False,
                            "launch_buttons": {"notebook_interface": "jupyterlab",
                                               "binderhub_url": "https://mybinder.org",
                                               "colab_url": "https://colab.research.google.com"}},
        myst_substitutions={}, latex_elements={"preamble": "% the book's"})
    app = SimpleNamespace()
    pm_address._configure(app, config)
    return config


def test_an_address_turns_the_buttons_on_and_fills_intro_and_colophon():
    config = _configured("https://example.org/a/book")
    options = config.html_theme_options
    assert options["use_repository_button"] and options["use_issues_button"]
    assert options["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert config.myst_substitutions["repository"] == "<https://example.org/a/book>"
    assert r"\newcommand{\pmrepository}{\url{https://example.org/a/book}}" in config.latex_elements["preamble"]
    assert config.latex_elements["preamble"].startswith("% the book's")


def test_no_address_means_no_buttons_that_point_nowhere():
    config = _configured("")
    options = config.html_theme_options
    assert not options["use_repository_button"] and not options["use_issues_button"]
    assert options["launch_buttons"] == {"notebook_interface": "jupyterlab"}
    assert "http" not in config.myst_substitutions["repository"]
    assert re.search(r"\\newcommand\{\\pmrepository\}\{[^\\]*\}", config.latex_elements["preamble"])
