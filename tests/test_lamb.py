"""LAMB (minilm.train.lamb): Algorithm 2 of You et al. (2019) by hand, AdamW without the trust ratio, per-layer
ratios, state dicts, closures, bf16, and in the Trainer: the loss falls, groups follow ALBERT, resumes are checked."""

import io
import math

import pytest
import torch

from minilm.models.gpt import GPT, GPTConfig
from minilm.recipes.gpt import clm_loss
from minilm.train.config import ConfigError
from minilm.train.lamb import Lamb
from minilm.train.trainer import TrainConfig, Trainer

VOCAB, SEQ = 50, 16


def stepped(optimizer, params, grads):
    """One optimizer step with the given gradients."""
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    optimizer.step()


def lamb_by_hand(x, grads, lr, betas, eps, weight_decay, adapt):
    """x after one step per gradient in ``grads``: Algorithm 2 written out in plain tensor arithmetic."""
    beta1, beta2 = betas
    m, v = torch.zeros_like(x), torch.zeros_like(x)
    for t, g in enumerate(grads, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        r = (m / (1 - beta1**t)) / (torch.sqrt(v / (1 - beta2**t)) + eps)
        u = r + weight_decay * x
        w_norm, u_norm = float(torch.sqrt((x * x).sum())), float(torch.sqrt((u * u).sum()))
        ratio = w_norm / u_norm if adapt and w_norm > 0 and u_norm > 0 else 1.0
        x = x - lr * ratio * u
    return x


def test_one_step_by_hand():
    # At t = 1, m̂ = g and v̂ = g², so with ε = 0 Adam's direction is r = sign(g) = [1, -1].
    # u = r + λx = [1, -1] + 0.5 [3, 4] = [2.5, 1];  ratio = ‖x‖ / ‖u‖ = 5 / √7.25.
    x = torch.tensor([3.0, 4.0], requires_grad=True)
    optimizer = Lamb([x], lr=0.1, betas=(0.9, 0.999), eps=0.0, weight_decay=0.5)
    stepped(optimizer, [x], [torch.tensor([1.0, -2.0])])
    ratio = 5 / math.sqrt(7.25)
    expected = [3 - 0.1 * ratio * 2.5, 4 - 0.1 * ratio * 1.0]
    assert x.detach().tolist() == pytest.approx(expected, rel=1e-6)
    assert float((x.detach() - torch.tensor([3.0, 4.0])).norm()) == pytest.approx(0.1 * 5)  # moved lr x ‖x‖


def test_two_steps_by_hand_with_weight_decay_a_zero_parameter_and_a_group_without_adaptation():
    # β = (0.5, 0.5), ε = 0: after g1 = [1, -2] then g2 = [3, 2], m̂ = (g1 + 2 g2) / 3 = [7/3, 2/3] and
    # v̂ = (g1² + 2 g2²) / 3 = [19/3, 4], so r = [7/√57, 1/3].
    g1, g2 = torch.tensor([1.0, -2.0]), torch.tensor([3.0, 2.0])
    r2 = torch.tensor([7 / math.sqrt(57), 1 / 3])
    x = torch.tensor([3.0, 4.0], requires_grad=True)  # adapted, decayed
    zero = torch.zeros(2, requires_grad=True)  # adapted, starts at ‖x‖ = 0: ratio 1 on step 1
    bias = torch.tensor([1.0, 1.0], requires_grad=True)  # the no-decay group: no trust ratio (ALBERT's exclusion)
    groups = [{"params": [x, zero], "weight_decay": 0.5}, {"params": [bias], "layer_adaptation": False}]
    optimizer = Lamb(groups, lr=0.1, betas=(0.5, 0.5), eps=0.0)
    stepped(optimizer, [x, zero, bias], [g1, g1, g1])
    assert zero.detach().tolist() == pytest.approx([-0.1, 0.1])  # u = r = [1, -1], ratio 1
    assert bias.detach().tolist() == pytest.approx([0.9, 1.1])  # Adam's step, r = [1, -1]
    x1 = x.detach().clone()
    stepped(optimizer, [x, zero, bias], [g2, g2, g2])
    u = r2 + 0.5 * x1
    assert x.detach().tolist() == pytest.approx((x1 - 0.1 * x1.norm() / u.norm() * u).tolist(), rel=1e-6)
    assert bias.detach().tolist() == pytest.approx((torch.tensor([0.9, 1.1]) - 0.1 * r2).tolist(), rel=1e-6)
    z1 = torch.tensor([-0.1, 0.1])
    u = r2 + 0.5 * z1
    assert zero.detach().tolist() == pytest.approx((z1 - 0.1 * z1.norm() / u.norm() * u).tolist(), rel=1e-6)


def test_many_steps_follow_algorithm_2_written_out():
    gen = torch.Generator().manual_seed(0)
    start = [torch.randn(4, 3, generator=gen), torch.zeros(5), torch.randn(3, generator=gen)]
    grads = [[torch.randn(p.shape, generator=gen) for p in start] for _ in range(5)]
    params = [p.clone().requires_grad_() for p in start]
    settings = dict(lr=0.05, betas=(0.9, 0.99), eps=1e-6)
    groups = [{"params": params[:2], "weight_decay": 0.1}, {"params": params[2:], "layer_adaptation": False}]
    optimizer = Lamb(groups, **settings)
    for step_grads in grads:
        stepped(optimizer, params, step_grads)
    for i, (p, weight_decay, adapt) in enumerate(zip(params, (0.1, 0.1, 0.0), (True, True, False), strict=True)):
        expected = lamb_by_hand(start[i], [g[i] for g in grads], weight_decay=weight_decay, adapt=adapt, **settings)
        torch.testing.assert_close(p.detach(), expected)


def test_without_layer_adaptation_lamb_is_adamw():
    gen = torch.Generator().manual_seed(1)
    start = torch.randn(6, 4, generator=gen)
    grads = [torch.randn(6, 4, generator=gen) for _ in range(6)]
    ours, theirs = start.clone().requires_grad_(), start.clone().requires_grad_()
    settings = dict(lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    lamb = Lamb([ours], layer_adaptation=False, **settings)
    adamw = torch.optim.AdamW([theirs], **settings)
    for g in grads:
        stepped(lamb, [ours], [g])
        stepped(adamw, [theirs], [g])
    torch.testing.assert_close(ours, theirs)


def test_the_trust_ratio_differs_per_layer():
    """Two layers with the same gradient but weights 10x apart: Adam moves both alike, LAMB each by lr x its norm."""
    gen = torch.Generator().manual_seed(2)
    small, g = torch.randn(8, 8, generator=gen), torch.randn(8, 8, generator=gen)
    start = [small, 10 * small]
    moves = {}
    for adapt in (True, False):
        params = [p.clone().requires_grad_() for p in start]
        stepped(Lamb(params, lr=0.01, layer_adaptation=adapt), params, [g, g])
        moves[adapt] = [float((p.detach() - s).norm()) for p, s in zip(params, start, strict=True)]
    assert moves[True] == pytest.approx([0.01 * float(small.norm()), 0.1 * float(small.norm())], rel=1e-5)
    assert moves[False][0] == pytest.approx(moves[False][1], rel=1e-5)  # the same step, whatever the layer's size
    ratios = [moved / without for moved, without in zip(moves[True], moves[False], strict=True)]
    assert ratios[1] == pytest.approx(10 * ratios[0], rel=1e-5)


def test_a_zero_update_leaves_the_parameter_as_it_is():
    x = torch.tensor([3.0, 4.0], requires_grad=True)
    stepped(Lamb([x], lr=0.1), [x], [torch.zeros(2)])  # u = 0: ratio 1, not ‖x‖ / 0
    assert x.detach().tolist() == [3.0, 4.0]


def test_a_closure_is_evaluated_with_gradients_and_its_loss_returned():
    x = torch.tensor([3.0, 4.0], requires_grad=True)
    optimizer = Lamb([x], lr=0.1, eps=0.0)

    def closure():
        optimizer.zero_grad()
        loss = (x**2).sum()
        loss.backward()
        return loss

    assert optimizer.step(closure).item() == 25.0
    # g = 2x: r = sign(g) = [1, 1], u = r, ratio 5 / √2
    assert x.detach().tolist() == pytest.approx([3 - 0.5 / math.sqrt(2), 4 - 0.5 / math.sqrt(2)])


def test_the_state_dict_round_trips_and_the_run_goes_on_identically():
    gen = torch.Generator().manual_seed(3)
    start = [torch.randn(4, 4, generator=gen), torch.randn(4, generator=gen)]
    grads = [[torch.randn(p.shape, generator=gen) for p in start] for _ in range(4)]

    def optimizer_for(params):
        return Lamb([{"params": params[:1], "weight_decay": 0.1}, {"params": params[1:], "layer_adaptation": False}])

    straight = [p.clone().requires_grad_() for p in start]
    optimizer = optimizer_for(straight)
    for g in grads:
        stepped(optimizer, straight, g)
    first = [p.clone().requires_grad_() for p in start]
    optimizer = optimizer_for(first)
    for g in grads[:2]:
        stepped(optimizer, first, g)
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)  # as a checkpoint keeps it, read back without unpickling objects
    buffer.seek(0)
    resumed = [p.detach().clone().requires_grad_() for p in first]
    optimizer = optimizer_for(resumed)
    optimizer.load_state_dict(torch.load(buffer, weights_only=True))
    assert optimizer.param_groups[1]["layer_adaptation"] is False and int(optimizer.state[resumed[0]]["step"]) == 2
    for g in grads[2:]:
        stepped(optimizer, resumed, g)
    for a, b in zip(resumed, straight, strict=True):
        assert torch.equal(a, b)


def test_bf16_parameters_take_a_step():
    x = torch.randn(4, 4).to(torch.bfloat16).requires_grad_()
    before = x.detach().clone()
    optimizer = Lamb([x], lr=0.1, weight_decay=0.1)
    stepped(optimizer, [x], [torch.randn(4, 4).to(torch.bfloat16)])
    assert x.dtype == torch.bfloat16 and optimizer.state[x]["exp_avg"].dtype == torch.bfloat16
    moved = float((x.detach().float() - before.float()).norm())  # lr x ‖x‖, up to bf16's 3 digits
    assert torch.isfinite(x).all() and moved == pytest.approx(0.1 * float(before.float().norm()), rel=0.05)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(lr=-1.0), "lr must be >= 0, got -1.0"),
        (dict(betas=(0.9, 1.0)), r"betas must each be in \[0, 1\), got \(0.9, 1.0\)"),
        (dict(eps=-1e-8), "eps must be >= 0"),
        (dict(weight_decay=float("nan")), "weight_decay must be >= 0, got nan"),
    ],
)
def test_bad_settings_are_one_clear_message(settings, message):
    with pytest.raises(ValueError, match=message):
        Lamb([torch.zeros(2, requires_grad=True)], **settings)


# ------------------------------------------------------------------------------------------ in the Trainer


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=VOCAB, max_len=32, n_layers=2, n_heads=2, d_model=32, dropout=0.0))


def blocks(n=64, seed=0):
    """Learnable data: each block counts upwards modulo VOCAB from a random start."""
    starts = torch.randint(0, VOCAB, (n, 1), generator=torch.Generator().manual_seed(seed))
    return (starts + torch.arange(SEQ + 1)) % VOCAB


def lamb_config(**kw):
    base = dict(optimizer="lamb", batch_size=8, max_steps=60, lr=0.1, warmup_steps=2, log_every=1, progress=False)
    return TrainConfig(**{**base, **kw})


def train_losses(trainer):
    return [e["loss"] for e in trainer.history if e["split"] == "train"]


def test_the_trainer_with_lamb_lowers_the_loss_and_groups_as_albert():
    trainer = Trainer(tiny_gpt(), clm_loss, blocks(), lamb_config(eval_every=0))
    decay, no_decay = trainer.optimizer.param_groups
    assert isinstance(trainer.optimizer, Lamb) and decay["layer_adaptation"] and not no_decay["layer_adaptation"]
    assert all(p.dim() == 1 for p in no_decay["params"]) and no_decay["weight_decay"] == 0.0
    assert decay["betas"] == (0.9, 0.95) and decay["eps"] == 1e-8  # the TrainConfig's
    trainer.fit()
    losses = train_losses(trainer)
    assert losses[-1] < 0.5 * losses[0]  # (each layer moves lr = 10% of its norm per step at the peak)
    assert isinstance(Trainer(tiny_gpt(), clm_loss, blocks(), TrainConfig()).optimizer, torch.optim.AdamW)


def test_a_lamb_run_resumes_exactly(tmp_path):
    full = Trainer(tiny_gpt(), clm_loss, blocks(), lamb_config(max_steps=8, save_every=4, run_dir=str(tmp_path / "a")))
    full.fit()
    resumed = Trainer(tiny_gpt(seed=1), clm_loss, blocks(), lamb_config(max_steps=8, run_dir=str(tmp_path / "b")))
    assert resumed.resume(tmp_path / "a" / "checkpoints" / "step_00000004") == 4
    resumed.fit()
    assert train_losses(resumed) == train_losses(full)[4:]  # bitwise: LAMB's moments and step counts came back


def test_resuming_with_another_optimizer_is_one_clear_message(tmp_path):
    adamw_run = lamb_config(optimizer="adamw", max_steps=2, eval_every=0, run_dir=str(tmp_path))
    Trainer(tiny_gpt(), clm_loss, blocks(), adamw_run).fit()
    lamb = Trainer(tiny_gpt(), clm_loss, blocks(), lamb_config(max_steps=4, run_dir=str(tmp_path)))
    message = f"{tmp_path} was trained with optimizer=adamw; its optimizer state cannot continue as optimizer=lamb"
    with pytest.raises(ConfigError, match=message):
        lamb.resume(tmp_path)
    assert lamb.step == 0 and not lamb.optimizer.state  # refused before anything was loaded
