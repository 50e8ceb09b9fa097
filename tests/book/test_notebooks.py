"""What the stored notebooks carry: outputs that nbval compares, and no record of when they ran."""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted([*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("exercises/*/*.ipynb")])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_execution_timestamps_are_stored(path):
    """nbclient's per-cell timings (`make notebooks` turns them off) would change on every run."""
    nb = nbformat.read(path, as_version=4)
    timed = [i for i, c in enumerate(nb.cells) if "execution" in c.metadata]
    assert not timed, f"{path.name}: cells {timed[:5]} store execution timestamps"
