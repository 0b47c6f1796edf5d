"""LAMB: Adam's step, rescaled layer by layer to a fixed fraction of the layer's weights (You et al. 2019).

"Large Batch Optimization for Deep Learning: Training BERT in 76 minutes", Algorithm 2; ALBERT (Lan et al. 2020)
was trained with it. For each parameter tensor (a "layer") x with gradient g at step t::

    m_t = β1 m_{t-1} + (1 - β1) g_t                   first moment, as in Adam
    v_t = β2 v_{t-1} + (1 - β2) g_t²                  second moment
    m̂_t = m_t / (1 - β1^t),  v̂_t = v_t / (1 - β2^t)   bias correction
    r_t = m̂_t / (√v̂_t + ε)                           Adam's step direction
    u_t = r_t + λ x_t                                 decoupled weight decay joins the update (AdamW's λ)
    x_{t+1} = x_t - η · φ(‖x_t‖) / ‖u_t‖ · u_t          the trust ratio φ(‖x‖)/‖u‖, with φ the identity

So an adapted layer moves by exactly η‖x‖ per step, whatever the scale of its gradient: the learning rate is
relative to each layer's own size, which is what keeps huge batches (and their large learning rates) stable. The
ratio is 1 when either norm is 0 (a layer initialised to zeros still moves; a zero update stays zero).

ALBERT's lamb_optimizer.py exempts LayerNorm weights and biases from weight decay and from the layer adaptation;
here a parameter group says so with ``layer_adaptation=False`` (the Trainer's no-decay group of 1-D tensors), and
its parameters take AdamW's step. Google's TF code also drops the bias correction; the paper keeps it, so do we.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


class Lamb(torch.optim.Optimizer):
    """LAMB over ``params`` (tensors, or groups of them as dicts that override these defaults).

    ``layer_adaptation``: rescale each tensor's update by the trust ratio ‖x‖/‖u‖ (False: AdamW's update).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        layer_adaptation: bool = True,
    ) -> None:
        if not lr >= 0:
            raise ValueError(f"lr must be >= 0, got {lr}")
        if not all(0 <= beta < 1 for beta in betas):
            raise ValueError(f"betas must each be in [0, 1), got {betas}")
        if not eps >= 0:
            raise ValueError(f"eps must be >= 0, got {eps}")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, layer_adaptation=layer_adaptation)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """One update of every parameter that has a gradient; ``closure`` re-evaluates the loss first."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for x in group["params"]:
                if x.grad is None:
                    continue
                if x.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                g, state = x.grad, self.state[x]
                if not state:
                    state["step"] = torch.tensor(0.0)  # a tensor, as torch's Adam keeps it (state dicts, FSDP)
                    state["exp_avg"] = torch.zeros_like(x, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(x, memory_format=torch.preserve_format)
                state["step"] += 1
                t, m, v = int(state["step"]), state["exp_avg"], state["exp_avg_sq"]
                m.lerp_(g, 1 - beta1)  # m_t = β1 m_{t-1} + (1 - β1) g_t
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)  # v_t = β2 v_{t-1} + (1 - β2) g_t²
                m_hat = m / (1 - beta1**t)  # m̂_t = m_t / (1 - β1^t)
                v_hat = v / (1 - beta2**t)  # v̂_t = v_t / (1 - β2^t)
                update = m_hat / (v_hat.sqrt() + group["eps"])  # r_t = m̂_t / (√v̂_t + ε)
                if group["weight_decay"]:
                    update.add_(x, alpha=group["weight_decay"])  # u_t = r_t + λ x_t
                if group["layer_adaptation"]:
                    update.mul_(trust_ratio(x, update))  # φ(‖x_t‖) / ‖u_t‖ · u_t
                x.add_(update, alpha=-group["lr"])  # x_{t+1} = x_t - η · (ratio ·) u_t
        return loss


def trust_ratio(weights: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """‖x‖ / ‖u‖ as a 0-dim tensor (no host sync), or 1 when either norm is 0.

    On FSDP's sharded tensors the norms are those of the whole tensors (DTensor reduces them over the shards).
    """
    w_norm, u_norm = torch.linalg.vector_norm(weights), torch.linalg.vector_norm(update)
    return torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
