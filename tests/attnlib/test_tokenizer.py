"""attnlib.tokenizer: byte-pair encoding in plain Python, against the tokenizers package when it is installed."""
from pathlib import Path

import numpy as np
import pytest

import needs
from attnlib.tokenizer import BPE

ROOT = Path(__file__).resolve().parents[2]
TEXT = ("KING\nWho's there? Stand, and unfold yourself.\n\nEnter KING and QUEEN\n\n"
        "QUEEN\nKeep it in mind, my lord; keep them at bay.\n[Aside] 'Tis 12 o'clock.\n")
PATTERN = r" ?[A-Za-z]+(?:'[A-Za-z]+)*| ?[0-9]+| ?[^\sA-Za-z0-9]|\n+|\s"


def small_bpe():
    chars = sorted(set(TEXT))
    merges = [("K", "I"), ("KI", "N"), ("KIN", "G"), (" ", "KING"), ("e", "e"), (" ", "k"), (" k", "ee")]
    vocab = ["<unk>", "<bos>", *chars, *(a + b for a, b in merges)]
    return BPE(vocab, merges, PATTERN, unk="<unk>", special=["<bos>"])


def test_round_trip_on_its_own():
    bpe = small_bpe()
    ids = bpe.encode(TEXT)
    assert ids.dtype == np.int64 and ids.ndim == 1
    assert bpe.decode(ids) == TEXT
    assert bpe.decode(bpe.encode("")) == ""
    names = [bpe.token_names[i] for i in bpe.encode("Enter KING\n")]
    assert names == ["E", "n", "t", "e", "r", " KING", "⏎"]


def test_merges_apply_lowest_rank_first_and_leftmost_on_a_tie():
    bpe = BPE(["a", "b", "aa", "ab"], [("a", "b"), ("a", "a")], r"[ab]+")
    assert bpe.decode(bpe.encode("aab")).split() == ["aab"]
    assert [bpe.vocab[i] for i in bpe.encode("aab")] == ["a", "ab"]  # (a, b) outranks (a, a)
    assert [bpe.vocab[i] for i in bpe.encode("aaa")] == ["aa", "a"]  # leftmost first


def test_unknown_characters_and_bad_input_are_named():
    bpe = small_bpe()
    assert bpe.encode("é").tolist() == [bpe.unk]
    no_unk = BPE(["a"], [], r".")
    with pytest.raises(ValueError, match="'b' is not in the vocabulary"):
        no_unk.encode("ab")
    with pytest.raises(TypeError, match="text must be a str"):
        bpe.encode(b"KING")
    with pytest.raises(ValueError, match="ids must lie in 0 .. "):
        bpe.decode([len(bpe)])
    with pytest.raises(ValueError, match="lacks their concatenation 'xy'"):
        BPE(["x", "y"], [("x", "y")], r".")
    with pytest.raises(ValueError, match="must match every character"):
        BPE(["a"], [], r"a").encode("ab")


def test_arrays_round_trip():
    bpe = small_bpe()
    again = BPE.from_arrays(bpe.arrays())
    assert again.vocab == bpe.vocab and again.merges == bpe.merges and again.pattern == bpe.pattern
    assert again.unk == bpe.unk and again.special == bpe.special
    assert (again.encode(TEXT) == bpe.encode(TEXT)).all()


def test_same_ids_as_the_tokenizers_package():
    tokenizers = needs.module("tokenizers", "tokenizers is optional (it trains the tokenizer)")
    import corpus

    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex(corpus.PATTERN), behavior="isolated")
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<bos>"], show_progress=False)
    tok.train_from_iterator([TEXT * 3], trainer)
    bpe = corpus.bpe_of(tok)
    for text in (TEXT, "Keep it at bay, KING.", "Enter  QUEEN\n\n\n'tis"):
        assert bpe.encode(text).tolist() == tok.encode(text).ids
        assert bpe.decode(bpe.encode(text)) == text
