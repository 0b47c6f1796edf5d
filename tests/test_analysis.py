"""minilm.analysis: per-layer features and linear probes (against scikit-learn), zero-shot scoring (against a hand
computation), and recorded results found from anywhere in the repository."""

import json
import math
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minilm.analysis import (
    Recorded,
    layer_features,
    linear_probe,
    probe_layers,
    recorded_results,
    sense_vectors,
    standardize,
    zero_shot_scores,
)
from minilm.models.elmo import ELMo, ELMoConfig
from minilm.nn import batch_to_char_ids

ROOT = Path(__file__).resolve().parents[1]


def blobs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three overlapping Gaussian classes in 2-D: (n, 2) features, (n,) labels; not separable, so the unpenalised
    logistic regression has a finite optimum."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 3
    centres = torch.tensor([[0.0, 0.0], [2.0, 0.5], [0.5, 2.0]])
    return centres[labels] + torch.randn(n, 2, generator=generator), labels


# --- linear probes ---


def test_a_converged_probe_predicts_as_scikit_learns_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    (x, y), (test_x, test_y) = blobs(600, seed=0), blobs(2000, seed=1)
    probe = linear_probe([x], y, [test_x], test_y, 3, epochs=400, lr=0.05, batch_size=600)
    reference = LogisticRegression(C=1e6, max_iter=10_000).fit(x.numpy(), y.numpy()).predict(test_x.numpy())
    assert probe.predictions.shape == (2000,) and probe.mix_weights is None
    assert (probe.predictions.numpy() == reference).mean() > 0.995  # only points on the decision boundary differ
    assert probe.accuracy == pytest.approx((probe.predictions == test_y).float().mean().item())
    assert probe.accuracy == pytest.approx((reference == test_y.numpy()).mean(), abs=0.005)


def test_the_mix_learns_to_weight_the_informative_layer():
    (x, y), (test_x, test_y) = blobs(600, seed=0), blobs(600, seed=1)
    noise, test_noise = torch.randn(600, 2), torch.randn(600, 2)
    probe = linear_probe([noise, x], y, [test_noise, test_x], test_y, 3, mix=True, epochs=30, lr=0.03)
    assert sum(probe.mix_weights) == pytest.approx(1.0)
    assert probe.mix_weights[1] > 0.6 > probe.mix_weights[0]
    assert probe.accuracy > 0.6  # chance is 1/3


def test_probe_layers_gives_one_row_per_layer_and_the_mix_averaged_over_seeds():
    (x, y), (test_x, test_y) = blobs(300, seed=0), blobs(300, seed=1)
    train, test = [torch.randn(300, 2), x], [torch.randn(300, 2), test_x]
    table = probe_layers(train, y, test, test_y, 3, seeds=(0, 1), epochs=30, lr=0.03)
    assert list(table) == ["layer 0", "layer 1", "ScalarMix"]
    assert (
        table["layer 1"]["per_seed"][1]
        == linear_probe([x], y, [test_x], test_y, 3, seed=1, epochs=30, lr=0.03).accuracy
    )
    assert all(row["accuracy"] == sum(row["per_seed"]) / 2 for row in table.values())
    assert table["layer 1"]["accuracy"] > table["layer 0"]["accuracy"] + 0.2  # noise vs signal
    assert (
        table["ScalarMix"]["weights"]
        == linear_probe(train, y, test, test_y, 3, mix=True, epochs=30, lr=0.03).mix_weights
    )


def test_a_probe_without_mix_reads_one_layer():
    x, y = blobs(30, seed=0)
    with pytest.raises(ValueError, match="reads one layer, got 2: pass \\[layers\\[j\\]\\] or mix=True"):
        linear_probe([x, x], y, [x, x], y, 3)


def test_standardize_uses_the_training_statistics():
    train, test = torch.tensor([[1.0, 10.0], [3.0, 30.0]]), torch.tensor([[2.0, 50.0]])
    (train_out,), (test_out,) = standardize([train], [test])
    std = torch.tensor([2**0.5, 200**0.5]) + 1e-6  # the sample std of each column, + 1e-6
    assert torch.allclose(train_out, (train - torch.tensor([2.0, 20.0])) / std)
    assert torch.allclose(test_out, torch.tensor([[0.0, 30.0]]) / std)


# --- per-layer features of a model that reads characters ---

SMALL_ELMO = ELMoConfig(vocab_size=20, max_chars=8, char_embed_dim=4, filters=((1, 4), (2, 4)), n_highway=1,
                        projection_dim=6, hidden_size=10, dropout=0.0)  # fmt: skip


def test_layer_features_are_each_words_vectors_in_order_without_padding():
    torch.manual_seed(0)
    model = ELMo(SMALL_ELMO).eval()
    sentences = [["the", "bank", "lent"], ["a", "bank"], ["bank"]]
    layers = layer_features(model, sentences, batch_size=2)  # two batches, padding in the first
    assert [tuple(h.shape) for h in layers] == [(6, 12)] * 3  # n_layers + 1 layers, 6 words, 2d wide
    expected = model.features(char_ids=batch_to_char_ids([["a", "bank"]], 8)).hidden_states
    assert all(torch.allclose(h[3:5], e[0], atol=1e-6) for h, e in zip(layers, expected, strict=True))
    bank = [1, 4, 5]  # "bank" in each sentence
    assert torch.allclose(layers[0][bank[0]], layers[0][bank[2]], atol=1e-6)  # layer 0 is static: one per word
    assert not torch.allclose(layers[1][bank[0]], layers[1][bank[1]])  # the LSTM layers see the context


def test_sense_vectors_pick_the_word_in_each_sentence_and_label_the_senses():
    torch.manual_seed(0)
    model = ELMo(SMALL_ELMO).eval()
    senses = {"river": ["the bank of the river", "a green bank"], "money": ["the bank lent money", "my bank"]}
    layers, labels = sense_vectors(model, "bank", senses)
    assert labels.tolist() == [0, 0, 1, 1]
    sentences = [text.split() for texts in senses.values() for text in texts]
    features = layer_features(model, sentences)
    assert all(torch.equal(h[[1, 7, 9, 13]], v) for h, v in zip(features, layers, strict=True))
    with pytest.raises(ValueError, match="'bank' is not a word of 'the banks'"):
        sense_vectors(model, "bank", {"river": ["the banks"], "money": ["my bank"]})


# --- zero-shot scoring ---


class CharTokenizer:
    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]


class BiasedLM(nn.Module):
    """Next-character logits: " a" is always 3 nats likelier than " b", and a prompt starting with "+" (or "-") adds
    one nat to "a" (or "b"): the raw rule always says "a", the calibrated one reads the sign."""

    def __init__(self) -> None:
        super().__init__()
        self.config = type("Config", (), {"max_len": 64})()
        self.unused = nn.Parameter(torch.zeros(()))

    def forward(self, ids):  # (B, T) -> (B, T, 128)
        logits = torch.zeros(*ids.shape, 128)
        logits[..., ord("a")] = 3.0 + (ids[:, :1] == ord("+")).float()
        logits[..., ord("b")] = (ids[:, :1] == ord("-")).float()
        return logits


def test_zero_shot_scores_compare_the_label_words_raw_and_calibrated():
    texts, labels = ["+ good", "- bad", "- awful", "+ fine", "- poor"], [0, 1, 1, 0, 1]
    scores = zero_shot_scores(BiasedLM(), CharTokenizer(), texts, labels, (" a", " b"), template="{} is")
    assert scores["accuracy"] == pytest.approx(0.4) and scores["calibrated_accuracy"] == 1.0
    assert scores["predicted_fraction"] == [1.0, 0.0]


def test_zero_shot_scores_equal_the_two_word_rule_written_out():
    from minilm.generation import continuation_log_prob
    from minilm.models import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=128, max_len=32, n_layers=1, d_model=16, n_heads=2)).eval()
    texts, labels = [f"+{i}" if i % 2 else f"-{i}" for i in range(12)], [i % 2 for i in range(12)]
    scores = zero_shot_scores(model, CharTokenizer(), texts, labels, (" no", " yes"), template="{} very")
    prompts = [text + " very" for text in texts]  # the rule of Radford et al. (2018, §5), written out
    yes, no = (continuation_log_prob(model, CharTokenizer(), prompts, w) for w in (" yes", " no"))
    prior = continuation_log_prob(model, CharTokenizer(), ["N/A very"], " yes") - continuation_log_prob(
        model, CharTokenizer(), ["N/A very"], " no"
    )
    labels = torch.tensor(labels)
    assert scores["accuracy"] == ((yes > no).long() == labels).float().mean().item()
    assert scores["calibrated_accuracy"] == ((yes - no > prior).long() == labels).float().mean().item()
    assert scores["predicted_fraction"][1] == (yes > no).float().mean().item()


def test_zero_shot_scores_refuse_labels_without_a_word():
    with pytest.raises(ValueError, match="labels must index label_words \\(0 to 1\\), got \\[0, 2\\]"):
        zero_shot_scores(BiasedLM(), CharTokenizer(), ["+", "-"], [0, 2], (" a", " b"), content_free="N/A")


# --- recorded results ---


def test_recorded_results_are_found_from_a_subfolder_of_the_repository(tmp_path):
    (tmp_path / "experiments" / "results").mkdir(parents=True)
    provenance = {"command": "python experiments/x.py", "commit": "abc1234", "machine": "2 CPUs", "date": "today"}
    (tmp_path / "experiments" / "results" / "x.json").write_text(json.dumps({"provenance": provenance, "results": {}}))
    (tmp_path / "chapters").mkdir()
    recorded = recorded_results("x", start=tmp_path / "chapters")
    assert recorded.path == tmp_path / "experiments" / "results" / "x.json" and recorded.results == {}
    assert recorded.describe() == "command: python experiments/x.py\ncode:    commit abc1234 | today\nmachine: 2 CPUs"


def test_every_record_names_the_committed_code_that_produced_it():
    """A clean commit, ``matches_commit``, or (no single commit holds what ran) the commit of each part of the code:
    commits of this repository, the script's among them."""
    git = ["git", "-C", str(ROOT)]
    shallow = subprocess.run([*git, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True).stdout
    if shallow != "false\n":
        pytest.skip("needs the repository's full history")
    for path in sorted((ROOT / "experiments" / "results").glob("*.json")):
        recorded = recorded_results(path.stem, start=ROOT / "chapters")
        p = recorded.provenance
        assert recorded.path == path
        assert p.get("matches_commit") or "code" in p or "+" not in p["commit"], path.name
        script = p.get("matches_commit") or p.get("code", {}).get("experiments/") or p["commit"]
        commits = [script] + [c.split()[0] for c in p.get("code", {}).values()]
        assert all(subprocess.run([*git, "cat-file", "-e", f"{c}^{{commit}}"]).returncode == 0 for c in commits)
        assert subprocess.run([*git, "cat-file", "-e", f"{script}:experiments/{path.stem}.py"]).returncode == 0
        assert "+uncommitted" not in recorded.describe().splitlines()[1].split("(recorded as")[0]


def test_describe_names_the_matching_commit_or_each_parts_commit():
    p = {"command": "python experiments/x.py", "commit": "abc1234+uncommitted changes", "machine": "m", "date": "d"}
    matched = Recorded(Path("x.json"), {**p, "matches_commit": "def5678"}, {})
    assert matched.describe().splitlines()[1] == "code:    commit def5678 (recorded as abc1234+uncommitted changes) | d"
    parts = Recorded(Path("x.json"), {**p, "matches_commit": None, "code": {"experiments/": "1", "minilm/": "2"}}, {})
    assert parts.describe().splitlines()[1] == "code:    experiments/ of 1, minilm/ of 2 (see the record's note) | d"


def test_a_missing_record_says_where_it_looked_and_how_to_make_it(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        recorded_results("ch09_nothing", start=tmp_path)
    message = str(info.value)
    assert str(tmp_path / "experiments" / "results" / "ch09_nothing.json") in message
    assert str(ROOT / "experiments" / "results" / "ch09_nothing.json") in message  # where minilm comes from
    assert "python experiments/ch09_nothing.py" in message


# --- the unigram plateau --------------------------------------------------------------------------------------


def test_unigram_entropy_is_the_entropy_of_the_targets_frequencies():
    from scipy.stats import entropy

    from minilm.analysis.plateau import token_counts, unigram_entropy

    targets = torch.tensor([3, 3, 3, 7, 7, 1, 9, 9, 9, 9])
    counts = token_counts(targets).numpy()
    assert counts.tolist() == [0, 1, 0, 3, 0, 0, 0, 2, 0, 4]
    assert unigram_entropy(targets) == pytest.approx(entropy(counts[counts > 0]), abs=1e-12)  # natural log
    assert unigram_entropy([targets[:4], targets[4:]]) == pytest.approx(unigram_entropy(targets), abs=1e-12)
    assert unigram_entropy(torch.full((5,), 4)) == 0.0
    with pytest.raises(ValueError, match="scored_targets"):
        unigram_entropy(torch.tensor([1, -100]))


def test_the_frequency_model_scores_exactly_the_unigram_entropy_and_no_context_free_model_beats_it():
    from minilm.analysis.plateau import token_counts, unigram_entropy

    generator = torch.Generator().manual_seed(0)
    targets = torch.multinomial(torch.tensor([0.5, 0.2, 0.2, 0.05, 0.05]), 400, replacement=True, generator=generator)
    frequencies = token_counts(targets, vocab_size=5).double() / len(targets)
    frequency_model = F.cross_entropy(frequencies.log().expand(len(targets), 5), targets).item()
    assert frequency_model == pytest.approx(unigram_entropy(targets), abs=1e-9)
    for _ in range(5):  # any other fixed distribution over the vocabulary does worse (Gibbs' inequality)
        other = torch.softmax(torch.randn(5, generator=generator, dtype=torch.float64), 0)
        assert F.cross_entropy(other.log().expand(len(targets), 5), targets).item() > frequency_model


def test_scored_targets_of_each_kind_of_batch_and_the_plateau_margin():
    from minilm.analysis.plateau import below_plateau, binary_entropy, past_plateau, scored_targets

    block = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])  # a language model's blocks (B, T + 1)
    assert scored_targets(block).tolist() == [2, 3, 4, 6, 7, 8]
    labels = torch.tensor([[-100, 5, -100], [7, -100, -100]])  # MLM's masked tokens or a padded seq2seq target
    assert scored_targets({"input_ids": block, "labels": labels}).tolist() == [5, 7]
    assert binary_entropy(0.5) == pytest.approx(math.log(2)) and binary_entropy(0.0) == 0.0
    assert binary_entropy(0.15) == pytest.approx(-(0.15 * math.log(0.15) + 0.85 * math.log(0.85)))
    with pytest.raises(ValueError):
        binary_entropy(1.5)
    assert below_plateau(4.5, 6.2) == pytest.approx(1.7)
    assert past_plateau(4.5, 6.2) and not past_plateau(5.5, 6.2) and past_plateau(5.5, 6.2, margin=0.5)
