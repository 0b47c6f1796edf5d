"""Bidirectional language modelling (ELMo): a forward LM and a backward LM trained jointly on the same tokens.

    forward:   p(t_1, ..., t_N) = Π_k p(t_k | t_1, ..., t_{k−1})
    backward:  p(t_1, ..., t_N) = Π_k p(t_k | t_{k+1}, ..., t_N)
    objective: maximise Σ_k [ log p(t_k | t_<k; Θ_x, Θ→_LSTM, Θ_s) + log p(t_k | t_>k; Θ_x, Θ←_LSTM, Θ_s) ]
                                                                                   (Peters et al. 2018, §3.1)

Θ_x (token representation) and Θ_s (softmax) are shared by the two directions, the LSTMs are not. A training
example is a block of ``seq_len + 1`` token ids (:func:`~minilm.objectives.causal_lm.language_model_blocks`); the
model reads the whole block, and each direction makes ``seq_len`` predictions: the forward LM predicts ids[1:] from
the states at positions 0..T−2, the backward LM ids[:-1] from the states at positions 1..T−1.

Padding (ids equal to ``ignore_index``) is neither predicted nor predicts: a prediction is scored when its target and
the position that makes it are both real tokens. In a right-padded row of n tokens the backward logits at the first
padding position have read no token of the row (ELMo's states there are zeros), so they do not score t_n: each
direction makes n − 1 predictions, exactly those of the same row without padding.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from minilm.nn.linear_cross_entropy import linear_cross_entropy
from minilm.objectives.labels import IGNORE_INDEX


class BiLMLoss(NamedTuple):
    loss: torch.Tensor  # forward + backward: the negative objective above, per position (the tokens' mean)
    forward: torch.Tensor  # mean −log p(t_k | t_<k) over the forward predictions
    backward: torch.Tensor  # mean −log p(t_k | t_>k) over the backward predictions

    @property
    def mean(self) -> torch.Tensor:
        """(forward + backward) / 2: the mean over all predictions of both directions; exp(mean) is a perplexity."""
        return (self.forward + self.backward) / 2


def bilm_loss(
    forward_logits: torch.Tensor, backward_logits: torch.Tensor, ids: torch.Tensor, ignore_index: int = IGNORE_INDEX
) -> BiLMLoss:
    """forward_logits, backward_logits (B, T, V) of a model that read ids (B, T): position k's forward logits
    predict ids[k + 1], its backward logits ids[k − 1]. Targets equal to ``ignore_index`` are not scored, nor are
    the predictions made at such a position (the backward one at the first padding position)."""
    forward_targets, backward_targets = _targets(ids, ignore_index)
    forward = F.cross_entropy(
        forward_logits[:, :-1].float().flatten(0, 1), forward_targets[:, :-1].flatten(), ignore_index=ignore_index
    )
    backward = F.cross_entropy(
        backward_logits[:, 1:].float().flatten(0, 1), backward_targets[:, 1:].flatten(), ignore_index=ignore_index
    )
    return BiLMLoss(forward + backward, forward, backward)


def _targets(ids: torch.Tensor, ignore_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What each position's forward and backward logits predict, (B, T) each: ids[k + 1] and ids[k − 1], and
    ``ignore_index`` where there is nothing to predict (the last position forward, the first one backward) and where
    position k is itself padding."""
    padding = ids == ignore_index
    forward = F.pad(ids[:, 1:], (0, 1), value=ignore_index).masked_fill(padding, ignore_index)
    backward = F.pad(ids[:, :-1], (1, 0), value=ignore_index).masked_fill(padding, ignore_index)
    return forward, backward


def bilm_loss_from_states(
    forward_states: torch.Tensor,
    backward_states: torch.Tensor,
    softmax: nn.Linear,
    ids: torch.Tensor,
    ignore_index: int = IGNORE_INDEX,
) -> BiLMLoss:
    """``bilm_loss(softmax(forward_states), softmax(backward_states), ids)`` without the (B, T, V) logits.

    The states (B, T, d) are scored whole: the position with nothing to predict in each direction (the last one
    forward, the first one backward) gets the target ``ignore_index``, so no slice of the states is copied.
    """
    forward_targets, backward_targets = _targets(ids, ignore_index)  # position k predicts ids[k + 1], ids[k − 1]

    def loss(states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return linear_cross_entropy(
            states.flatten(0, 1), softmax.weight, softmax.bias, targets.flatten(), ignore_index=ignore_index
        )

    forward, backward = loss(forward_states, forward_targets), loss(backward_states, backward_targets)
    return BiLMLoss(forward + backward, forward, backward)
