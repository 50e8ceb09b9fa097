"""Small fixes to how the site is assembled (a local Sphinx extension).

* Load MathJax on every page: the sidebar's chapter titles carry maths on
  pages whose body has none (bibliography, search, index), and would
  otherwise show raw TeX there.
* Drop repeated inline scripts from the written pages: under Jupyter Book,
  sphinx-thebe's and sphinx-togglebutton's configuration scripts reach
  notebook pages twice, and a second ``const`` declaration is a JavaScript
  error in the reader's console.
* Give the PDF edition (the LaTeX builder) a printed book's structure; see
  :func:`_print_structure`.
"""
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

_INLINE_SCRIPT = re.compile(r"^\s*<script>[^<]*</script>\s*$")


def _dedupe_inline_scripts(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        lines = page.read_text(encoding="utf-8").splitlines(keepends=True)
        seen, kept = set(), []
        for line in lines:
            if _INLINE_SCRIPT.match(line):
                if line.strip() in seen:
                    continue
                seen.add(line.strip())
            kept.append(line)
        if len(kept) != len(lines):
            page.write_text("".join(kept), encoding="utf-8")


# --- the PDF edition -----------------------------------------------------------
_CHAPTER_NUMBER = re.compile(r"^(\d+)\.\s+")
_EXERCISE_NUMBER = re.compile(r"^Exercise (\d+):\s+")
_SECRET = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)")
_SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n", re.M)


def _latex(text):
    return nodes.raw("", text + "\n", format="latex")


def _strip_number(section, pattern, expected, docname):
    """Drop the number the site writes into a title ("3. ..."): LaTeX numbers it, and must agree."""
    title = section.next_node(nodes.title)
    first = title.children[0] if title.children else None
    match = pattern.match(first.astext()) if isinstance(first, nodes.Text) else None
    if match is None:
        return
    if int(match.group(1)) != expected:
        logger.warning(f"{docname}: the title says {match.group(1)} but it is number {expected} in print",
                       location=docname)
    title.replace(first, nodes.Text(first.astext()[match.end():]))


def _move_solutions(chapter, docname, number, appendix):
    """Move an exercise's solution cells, model answers and checks with hidden tests to the appendix.

    In their place the exercise says on which page they are. A student version
    (the course edition) has no such cells, so nothing moves and no appendix is made.
    """
    def secret(node):
        if isinstance(node, nodes.container) and node.get("nb_element") == "cell_code":
            block = node.next_node(nodes.literal_block)
            return block is not None and bool(_SECRET.search(block.astext()))
        # a written question's model answer, folded on the site
        title = node.next_node(nodes.title) if isinstance(node, nodes.admonition) else None
        return title is not None and "dropdown" in node.get("classes", []) and title.astext() == "Model answer"

    moved = []
    for cell in list(chapter.findall(secret)):
        block = cell.next_node(nodes.literal_block) if isinstance(cell, nodes.container) else None
        label = f"pmsol:{number}:{len(moved)}"
        parent, index = cell.parent, cell.parent.index(cell)
        previous = parent[index - 1] if index else None
        parent.remove(cell)
        if previous is not None and previous.get("pm_pointer"):  # one pointer for a run of moved cells
            pass
        else:
            pointer = _latex(
                "\\sphinxAtStartPar\\textit{Solution and checks: page~\\pageref{" + label + "} "
                "(Appendix~\\ref{pmsol:appendix}).}\\par")
            pointer["pm_pointer"] = True
            parent.insert(index, pointer)
        for text in list(block.findall(nodes.Text)) if block is not None else []:
            cleaned = _SOLUTION_MARKER.sub("", text.astext())
            if cleaned != text.astext():
                text.parent.replace(text, nodes.Text(cleaned))
        if block is not None:
            block.rawsource = block.astext()
        moved.append(_latex("\\label{" + label + "}"))
        moved.append(cell)
    _appendix_section(appendix, chapter, docname, f"Exercise {number}: ", moved)


def _appendix_section(appendix, chapter, docname, prefix, moved):
    if moved:
        title = chapter.next_node(nodes.title).deepcopy()
        section = nodes.section("", nodes.title("", prefix, *title.children), ids=[f"pm-solutions-{docname}"])
        section.extend(moved)
        appendix.append(_latex(f"%% pm-solutions-of: {docname}"))  # for tests/book/pdf: whose figures these are
        appendix.append(section)


def _move_check_solutions(chapter, docname, number, appendix):
    """Move the solutions of a chapter's "check your understanding" (folded on the site) to the appendix."""
    from sphinx_exercise.nodes import solution_node

    moved = []
    for i, solution in enumerate(list(chapter.findall(solution_node))):
        label = f"pmsol:{docname}:{i}"
        solution.replace_self(_latex("\\sphinxAtStartPar\\textit{Solution: page~\\pageref{" + label + "}.}\\par"))
        moved += [_latex("\\label{" + label + "}"), solution]
    _appendix_section(appendix, chapter, docname, f"Chapter {number}: ", moved)


def _print_structure(app, doctree, docname):
    """The book's structure in print, on the LaTeX builder's single assembled doctree.

    Jupyter Book's root page holds the introduction and one toctree per part.
    Sphinx's LaTeX writer would make the introduction's sections chapters and
    every page a section under the last of them. Here: the introduction
    becomes unnumbered front matter; each toctree caption a ``\\part``; each
    page a chapter, numbered by LaTeX as on the site (the number written in
    the site's title is taken out, after checking that they agree); the
    exercises a part numbered Exercise 1, 2, ...; the guides ("Using this book") an unnumbered part of
    unnumbered chapters; the solutions (the exercises'
    and those of the chapters' questions, all folded on the site) an appendix; the back matter appendices, with an unnumbered bibliography.
    """
    if app.builder.format != "latex" or docname != app.config.root_doc:
        return
    root = doctree.next_node(nodes.section)
    captions = [t.get("caption") for t in app.env.get_doctree(docname).findall(addnodes.toctree)]
    wrappers = [c for c in doctree.findall(nodes.compound) if "toctree-wrapper" in c["classes"]
                and not any(isinstance(a, addnodes.start_of_file) for a in _ancestors(c))]
    if len(wrappers) != len(captions):
        logger.warning(f"print structure: {len(captions)} toctree captions but {len(wrappers)} toctrees")
        return
    for wrapper in wrappers:
        wrapper.parent.remove(wrapper)
    # front matter: the introduction, unnumbered, its sections as sections
    intro = [child for child in root.children if not isinstance(child, nodes.title)]
    for child in intro:
        root.remove(child)
    front = nodes.section("", nodes.title("", app.config.pm_print_intro_title), ids=["pm-front-matter"])
    front.extend(intro)
    root.append(_latex("\\setcounter{secnumdepth}{-1}"))
    root.append(front)
    root.append(_latex("\\setcounter{secnumdepth}{0}"))
    chapter_no = exercise_no = 0
    appendix = nodes.section("", nodes.title("", "Solutions"), ids=["pm-solutions"])
    for caption, wrapper in zip(captions, wrappers):
        docs = [s for s in wrapper.children if isinstance(s, addnodes.start_of_file)]
        exercises = caption == app.config.pm_print_exercises_part
        back = caption == app.config.pm_print_back_matter
        guides = caption == app.config.pm_print_guides_part
        if guides:  # the guides: an unnumbered part of unnumbered chapters, not counted as chapters
            root.append(_latex("\\setcounter{secnumdepth}{-2}\\part{" + caption + "}"))
        elif back:
            root.append(_latex("\\appendix"))
            if len(appendix) > 1:
                appendix.insert(1, _latex("\\label{pmsol:appendix}"))
                root.append(appendix)
        elif exercises:
            root.append(_latex("\\part{" + caption + "}\n\\renewcommand{\\chaptername}{Exercise}"
                               "\\setcounter{chapter}{0}\\renewcommand{\\theHchapter}{exercise.\\arabic{chapter}}"))
        else:
            root.append(_latex("\\part{" + caption + "}"))
        for doc in docs:
            chapter = doc.next_node(nodes.section)
            if back and chapter is not None and doc["docname"] == app.config.pm_print_bibliography:
                # the bibliography environment makes its own unnumbered chapter
                chapter.replace_self([c for c in chapter.children if not isinstance(c, nodes.title)])
            elif exercises and chapter is not None:
                exercise_no += 1
                _strip_number(chapter, _EXERCISE_NUMBER, exercise_no, doc["docname"])
                _move_solutions(chapter, doc["docname"], exercise_no, appendix)
            elif not back and not guides and chapter is not None:
                chapter_no += 1
                _strip_number(chapter, _CHAPTER_NUMBER, chapter_no, doc["docname"])
                _move_check_solutions(chapter, doc["docname"], chapter_no, appendix)
            root.append(doc)
        if guides:
            root.append(_latex("\\setcounter{secnumdepth}{0}"))


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


def setup(app):
    app.add_config_value("pm_print_intro_title", "About this book", "")
    app.add_config_value("pm_print_exercises_part", "Exercises", "")
    app.add_config_value("pm_print_back_matter", "Back matter", "")
    app.add_config_value("pm_print_guides_part", "Using this book", "")
    app.add_config_value("pm_print_bibliography", "bibliography", "")
    app.connect("doctree-resolved", _print_structure)
    app.set_html_assets_policy("always")
    app.connect("build-finished", _dedupe_inline_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
