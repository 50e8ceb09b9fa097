"""The reference tests skip where PyTorch, tokenizers or the sandbox are missing, and fail so under CI=true."""
import pytest

import needs


def test_a_missing_reference_skips_saying_why(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no_such_reference is optional"):
        needs.module("no_such_reference", "no_such_reference is optional")


def test_under_ci_a_missing_reference_fails(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="under CI=true a reference test may not skip"):
        needs.module("no_such_reference", "no_such_reference is optional")
    with pytest.raises(pytest.fail.Exception, match="no card's check was made on this CPU"):
        needs.skip("no card's check was made on this CPU")


def test_an_installed_reference_is_imported(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert needs.module("json", "never missing").dumps([1]) == "[1]"
