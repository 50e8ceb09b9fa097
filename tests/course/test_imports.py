"""pm_course's layering, checked by folder, and its modules free of import cycles (lazy imports included).

The package's folders are its layers, lowest first (:data:`LAYERS`): ``state/`` (the
course object, its course file, its lock and every file of its state), then the
LMSs' formats and clients (``lms/``) and the grading sandbox (``sandbox/``), then
nbgrader's steps and the release of student versions (``grading/``), then the
commands (``steps/``), then the entry points at the top (``cli``). A module
imports from its own folder and lower ones, never from a higher one nor from one
beside its own; a step never imports another step (the command line composes
them). A cycle works only while every import in it stays lazy; the first one
moved to the top of a file breaks the tool at start-up.
"""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pm_course"
# the folders, lowest first; folders of one level stand side by side and import nothing of each other
LAYERS = {"state": 0, "lms": 1, "sandbox": 1, "grading": 2, "steps": 3, "": 4}


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """``pm_course/state/course.py`` -> ``pm_course.state.course``; a package's ``__init__`` is the package."""
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The pm_course modules an ``from ... import ...`` names (a name imported from a package may be a module)."""
    if node.level:
        base = importer.split(".")[: len(importer.split(".")) - node.level + (1 if is_package else 0)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    if module != "pm_course" and not module.startswith("pm_course."):
        return []
    return [module, *(f"{module}.{a.name}" for a in node.names)]


def imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports, anywhere in it (lazy imports included)."""
    found = {module_name(p, package): p for p in package.rglob("*.py")}
    graph = {}
    for name, path in found.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (named := _resolve(name, path.name == "__init__.py", node)):
                module, *members = named
                submodules = [m for m in members if m in found]
                # ``from a.b import c``: the module a.b.c when c is one, else (a name of a.b's) a.b itself
                deps.update(submodules + ([module] if len(submodules) < len(members) and module in found else []))
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in found)
        # importing a.b.c imports the packages a and a.b too: their __init__ only counts where named
        graph[name] = deps - {name, "pm_course"}
    return graph


def folder(module: str) -> str:
    """The layer folder of a module: ``pm_course.state.course`` -> ``state``; a module at the top -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS and (len(parts) > 2 or parts[1] != "cli") else ""


def crossings(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports that break the layering: to a higher folder, to a folder beside one's own, from a step to
    another step."""
    bad = []
    for importer, deps in sorted(graph.items()):
        mine = folder(importer)
        for dep in sorted(deps):
            theirs = folder(dep)
            if theirs != mine and LAYERS[theirs] >= LAYERS[mine]:
                bad.append((importer, dep))
            elif mine == theirs == "steps":
                bad.append((importer, dep))
    return bad


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
    assert {"pm_course.steps.grade", "pm_course.steps.collect", "pm_course.state.course"} <= graph.keys()
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

def test_every_module_lives_in_a_layer_folder_but_the_entry_points():
    top = sorted(m for m in imports() if folder(m) == "")
    assert top == ["pm_course", "pm_course.__main__", "pm_course.cli", "pm_course.jupyter_mode", "pm_course.student"], top


def test_the_check_finds_an_import_up_across_and_between_steps(tmp_path):
    """A lower folder importing a higher one, a folder importing one beside it, a step another step, and a lazy
    import among them: each is found; a module importing its own folder and lower ones is not."""
    for name, text in {"state/__init__.py": "", "state/course.py": "from pm_course.steps import grade\n",
                       "state/files.py": "from .course import Course\n",
                       "lms/__init__.py": "def f():\n    from pm_course import sandbox\n",
                       "sandbox/__init__.py": "from ..state.files import write_text\n",
                       "steps/__init__.py": "", "steps/grade.py": "from pm_course.steps.collect import collect\n",
                       "steps/collect.py": "from pm_course.lms import f\nfrom pm_course.state import files\n",
                       "cli.py": "from pm_course.steps import grade\n"}.items():
        (tmp_path / "pm_course" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pm_course" / name).write_text(text)
    assert crossings(imports(tmp_path / "pm_course")) == [
        ("pm_course.lms", "pm_course.sandbox"), ("pm_course.state.course", "pm_course.steps.grade"),
        ("pm_course.steps.grade", "pm_course.steps.collect")]


def test_no_folder_imports_a_higher_one_nor_a_step_another():
    graph = imports()
    assert {folder(m) for m in graph} == set(LAYERS), "a layer folder is gone or new: update LAYERS"
    bad = crossings(graph)
    assert not bad, "imports that break the layering (lower folder -> higher, or step -> step): " + ", ".join(
        f"{a} -> {b}" for a, b in bad)


def test_no_package_names_something_after_one_of_its_modules():
    """``from pm_course.sandbox import limits`` gives a package's own ``limits`` before its module of that name, and
    importing the module replaces the package's ``limits``: a package defines no name of one of its modules."""
    for init in PACKAGE.rglob("__init__.py"):
        modules = {p.stem for p in init.parent.glob("*.py")} | {p.name for p in init.parent.iterdir()
                                                              if (p / "__init__.py").is_file()}
        tree = ast.parse(init.read_text(encoding="utf-8"))
        names = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                 if isinstance(t, ast.Name)}
        names |= {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        assert not names & modules, f"{init}: {sorted(names & modules)} name modules of the package too"


def test_push_stands_beside_export_on_what_both_send():
    """export (a gradebook file) and push (the LMS's API) share the late policy, the comment and the page the LMS
    gets through pm_course.lms.outcome; push imports nothing of export."""
    graph = imports()
    assert "pm_course.lms.outcome" in graph["pm_course.steps.push"] & graph["pm_course.steps.export"]
    assert "pm_course.steps.export" not in graph["pm_course.steps.push"]


def test_the_commands_that_read_pages_do_not_load_the_page_maker():
    """export, push and review pack, send and list the feedback pages that grading made: they import
    :mod:`pm_course.state.pages`, never nbconvert's exporter (about a second of every such command's start)."""
    import subprocess
    import sys

    code = ("import sys, pm_course.steps.export, pm_course.steps.feedback, pm_course.steps.push,"
            " pm_course.steps.review\nprint('nbconvert' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"], out
    for step in ("export", "feedback"):
        deps = imports()[f"pm_course.steps.{step}"] | imports()["pm_course.lms.outcome"]
        assert "pm_course.state.pages" in deps and "pm_course.grading.feedback_page" not in deps, deps
