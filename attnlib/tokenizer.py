"""Byte-pair encoding in plain Python: text to token ids and back (chapter 14).

A model trained on text reads token ids; this module turns text into them
with the vocabulary and merges shipped in the model's file, so reading the
model needs numpy and nothing else. It is the usual BPE of Sennrich et al.
(2016), as the ``tokenizers`` package implements it:

1. **pre-tokenize**: a regular expression cuts the text into pieces (a word
   with the space before it, one punctuation mark, a run of newlines); no
   token ever crosses a cut;
2. **merge**: each piece starts as single characters, and the learned merges
   are applied, lowest rank first (leftmost first on a tie), until none
   applies; the pieces left are tokens.

Decoding concatenates the tokens' strings: spaces are part of the tokens
(``" KING"``), so ``decode(encode(text)) == text`` for any text whose
characters are all in the vocabulary.

Examples
--------
>>> bpe = BPE(["a", "b", " ", "ab", " ab"], [("a", "b"), (" ", "ab")], r" ?[a-z]+|\\s")
>>> bpe.encode("ab abba").tolist()
[3, 4, 1, 0]
>>> bpe.decode([3, 4, 1, 0])
'ab abba'
"""
from __future__ import annotations

import re

import numpy as np

# Printable stand-ins for characters that would vanish from a table or an axis label.
_SHOWN = {"\n": "⏎", "\t": "⇥"}


class BPE:
    """A byte-pair-encoding tokenizer: a vocabulary, ranked merges and a pre-tokenizing pattern.

    Parameters
    ----------
    vocab : sequence of str
        The string of each token id; unique.
    merges : sequence of (str, str)
        Pairs of tokens to merge, in rank order (first learned first); each
        pair's concatenation must be in ``vocab``.
    pattern : str
        Regular expression whose matches, left to right, cut the text into
        pieces (Python's :mod:`re`; it must match every character).
    unk : str, optional
        The token for a character the vocabulary lacks; without it such a
        character raises ``ValueError``.
    special : sequence of str
        Tokens that text never produces (e.g. ``"<bos>"``); :meth:`encode`
        treats their text as ordinary characters.
    """

    def __init__(self, vocab, merges, pattern, unk=None, special=()):
        self.vocab = [str(v) for v in vocab]
        self.ids = {tok: i for i, tok in enumerate(self.vocab)}
        if len(self.ids) != len(self.vocab):
            raise ValueError(f"vocab has {len(self.vocab) - len(self.ids)} repeated token(s)")
        self.merges = [(str(a), str(b)) for a, b in merges]
        for a, b in self.merges:
            if a + b not in self.ids:
                raise ValueError(f"merges has ({a!r}, {b!r}) but vocab lacks their concatenation {a + b!r}")
        self.ranks = {pair: r for r, pair in enumerate(self.merges)}
        self.pattern = str(pattern)
        self._re = re.compile(self.pattern)
        for name, tok in [("unk", unk), *(("special", s) for s in special)]:
            if tok is not None and tok not in self.ids:
                raise ValueError(f"{name} token {tok!r} is not in vocab")
        self.unk = None if unk is None else self.ids[unk]
        self.special = frozenset(self.ids[s] for s in special)
        self._cache: dict = {}

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return f"BPE(vocab {len(self.vocab)}, {len(self.merges)} merges)"

    def pieces(self, text: str) -> list:
        """The pre-tokenized pieces of ``text`` (BPE never merges across two of them).

        Examples
        --------
        >>> BPE(["a"], [], r" ?[A-Za-z]+|\\n+|.").pieces("Enter KING\\n\\nKING")
        ['Enter', ' KING', '\\n\\n', 'KING']
        """
        out, end = [], 0
        for m in self._re.finditer(text):
            if m.start() != end or m.end() == m.start():
                break
            out.append(m.group())
            end = m.end()
        if end != len(text):
            raise ValueError(f"the pattern {self.pattern!r} matches no piece at character {end}"
                             f" ({text[end:end + 10]!r}...): it must match every character")
        return out

    def _merge(self, piece: str) -> list:
        """Token ids of one piece: apply the lowest-ranked merge, leftmost first, until none applies."""
        if piece in self._cache:
            return self._cache[piece]
        parts = list(piece)
        while len(parts) > 1:
            ranked = [(self.ranks.get((a, b), -1), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            ranked = [ri for ri in ranked if ri[0] >= 0]
            if not ranked:
                break
            _, i = min(ranked)
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        ids = []
        for p in parts:
            if p in self.ids:
                ids.append(self.ids[p])
            elif self.unk is not None:
                ids.append(self.unk)
            else:
                raise ValueError(f"the character {p!r} is not in the vocabulary, and there is no unknown token")
        self._cache[piece] = ids
        return ids

    def encode(self, text: str) -> np.ndarray:
        """Token ids of a text.

        Parameters
        ----------
        text : str

        Returns
        -------
        (n_tokens,) ndarray of int64
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids = [i for piece in self.pieces(text) for i in self._merge(piece)]
        return np.array(ids, dtype=np.int64)

    def decode(self, ids) -> str:
        """The text of token ids (special tokens give their own name, e.g. ``"<bos>"``).

        Parameters
        ----------
        ids : (n_tokens,) array_like of int

        Returns
        -------
        str
        """
        ids = np.asarray(ids)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise TypeError(f"ids must be one sequence of integers, got dtype {ids.dtype} and shape {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= len(self.vocab)):
            raise ValueError(f"ids must lie in 0 .. {len(self.vocab) - 1}, got values from {ids.min()} to {ids.max()}")
        return "".join(self.vocab[i] for i in ids.tolist())

    @property
    def token_names(self) -> list:
        """A printable name per token: its string, with a newline shown as ``⏎``.

        Examples
        --------
        >>> BPE(["\\n", " to", "be"], [], r".").token_names
        ['⏎', ' to', 'be']
        """
        return ["".join(_SHOWN.get(c, c) for c in tok) for tok in self.vocab]

    # --- as arrays, for a model file -------------------------------------------
    def arrays(self) -> dict:
        """The tokenizer as named string arrays (stored in a model's ``.npz`` and covered by its SHA-256)."""
        special = sorted(self.special)
        return {
            "tokenizer.vocab": np.array(self.vocab, dtype=str),
            "tokenizer.merges": np.array(self.merges, dtype=str).reshape(len(self.merges), 2),
            "tokenizer.pattern": np.array(self.pattern, dtype=str),
            "tokenizer.unk": np.array([] if self.unk is None else [self.vocab[self.unk]], dtype=str),
            "tokenizer.special": np.array([self.vocab[i] for i in special], dtype=str),
        }

    @classmethod
    def from_arrays(cls, arrays: dict) -> "BPE":
        """The inverse of :meth:`arrays`."""
        unk = arrays["tokenizer.unk"].tolist()
        return cls(arrays["tokenizer.vocab"].tolist(), [tuple(p) for p in arrays["tokenizer.merges"].tolist()],
                   str(arrays["tokenizer.pattern"]), unk=unk[0] if unk else None,
                   special=arrays["tokenizer.special"].tolist())
