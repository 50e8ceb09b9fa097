"""The book's address, from one setting: ``repository: url`` in ``_config.yml``.

The site's repository and issues buttons, its Binder and Colab buttons, the
PDF's colophon, the introduction's "get a copy" line and every notebook's
install cell (the hidden cell that installs attnlib on Colab or Binder) all
come from that one setting. Left empty (``url: ""``), the book points at no
address: no repository or launch buttons, and the install cell says how to
install attnlib from a local copy instead.

A notebook's install cell travels with the notebook (a student opens it on
Colab with nothing else), so it is written into each notebook by
``python _ext/pm_address.py`` from the setting; the build fails (a warning,
under ``--warningiserror``) if a notebook's cell does not match it.
"""
from __future__ import annotations

import sys
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
MARK = "# attnlib for this notebook"  # the first line of every install cell
BUTTONS = ("use_repository_button", "use_issues_button")
LAUNCHERS = ("binderhub_url", "colab_url", "jupyterhub_url", "jupyterlite_url")


def install_cell(url: str) -> str:
    """The source of the install cell for a book at ``url`` ("" for none).

    >>> print(install_cell("https://example.org/book").splitlines()[-2])
            "install -q git+https://example.org/book",
    >>> "make install" in install_cell("")
    True
    """
    if url:
        return (f"{MARK} (on Colab or Binder it is not installed yet):\n"
                "# pip installs it from the book's repository.\n"
                "try:\n"
                "    import attnlib  # noqa: F401\n"
                "except ImportError:\n"
                "    get_ipython().run_line_magic(\n"
                '        "pip",\n'
                f'        "install -q git+{url}",\n'
                "    )")  # as ruff formats it, so that formatting the notebooks keeps it
    return (f"{MARK}: installed by `make install` in a copy of the book's\n"
            "# repository (the book names no public address to install it from).\n"
            "try:\n"
            "    import attnlib  # noqa: F401\n"
            "except ImportError:\n"
            "    raise ImportError(\n"
            '        "attnlib is not installed in this kernel: in your copy of the"\n'
            '        " book\'s repository run `make install` and use its .venv, or"\n'
            '        " run `pip install -e PATH_TO_YOUR_COPY`"\n'
            "    ) from None")


def setting(config_file: Path = ROOT / "_config.yml") -> str:
    """``repository: url`` of a book's ``_config.yml`` ("" if unset)."""
    import yaml

    config = yaml.safe_load(config_file.read_text()) or {}
    return ((config.get("repository") or {}).get("url") or "").strip()


def install_cell_index(cells) -> int | None:
    """The index of a notebook's install cell (its first line is ``MARK``), or None."""
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "code" and cell_source(cell).startswith(MARK):
            return i
    return None


def cell_source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def write_install_cells(paths, url: str) -> list[Path]:
    """Set the install cell of each notebook in ``paths`` for ``url``; the notebooks changed."""
    import nbformat

    changed = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        i = install_cell_index(nb.cells)
        if i is None:
            raise SystemExit(f"{path}: no install cell (a code cell starting {MARK!r})")
        if nb.cells[i].source != install_cell(url):
            nb.cells[i].source = install_cell(url)
            nbformat.write(nb, path)
            changed.append(path)
    return changed


def book_notebooks(root: Path = ROOT) -> list[Path]:
    return sorted([*root.glob("chapters/*.ipynb"), *root.glob("exercises/*/*.ipynb")])


# --- Sphinx ------------------------------------------------------------------------------

def _configure(app, config):
    url = (config.html_theme_options.get("repository_url") or "").strip()
    # jupyter-book refuses the repository buttons without an address, and the launch buttons
    # fail on an empty one: _config.yml leaves them off and they are turned on here, only when
    # the address is set.
    for button in BUTTONS:
        config.html_theme_options[button] = bool(url)
    if not url:
        launch = dict(config.html_theme_options.get("launch_buttons") or {})
        config.html_theme_options["launch_buttons"] = {k: v for k, v in launch.items() if k not in LAUNCHERS}
    config.myst_substitutions = {
        **(config.myst_substitutions or {}),
        "repository": f"<{url}>" if url else "from whoever gave you this book",
    }
    colophon = rf"\url{{{url}}}" if url else "the copy of the repository it was built from"
    config.latex_elements = {**config.latex_elements,
                             "preamble": config.latex_elements.get("preamble", "")
                             + f"\n\\newcommand{{\\pmrepository}}{{{colophon}}}\n"}
    app.pm_repository_url = url


def _check_install_cells(app, env, docnames):
    import nbformat

    for docname in docnames:
        path = Path(env.doc2path(docname))
        if path.suffix != ".ipynb":
            continue
        cells = nbformat.read(path, as_version=4).cells
        i = install_cell_index(cells)
        if i is not None and cells[i].source != install_cell(app.pm_repository_url):
            logger.warning(f"{docname}: its install cell does not match the book's address "
                           f"(repository: url in _config.yml): run `python _ext/pm_address.py`",
                           location=docname)


def setup(app):
    app.connect("config-inited", _configure, priority=900)  # after jupyter-book's own settings
    app.connect("env-before-read-docs", _check_install_cells)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    if sys.argv[1:]:
        raise SystemExit("usage: python _ext/pm_address.py  (sets every notebook's install cell"
                         " from repository: url in _config.yml)")
    url = setting()
    changed = write_install_cells(book_notebooks(), url)
    for path in changed:
        print(f"{path.relative_to(ROOT)}: install cell set for {url or 'no address'}")
    print(f"{len(changed)} notebooks changed" if changed else "every install cell is already set")
