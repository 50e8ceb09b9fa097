"""Doctests see numpy as ``np`` and attnlib's public names, as a reader would."""
import numpy as np
import pytest

import attnlib


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    doctest_namespace["np"] = np
    doctest_namespace.update({name: getattr(attnlib, name) for name in attnlib.__all__})
