"""One word, one meaning: "pattern" in the notebooks' prose is the glossary's pattern.

The glossary (chapters/glossary.md) defines a *pattern* as row t of P_i = X W^P_i (what
token t looks for) and the *pattern matrix* as W^P_i; the softmax's output A_i
is the *attention weights*. This test reads the markdown of every chapter and
exercise notebook and flags each "pattern" that is not visibly one of those:
code (inline or fenced) and glossary links ({term}`pattern`) are skipped, and
every other occurrence must sit in one of the phrases below.
"""
import ast
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted([*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("exercises/*/*.ipynb")])

WORD = re.compile(r"\bpatterns?\b", re.I)

# What may follow the word: the pattern matrix, the title pair, or the symbol itself.
AFTER = [
    re.compile(r"patterns?\s+matri(x|ces)\b", re.I),  # pattern matrix W^P_i
    re.compile(r"patterns?(-|\s+)and(-|\s+)messages?\b", re.I),  # the book's title, the form's name
    re.compile(r"patterns?[,:]?\s+(\$\s*|\()?(p_|P_|p\^|P\^|x_t\s*W\^P|X\s*W\^P)", re.I),  # pattern $p_t$, patterns $P_i$
    re.compile(r"patterns?\s*\((its\s+|the\s+)?rows?\s+of\s+\$\s*(P_|X\s*W\^P)", re.I),  # patterns (rows of $P_i$)
]
# Another text's name, quoted where the sentence names that text.
OTHER_TEXT = re.compile(r"circuits paper|Elhage|TransformerLens|hook_pattern", re.I)
QUOTED = re.compile(r"\*attention pattern\*|\"attention pattern\"|attention pattern", re.I)

# Occurrences still to reword, by notebook and the words around them (a stale entry fails the
# test below): none left.
OTHER_SENSE_TO_FIX: dict[str, list[str]] = {}  # every chapter and exercise now uses the glossary's words


# A Markdown link to a target anywhere in the book, [text](#target) or [text](<#target with spaces>):
# a glossary term, a label or an equation. MyST resolves it as it resolves {term}, {ref} or {eq};
# JupyterLab shows it as a link, where it would show the role raw.
LINK = re.compile(r"\[([^\]]*)\]\(<?#([^)>]+)>?\)")


def term_links(source: str) -> list[str]:
    """The glossary terms a markdown cell links: {term} roles and links to #term (lower case)."""
    roles = [(re.search(r"<([^>]*)>\s*$", r) or re.match(r"(.*)", r, flags=re.S)).group(1)
             for r in re.findall(r"\{term\}`([^`]*)`", source)]
    return [t.strip().lower() for t in roles + [m.group(2) for m in LINK.finditer(source)]]


def labels() -> set[str]:
    """Every label the book defines: (label)= lines, :label: and :name: options."""
    found = set()
    for path in [*NOTEBOOKS, *ROOT.glob("*.md"), *ROOT.glob("chapters/*.md"), *ROOT.glob("guides/*.md")]:
        text = ("\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
                if path.suffix == ".ipynb" else path.read_text(encoding="utf-8"))
        found |= set(re.findall(r"^\(([\w-]+)\)=\s*$", text, flags=re.M))
        found |= set(re.findall(r"^:(?:label|name): *([\w-]+)\s*$", text, flags=re.M))
    return found


def prose(source: str) -> str:
    """Markdown with code, glossary links, labels and cross-reference targets removed."""
    text = re.sub(r"^(```|:::)\{?(code|python|bash|eval-rst)[^\n]*\n.*?^\1\s*$", " ", source, flags=re.S | re.M)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\{term\}`[^`]*`", " TERM ", text)
    text = LINK.sub(lambda m: " TERM " if m.group(2).strip().lower() in glossary_terms() else " LINK ", text)
    text = re.sub(r"`[^`]*`", " CODE ", text)
    text = re.sub(r"\*{1,2}(?=\S)|(?<=\S)\*{1,2}", "", text)  # emphasis: **pattern** reads as pattern
    text = re.sub(r"^\([\w-]+\)=\s*$", " ", text, flags=re.M)  # (ch-patterns)=
    text = re.sub(r"^:::+\s*\{[\w-]+\}.*$", " ", text, flags=re.M)  # directive heads: {solution} ex-pattern-rank
    text = re.sub(r"^:[\w-]+:.*$", " ", text, flags=re.M)  # directive options: :label: ex-pattern-rank
    return text


def sentence_around(text: str, start: int, end: int) -> str:
    left = max(text.rfind(". ", 0, start), text.rfind("\n\n", 0, start), 0)
    right = min([i for i in (text.find(". ", end), text.find("\n\n", end)) if i >= 0] or [len(text)])
    return text[left:right]


def context(text: str, start: int, end: int) -> str:
    """A few words either side, on one line (what the allow-list records)."""
    return " ".join(text[max(0, start - 30):end + 30].split())


def other_sense(markdown: str) -> list[str]:
    """Each "pattern" in ``markdown`` that is not in the glossary's sense, with its context."""
    text = prose(markdown)
    found = []
    for m in WORD.finditer(text):
        rest = text[m.start():]
        if any(p.match(rest) for p in AFTER):
            continue
        before = text[max(0, m.start() - 11):m.end()]
        if QUOTED.search(before + text[m.end():m.end() + 1]) and OTHER_TEXT.search(sentence_around(text, m.start(), m.end())):
            continue
        found.append(context(text, m.start(), m.end()))
    return found


def occurrences():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown":
                for ctx in other_sense(cell.source):
                    yield path.stem, i, ctx


def test_the_checker_flags_pattern_for_attention_weights():
    # what the book used to say, and must not say again
    assert other_sense("The matrix $A$ is the head's **attention pattern**.")
    assert other_sense("If all heads share one pattern $A$, the sum factors.")
    assert other_sense("Each head attends in its own way: four patterns.")
    assert other_sense("the pattern decides *where to read*")


def test_the_checker_accepts_the_glossary_sense():
    assert not other_sense("$W^P_i$ is the head's **pattern matrix**.")
    assert not other_sense("Row $t$ of $P_i$, the pattern $p_t = x_t W^P_i$, is what token $t$ looks for.")
    assert not other_sense("the patterns $P_i = X W^P_i$ of every token")
    assert not other_sense("# Patterns and Messages")
    assert not other_sense("the patterns-and-messages form")
    assert not other_sense("a {term}`pattern` is a direction; `attnlib.attention_pattern(Q, K)` is code")
    assert not other_sense("The circuits paper calls $A_i$ the *attention pattern*.")
    # a quoted name without the text it belongs to is not enough
    assert other_sense("The *attention pattern* of head 2.")


def test_pattern_has_one_meaning_in_every_notebook():
    found = {}
    for stem, i, ctx in occurrences():
        if ctx in OTHER_SENSE_TO_FIX.get(stem, ()):
            continue
        found.setdefault(stem, []).append(f"cell {i}: ...{ctx}...")
    assert not found, "\"pattern\" used for something other than a row of X W^P_i:\n" + "\n".join(
        f"{stem}: {hit}" for stem, hits in found.items() for hit in hits)


def test_the_allow_list_has_no_stale_entries():
    present = {}
    for stem, _, ctx in occurrences():
        present.setdefault(stem, set()).add(ctx)
    stale = [(stem, ctx) for stem, ctxs in OTHER_SENSE_TO_FIX.items() for ctx in ctxs
             if ctx not in present.get(stem, set())]
    assert not stale, f"fixed (delete from OTHER_SENSE_TO_FIX): {stale}"


@pytest.mark.parametrize("stem", sorted(OTHER_SENSE_TO_FIX))
def test_the_allow_list_is_only_for_notebooks_of_others(stem):
    number = int(stem.split("_")[0]) if stem[:2].isdigit() else None
    chapter = any(p.stem == stem and p.parent.name == "chapters" for p in NOTEBOOKS)
    assert not (chapter and number is not None and number <= 9), f"{stem}: chapters 1-9 must use the glossary's sense"


def glossary_terms() -> set[str]:
    """The terms the glossary defines: the unindented lines inside its ```{glossary} blocks."""
    text = (ROOT / "chapters" / "glossary.md").read_text(encoding="utf-8")
    terms = set()
    for block in re.findall(r"```\{glossary\}\n(.*?)```", text, flags=re.S):
        terms |= {line.strip().lower() for line in block.splitlines() if line.strip() and not line[0].isspace()}
    return terms


def test_the_glossary_defines_the_book_s_vocabulary():
    terms = glossary_terms()
    for term in ("pattern", "pattern matrix", "message", "message matrix", "attention weights",
                 "attention logits", "output logits", "causal mask", "flop", "materialised", "factored",
                 "bilinear form", "embedding", "unembedding", "residual stream", "circuit", "eigenvalue",
                 "copying score", "forms"):
        assert term in terms, f"the glossary does not define {term!r}"


def test_the_glossary_defines_what_chapters_10_to_16_use():
    """The words of reading a trained model, each defined before a reader needs it."""
    terms = glossary_terms()
    missing = [term for term in (
        "score", "ablation", "activation patching", "path patching", "clean and corrupt", "virtual head",
        "previous-token head", "induction head", "composition", "composition score", "null", "percentile",
        "loss", "direct logit attribution", "path expansion", "qk attribution", "attribution graph",
        "head names", "model card", "occurrence") if term not in terms]
    assert not missing, f"the glossary does not define {missing}"


def test_chapter_10_opens_with_the_words_of_its_model_card():
    """Chapter 10 prints a model card that speaks of heads chapter 12 defines: a box links them first."""
    nb = nbformat.read(ROOT / "chapters" / "10_residual_stream.ipynb", as_version=4)
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "load(" in c.source)
    before = " ".join(c.source for c in nb.cells[:first_code] if c.cell_type == "markdown")
    linked = set(term_links(before))
    for term in ("model card", "head names", "previous-token head", "induction head", "ablation",
                 "occurrence", "null"):
        assert term in linked, f"chapter 10 does not link {term!r} before its model card"


def test_every_term_link_has_a_glossary_entry():
    """{term}`text <target>`, {term}`target` or [text](#target) must name a glossary entry or a label."""
    terms, known = glossary_terms(), labels()
    missing = []
    for path in NOTEBOOKS + [ROOT / "intro.md", ROOT / "chapters" / "glossary.md"]:
        sources = ([c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
                   if path.suffix == ".ipynb" else [path.read_text(encoding="utf-8")])
        for source in sources:
            for role in re.findall(r"\{term\}`([^`]*)`", source):
                target = re.search(r"<([^>]*)>\s*$", role)
                name = (target.group(1) if target else role).strip().lower()
                if name not in terms:
                    missing.append(f"{path.name}: {role}")
            for m in LINK.finditer(source):
                if m.group(2).strip().lower() not in terms and m.group(2).strip() not in known:
                    missing.append(f"{path.name}: {m.group(0)}")
    assert not missing, f"links to terms the glossary lacks (or to labels the book does not define): {missing}"


def test_chapters_1_to_9_link_the_glossary():
    linked = set()
    for path in NOTEBOOKS:
        if path.parent.name == "chapters" and path.stem[:2].isdigit() and int(path.stem[:2]) <= 9:
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type == "markdown":
                    linked |= set(term_links(cell.source))
    for term in ("pattern", "pattern matrix", "message", "message matrix", "attention weights",
                 "attention logits", "causal mask", "flop", "factored", "materialised", "bilinear form",
                 "embedding", "residual stream", "unembedding", "circuit"):
        assert term in linked, f"chapters 1-9 never link {term!r} to the glossary"


# --- The glossary's words in code names and headings --------------------------------------------
# A library name (function, class, method) or a notebook variable that contains a defined word
# must use it in the glossary's sense. "pattern": the name's docstring speaks of W^P (or of the
# patterns-and-messages form); the softmax's output is the "attention weights" (A), and "weights"
# alone means the parameters. "circuit": a product of weight matrices along one path (W^P_i, W^M_i,
# W_E W^M_i W_U). Names kept with another sense say why.

KEPT_OTHER_SENSE: dict = {
    # public names other code relies on, kept with another sense (none now: Model.patterns and
    # Trace.patterns are deprecated aliases of attention_weights, whose docstrings speak of W^P)
}
GLOSSARY_SENSE = {
    "pattern": re.compile(r"W\^P|pattern matri|patterns and messages|patterns too", re.I),
    "circuit": re.compile(r"W\^P|W\^M|W_E\b|W_U\b|pattern matri|message matri", re.I),
}
OLD_NAMES = {  # old name -> the glossary-named function it stands for (each old name warns)
    "attnlib.attention.attention_pattern": "attention_weights",
    "attnlib.plots.pattern_heatmap": "attention_heatmap",
    "attnlib.plots.head_patterns": "head_attention_weights",
    "attnlib.plots.weights_heatmap": "attention_heatmap",
    "attnlib.plots.head_weights": "head_attention_weights",
}


def library_names():
    """Every public function, class and method of attnlib's modules, by dotted name."""
    import importlib
    import inspect
    import pkgutil

    import attnlib
    for info in pkgutil.iter_modules(attnlib.__path__):
        module = importlib.import_module(f"attnlib.{info.name}")
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            yield f"{module.__name__}.{name}", obj
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    if not member.startswith("_"):
                        yield f"{module.__name__}.{name}.{member}", value


def names_in_another_sense(names) -> list[str]:
    import inspect

    found = []
    for dotted, obj in names:
        leaf = dotted.rsplit(".", 1)[-1].lower()
        for word, sense in GLOSSARY_SENSE.items():
            if word not in leaf or dotted in KEPT_OTHER_SENSE or dotted in OLD_NAMES:
                continue
            doc = (inspect.getdoc(obj) or "").split("\n\n")[0]
            if not sense.search(doc):
                found.append(f"{dotted}: {doc[:80]!r}")
    return found


def test_library_names_use_the_glossary_s_words():
    found = names_in_another_sense(library_names())
    assert not found, ("a library name uses a glossary word in another sense (rename it, keep the old "
                       "name as an alias in OLD_NAMES):\n" + "\n".join(found))


def test_the_name_checker_flags_pattern_for_attention_weights():
    def attention_pattern(Q, K):
        """Attention weights ``softmax(Q Kᵀ / √d_k)``, one row per query."""

    def qk_circuit(w):
        """Pattern matrices ``W^P_i = W^Q_i (W^K_i)ᵀ`` for every head."""

    def circuit_of_tokens(x):
        """The tokens the sentence is made of."""

    found = names_in_another_sense([("m.attention_pattern", attention_pattern), ("m.qk_circuit", qk_circuit),
                                    ("m.circuit_of_tokens", circuit_of_tokens)])
    assert [f.split(":")[0] for f in found] == ["m.attention_pattern", "m.circuit_of_tokens"]


def test_old_names_are_the_new_functions_and_keep_old_code_running():
    import importlib
    import warnings

    import numpy as np

    for dotted, new in OLD_NAMES.items():
        module_name, old = dotted.rsplit(".", 1)
        module = importlib.import_module(module_name)
        assert hasattr(module, new), f"{module_name} has no {new}"
    from attnlib import attention, attention_pattern, attention_weights, plots
    for dotted, new in OLD_NAMES.items():
        module_name, old = dotted.rsplit(".", 1)
        if module_name == "attnlib.plots":  # the same function behind a warning
            assert getattr(plots, old).__wrapped__ is getattr(plots, new), dotted
    rng = np.random.default_rng(0)
    Q, K = rng.standard_normal((2, 2, 5, 3))  # (n_heads, T, d_k) each
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = attention_pattern(Q, K, causal=True)
    assert np.array_equal(old, attention_weights(Q, K, causal=True))
    assert [w.category for w in caught] == [PendingDeprecationWarning]
    assert "attention_weights" in str(caught[0].message)
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert np.allclose(old @ K, attention(Q, K, K, causal=True))


def test_the_old_names_of_the_figures_warn_and_draw_the_same():
    """plots.weights_heatmap, head_weights (and the older pattern_heatmap, head_patterns) warn, as attention_pattern does."""
    import warnings

    import matplotlib.pyplot as plt
    import numpy as np
    from attnlib import plots

    A = np.array([[1.0, 0.0], [0.25, 0.75]])
    for old, new in [("weights_heatmap", "attention_heatmap"), ("pattern_heatmap", "attention_heatmap"),
                     ("head_weights", "head_attention_weights"), ("head_patterns", "head_attention_weights")]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig = getattr(plots, old)(A[None] if new.startswith("head") else A, ["a", "b"])
        plt.close(fig)
        assert [w.category for w in caught] == [PendingDeprecationWarning], old
        assert f"attnlib.plots.{new}" in str(caught[0].message) and caught[0].filename == __file__


def test_renamed_keywords_still_work_and_name_the_new_one():
    """metrics' functions took the attention weights as ``pattern`` (or ``weights``): that keyword still works, warned."""
    import inspect
    import warnings

    import numpy as np
    from attnlib import incontext, metrics

    A = np.tri(4)[None] / np.arange(1, 5)[:, None]  # one head, uniform causal
    tokens, mask = np.array([3, 1, 3, 1]), np.array([False, True, True, True])
    calls = [(metrics.attention_to_previous, {"first": 2}, "pattern"),
             (metrics.attention_to, {"source": tokens * 0, "mask": mask}, "pattern"),
             (metrics.head_scores, {"tokens": tokens, "mask": mask}, "pattern"),
             (metrics.onto_one_occurrence, {"tokens": tokens}, "weights")]
    for f, rest, old in calls:
        assert list(inspect.signature(f).parameters)[0] == "A", f.__name__
        a = A[0] if f is metrics.onto_one_occurrence else A
        new = f(a, **rest)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            was = f(**{old: a}, **rest)
        assert [w.category for w in caught] == [DeprecationWarning], f.__name__
        assert f"'{old}' is now called 'A'" in str(caught[0].message) and caught[0].filename == __file__
        assert str(was) == str(new), f.__name__
    # the old incontext.attention_to_previous (default first=2) is an alias of the one function, numbers unchanged
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = incontext.attention_to_previous(A)
    assert [w.category for w in caught] == [PendingDeprecationWarning] and caught[0].filename == __file__
    assert "metrics.attention_to_previous(A, first=2)" in str(caught[0].message)
    assert np.array_equal(old, metrics.attention_to_previous(A, first=2))


def test_the_model_s_old_names_are_aliases_that_warn():
    """Model.patterns and Trace.patterns (attention weights under the old name) warn, as attention_pattern does."""
    import warnings

    import numpy as np
    from attnlib.model import load

    model = load("induction")
    tokens = np.arange(1, 9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tr = model.trace(tokens)
        new = model.attention_weights(tokens)
        assert not caught, [str(w.message) for w in caught]
        old_method = model.patterns(tokens)
        old_field = tr.patterns
    assert [w.category for w in caught] == [PendingDeprecationWarning] * 2
    assert "Model.attention_weights" in str(caught[0].message) and "Trace.attention_weights" in str(caught[1].message)
    assert all(w.filename == __file__ for w in caught)  # each points at the caller's line
    for a, b, c in zip(old_method, old_field, new, strict=True):
        assert np.array_equal(a, c) and np.array_equal(b, c)
    assert tr._fields[1] == "attention_weights" and tr[1] is tr.attention_weights


def test_the_old_name_writes_nothing_to_stderr_in_a_notebook_s_main_module():
    """An old notebook (or a graded test cell: nbgrader fails a cell that writes to stderr) keeps running quietly."""
    import subprocess
    import sys

    code = ("import numpy as np, attnlib\n"
            "A = attnlib.attention_pattern(np.eye(3), np.eye(3))\n"
            "print(A.shape)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "(3, 3)" and run.stderr == ""
    # a DeprecationWarning in __main__ is shown by default (the check can fail): the alias avoids it
    loud = subprocess.run([sys.executable, "-c", "import warnings; warnings.warn('x', DeprecationWarning)"],
                          capture_output=True, text=True, timeout=60)
    assert "DeprecationWarning" in loud.stderr


NOTEBOOK_ASSIGNMENT = re.compile(r"^\s*(\w*pattern\w*)\s*=\s*(.*)$", re.I | re.M)
WEIGHTS_CALL = re.compile(r"attention_weights|attention_pattern|softmax\(|\.patterns\(")


def notebook_names_in_another_sense(source: str) -> list[str]:
    """Variables named *pattern* that hold attention weights (the softmax's output)."""
    return [m.group(1) for m in NOTEBOOK_ASSIGNMENT.finditer(source) if WEIGHTS_CALL.search(m.group(2))]


def test_notebook_variables_named_pattern_hold_patterns():
    assert notebook_names_in_another_sense("pattern = attnlib.attention_weights(Q, K)") == ["pattern"]
    assert notebook_names_in_another_sense("P_pattern = X @ W_P  # (T, d_model)") == []
    found = [f"{path.relative_to(ROOT)}: {name}" for path in NOTEBOOKS
             for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
             for name in notebook_names_in_another_sense(cell.source)]
    assert not found, f"variables named pattern holding attention weights: {found}"


def test_cross_references_read_as_text_in_jupyter():
    """JupyterLab shows a MyST role such as {ref}`chapter 3 <ch-split-wo>` raw: every notebook links with Markdown.

    A chapter links a file ([chapter 3](03_split_wo.ipynb)), a glossary term ([pattern](#pattern)), a
    label or an equation ([(attention)](#eq-attention), which the site numbers); citations keep {cite}.
    """
    roles = re.compile(r"\{(ref|doc|numref|term|eq)\}`[^`]*`")
    found = [f"{path.relative_to(ROOT)} cell {i}: {m.group(0)}" for path in NOTEBOOKS
             for i, cell in enumerate(nbformat.read(path, as_version=4).cells) if cell.cell_type == "markdown"
             for m in roles.finditer(cell.source)]
    assert not found, f"cross-references Jupyter shows raw (use [text](file.ipynb)): {found}"
    links = [m for path in NOTEBOOKS
             if path.parent.name == "chapters" and path.stem[:2].isdigit() and int(path.stem[:2]) <= 9
             for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "markdown"
             for m in re.findall(r"\]\(([^)#]+\.(?:ipynb|md))\)", cell.source)]
    assert len(links) > 30, f"chapters 1-9 link other pages more than {len(links)} times"
    missing = [link for link in links if not (ROOT / "chapters" / link).resolve().is_file()]
    assert not missing, f"links to files that do not exist: {missing}"


# --- The old names of the attention weights in notebook code -------------------------------------
# Model.patterns, Trace.patterns and attnlib.attention_pattern still run (deprecated aliases), but a
# reader copies what the book shows: every chapter and exercise calls the weights by their name.
OLD_WEIGHTS_NAME = re.compile(r"\.patterns\b(?!\s*=)|\battention_pattern\b"
                              r"|\b(weights_heatmap|head_weights|pattern_heatmap|head_patterns)\b")


def old_weights_names(source: str) -> list[str]:
    """The lines of a code cell that use an old name of the attention weights."""
    return [line.strip() for line in source.splitlines()
            if OLD_WEIGHTS_NAME.search(line.split("#", 1)[0])]


def test_the_old_name_checker_finds_each_old_name():
    assert old_weights_names("A = model.patterns(tokens)[1]") == ["A = model.patterns(tokens)[1]"]
    assert old_weights_names("w = tr.patterns[0][:, 3]\nx = 1") == ["w = tr.patterns[0][:, 3]"]
    assert old_weights_names("A = attnlib.attention_pattern(Q, K)") == ["A = attnlib.attention_pattern(Q, K)"]
    assert old_weights_names("from attnlib import attention_pattern") != []
    assert not old_weights_names("A = model.attention_weights(tokens)\nB = tr.attention_weights[0]")
    assert old_weights_names("fig = plots.head_weights(A)") and old_weights_names("plots.weights_heatmap(A[0])")
    assert old_weights_names("plots.head_patterns(A)  # heads' weights; FORMS['patterns_and_messages']")
    assert not old_weights_names("plots.head_attention_weights(A)  # FORMS['patterns_and_messages']")
    assert not old_weights_names("A = model.attention_weights(t)  # not model.patterns, the old name")


def test_no_notebook_uses_the_old_names_of_the_attention_weights():
    found = [f"{path.relative_to(ROOT)} cell {i}: {line}" for path in NOTEBOOKS
             for i, cell in enumerate(nbformat.read(path, as_version=4).cells) if cell.cell_type == "code"
             for line in old_weights_names(cell.source)]
    assert not found, ("notebooks that call the attention weights by an old name (use "
                       "Model.attention_weights, Trace.attention_weights, attnlib.attention_weights):\n"
                       + "\n".join(found))


# --- The glossary's words in the library's source, read with ast -------------------------------
# Every module, class and function of attnlib, private ones too: its parameter names, the names it
# assigns, and its whole docstring. "pattern" (a row of X W^P) never names the softmax's output, and
# "weights" alone (the parameters) never names the attention weights: those are A or attention_weights.
LIBRARY = ROOT / "attnlib"
PATTERN = re.compile(r"pattern", re.I)
BARE_WEIGHTS = re.compile(r"(?<!attention_)weights", re.I)  # weights, head_weights; not attention_weights
# A sentence (or a parameter's entry) that shows the glossary's pattern, or speaks of the attention weights.
PATTERN_SENSE = re.compile(r"W\^P|pattern matri|patterns?[-_ ]and[-_ ]messages|patterns too|\bp_t\b", re.I)
SOFTMAX_SENSE = re.compile(r"attention weights|softmax|attention pattern", re.I)
# An expression that computes or reads the attention weights (what a name it is assigned to holds).
SOFTMAX_CALLS = {"attention_weights", "_attention_weights", "softmax", "softmax_", "patterns"}
# Other texts' name for A, quoted in a sentence that names the text.
OTHER_TEXT_NAME = re.compile(r"attention pattern", re.I)
# Docstrings and parameters (dotted name) that use "pattern" in another sense, and why.
KEPT_IN_SOURCE = {
    "attnlib.tokenizer.BPE": "a regular expression (re's pattern) that cuts text into pieces",
    "attnlib.tokenizer.BPE.__init__(pattern)": "the same regular expression",
}


def _definitions(tree: ast.Module, module: str):
    """(dotted name, node, the class docstring for methods) of the module, its classes and functions."""
    yield module, tree, None
    stack = [(module, tree, None)]
    while stack:
        prefix, node, _ = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                dotted = f"{prefix}.{child.name}"
                owner = ast.get_docstring(node) if isinstance(node, ast.ClassDef) else None
                yield dotted, child, owner
                stack.append((dotted, child, owner))


def _parameter_entries(doc: str) -> dict[str, str]:
    """A numpydoc docstring's Parameters section: each parameter's header and description."""
    match = re.search(r"^Parameters\n-+\n(.*?)(?=^\w[\w ]*\n-+\n|\Z)", doc or "", flags=re.S | re.M)
    entries, current = {}, None
    for line in (match.group(1) if match else "").splitlines():
        head = re.match(r"^(\*{0,2}\w+(?:\s*,\s*\w+)*)\s*(:|$)", line)
        if head:
            current = [n.strip("* ") for n in head.group(1).split(",")]
            for name in current:
                entries[name] = line
        elif current and line.strip():
            for name in current:
                entries[name] += "\n" + line
    return entries


def _code_masked(doc: str) -> str:
    """The docstring with its code (``literals``, `roles`, doctest examples and their output) blanked."""
    doc = re.sub(r"``.*?``|`[^`\n]*`", lambda m: " " * len(m.group(0)), doc, flags=re.S)
    lines, in_example = [], False
    for line in doc.split("\n"):
        stripped = line.strip()
        in_example = stripped.startswith((">>>", "...")) or (in_example and bool(stripped))
        lines.append(" " * len(line) if in_example else line)
    return "\n".join(lines)


def _softmax_valued(node) -> bool:
    """An expression that computes or reads the attention weights: softmax(...), x.attention_weights, ..."""
    return any((isinstance(n, ast.Name) and n.id in SOFTMAX_CALLS)
               or (isinstance(n, ast.Attribute) and n.attr in SOFTMAX_CALLS) for n in ast.walk(node))


def _own_nodes(node):
    """The nodes of a function's (or module's) own body: not those of the functions and classes it defines."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield child
            yield from _own_nodes(child)


def _assigned(node):
    """(name, value) of each name this function (or module) assigns itself, loop variables included."""
    for n in _own_nodes(node):
        if isinstance(n, ast.Assign):
            targets, value = n.targets, n.value
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and n.value is not None:
            targets, value = [n.target], n.value
        elif isinstance(n, (ast.For, ast.comprehension)):
            targets, value = [n.target], n.iter
        else:
            continue
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    yield name.id, value


def library_source_misuses(root: Path = LIBRARY) -> list[str]:
    """Each "pattern" meaning the attention weights, and each bare "weights" naming them, in ``root``'s source."""
    found = []
    for path in sorted(root.glob("*.py")):
        module = f"attnlib.{path.stem}"
        for dotted, node, owner in _definitions(ast.parse(path.read_text(encoding="utf-8")), module):
            doc = ast.get_docstring(node) or ""
            where = f"{path.name}:{getattr(node, 'lineno', 1)} {dotted}"
            deprecated = doc.startswith("Deprecated")  # an old name kept for old code (see OLD_NAMES)
            if not isinstance(node, ast.Module) and not deprecated:
                first = doc.split("\n\n")[0]
                if PATTERN.search(node.name) and not PATTERN_SENSE.search(first) and dotted not in KEPT_IN_SOURCE:
                    found.append(f"{where}: the name says pattern, its docstring {first[:60]!r}")
                if BARE_WEIGHTS.search(node.name) and SOFTMAX_SENSE.search(first):
                    found.append(f"{where}: 'weights' alone names the attention weights ({first[:60]!r})")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                entries = {**_parameter_entries(owner or ""), **_parameter_entries(doc)}
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]:
                    entry = entries.get(arg.arg, "")
                    if f"{dotted}({arg.arg})" in KEPT_IN_SOURCE:
                        continue
                    if PATTERN.search(arg.arg) and not PATTERN_SENSE.search(entry):
                        found.append(f"{where}: parameter {arg.arg!r} ({entry.strip()[:60]!r})")
                    if BARE_WEIGHTS.search(arg.arg) and SOFTMAX_SENSE.search(entry):
                        found.append(f"{where}: parameter {arg.arg!r} is the attention weights ({entry.strip()[:60]!r})")
            for name, value in _assigned(node):
                alias = isinstance(value, ast.Call) and getattr(value.func, "id", "") == "renamed_function"
                if (PATTERN.search(name) or BARE_WEIGHTS.search(name)) and not alias and _softmax_valued(value):
                    found.append(f"{where}: {name} = {ast.unparse(value)[:60]} (the attention weights: A)")
            if dotted in KEPT_IN_SOURCE:
                continue
            masked = _code_masked(doc)
            for m in re.finditer(r"\bpatterns?\b", masked, re.I):
                sentence = sentence_around(doc, m.start(), m.end())
                if PATTERN_SENSE.search(sentence):
                    continue
                if OTHER_TEXT_NAME.search(doc[max(0, m.start() - 10):m.end()]) and OTHER_TEXT.search(sentence):
                    continue
                found.append(f"{where}: docstring ...{context(doc, m.start(), m.end())}...")
    return sorted(set(found))


def test_the_source_checker_flags_pattern_and_bare_weights_for_attention_weights(tmp_path):
    (tmp_path / "old.py").write_text('''"""Readings computed from the patterns of Model.trace."""


def head_scores(pattern, tokens):
    """Scores.

    Parameters
    ----------
    pattern : (n_heads, T, T) ndarray
    tokens : (T,) ndarray
    """
    patterns = softmax(pattern)
    return patterns


def _pattern(Q, K):
    """softmax(Q K^T)."""


def weights_heatmap(A):
    """Heatmap of attention weights."""


def moved(weights, tokens):
    """Move weight.

    Parameters
    ----------
    weights : (T, T) ndarray
        One head's attention weights.
    """
    weights = model.attention_weights(tokens)
''', encoding="utf-8")
    (tmp_path / "new.py").write_text('''"""Patterns and messages: the pattern matrix ``W^P_i`` of each head."""


def head_scores(A, tokens, weights):
    """Scores of the pattern ``p_t = x_t W^P_i`` and the attention weights.

    The circuits paper calls ``A`` the attention pattern.

    Parameters
    ----------
    A : (n_heads, T, T) ndarray
        Attention weights.
    weights : Weights
        The layer's parameters.
    """
    A = softmax(tokens)
    weights = load(tokens)
    return A, weights
''', encoding="utf-8")
    found = library_source_misuses(tmp_path)
    flagged = " ".join(found)
    assert all("new.py" not in f for f in found), found
    for what in ["old.py:1 attnlib.old: docstring", "parameter 'pattern'", "patterns = softmax",
                 "_pattern: the name says pattern", "weights_heatmap: 'weights' alone",
                 "parameter 'weights' is the attention weights", "weights = model.attention_weights"]:
        assert what in flagged, (what, found)


def test_the_library_s_source_uses_the_glossary_s_words():
    """Parameter names, assigned names and whole docstrings of every module (private ones too), read with ast."""
    found = library_source_misuses()
    assert not found, ("attnlib calls the attention weights 'pattern' or bare 'weights' (name them A or "
                       "attention_weights; keep an old public name as a warning alias):\n" + "\n".join(found))
