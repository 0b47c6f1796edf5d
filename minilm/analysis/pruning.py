"""Which attention heads matter, and removing those that do not: Michel, Levy & Neubig (2019), "Are Sixteen Heads
Really Better than One?" (Chapter 9).

    I = head_importance(model, batches, loss_fn)          # (L, nh): E_x |∂L(x)/∂ξ_h|, normalised per layer
    pruning_order(I)                                      # [(layer, head), ...], the least important first
    records = iterative_pruning(model, batches, loss_fn, evaluate, steps=0.1)
    with head_mask(model, records[3]["mask"]): ...        # switch heads off for a while (0 = off)
    prune_heads(model, records[3]["mask"])                # remove them for good: fewer parameters, less time
    count_heads(model)

Each head's output is multiplied by a gate ξ_h: MHAtt(x) = Σ_h ξ_h Att_h(x) (§2.1). ξ_h = 0 switches head h off;
differentiating the loss with respect to ξ at ξ = 1 gives the importance of §4.1, I_h = E_x |∂L(x)/∂ξ_h|, a
first-order estimate of how much the loss changes when head h goes. Michel et al. normalise it per layer by its
l2 norm (following Molchanov et al. 2017) and prune heads globally, the least important first, recomputing the
importance after each step with the heads pruned so far switched off (§4.1; §4.2: 40 % of BERT's heads go
without a noticeable loss of accuracy on MNLI). The search only masks heads; :func:`prune_heads` then removes
their weights.

The functions work on any model holding one minilm :class:`~minilm.nn.TransformerEncoder` (Bert, Electra, an
encoder alone), its layers' self-attention heads; masks are (L, nh) with the heads' **original** indices, so they
keep their meaning after pruning (a pruned head's entry is ignored, its importance 0). Models that share attention
across layers (ALBERT) are refused: one module runs in several layers, so a head of one layer cannot be switched off
alone. Putting the model in eval mode (no dropout) is the caller's job; the functions leave the masks as they
found them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from minilm.nn import MultiHeadAttention, TransformerEncoder

LossFn = Callable[[nn.Module, Any], Tensor]  # (model, batch) -> scalar loss


def attention_modules(model: nn.Module) -> list[MultiHeadAttention]:
    """The self-attention of each layer of the model's encoder, in layer order (L modules)."""
    encoders = [m for m in model.modules() if isinstance(m, TransformerEncoder)]
    if len(encoders) != 1:
        raise ValueError(
            f"{type(model).__name__} holds {len(encoders)} minilm TransformerEncoders, not one: pass the model "
            "(or encoder) whose heads to analyse, e.g. electra_pretraining.discriminator"
        )
    encoder = encoders[0]
    modules = [encoder.layers[i].self_attn for i in encoder.block_of]
    if len({id(m) for m in modules}) < len(modules):
        raise ValueError(
            f"this encoder shares its attention across layers (share={encoder.share!r}, as in ALBERT): one module "
            "runs in several layers, so a head cannot be masked or pruned in one layer alone"
        )
    return modules


def _n_heads(modules: Sequence[MultiHeadAttention]) -> int:
    """The layers' original number of heads (pruned ones included)."""
    return len(modules[0].kept_heads) + len(modules[0].pruned_heads)


def _check_shape(mask: Tensor, modules: Sequence[MultiHeadAttention], what: str) -> None:
    shape = (len(modules), _n_heads(modules))
    if tuple(mask.shape) != shape:
        raise ValueError(f"{what} must be (layers, heads) = {shape}, one per original head, got {tuple(mask.shape)}")


def set_head_mask(model: nn.Module, mask: Tensor | None) -> None:
    """Give every layer's heads their ξ: mask (L, nh), 0 = off, 1 = on (real values scale); None: all on, no cost.

    Entries of heads already pruned are ignored. A mask with ``requires_grad`` keeps its graph to the layers.
    """
    modules = attention_modules(model)
    if mask is None:
        for attn in modules:
            attn.head_mask = None
        return
    _check_shape(mask, modules, "mask")
    mask = mask if mask.is_floating_point() else mask.float()  # bool/int 0-1 masks scale the heads too
    for attn, row in zip(modules, mask, strict=True):
        kept = torch.tensor(attn.kept_heads, dtype=torch.long, device=row.device)
        attn.head_mask = row[kept].to(attn.q_proj.weight.device)  # (nh_kept,): original indices -> current positions


@contextmanager
def head_mask(model: nn.Module, mask: Tensor | None) -> Iterator[None]:
    """``with head_mask(model, mask):`` run with :func:`set_head_mask` ``(model, mask)``, then restore the masks
    the layers had (do not prune heads inside: the restored masks would no longer fit)."""
    modules = attention_modules(model)
    saved = [attn.head_mask for attn in modules]
    set_head_mask(model, mask)
    try:
        yield
    finally:
        for attn, previous in zip(modules, saved, strict=True):
            attn.head_mask = previous


def head_importance(
    model: nn.Module, batches: Iterable[Any], loss_fn: LossFn, normalize: bool = True, mask: Tensor | None = None
) -> Tensor:
    """I_h = E_x |∂L(x)/∂ξ_h| (Michel et al. 2019, §4.1), averaged over ``batches`` -> (L, nh), on the CPU.

    ``loss_fn(model, batch)`` returns the batch's scalar loss (e.g. a classifier's mean cross-entropy); as in
    Michel et al.'s code the absolute value is taken per batch (batches of one example give the expectation).
    The gradient is taken at ξ = ``mask`` (L, nh) (None: all ones; iterative pruning passes the heads pruned so far
    as 0). ``normalize``: divide each layer's importances by their l2 norm, I_h / ||I_layer||_2 (a layer of zeros
    stays zero). Heads already pruned get 0. Only ξ is differentiated: no ``.grad`` is left on the parameters.
    """
    modules = attention_modules(model)
    weight = modules[0].q_proj.weight
    shape = (len(modules), _n_heads(modules))
    if mask is not None:
        _check_shape(mask, modules, "mask")
    xi = torch.ones(shape) if mask is None else mask.detach()
    xi = xi.to(weight.device, weight.dtype).requires_grad_()  # the model's dtype: float64 models, float64 gradients
    total, n_batches = torch.zeros(shape, dtype=weight.dtype, device=weight.device), 0
    with torch.enable_grad():
        for batch in batches:
            with head_mask(model, xi):  # set anew per batch: each backward frees the graph from ξ to the layers
                loss = loss_fn(model, batch)
            if loss.dim() != 0:
                raise ValueError(f"loss_fn must return a scalar loss, got shape {tuple(loss.shape)}: average it")
            if not loss.requires_grad:
                raise ValueError(
                    "loss_fn's loss does not depend on the head mask: compute it from the model's outputs, "
                    "outside torch.no_grad()"
                )
            (grad,) = torch.autograd.grad(loss, xi, allow_unused=True)  # None: no head left to depend on
            if grad is not None:
                total += grad.abs()  # |∂L(x)/∂ξ_h|
            n_batches += 1
    if n_batches == 0:
        raise ValueError("batches is empty: the importance is an average over at least one batch")
    importance = total / n_batches  # (L, nh)
    if normalize:
        norm = importance.norm(dim=-1, keepdim=True)  # (L, 1): ||I_layer||_2
        importance = importance / norm.clamp_min(torch.finfo(norm.dtype).tiny)
    return importance.float().cpu()


def pruning_order(importance: Tensor, mask: Tensor | None = None) -> list[tuple[int, int]]:
    """(L, nh) importances -> every (layer, head), the least important first, across layers (ties: in index order).

    Heads whose ``mask`` (L, nh) entry is 0 (already pruned) are left out.
    """
    if importance.dim() != 2:
        raise ValueError(f"importance must be (layers, heads), got shape {tuple(importance.shape)}")
    if mask is not None and mask.shape != importance.shape:
        raise ValueError(f"mask {tuple(mask.shape)} must have the shape of importance {tuple(importance.shape)}")
    n_heads = importance.size(1)
    order = torch.argsort(importance.flatten(), stable=True).tolist()
    pairs = [(i // n_heads, i % n_heads) for i in order]
    return pairs if mask is None else [(layer, head) for layer, head in pairs if mask[layer, head] != 0]


def _targets(steps: float | Sequence[int], n_heads: int) -> list[int]:
    """The numbers of heads pruned after each step."""
    if isinstance(steps, (int, float)):
        if not 0.0 < steps <= 1.0:
            raise ValueError(f"a fraction of heads per step must lie in (0, 1], got {steps}")
        n_steps = round(1.0 / steps)
        return sorted({min(n_heads, round(k * steps * n_heads)) for k in range(n_steps + 1)} | {n_heads})
    targets = [int(t) for t in steps]
    increasing = all(a < b for a, b in zip(targets, targets[1:], strict=False))
    if not targets or not increasing or targets[0] < 0 or targets[-1] > n_heads:
        raise ValueError(
            f"steps must be increasing numbers of heads pruned in 0..{n_heads} (or a fraction per step), got {steps}"
        )
    return targets


def iterative_pruning(
    model: nn.Module,
    batches: Iterable[Any],
    loss_fn: LossFn,
    evaluate: Callable[[nn.Module], float],
    steps: float | Sequence[int] = 0.1,
    normalize: bool = True,
) -> list[dict[str, Any]]:
    """Michel et al.'s iterative pruning (§4.1): mask the least important heads step by step, scoring each step.

    ``steps``: a fraction of the heads to prune per step (0.1: 0 %, 10 %, ..., 100 %) or the increasing numbers of
    heads pruned after each step. At each step the importance is computed anew (:func:`head_importance` over
    ``batches``, which must be a list or another re-iterable) with the heads pruned so far masked, the next least
    important ones are masked and ``evaluate(model)`` scores the model. One record per step: {"heads_pruned",
    "fraction" (of the heads the model had), "score", "mask" (L, nh), 0 = pruned (heads removed before, too)}.
    The heads are masked, not removed (:func:`prune_heads` does that with a record's mask); the model's own masks
    are restored at the end.
    """
    if iter(batches) is batches:
        raise ValueError("batches is read at every step: pass a list (or another re-iterable), not an iterator")
    modules = attention_modules(model)
    mask = torch.zeros(len(modules), _n_heads(modules))  # (L, nh): 1 = on; heads removed before stay 0
    for layer, attn in enumerate(modules):
        mask[layer, attn.kept_heads] = 1.0
    n_heads = int(mask.sum())
    records, pruned = [], 0
    with head_mask(model, mask):
        for target in _targets(steps, n_heads):
            if target > pruned:
                importance = head_importance(model, batches, loss_fn, normalize, mask=mask)
                for layer, head in pruning_order(importance, mask)[: target - pruned]:
                    mask[layer, head] = 0.0
                pruned = target
                set_head_mask(model, mask)
            score = float(evaluate(model))
            records.append({"heads_pruned": pruned, "fraction": pruned / n_heads, "score": score, "mask": mask.clone()})
    return records


def prune_heads(model: nn.Module, heads: Mapping[int, Iterable[int]] | Tensor) -> dict[int, list[int]]:
    """Remove heads' weights for good (:meth:`MultiHeadAttention.prune_heads`); return {layer: heads removed}.

    ``heads``: {layer: original head indices}, or a 0/1 mask (L, nh) (a record's ``"mask"``) whose 0 entries go.
    Heads already pruned are skipped; layers where nothing was removed are left out of the result.
    """
    modules = attention_modules(model)
    if isinstance(heads, Tensor):
        _check_shape(heads, modules, "a mask of heads")
        if not ((heads == 0) | (heads == 1)).all():
            raise ValueError("a mask of heads to prune must be 0 (prune) or 1 (keep): a soft mask has no pruning")
        heads = {layer: (row == 0).nonzero().flatten().tolist() for layer, row in enumerate(heads)}
    unknown = [layer for layer in heads if not 0 <= layer < len(modules)]
    if unknown:
        raise ValueError(f"layers {unknown} do not exist: the encoder has {len(modules)}, 0..{len(modules) - 1}")
    removed = {layer: modules[layer].prune_heads(layer_heads) for layer, layer_heads in heads.items()}
    return {layer: r for layer, r in sorted(removed.items()) if r}


def count_heads(model: nn.Module) -> int:
    """The number of attention heads the encoder's layers have left (L * nh before any pruning)."""
    return sum(attn.n_heads for attn in attention_modules(model))
