"""The two-layer models of the plays: checkpoints, the attempts' record, and what chapter 15 says (numpy only)."""
import json
import re
import shutil

import numpy as np
import pytest

from attnlib import incontext
from attnlib.model import MODELS, checkpoints, load


@pytest.fixture(scope="module")
def spans():
    return load("plays_2l_spans")


@pytest.fixture(scope="module")
def plain():
    return load("plays_2l")


@pytest.mark.parametrize("name", ["plays_2l", "plays_2l_spans"])
def test_checkpoints_are_the_weights_along_training(name):
    final = load(name)
    ckpts = checkpoints(name)
    info = final.card["checkpoints"]
    assert list(ckpts) == info["steps"] and info["steps"][0] == 0 and info["steps"][-1] == final.card["steps"]
    last = ckpts[final.card["steps"]]
    assert last.card["step"] == final.card["steps"]
    # the last checkpoint is the final model, rounded to float16
    np.testing.assert_allclose(last.W_E, final.W_E, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(last.layers[1].W_Q, final.layers[1].W_Q, rtol=1e-3, atol=1e-3)
    assert not np.allclose(ckpts[0].W_E, final.W_E, atol=1e-2)  # training moved the weights
    rows = np.array(final.card["training_curve"]["rows"])  # (steps / 100, 2)
    assert rows[0, 0] == 100 and rows[-1, 0] == final.card["steps"] and rows[-1, 1] < rows[0, 1]


def test_a_changed_checkpoint_file_is_refused(tmp_path):
    for suffix in (".npz", ".json", ".checkpoints.npz"):
        shutil.copy(MODELS / f"plays_2l{suffix}", tmp_path / f"plays_2l{suffix}")
    assert list(checkpoints(tmp_path / "plays_2l.npz"))[0] == 0
    with np.load(tmp_path / "plays_2l.checkpoints.npz") as f:
        arrays = dict(f)
    arrays["step0.W_E"][0, 0] += 1
    np.savez_compressed(tmp_path / "plays_2l.checkpoints.npz", **arrays)
    with pytest.raises(ValueError, match="do not match the SHA-256"):
        checkpoints(tmp_path / "plays_2l.npz")
    with pytest.raises(ValueError, match="without checkpoints"):
        checkpoints("plays_1l")


def test_the_spans_model_has_an_induction_head_that_reads_a_previous_token_head(spans):
    seqs = incontext.repeated_random(spans, n=64, occurrences=3, seed=7)  # not the card's sequences
    s = incontext.induction_scores(spans, seqs)
    p, i = int(s["previous"][0].argmax()), int(s["prefix"][1].argmax())
    assert s["prefix"][1, i] >= 0.5 and s["previous"][0, p] >= 0.5
    without = incontext.induction_scores(spans, seqs, ablate=[(0, p)])["prefix"][1, i]
    assert without <= s["prefix"][1, i] / 2
    copies = incontext.repeat_losses(spans, seqs)
    assert copies[1] < copies[0] - 1  # the second copy is predicted better than the first


def test_the_plain_model_has_no_prefix_matching_head(plain):
    seqs = incontext.repeated_random(plain, n=64, occurrences=3, seed=7)
    assert incontext.induction_scores(plain, seqs)["prefix"].max() < 0.1
    for row in checkpoints("plays_2l").values():
        assert incontext.induction_scores(row, seqs[:16])["prefix"].max() < 0.1


def test_the_spans_model_was_trained_on_windows_made_by_repeat_spans(spans):
    """The card's recipe, the attempt it came from and attnlib.incontext.repeat_spans agree."""
    record = json.loads((MODELS / "induction_attempts.json").read_text())
    settings = record["all_spans_pos20"]["settings"]
    assert settings["repeat"] == {k: spans.card["repeat"][k] for k in ("share", "min_len", "max_len")}
    assert settings["lr"] == spans.card["optimiser"]["lr"]
    for key in ("steps", "batch", "seed", "positions", "n_layers", "n_heads", "d_model", "d_head"):
        assert settings[key] == spans.card[key], key


def test_the_attempt_record_ends_where_the_shipped_model_is(spans, plain):
    """Each shipped model was also an attempt: its last recorded figures are what its weights give."""
    import induction_attempts as attempts

    record = json.loads((MODELS / "induction_attempts.json").read_text())
    for name, model in (("all_spans_pos20", spans), ("plain_pos20", plain)):
        tokens, targets = attempts.windows(model)
        again = attempts.probe(model, (tokens, targets))
        last = record[name]["curve"][-1]
        assert last["step"] == model.card["steps"]
        for key in ("previous", "prefix", "second_copy_loss", "heldout_loss", "in_context"):
            assert again[key] == pytest.approx(last[key], abs=1e-6), (name, key)


def test_every_attempt_is_recorded_with_its_settings_and_curve():
    record = json.loads((MODELS / "induction_attempts.json").read_text())
    assert {"plain_pos20", "smear_pos20", "all_spans_pos20"} <= set(record)
    for name, e in record.items():
        assert e["threads"] == 1 and e["torch"] and e["training_seconds"] > 0, name
        steps = [r["step"] for r in e["curve"]]
        done = e["settings"]["steps"] if e.get("complete", True) else e["steps_done"]
        assert done <= e["settings"]["steps"], name
        assert steps[0] == 0 and steps[-1] == done, name  # an unfinished attempt says where it stopped
        assert e["tokens_seen"] == done * e["settings"]["batch"] * e["settings"]["data"]["T"]


def test_repeated_pairs_are_where_an_earlier_pair_recurs():
    w = np.array([[5, 6, 7, 5, 6, 8, 5, 6]])
    assert incontext.repeated_pairs(w).astype(int).tolist() == [[0, 0, 0, 0, 1, 0, 0, 1]]
    spanned = incontext.repeat_spans(np.arange(64)[None].repeat(50, 0), np.random.default_rng(1), 1.0, 8, 31)
    got = incontext.repeated_pairs(spanned).sum(axis=1)  # every token of a copy but its first
    want = [(np.diff(row) != 1).sum() for row in spanned]
    assert (got > 0).all() and len(want) == 50
    with pytest.raises(ValueError, match="do not fit twice"):
        incontext.repeat_spans(np.zeros((2, 10), int), np.random.default_rng(0), 1.0, 4, 6)


def test_the_models_guide_says_which_models_ship_checkpoints_and_how_long_they_trained():
    """guides/models.md: checkpoints for the two plays_2l models only (15, steps 0 to 10,000); toy training times."""
    from attnlib.model import available

    cards = {n: json.loads((MODELS / f"{n}.json").read_text()) for n in available()}
    with_checkpoints = {n for n, c in cards.items() if "checkpoints" in c}
    assert with_checkpoints == {"plays_2l", "plays_2l_spans"}
    for n in with_checkpoints:
        steps = cards[n]["checkpoints"]["steps"]
        assert len(steps) == 15 and (steps[0], steps[-1]) == (0, 10000)
    toy = {n: c["training_seconds"] for n, c in cards.items() if c["task"] != "text"}
    one_layer = [s for n, s in toy.items() if cards[n]["n_layers"] == 1]
    two_layer = [s for n, s in toy.items() if cards[n]["n_layers"] == 2]
    assert 2 <= min(one_layer) and max(one_layer) <= 3
    assert 50 <= min(two_layer) and max(two_layer) <= 370
    assert round(toy["induction"]) == 52 and round(toy["induction_plain_seed1"]) == 369
    guide = " ".join((MODELS.parents[1] / "guides" / "models.md").read_text().split())
    said = re.search(r"`plays_2l` and `plays_2l_spans` take (\d+) and (\d+) minutes of training on one core"
                     r" \([^)]*?(\d+) s and (\d+) s in their cards", guide)
    assert said, "guides/models.md no longer says how long plays_2l and plays_2l_spans trained"
    seconds = [cards[n]["training_seconds"] for n in ("plays_2l", "plays_2l_spans")]
    assert [int(v) for v in said.groups()] == [round(s / 60) for s in seconds] + [round(s) for s in seconds]


def test_the_spans_settings_ran_with_three_seeds_and_changed_nothing_else():
    record = json.loads((MODELS / "induction_attempts.json").read_text())
    base = {k: v for k, v in record["all_spans_pos20"]["settings"].items() if k != "seed"}
    for seed in (1, 2):
        e = record[f"all_spans_pos20_seed{seed}"]
        assert e["settings"]["seed"] == seed and e.get("complete", True)
        assert {k: v for k, v in e["settings"].items() if k != "seed"} == base
        assert e["curve"][-1]["step"] == base["steps"] and e["threads"] == 1
