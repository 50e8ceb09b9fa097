"""The package's order rule: no module of attnlib imports one that comes later in attnlib.ORDER."""
import ast
from pathlib import Path

import pytest

import attnlib

PACKAGE = Path(attnlib.__file__).parent
ORDER = [name for name, _ in attnlib.ORDER]


def imported(path: Path) -> set:
    """Every attnlib module ``path`` imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                out |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
            elif node.level == 0 and (node.module or "").startswith("attnlib."):
                out.add(node.module.split(".")[1])
            elif node.level == 0 and node.module == "attnlib":
                out |= {a.name for a in node.names if a.name in ORDER}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("attnlib.")}
    return out


def test_every_module_is_listed_once():
    files = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert len(ORDER) == len(set(ORDER))
    assert set(ORDER) == files, f"listed but missing: {set(ORDER) - files}; not listed: {files - set(ORDER)}"


@pytest.mark.parametrize("name", ORDER)
def test_no_module_imports_a_later_one(name):
    later = {m for m in imported(PACKAGE / f"{name}.py") if m in ORDER and ORDER.index(m) >= ORDER.index(name)}
    assert not later, f"attnlib.{name} imports {sorted(later)}, which come later in attnlib.ORDER"


def test_the_rule_is_checked_on_imports_inside_functions_too(tmp_path):
    """The check sees a late import hidden in a function (as attribution once imported backward)."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from .backward import gradients\n    from . import methods\n")
    assert imported(f) == {"backward", "methods"}
