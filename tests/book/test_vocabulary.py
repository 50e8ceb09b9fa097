"""One word, one meaning: "pattern" in the notebooks' prose is the glossary's pattern.

The glossary (chapters/glossary.md) defines a *pattern* as row t of P_i = X W^P_i (what
token t looks for) and the *pattern matrix* as W^P_i; the softmax's output A_i
is the *attention weights*. This test reads the markdown of every chapter and
exercise notebook and flags each "pattern" that is not visibly one of those:
code (inline or fenced) and glossary links ({term}`pattern`) are skipped, and
every other occurrence must sit in one of the phrases below.
"""
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


def prose(source: str) -> str:
    """Markdown with code, glossary links, labels and cross-reference targets removed."""
    text = re.sub(r"^(```|:::)\{?(code|python|bash|eval-rst)[^\n]*\n.*?^\1\s*$", " ", source, flags=re.S | re.M)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\{term\}`[^`]*`", " TERM ", text)
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
                 "bilinear form", "embedding", "unembedding", "eigenvalue", "copying score", "forms"):
        assert term in terms, f"the glossary does not define {term!r}"


def test_every_term_link_has_a_glossary_entry():
    """{term}`text <target>` or {term}`target` in any notebook must name a glossary entry (else a broken link)."""
    terms = glossary_terms()
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
    assert not missing, f"links to terms the glossary lacks: {missing}"


def test_chapters_1_to_9_link_the_glossary():
    linked = set()
    for path in NOTEBOOKS:
        if path.parent.name == "chapters" and path.stem[:2].isdigit() and int(path.stem[:2]) <= 9:
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type == "markdown":
                    for role in re.findall(r"\{term\}`([^`]*)`", cell.source):
                        target = re.search(r"<([^>]*)>\s*$", role)
                        linked.add((target.group(1) if target else role).strip().lower())
    for term in ("pattern", "pattern matrix", "message", "message matrix", "attention weights",
                 "attention logits", "causal mask", "flop", "factored", "materialised", "bilinear form"):
        assert term in linked, f"chapters 1-9 never link {term!r} to the glossary"
