"""Cross-entropy over a linear layer's outputs without materialising them: the fused LM head + loss.

A language model's last step turns hidden states h (N, D) into vocabulary logits z = h Wᵀ + b (N, V) and scores
them with the cross-entropy

    ℓ_i = log Σ_v exp(z_iv) − z_{i,y_i}          (log-sum-exp minus the target's logit)
    ∂ℓ_i/∂z_i = softmax(z_i) − onehot(y_i)

The (N, V) logits are the largest tensor of a training step (2,048 tokens × 50,257 GPT-2 tokens: 400 MB in fp32),
and the plain loss writes them, their log-softmax and both gradients to memory. Here the rows go through in chunks:
each chunk's logits are computed, reduced to its losses, turned in place into ∂ℓ/∂z, and multiplied straight away
into the gradients of h, W and b (∂L/∂h = G W, ∂L/∂W = Gᵀ h, ∂L/∂b = Σ_i G_i), which backward only scales. At most
one chunk of logits exists at a time (Liger Kernel's FusedLinearCrossEntropy does the same on GPUs,
Hsu et al. 2024). Values and gradients equal ``F.cross_entropy(F.linear(h, W, b), y)`` (tests check both).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

CHUNK_ROWS = 256  # rows of logits computed at once: (256, V) fp32, 8 MB at V = 8192 (fastest on CPU here)


def linear_cross_entropy(
    hidden: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    targets: Tensor,
    ignore_index: int = -100,  # F.cross_entropy's default, and the library's label convention
    reduction: str = "mean",
    chunk_rows: int = CHUNK_ROWS,
) -> Tensor:
    """``F.cross_entropy(F.linear(hidden, weight, bias), targets, ignore_index=, reduction=)`` in chunks of rows.

    hidden (N, D), weight (V, D), bias (V,) or None, targets (N,) -> a scalar: the mean over the targets not equal
    to ``ignore_index`` (0 when there are none, still connected to the graph) or, with ``reduction="sum"``, their
    sum. The softmax runs in fp32; under autocast the matrix products run in autocast's dtype, as ``F.linear`` would.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1] or weight.dim() != 2 or weight.size(1) != hidden.size(1):
        raise ValueError(
            f"expected hidden (N, D), weight (V, D) and targets (N,), got {tuple(hidden.shape)}, "
            f"{tuple(weight.shape)} and {tuple(targets.shape)}"
        )
    if torch.compiler.is_compiling():  # one graph (the chunk loop and the count of targets would break it): the plain
        # loss, which the compiler fuses itself
        logits = F.linear(hidden, weight, bias).float()
        total = F.cross_entropy(logits, targets, ignore_index=ignore_index, reduction="sum")
        return total if reduction == "sum" else total / (targets != ignore_index).sum().clamp(min=1)
    return _LinearCrossEntropy.apply(hidden, weight, bias, targets, ignore_index, reduction, chunk_rows)


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, ignore_index, reduction, chunk_rows):
        device = hidden.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
        exact = torch.promote_types(dtype, torch.float32)  # the softmax's and the sums' dtype: fp32, or fp64
        want_hidden, want_weight, want_bias = ctx.needs_input_grad[:3]
        scored = targets != ignore_index  # (N,)
        n_scored = int(scored.sum())
        scale = 1.0 / max(n_scored, 1) if reduction == "mean" else 1.0  # ∂L/∂ℓ_i
        with torch.autocast(device, enabled=False):
            w = weight.to(dtype)
            b = bias.to(dtype) if bias is not None else None
            grad_hidden = torch.empty_like(hidden) if want_hidden else None
            grad_weight = torch.zeros(weight.shape, dtype=exact, device=weight.device) if want_weight else None
            grad_bias = torch.zeros(bias.shape, dtype=exact, device=bias.device) if want_bias else None
            total = torch.zeros((), dtype=exact, device=hidden.device)
            for start in range(0, hidden.size(0), chunk_rows):
                rows = slice(start, start + chunk_rows)
                h = hidden[rows].to(dtype)  # (n, D)
                logits = (h @ w.T if b is None else torch.addmm(b, h, w.T)).to(exact)  # z = h Wᵀ + b: (n, V)
                keep = scored[rows]  # (n,)
                y = targets[rows].masked_fill(~keep, 0)[:, None]  # (n, 1): any valid index where not scored
                target_logits = logits.gather(1, y)  # z_y: (n, 1)
                if not (want_hidden or want_weight or want_bias):
                    total += (logits.logsumexp(dim=-1, keepdim=True) - target_logits)[keep].sum()
                    continue
                # One pass of exp serves the loss and the gradient: e = exp(z − max z), softmax = e / Σ e.
                top = logits.amax(dim=-1, keepdim=True)  # (n, 1)
                grad = logits.sub_(top).exp_()  # e, in the logits' memory: (n, V)
                norm = grad.sum(dim=-1, keepdim=True)  # Σ_v e_v: (n, 1)
                total += (top + norm.log() - target_logits)[keep].sum()  # ℓ_i = log Σ_v exp(z_v) − z_y
                grad.mul_(keep[:, None].to(exact) / norm)  # softmax(z); 0 where not scored
                grad.scatter_add_(1, y, keep[:, None].to(exact).neg())  # − onehot(y): G = ∂ℓ_i/∂z_i
                # G unscaled: ∂L/∂ℓ_i = 1/N (~1e-9 at N = 16k, V = 50k) would flush G to zero in fp16, before a
                # gradient scaler's factor arrives; backward applies both in the exact dtype
                grad = grad.to(dtype)  # G: (n, V)
                if want_hidden:
                    grad_hidden[rows] = grad @ w  # G W: (n, D)
                if want_weight:
                    if dtype == exact:
                        grad_weight.addmm_(grad.T, h)  # += Gᵀ h: (V, D)
                    else:
                        grad_weight += (grad.T @ h).to(exact)
                if want_bias:
                    grad_bias += grad.sum(0, dtype=exact)
        ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)
        ctx.dtypes = (weight.dtype, bias.dtype if bias is not None else None)
        ctx.scale = scale
        return total * scale

    @staticmethod
    def backward(ctx, grad_loss):
        grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        weight_dtype, bias_dtype = ctx.dtypes
        factor = grad_loss * ctx.scale  # ∂(loss)/∂L (a gradient scaler's factor) x ∂L/∂ℓ_i, in the exact dtype
        if grad_hidden is not None:
            grad_hidden = (grad_hidden * factor).to(grad_hidden.dtype)
        if grad_weight is not None:
            grad_weight = (grad_weight * factor).to(weight_dtype)
        if grad_bias is not None:
            grad_bias = (grad_bias * factor).to(bias_dtype)
        return grad_hidden, grad_weight, grad_bias, None, None, None, None
