"""What a student version of an exercise must leave out, and what it must keep.

Read from the instructor's source notebook, independently of how the student
version is made (nbgrader's markers and cell metadata only).
"""
import re

import nbformat

BEGIN = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)")
END = re.compile(r"### END (SOLUTION|HIDDEN TESTS)")


def _lines(source):
    """(line, inside a solution or hidden-test region) for every line of a source notebook."""
    inside = False
    for cell in nbformat.read(source, as_version=4).cells:
        is_check = cell.metadata.get("nbgrader", {}).get("grade") and not cell.metadata["nbgrader"].get("solution")
        for line in cell.source.splitlines():
            if BEGIN.search(line):
                inside = True
            elif END.search(line):
                inside = False
            else:
                yield cell, line.strip(), inside, is_check


def visible_lines(source):
    """Every line of the source outside its solutions and hidden tests: what every student reads."""
    return {line for _, line, inside, _ in _lines(source) if not inside and line}


def secret_lines(source):
    """Every non-trivial line of the source's solutions and hidden tests (not bare ``return x``).

    A line the student version shows anyway (``assert np.allclose(`` opening a
    visible check, say) is no secret, so it is left out.
    """
    shown = visible_lines(source)
    return {line for _, line, inside, _ in _lines(source) if inside and len(line) > 12 and line not in shown}


def visible_check_lines(source):
    """Every line of the checks a student sees (test cells, less their hidden tests)."""
    return {line for _, line, inside, check in _lines(source) if check and not inside and line}


def problems(student_file, source):
    """Why ``student_file`` is not a clean student version of ``source`` (empty if it is)."""
    raw = student_file.read_text(encoding="utf-8")
    nb = nbformat.reads(raw, as_version=4)
    # compare with what the student reads (the file's JSON escapes quotes and backslashes)
    text = {line.strip() for cell in nb.cells for line in cell.source.splitlines()}
    found = []
    if BEGIN.search(raw) or END.search(raw):
        found.append("it still has BEGIN/END SOLUTION or HIDDEN TESTS markers")
    leaked = secret_lines(source) & text
    if leaked:
        found.append(f"solution or hidden-test lines: {sorted(leaked)[:3]}")
    lost = visible_check_lines(source) - text
    if lost:
        found.append(f"visible check lines missing: {sorted(lost)[:3]}")
    if any(cell.get("outputs") for cell in nb.cells):
        found.append("it has outputs")
    if "raise NotImplementedError()" not in raw:
        found.append("no '# YOUR CODE HERE / raise NotImplementedError()' stub")
    if not any(cell.metadata.get("nbgrader") for cell in nb.cells):
        found.append("no nbgrader cell metadata")
    return found


def solution_lines(sources):
    """{source notebook: its secret lines that no student reads in any of ``sources`` anyway}."""
    shown = set().union(*(visible_lines(s) for s in sources))
    out = {s: secret_lines(s) - shown for s in sources}
    assert all(out.values()), [s for s, lines in out.items() if not lines]
    return out
