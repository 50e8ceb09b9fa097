"""The book build's execution cache is keyed by attnlib, its models and the environment (_ext/pm_cache.py)."""
from types import SimpleNamespace

import pytest

import pm_cache  # _ext/, on pytest's pythonpath (pyproject.toml)


@pytest.fixture
def book(tmp_path):
    (tmp_path / "attnlib" / "models").mkdir(parents=True)
    (tmp_path / "attnlib" / "model.py").write_text("def forward(): ...\n")
    (tmp_path / "attnlib" / "models" / "induction.json").write_text('{"seed": 0}')
    (tmp_path / "requirements.txt").write_text("numpy==2.4.6\n")
    return tmp_path


@pytest.mark.parametrize("change", ["attnlib/model.py", "attnlib/models/induction.json",
                                    "attnlib/models/new.npz", "requirements.txt"])
def test_a_change_to_attnlib_its_models_or_the_pins_is_a_new_key(book, change):
    before = pm_cache.key(book, {})
    path = book / change
    path.write_text((path.read_text() if path.exists() else "") + "# changed\n")
    assert pm_cache.key(book, {}) != before


def test_compiled_files_and_other_folders_keep_the_key(book):
    before = pm_cache.key(book, {})
    (book / "attnlib" / "__pycache__").mkdir()
    (book / "attnlib" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    (book / "chapters").mkdir()
    (book / "chapters" / "notes.md").write_text("prose\n")
    assert pm_cache.key(book, {}) == before
    assert pm_cache.key(book, {"PM_FIGURE_FORMATS": "png,pdf"}) != before


def _config(mode, path=""):
    return SimpleNamespace(nb_execution_mode=mode, nb_execution_cache_path=path)


def test_the_cache_lives_in_a_folder_named_by_the_key_and_older_ones_go(tmp_path, monkeypatch):
    monkeypatch.delenv("PM_EXECUTE", raising=False)
    app = SimpleNamespace(outdir=str(tmp_path / "_build" / "html"))
    old = tmp_path / "_build" / ".jupyter_cache" / "0123456789abcdef"
    old.mkdir(parents=True)
    config = _config("cache")
    pm_cache._configure(app, config)
    assert config.nb_execution_cache_path == str(tmp_path / "_build" / ".jupyter_cache" / pm_cache.key())
    assert not old.exists()


def test_pm_execute_force_executes_everything_but_a_book_that_executes_nothing(tmp_path, monkeypatch):
    app = SimpleNamespace(outdir=str(tmp_path / "_build" / "html"))
    monkeypatch.setenv("PM_EXECUTE", "force")
    config = _config("cache")
    pm_cache._configure(app, config)
    assert (config.nb_execution_mode, config.nb_execution_cache_path) == ("force", "")
    course_edition = _config("off")
    pm_cache._configure(app, course_edition)
    assert course_edition.nb_execution_mode == "off"
    monkeypatch.setenv("PM_EXECUTE", "always")
    with pytest.raises(ValueError, match="PM_EXECUTE='always'"):
        pm_cache._configure(app, _config("cache"))
