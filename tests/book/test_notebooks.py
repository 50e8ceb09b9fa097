"""What the stored notebooks carry: outputs that nbval compares, and no record of when they ran."""
import re
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


def headings_after_a_colon(source: str) -> list[str]:
    """Headings that follow, in the same markdown cell, a paragraph ending in ':'.

    A paragraph that ends in a colon introduces the cell below it; a heading
    after it in the same cell puts what it introduces under the wrong section
    (chapter 12's zero-or-mean table once rendered under "Explore").
    """
    text, found, introduced = source.replace("\r", ""), [], None
    for block in text.split("\n\n"):
        block = block.strip()
        if block.startswith("#") and introduced is not None:
            found.append(f"{introduced[-40:]!r} then {block.splitlines()[0]!r}")
        elif block and not block.startswith(("```", ":::", "$$")):
            introduced = block if block.endswith(":") else None
    return found


def test_the_heading_checker():
    assert headings_after_a_colon("The same cuts, judged both ways:\n\n## Explore\n\nEvery head.")
    assert not headings_after_a_colon("## Explore\n\nEvery head of the model, pre-rendered:")
    assert not headings_after_a_colon("Text ends here.\n\n## Next\n\nIt introduces:")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_what_a_colon_introduces_stays_in_its_section(path):
    nb = nbformat.read(path, as_version=4)
    found = [f"cell {i}: {hit}" for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
             for hit in headings_after_a_colon(c.source)]
    assert not found, f"{path.name}: a heading between a paragraph and the cell it introduces: {found}"


SIGNED = re.compile(r"(?<![\w.])[+\-−]\d+\.\d+")  # a value as the book's tables print it: +13.55, -5.44


def alt_numbers_not_printed(nb) -> list[str]:
    """The signed values a figure's alt text states that no text output of its notebook prints.

    An alt text is written by hand beside the figure; the printed outputs are computed, and nbval
    compares them with a fresh run (tests/book/site/test_outputs.py). A value in the alt text that
    no output prints is one the figure no longer shows (or never did).
    """
    printed = "\n".join(o.get("text", "") or o.get("data", {}).get("text/plain", "")
                        for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    printed_values = set(SIGNED.findall(printed.replace("−", "-")))
    missing = []
    for c in nb.cells:
        alt = c.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
        missing += [v for v in SIGNED.findall(alt.replace("−", "-")) if v not in printed_values]
    return missing


def test_the_alt_text_checker():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("plot()", metadata={"mystnb": {"image": {"alt": "edges of +6.88 and -5.44"}}}),
        nbformat.v4.new_code_cell("table()", outputs=[nbformat.v4.new_output("stream", text="a  +6.88\nb  -5.44\n")]),
    ])
    assert alt_numbers_not_printed(nb) == []
    nb.cells[1].outputs[0].text = "a  +6.91\nb  -5.44\n"  # the graph changed; its alt text did not
    assert alt_numbers_not_printed(nb) == ["+6.88"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_figures_alt_text_states_only_values_its_notebook_prints(path):
    missing = alt_numbers_not_printed(nbformat.read(path, as_version=4))
    assert not missing, f"{path.name}: the alt text states {missing}, which no output prints"
