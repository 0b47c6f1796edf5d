"""DistilBERT's losses (minilm.objectives.distillation) by hand: the soft-target loss against torch's KLDivLoss and the
cross-entropy it stands for, Hinton's T² scaling, the cosine loss's extremes, padding ignored, the weighted sum."""

import math

import pytest
import torch
import torch.nn.functional as F

from minilm.objectives import distillation_loss, hidden_cosine_loss, soft_target_loss
from minilm.objectives.labels import IGNORE_INDEX


def _logits(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * 3


def test_soft_target_loss_is_t_squared_times_kl_as_distilbert_computes_it():
    student, teacher = _logits(0, 2, 5, 7), _logits(1, 2, 5, 7)
    for T in (1.0, 2.0, 4.0):
        # DistilBERT's distiller.py: KLDivLoss(reduction="batchmean") on log-softmaxes, times T**2
        theirs = (
            torch.nn.KLDivLoss(reduction="batchmean")(
                F.log_softmax(student.view(-1, 7) / T, -1), F.softmax(teacher.view(-1, 7) / T, -1)
            )
            * T**2
        )
        torch.testing.assert_close(soft_target_loss(student, teacher, T), theirs)
    # by hand, on one position: Σ_i t_i (log t_i - log s_i), with the cross-entropy it differs from by H(t)
    z_s, z_t = torch.tensor([[1.0, 2.0, 0.5]]), torch.tensor([[0.0, 3.0, -1.0]])
    s, t = [math.exp(v / 2) for v in (1.0, 2.0, 0.5)], [math.exp(v / 2) for v in (0.0, 3.0, -1.0)]
    s, t = [v / sum(s) for v in s], [v / sum(t) for v in t]
    cross_entropy = -sum(ti * math.log(si) for si, ti in zip(s, t, strict=True))
    entropy = -sum(ti * math.log(ti) for ti in t)
    assert soft_target_loss(z_s, z_t, 2.0).item() == pytest.approx(4 * (cross_entropy - entropy), rel=1e-5)


def test_its_gradient_is_the_cross_entropys_and_t_squared_keeps_its_scale():
    teacher = _logits(1, 64, 11)
    norms = {}
    for T in (2.0, 8.0):
        student = _logits(0, 64, 11).requires_grad_()
        soft_target_loss(student, teacher, T).backward()
        # d/dz_s of T² · CE(t, s) = T (s - t) / N: the same as the KL's
        expected = T * (F.softmax(student.detach() / T, -1) - F.softmax(teacher / T, -1)) / 64
        torch.testing.assert_close(student.grad, expected)
        norms[T] = student.grad.norm().item()
    # without T² the gradient would shrink as 1/T² (here 16x from T=2 to 8); with it, far less
    assert norms[8.0] > norms[2.0] / 4


def test_soft_target_loss_is_zero_when_the_student_is_the_teacher_and_ignores_unscored_positions():
    z = _logits(0, 3, 4, 9)
    assert soft_target_loss(z, z.clone(), 2.0).item() == pytest.approx(0.0, abs=1e-6)
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0]])
    student = _logits(1, 3, 4, 9)
    changed = student.clone()
    changed[mask == 0] = 100.0  # whatever the student says at padding does not count
    assert soft_target_loss(changed, z, 2.0, mask) == soft_target_loss(student, z, 2.0, mask)
    torch.testing.assert_close(
        soft_target_loss(student, z, 2.0, mask), soft_target_loss(student[mask == 1], z[mask == 1])
    )
    assert soft_target_loss(student, z, 2.0, torch.zeros_like(mask)).item() == 0.0  # nothing scored: 0, not NaN
    teacher = z.clone().requires_grad_()
    soft_target_loss(student.requires_grad_(), teacher, 2.0).backward()
    assert teacher.grad is None and student.grad is not None  # the teacher is a target
    with pytest.raises(ValueError, match="student logits \\(3, 4, 9\\) and teacher logits \\(3, 4, 8\\) differ"):
        soft_target_loss(student, z[..., :8], 2.0)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        soft_target_loss(student, z, 0.0)


def test_cosine_loss_is_0_for_aligned_states_2_for_opposite_ones_and_skips_padding():
    h = _logits(0, 2, 3, 8)
    assert hidden_cosine_loss(h, 2.5 * h).item() == pytest.approx(0.0, abs=1e-6)  # the direction only
    assert hidden_cosine_loss(h, -h).item() == pytest.approx(2.0)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    other = h.clone()
    other[mask == 0] = -h[mask == 0]  # opposite at the padding only
    assert hidden_cosine_loss(h, other, mask).item() == pytest.approx(0.0, abs=1e-6)
    a, b = torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([[0.0, 1.0], [1.0, 1.0]])  # 90° and 0°
    assert hidden_cosine_loss(a, b).item() == pytest.approx(0.5)
    target = torch.ones(2)  # DistilBERT's CosineEmbeddingLoss with target 1
    assert hidden_cosine_loss(a, b).item() == pytest.approx(torch.nn.CosineEmbeddingLoss()(a, b, target).item())
    with pytest.raises(ValueError, match="compares states of one width"):
        hidden_cosine_loss(h, h[..., :4])


def _batch():
    student, teacher = _logits(0, 2, 5, 11), _logits(1, 2, 5, 11)
    hs, ht = _logits(2, 2, 5, 6), _logits(3, 2, 5, 6)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    labels = torch.full((2, 5), IGNORE_INDEX)
    labels[0, 1], labels[0, 3], labels[1, 2] = 4, 7, 10
    return student, teacher, labels, hs, ht, mask


def test_distillation_loss_is_distilberts_weighted_sum():
    student, teacher, labels, hs, ht, mask = _batch()
    loss, parts = distillation_loss(student, teacher, labels, hs, ht, mask)
    real, masked = mask.bool(), labels != IGNORE_INDEX
    ce = soft_target_loss(student[real], teacher[real], 2.0)  # every real token, DistilBERT's default
    mlm = F.cross_entropy(student[masked], labels[masked])
    cos = (1 - F.cosine_similarity(hs[real], ht[real], dim=-1)).mean()
    assert parts.keys() == {"ce", "mlm", "cos"}
    for name, value in [("ce", ce), ("mlm", mlm), ("cos", cos)]:
        torch.testing.assert_close(parts[name], value)
    torch.testing.assert_close(loss, 5.0 * ce + 2.0 * mlm + 1.0 * cos)  # α = 5, β = 2, γ = 1, T = 2
    loss, parts = distillation_loss(
        student, teacher, labels, hs, ht, mask, alpha_ce=1.0, alpha_mlm=0.0, alpha_cos=3.0, temperature=1.0
    )
    torch.testing.assert_close(parts["ce"], soft_target_loss(student[real], teacher[real], 1.0))
    torch.testing.assert_close(loss, parts["ce"] + 3.0 * parts["cos"])
    _, restricted = distillation_loss(student, teacher, labels, hs, ht, mask, restrict_ce_to_mask=True)
    torch.testing.assert_close(restricted["ce"], soft_target_loss(student[masked], teacher[masked], 2.0))
    # rows already selected (N, V), as a recipe computes the logits at the real tokens only
    loss_rows, _ = distillation_loss(student[real], teacher[real], labels[real], hs[real], ht[real])
    torch.testing.assert_close(loss_rows, distillation_loss(student, teacher, labels, hs, ht, mask)[0])
    with pytest.raises(ValueError, match="the weights must be >= 0, got alpha_ce=-1.0"):
        distillation_loss(student, teacher, labels, hs, ht, mask, alpha_ce=-1.0)


def test_a_student_equal_to_its_teacher_has_only_the_mlm_loss_left():
    student, _, labels, hs, _, mask = _batch()
    loss, parts = distillation_loss(student, student.clone(), labels, hs, hs.clone(), mask)
    assert parts["ce"].item() == pytest.approx(0.0, abs=1e-6) and parts["cos"].item() == pytest.approx(0.0, abs=1e-6)
    torch.testing.assert_close(loss, 2.0 * parts["mlm"], atol=1e-5, rtol=0)
