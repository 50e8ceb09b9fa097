"""pm_course's modules import each other without a cycle (lazy imports inside functions included).

A cycle works only while every import in it stays lazy; the first one moved to the
top of a file breaks the tool at start-up. Each concept has its own module (grades.csv
in ``grades``, notebook repairs in ``repair``), so what reads grades never imports the grader.
"""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pm_course"


def imports() -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports, anywhere in it."""
    graph = {}
    for path in PACKAGE.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pm_course."):
                deps.add(node.module.split(".")[1])
        graph[path.stem] = deps - {path.stem}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                return path[path.index(dep):] + [dep]
            if dep not in state and (found := visit(dep, path + [dep])):
                return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_the_check_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_pm_course_has_no_import_cycle():
    graph = imports()
    assert {"grade", "collect", "review", "grades"} <= graph.keys()
    found = cycle(graph)
    assert found is None, "import cycle: " + " -> ".join(found)


def test_a_command_starts_without_the_iri_parsers_and_still_validates_notebooks():
    """pm-course leaves out jsonschema's IRI checker (three parsers built on import: most of a
    command's start-up); nbformat still refuses a notebook that breaks its schema."""
    import subprocess
    import sys

    code = """
import sys, nbformat
import pm_course.cli
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
nbformat.validate(nb)
nb.cells[0]["execution_count"] = "one"
try:
    nbformat.validate(nb)
except nbformat.ValidationError:
    print("refused")
print(sys.modules.get("rfc3987_syntax", "absent"))
"""
    # pm_course imported first, as `python -m pm_course` does
    out = subprocess.run([sys.executable, "-c", "import pm_course\n" + code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["refused", "None"], out



def test_nbformat_alone_loads_no_iri_parser():
    """The pinned jsonschema (requirements.txt) has no IRI checker to load: a process that imports
    nbformat without pm_course (a test worker, a book build) does not build its parsers either."""
    import subprocess
    import sys

    code = "import sys, nbformat; print('rfc3987_syntax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"], out

# The steps of a term stand side by side on the state layer (the course folder, its lock, fingerprints,
# grades.csv, the manifest, history, the LMS formats, the course file): the command line composes them.
# ``export`` holds both the gradebook export and the feedback packing; ``status`` lives with ``review``.
STEPS = {"collect", "grade", "review", "export"}
# ``reviews``: the written answers and their reviews, which grading (keeping the reviews of unchanged answers)
# and reviewing share
STATE = {"course", "state", "fingerprints", "grades", "submissions", "history", "lms", "config", "exported",
         "reviews"}


def test_the_steps_import_no_other_step_and_the_state_layer_no_step():
    graph = imports()
    assert STATE <= graph.keys() and STEPS <= graph.keys(), "a module named here is gone: update STEPS or STATE"
    crossing = sorted((step, dep) for step in STEPS for dep in graph[step] & STEPS)
    assert not crossing, f"a step imports another (the command line composes them): {crossing}"
    upward = sorted((layer, dep) for layer in STATE for dep in graph[layer] & STEPS)
    assert not upward, f"the state layer imports a step: {upward}"


def test_the_commands_that_read_pages_do_not_load_the_page_maker():
    """export, push and review pack, send and list the feedback pages that grading made: they import
    :mod:`pm_course.pages`, never nbconvert's exporter (about a second of every such command's start)."""
    import subprocess
    import sys

    code = "import sys, pm_course.export, pm_course.push, pm_course.review\nprint('nbconvert' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"], out
    assert "pages" in imports()["export"] and "feedback" not in imports()["export"]
