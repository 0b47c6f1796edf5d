"""Knowledge distillation (Hinton et al. 2015; DistilBERT, Sanh et al. 2019, §2-3): a student learns from a teacher's
output distribution, its "soft targets", as well as from the data.

    t_i = softmax(z_t / T)_i,  s_i = softmax(z_s / T)_i            (teacher's and student's logits z, temperature T)
    L_ce  = -Σ_i t_i log s_i  ->  T² · KL(t ‖ s)                   (the same gradient in z_s: KL = L_ce - H(t))
    L_mlm = -1/|M| Σ_{j∈M} log s_j(x_j)    at T = 1                (the ordinary masked-LM loss)
    L_cos = 1 - cos(h_s, h_t)                                       (the last hidden states, aligned)
    L = α · L_ce + β · L_mlm + γ · L_cos,   DistilBERT: α = 5, β = 2, γ = 1, T = 2

§2: "The final training objective is a linear combination of the distillation loss L_ce with the supervised
training loss, in our case the masked language modeling loss L_mlm. We found it beneficial to add a cosine
embedding loss (L_cos) which will tend to align the directions of the student and teacher hidden states vectors."
The weights and temperature are the defaults of the authors' ``train.py`` (``--alpha_ce 5.0 --alpha_mlm 2.0
--alpha_cos 1.0 --temperature 2.0``).

L_ce is written as KL(t ‖ s), which differs from the cross-entropy by the teacher's entropy, a constant for the
student: the gradients are the same, and the loss is 0 when the student matches the teacher. It is multiplied by T²
(Hinton et al. §2: the soft targets' gradients scale as 1/T², so the product keeps their magnitude as T changes), as
DistilBERT's ``distiller.py`` does (``KLDivLoss(reduction="batchmean")(...) * T**2``), and averaged over the
positions scored: every real (non-padding) token, DistilBERT's default (its ``restrict_ce_to_mask`` is off), or
only the masked ones (``restrict_ce_to_mask=True``). L_cos is averaged over the real tokens (their
``CosineEmbeddingLoss`` with target 1 on the states of ``attention_mask`` positions).

Tensors may have any leading shape (B, T) or (N,): logits (..., V), hidden states (..., C), labels and masks (...).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.mlm import mlm_loss

# DistilBERT's train.py defaults
ALPHA_CE, ALPHA_MLM, ALPHA_COS, TEMPERATURE = 5.0, 2.0, 1.0, 2.0


def _rows(x: Tensor, mask: Tensor | None) -> Tensor:
    """(..., D) -> (N, D): the rows where ``mask`` (...) is true (all rows without a mask)."""
    if mask is None:
        return x.reshape(-1, x.size(-1))
    if mask.shape != x.shape[:-1]:
        raise ValueError(f"the mask {tuple(mask.shape)} must have the leading shape of {tuple(x.shape)}")
    return x[mask.bool()]


def soft_target_loss(
    student_logits: Tensor, teacher_logits: Tensor, temperature: float = TEMPERATURE, mask: Tensor | None = None
) -> Tensor:
    """T² · KL(softmax(z_t / T) ‖ softmax(z_s / T)), summed over the vocabulary and averaged over the positions where
    ``mask`` is true (every position without one). Logits (..., V); no gradient flows to the teacher.

    A batch with no position scored gives a zero loss (connected to the graph) instead of NaN.
    """
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"student logits {tuple(student_logits.shape)} and teacher logits {tuple(teacher_logits.shape)} differ: "
            "the student must score the teacher's vocabulary at the same positions"
        )
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    s, t = _rows(student_logits, mask).float(), _rows(teacher_logits, mask).detach().float()
    if s.shape[0] == 0:
        return s.sum() * 0.0
    log_s = F.log_softmax(s / temperature, dim=-1)
    log_t = F.log_softmax(t / temperature, dim=-1)
    kl = F.kl_div(log_s, log_t, reduction="batchmean", log_target=True)  # Σ_i t_i (log t_i - log s_i), / N
    return kl * temperature**2


def hidden_cosine_loss(student_hidden: Tensor, teacher_hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """1 - cos(h_s, h_t) averaged over the real tokens (``attention_mask`` 1; every position without one): 0 for
    states that point the same way, 2 for opposite ones. Hidden states (..., C) of the same width."""
    if student_hidden.shape != teacher_hidden.shape:
        raise ValueError(
            f"student hidden states {tuple(student_hidden.shape)} and teacher's {tuple(teacher_hidden.shape)} "
            "differ: the cosine loss compares states of one width at the same positions"
        )
    s, t = _rows(student_hidden, attention_mask).float(), _rows(teacher_hidden, attention_mask).detach().float()
    if s.shape[0] == 0:
        return s.sum() * 0.0
    return (1 - F.cosine_similarity(s, t, dim=-1)).mean()


def distillation_loss(
    student_logits: Tensor,
    teacher_logits: Tensor,
    labels: Tensor,
    student_hidden: Tensor,
    teacher_hidden: Tensor,
    attention_mask: Tensor | None = None,
    *,
    alpha_ce: float = ALPHA_CE,
    alpha_mlm: float = ALPHA_MLM,
    alpha_cos: float = ALPHA_COS,
    temperature: float = TEMPERATURE,
    restrict_ce_to_mask: bool = False,
) -> tuple[Tensor, dict[str, Tensor]]:
    """DistilBERT's L = α · L_ce + β · L_mlm + γ · L_cos -> (loss, {"ce", "mlm", "cos"}: each part's mean).

    student_logits, teacher_logits (..., V); labels (...): the original ids at the masked positions, -100 elsewhere;
    student_hidden, teacher_hidden (..., C); attention_mask (...): 1 on real tokens (None: all are). L_ce is scored
    at every real token, or at the masked ones with ``restrict_ce_to_mask``; L_mlm at the masked ones (T = 1);
    L_cos at every real token.
    """
    if min(alpha_ce, alpha_mlm, alpha_cos) < 0:
        weights = f"alpha_ce={alpha_ce}, alpha_mlm={alpha_mlm}, alpha_cos={alpha_cos}"
        raise ValueError(f"the weights must be >= 0, got {weights}")
    masked = labels != IGNORE_INDEX
    real = attention_mask.bool() if attention_mask is not None else torch.ones_like(masked)
    ce = soft_target_loss(student_logits, teacher_logits, temperature, masked if restrict_ce_to_mask else real)
    mlm = mlm_loss(student_logits[masked], labels)  # (|M|, V) in row-major order, that of labels[masked]
    cos = hidden_cosine_loss(student_hidden, teacher_hidden, real)
    parts = {"ce": ce, "mlm": mlm, "cos": cos}
    return alpha_ce * ce + alpha_mlm * mlm + alpha_cos * cos, parts
