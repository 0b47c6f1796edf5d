"""Zero-shot classification by a causal language model: which label word does it find likelier next?

    scores = zero_shot_scores(gpt, tokenizer, texts, labels, (" negative", " positive"), template="{} very")
    # {"accuracy", "calibrated_accuracy", "predicted_fraction": [fraction predicted as each label]}

Radford et al. (2018, §5) read GPT's sentiment without any fine-tuning: append " very" to a review and compare the
probabilities of " positive" and " negative" next. A model that prefers one word everywhere then calls every review
that; Zhao et al. (2021, "Calibrate Before Use") subtract each word's log-probability after a content-free prompt
("N/A very"), so only what the text adds decides. Label words are scored whole (several BPE tokens if need be) by
:func:`minilm.generation.continuation_log_prob`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from minilm.generation import continuation_log_prob


def zero_shot_scores(
    model,
    tokenizer,
    texts: Sequence[str],
    labels: Sequence[int] | Tensor,
    label_words: Sequence[str],
    template: str = "{}",
    content_free: str = "N/A",
) -> dict:
    """For each text, the prompt ``template.format(text)``; predict the label whose word (``label_words[label]``) has
    the highest log-probability after it. Returns the accuracy of that rule, of the same rule calibrated by the
    log-probabilities after the content-free prompt ``template.format(content_free)``, and the fraction of texts the
    uncalibrated rule assigns to each label. Ties go to the lower label."""
    labels = torch.as_tensor(labels)  # (N,)
    if len(label_words) < 2 or len(labels) != len(texts):
        raise ValueError(f"need two label words or more and one label per text, got {len(label_words)} words, "
                         f"{len(texts)} texts and {len(labels)} labels")  # fmt: skip
    if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < len(label_words):
        raise ValueError(f"labels must index label_words (0 to {len(label_words) - 1}), got {labels.unique().tolist()}")
    prompts, neutral = [template.format(text) for text in texts], [template.format(content_free)]
    scores = torch.stack([continuation_log_prob(model, tokenizer, prompts, w) for w in label_words], dim=1)  # (N, K)
    prior = torch.stack([continuation_log_prob(model, tokenizer, neutral, w) for w in label_words], dim=1)  # (1, K)
    predicted, calibrated = scores.argmax(1), (scores - prior).argmax(1)  # (N,) each
    return {
        "accuracy": (predicted == labels).float().mean().item(),
        "calibrated_accuracy": (calibrated == labels).float().mean().item(),
        "predicted_fraction": [(predicted == k).float().mean().item() for k in range(len(label_words))],
    }
