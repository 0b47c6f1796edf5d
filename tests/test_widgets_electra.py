"""The replaced-token explorer shows what the course ELECTRA's two networks do, computed as pretraining computes it."""

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from minilm.models import course_checkpoint  # noqa: E402
from minilm.objectives.mlm import masked_positions  # noqa: E402
from minilm.objectives.rtd import replace_tokens, sample_replacements  # noqa: E402
from minilm.recipes.electra import GeneratorConfig  # noqa: E402
from minilm.train.config import ConfigError  # noqa: E402
from minilm.widgets.replacements import replacement_explorer, replacement_view  # noqa: E402

TEXT = "she opened the door of the little room and looked out into the garden , where the rain had stopped ."


@pytest.fixture(scope="module")
def electra():
    return course_checkpoint("electra")


def test_the_view_is_the_recipes_masking_sampling_and_discriminator(electra):
    pair, tokenizer = electra.model, electra.tokenizer
    view = replacement_view(pair, tokenizer, TEXT, mask_prob=0.4, temperature=1.0, seed=3)
    encoding = tokenizer(TEXT, return_tensors="pt")
    rng = torch.Generator().manual_seed(3)
    batch = {"input_ids": encoding.input_ids, "special_tokens_mask": encoding.special_tokens_mask.bool()}
    batch = GeneratorConfig(mask_prob=0.4).mask_config(tokenizer)(batch, rng)
    with torch.no_grad():
        hidden = pair.generator.features(batch["input_ids"]).last_hidden_state
        logits = pair.generator.mlm_logits(hidden, masked_positions(batch["labels"]))
        corrupted, replaced = replace_tokens(batch["input_ids"], batch["labels"], sample_replacements(logits, 1.0, rng))
        p = torch.sigmoid(pair.discriminator.rtd_logits(pair.discriminator.features(corrupted).last_hidden_state))[0]
    assert view.corrupted == [tokenizer.id_to_token(int(i)) for i in corrupted[0]]
    assert view.replaced == replaced[0].tolist() and view.masked == (batch["labels"][0] != -100).tolist()
    torch.testing.assert_close(torch.tensor(view.p_replaced), p)
    assert sum(view.masked) >= 4 and any(view.replaced)


def test_labels_compare_with_the_original_and_only_masked_tokens_change(electra):
    view = replacement_view(electra.model, electra.tokenizer, TEXT, mask_prob=0.6, seed=1)
    for t, (original, shown) in enumerate(zip(view.original, view.corrupted, strict=True)):
        assert view.replaced[t] == (shown != original)  # a sample equal to the original is no replacement
        assert view.masked[t] or shown == original
    assert not view.masked[0] and not view.masked[-1]  # [CLS] and [SEP] are never selected
    assert all(0.0 <= p <= 1.0 for p in view.p_replaced)


def test_a_cold_generator_writes_its_top_guesses(electra):
    pair, tokenizer = electra.model, electra.tokenizer
    view = replacement_view(pair, tokenizer, TEXT, mask_prob=0.5, temperature=0.01, seed=2)
    ids = torch.tensor([[tokenizer.token_to_id(t) for t in view.generator_input]])
    masked = torch.tensor([view.masked])
    with torch.no_grad():
        logits = pair.generator.mlm_logits(pair.generator.features(ids).last_hidden_state, masked)
    top = [tokenizer.id_to_token(int(i)) for i in logits.argmax(-1)]
    assert [c for c, m in zip(view.corrupted, view.masked, strict=True) if m] == top


def test_the_explorer_follows_its_controls_and_draws_four_rows(electra):
    explorer = replacement_explorer(electra.model, electra.tokenizer, TEXT)
    assert explorer.current() == replacement_view(electra.model, electra.tokenizer, TEXT)
    assert explorer.title.startswith("masking 15%, temperature 1:")
    explorer.rate.value = 1.0  # every token but [CLS] and [SEP]
    assert sum(explorer.current().masked) == len(explorer.current().original) - 2
    explorer.temperature.value = 2.0
    assert "temperature 2:" in explorer.title and explorer.image.value[:4] == b"\x89PNG"
    gids = {text.get_gid() for text in explorer.axes.texts}
    heads = ("original", "generator reads", "discriminator reads", "P(replaced)")
    assert all(f"{head} {i}" in gids for head in heads for i in range(len(explorer.current().original)))
    plt.close("all")


def test_bad_settings_are_named(electra):
    with pytest.raises(ConfigError, match="temperature=0"):
        replacement_view(electra.model, electra.tokenizer, TEXT, temperature=0)
    with pytest.raises(ConfigError, match="mask_prob=0"):
        replacement_view(electra.model, electra.tokenizer, TEXT, mask_prob=0)
    with pytest.raises(ConfigError, match="temperature=0"):  # named, not clamped by the slider's minimum
        replacement_explorer(electra.model, electra.tokenizer, TEXT, temperature=0)
