"""Replaced-token detection (minilm.objectives.rtd): the corrupted input and its labels (a correct sample is
original), Gumbel-max sampling against softmax(logits / τ), the discriminator's loss against scikit-learn, and
All-Tokens MLM's copy mechanism against a naive computation in probability space."""

import pytest
import torch
import torch.nn.functional as F

from minilm.objectives.labels import IGNORE_INDEX
from minilm.objectives.rtd import RTD_WEIGHT, copy_mlm_loss, replace_tokens, rtd_loss, sample_replacements

stats = pytest.importorskip("scipy.stats")
metrics = pytest.importorskip("sklearn.metrics")

MASK = 4


def test_lambda_is_the_papers():
    assert RTD_WEIGHT == 50.0  # §3.1: "We set λ = 50"


# ---------------------------------------------------------------------------------------------- replace_tokens


def _masked_batch():
    """Originals (2, 6); masked positions (row-major): (0, 1), (0, 4), (1, 0), (1, 2), (1, 5); the generator's input
    shows [MASK] at all but (1, 2), which is left unchanged (ELECTRA's 15% kept)."""
    original = torch.tensor([[10, 11, 12, 13, 14, 15], [20, 21, 22, 23, 24, 25]])
    labels = torch.full_like(original, IGNORE_INDEX)
    at = torch.zeros_like(original, dtype=torch.bool)
    at[0, 1] = at[0, 4] = at[1, 0] = at[1, 2] = at[1, 5] = True
    labels[at] = original[at]
    masked = torch.where(at, MASK, original)
    masked[1, 2] = original[1, 2]
    return original, masked, labels, at


def test_replace_tokens_puts_the_samples_at_the_masked_positions_in_row_major_order():
    original, masked, labels, at = _masked_batch()
    samples = torch.tensor([40, 14, 41, 42, 25])  # (0, 4) and (1, 5) drew the original back
    before = masked.clone()
    corrupted, replaced = replace_tokens(masked, labels, samples)
    assert torch.equal(masked, before)  # the input is left as it was
    expected = original.clone()
    expected[0, 1], expected[0, 4], expected[1, 0], expected[1, 2], expected[1, 5] = 40, 14, 41, 42, 25
    assert torch.equal(corrupted, expected)
    assert torch.equal(corrupted[at], samples) and torch.equal(corrupted[~at], masked[~at])
    assert corrupted.dtype == masked.dtype and replaced.dtype == torch.bool
    # labels: True only where the sample differs from the original
    assert replaced.nonzero().tolist() == [[0, 1], [1, 0], [1, 2]]
    assert torch.equal(replaced, corrupted != original)


def test_a_correct_sample_is_labelled_original():
    """§2: "if the generator happens to generate the correct token, that token is considered 'real'"."""
    original, masked, labels, at = _masked_batch()
    corrupted, replaced = replace_tokens(masked, labels, original[at])  # every sample is right
    assert torch.equal(corrupted, original) and not replaced.any()
    # the original ids as the input (the unmasked view) give the same result
    corrupted, replaced = replace_tokens(original, labels, torch.tensor([11, 99, 20, 98, 25]))
    assert replaced.nonzero().tolist() == [[0, 4], [1, 2]]
    assert torch.equal(corrupted[~at], original[~at])


def test_replace_tokens_on_random_batches_agrees_with_a_loop():
    g = torch.Generator().manual_seed(0)
    original = torch.randint(5, 30, (8, 20), generator=g)
    at = torch.rand(original.shape, generator=g) < 0.3
    labels = torch.where(at, original, IGNORE_INDEX)
    samples = torch.randint(5, 30, (int(at.sum()),), generator=g)  # 1 in 25 is the original
    corrupted, replaced = replace_tokens(torch.where(at, MASK, original), labels, samples)
    k = 0
    for b in range(8):
        for t in range(20):
            if at[b, t]:
                assert corrupted[b, t] == samples[k] and bool(replaced[b, t]) == bool(samples[k] != original[b, t])
                k += 1
            else:
                assert corrupted[b, t] == original[b, t] and not replaced[b, t]
    assert k == len(samples) and 0 < int((samples == labels[at]).sum()) < k  # both kinds of masked position


def test_a_wrong_number_of_samples_is_refused():
    _, masked, labels, _ = _masked_batch()
    for n in (4, 6):
        with pytest.raises(ValueError, match=rf"\({n},\) samples for 5 masked positions"):
            replace_tokens(masked, labels, torch.arange(n))
    with pytest.raises(ValueError, match=r"\(1, 5\) samples for 5 masked positions"):
        replace_tokens(masked, labels, torch.arange(5)[None])


# ---------------------------------------------------------------------------------------------- sampling


def test_sampling_has_no_gradient_and_is_seeded():
    logits = torch.randn(64, 30, requires_grad=True)
    samples = sample_replacements(logits, generator=torch.Generator().manual_seed(0))
    assert samples.shape == (64,) and samples.dtype == torch.long
    assert samples.grad_fn is None and not samples.requires_grad
    assert samples.min() >= 0 and samples.max() < 30
    again = sample_replacements(logits, generator=torch.Generator().manual_seed(0))
    other = sample_replacements(logits, generator=torch.Generator().manual_seed(1))
    assert torch.equal(samples, again) and not torch.equal(samples, other)
    torch.manual_seed(3)  # without a generator: torch's global one
    a = sample_replacements(logits)
    torch.manual_seed(3)
    assert torch.equal(a, sample_replacements(logits))


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_samples_follow_softmax_of_logits_over_temperature(temperature):
    n = 40_000
    row = torch.tensor([2.0, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0, 1.5])
    samples = sample_replacements(row.expand(n, -1), temperature, generator=torch.Generator().manual_seed(0))
    observed = torch.bincount(samples, minlength=len(row)).numpy()
    expected = (n * torch.softmax(row.double() / temperature, -1)).numpy()
    assert stats.chisquare(observed, expected).pvalue > 1e-3, (observed, expected)
    # the test has power: the distribution at another temperature is rejected
    wrong = (n * torch.softmax(row.double() / (temperature * 1.25), -1)).numpy()
    assert stats.chisquare(observed, wrong).pvalue < 1e-6


def test_samples_of_rows_with_different_logits_follow_their_own_row():
    """Many rows at once: row r's draws follow its softmax (no mixing of rows or of the noise's axis)."""
    g = torch.Generator().manual_seed(0)
    rows = torch.randn(3, 5, generator=g) * 1.5
    n = 20_000
    samples = sample_replacements(rows.repeat(n, 1), generator=g).view(n, 3)
    for r in range(3):
        observed = torch.bincount(samples[:, r], minlength=5).numpy()
        expected = (n * torch.softmax(rows[r].double(), -1)).numpy()
        assert stats.chisquare(observed, expected).pvalue > 1e-3, (r, observed, expected)


def test_a_very_low_temperature_takes_the_argmax_and_a_non_positive_one_is_refused():
    g = torch.Generator().manual_seed(0)
    logits = torch.stack([torch.randperm(50, generator=g).float() * 0.1 for _ in range(500)])  # gaps of 0.1
    samples = sample_replacements(logits, temperature=1e-3, generator=g)
    assert torch.equal(samples, logits.argmax(-1))
    assert not torch.equal(sample_replacements(logits, generator=g), logits.argmax(-1))  # at τ = 1 it varies
    for temperature in (0, -1.0):
        with pytest.raises(ValueError, match=f"temperature={temperature} must be > 0"):
            sample_replacements(logits, temperature)


# ---------------------------------------------------------------------------------------------- rtd_loss


def _rtd_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(4, 10, generator=g) * 2
    replaced = torch.rand(4, 10, generator=g) < 0.3
    mask = torch.ones(4, 10, dtype=torch.long)
    mask[1, 6:] = 0
    mask[3, 3:] = 0
    return logits, replaced, mask


def test_rtd_loss_is_the_binary_cross_entropy_over_the_weighted_positions():
    logits, replaced, mask = _rtd_inputs()
    keep = mask.bool()
    loss = rtd_loss(logits, replaced, weights=mask)
    sklearn = metrics.log_loss(replaced[keep].numpy(), torch.sigmoid(logits[keep]).double().numpy(), labels=[0, 1])
    assert loss.item() == pytest.approx(sklearn, rel=1e-5)
    p = torch.sigmoid(logits[keep].double())  # by hand: -[y log p + (1 - y) log(1 - p)], mean
    y = replaced[keep].double()
    assert loss.item() == pytest.approx(-(y * p.log() + (1 - y) * (1 - p).log()).mean().item(), rel=1e-6)
    # ELECTRA 15%: the masked positions only
    masked = torch.zeros_like(mask)
    masked[0, 2] = masked[2, 7] = masked[3, 1] = 1
    at = masked.bool()
    sklearn = metrics.log_loss(replaced[at].numpy(), torch.sigmoid(logits[at]).double().numpy(), labels=[0, 1])
    assert rtd_loss(logits, replaced, weights=masked).item() == pytest.approx(sklearn, rel=1e-5)


def test_rtd_loss_ignores_padding_and_its_gradient_is_per_position():
    logits, replaced, mask = _rtd_inputs()
    pad = ~mask.bool()
    other_logits = torch.where(pad, torch.randn(logits.shape) * 100, logits)
    other_labels = torch.where(pad, ~replaced, replaced)
    assert rtd_loss(other_logits, other_labels, mask).item() == rtd_loss(logits, replaced, mask).item()
    logits.requires_grad_(True)
    rtd_loss(logits, replaced, mask).backward()
    expected = torch.where(pad, 0.0, (torch.sigmoid(logits.detach()) - replaced.float()) / int(mask.sum()))
    torch.testing.assert_close(logits.grad, expected)


def test_rtd_loss_with_no_weighted_position_is_zero_and_connected():
    logits, replaced, mask = _rtd_inputs()
    logits.requires_grad_(True)
    loss = rtd_loss(logits, replaced, torch.zeros_like(mask))
    assert loss.item() == 0.0 and loss.dim() == 0 and loss.grad_fn is not None
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))


# ---------------------------------------------------------------------------------------------- copy_mlm_loss


def _naive_copy_loss(mlm_logits, copy_logits, input_ids, targets, weights):
    """-mean log p(x_t), p(y) = D_t 1(y = x̃_t) + (1 - D_t) softmax_t(y), position by position in probabilities."""
    losses, row = [], 0
    for b in range(input_ids.shape[0]):
        for t in range(input_ids.shape[1]):
            if not weights[b, t]:
                continue
            c = copy_logits[b, t].double()
            d, not_d = torch.sigmoid(c), torch.sigmoid(-c)  # D and 1 - D (accurate when D is near 1)
            p_mlm = torch.softmax(mlm_logits[row].double(), -1)[targets[b, t]]
            p = d * float(input_ids[b, t] == targets[b, t]) + not_d * p_mlm
            losses.append(-torch.log(p))
            row += 1
    return torch.stack(losses).mean()


def _copy_inputs(seed=0, v=12):
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(0, v, (3, 9), generator=g)
    replaced = torch.rand(3, 9, generator=g) < 0.4
    input_ids = torch.where(replaced, torch.randint(0, v, (3, 9), generator=g), targets)  # some equal by chance
    weights = torch.ones(3, 9, dtype=torch.long)
    weights[2, 5:] = 0
    mlm_logits = torch.randn(int(weights.sum()), v, generator=g) * 2
    copy_logits = torch.randn(3, 9, generator=g) * 2
    return mlm_logits, copy_logits, input_ids, targets, weights


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_copy_mlm_loss_equals_the_mixture_in_probability_space(seed):
    mlm_logits, copy_logits, input_ids, targets, weights = _copy_inputs(seed)
    kept = weights.bool()
    same = input_ids[kept] == targets[kept]
    assert same.any() and (~same).any()  # positions where the input is the target, and where it is not
    loss = copy_mlm_loss(mlm_logits, copy_logits, input_ids, targets, weights)
    naive = _naive_copy_loss(mlm_logits, copy_logits, input_ids, targets, weights)
    assert loss.item() == pytest.approx(naive.item(), rel=1e-5)
    # the copy matters: with D = 0 everywhere it is the MLM loss at every weighted position
    no_copy = copy_mlm_loss(mlm_logits, torch.full_like(copy_logits, -60.0), input_ids, targets, weights)
    assert no_copy.item() == pytest.approx(F.cross_entropy(mlm_logits, targets[kept]).item(), rel=1e-5)
    assert no_copy.item() != pytest.approx(loss.item(), rel=1e-3)


def test_copy_mlm_loss_gradient_is_finite_even_where_the_copy_is_impossible():
    mlm_logits, copy_logits, input_ids, targets, weights = _copy_inputs()
    copy_logits = copy_logits * 20  # D near 0 or 1, also where the input is not the target (copying is wrong)
    mlm_logits.requires_grad_(True)
    copy_logits.requires_grad_(True)
    loss = copy_mlm_loss(mlm_logits, copy_logits, input_ids, targets, weights)
    naive = _naive_copy_loss(mlm_logits, copy_logits, input_ids, targets, weights)
    assert torch.isfinite(loss) and loss.item() == pytest.approx(naive.item(), rel=1e-4)
    loss.backward()
    assert torch.isfinite(mlm_logits.grad).all() and torch.isfinite(copy_logits.grad).all()
    assert copy_logits.grad[~weights.bool()].abs().sum() == 0 and copy_logits.grad.abs().sum() > 0
    # the gradients are the naive computation's
    grads = torch.autograd.grad(_naive_copy_loss(mlm_logits, copy_logits, input_ids, targets, weights), mlm_logits)
    torch.testing.assert_close(mlm_logits.grad, grads[0].float(), rtol=1e-4, atol=1e-6)


def test_copy_mlm_loss_refuses_misaligned_rows_and_is_zero_with_nothing_weighted():
    mlm_logits, copy_logits, input_ids, targets, weights = _copy_inputs()
    with pytest.raises(ValueError, match="22 rows of logits for 23 weighted positions"):
        copy_mlm_loss(mlm_logits[1:], copy_logits, input_ids, targets, weights)
    with pytest.raises(ValueError, match="23 rows of logits for 27 weighted positions"):
        copy_mlm_loss(mlm_logits, copy_logits, input_ids, targets, torch.ones_like(weights))
    empty = torch.zeros(0, 12, requires_grad=True)
    loss = copy_mlm_loss(empty, copy_logits, input_ids, targets, torch.zeros_like(weights))
    assert loss.item() == 0.0 and loss.grad_fn is not None
