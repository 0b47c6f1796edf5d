"""ELECTRA's recipe (minilm.recipes.electra): the model and its objectives in the registry, each objective's loss
recomputed by hand (generator + λ·discriminator, ELECTRA 15%, Replace MLM, All-Tokens MLM), no gradient from the
discriminator to the generator, ELECTRA's masking, pretraining from the command line that learns and fine-tunes, clear
errors through the real CLI."""

import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open

from minilm.finetune import main as finetune_main
from minilm.models.electra import ELECTRA_SIZES, Electra, ElectraConfig, ElectraPretraining, generator_config
from minilm.objectives.labels import IGNORE_INDEX
from minilm.recipes.electra import (
    GeneratorConfig,
    ReplacedTokenConfig,
    all_tokens_mlm_loss,
    electra_15_loss,
    electra_loss,
    replace_mlm_loss,
    wrap,
)
from minilm.train import registry
from minilm.train.pretrain import main as pretrain_main
from minilm.train.trainer import read_metrics

OBJECTIVES = ("rtd", "rtd_15", "replace_mlm", "all_tokens_mlm")
HEADS = {"rtd": (True, False), "rtd_15": (True, False), "replace_mlm": (False, True), "all_tokens_mlm": (True, True)}
HEADS["mlm"] = (False, True)  # (rtd, mlm)
V, MASK = 50, 4


def test_electra_is_registered_with_its_objectives_and_their_heads():
    entry = registry.get_model("electra")
    assert entry.kind == "encoder" and entry.tokenizer_family == "bert" and entry.build is Electra
    assert entry.config_class is ElectraConfig and entry.sizes is ELECTRA_SIZES
    trains = sorted(name for name, o in registry.objectives().items() if "electra" in o.models)
    assert trains == sorted([*OBJECTIVES, "mlm"])
    for name, (rtd, mlm) in HEADS.items():
        objective = registry.get_objective(name)
        needs = registry.needed_settings(entry, objective)
        config = registry.model_config(entry, "tiny", 100, needs)
        assert (config.rtd, config.mlm, config.pooler, config.nsp) == (rtd, mlm, False, False), name
        if name == "mlm":  # BERT's objective on ELECTRA's encoder: the model itself, no generator
            assert objective.wrap_model(Electra(config), config, None, None).__class__ is Electra
            continue
        settings = objective.config_class()
        assert isinstance(settings, GeneratorConfig)
        assert isinstance(settings, ReplacedTokenConfig) == (name in ("rtd", "rtd_15"))
        model = Electra(config)
        pair = objective.wrap_model(model, config, settings, None)
        assert isinstance(pair, ElectraPretraining) and objective.body(pair) is model and pair.share == "embeddings"
        assert pair.generator.config == generator_config(config, 0.25, "embeddings")
        assert pair.generator.config.d_model == 64 and pair.generator.config.embedding_size == 128
    for name in ("rtd", "rtd_15"):
        assert registry.get_objective(name).perplexity == "generator"


def test_electras_masking_has_no_random_tokens():
    from minilm.tokenizers import train_tokenizer

    lines = [f"the cat {w} sat on the mat and ran home" for w in ("quickly", "slowly", "happily", "sadly")] * 40
    tokenizer = train_tokenizer(lines, "bert", vocab_size=120)
    masking = GeneratorConfig().mask_config(tokenizer)
    assert (masking.mask_prob, masking.replace_prob, masking.random_prob) == (0.15, 0.85, 0.0)
    assert masking.mask_id == tokenizer.mask_id and masking.vocab_size == tokenizer.vocab_size
    assert GeneratorConfig(mask_prob=0.25).mask_config(tokenizer).mask_prob == 0.25  # ELECTRA-Large
    # on a batch: every masked position shows [MASK] (85%) or its own token (15%), never a random one
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, tokenizer.vocab_size, (64, 64), generator=g)
    batch = dict(input_ids=ids, special_tokens_mask=torch.zeros_like(ids), attention_mask=torch.ones_like(ids))
    masked = masking(batch, generator=g)
    at = masked["labels"] != IGNORE_INDEX
    shown = masked["input_ids"][at]
    assert torch.equal(masked["labels"][at], ids[at]) and torch.equal(masked["input_ids"][~at], ids[~at])
    assert bool(((shown == tokenizer.mask_id) | (shown == ids[at])).all())
    n, kept = int(at.sum()), int((shown == ids[at]).sum())
    assert abs(n / ids.numel() - 0.15) < 0.03 and abs(kept / n - 0.15) < 0.05


# ---------------------------------------------------------------------------------------------- the losses

# no dropout: in training mode the sampling is the only consumer of random numbers
TINY = ElectraConfig(vocab_size=V, max_len=16, n_layers=2, n_heads=2, d_model=16, d_ff=32, embedding_size=8)
TINY = dataclasses.replace(TINY, dropout=0.0, attention_dropout=0.0)


def _pair(rtd=True, mlm=False, settings=None, seed=0) -> ElectraPretraining:
    torch.manual_seed(seed)
    config = dataclasses.replace(TINY, rtd=rtd, mlm=mlm)
    return wrap(Electra(config), config, settings or ReplacedTokenConfig(generator_size=0.5))


def _batch():
    """Four rows, two right-padded (37 real tokens); 11 masked positions, 9 shown as [MASK] and 2 unchanged."""
    g = torch.Generator().manual_seed(0)
    original = torch.randint(5, V, (4, 12), generator=g)
    mask = torch.ones_like(original)
    mask[1, 8:] = 0
    mask[3, 5:] = 0
    original[mask == 0] = 0
    at = torch.zeros_like(original, dtype=torch.bool)
    for b, t in [(0, 1), (0, 4), (0, 10), (1, 0), (1, 3), (1, 7), (2, 2), (2, 5), (2, 6), (2, 11), (3, 4)]:
        at[b, t] = True
    labels = torch.where(at, original, IGNORE_INDEX)
    ids = torch.where(at, MASK, original)
    ids[0, 4], ids[2, 6] = original[0, 4], original[2, 6]  # kept as they are
    batch = dict(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), labels=labels)
    return batch, original, at


def _by_hand(pair, batch, original, at, rng):
    """The generator's MLM loss, x_corrupt (Gumbel-max with uniforms from ``rng``), replaced, the model's hidden."""
    g, d = pair.generator, pair.discriminator
    ids, mask, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    logits = g.mlm_logits(g.features(ids, mask, types).last_hidden_state)[at]  # every position, then the masked
    generator_loss = F.cross_entropy(logits, original[at])
    u = torch.rand(logits.shape, generator=rng) if isinstance(rng, torch.Generator) else torch.rand(logits.shape)
    samples = (logits.detach() / pair.settings.temperature - torch.log(-torch.log(u))).argmax(-1)
    corrupted = ids.clone()
    corrupted[at] = samples
    replaced = corrupted != original
    hidden = d.features(corrupted, mask, types).last_hidden_state
    return generator_loss, corrupted, replaced, hidden


@pytest.mark.parametrize("rtd_weight", [None, 7.5])
@pytest.mark.parametrize("objective", ["rtd", "rtd_15"])
def test_electra_loss_is_generator_plus_lambda_discriminator(objective, rtd_weight):
    settings = ReplacedTokenConfig(generator_size=0.5, **({} if rtd_weight is None else {"rtd_weight": rtd_weight}))
    settings.validate()
    λ = 50.0 if rtd_weight is None else rtd_weight  # the paper's λ by default
    assert settings.rtd_weight == λ
    pair = _pair(settings=settings).eval()
    batch, original, at = _batch()
    loss_fn = electra_loss if objective == "rtd" else electra_15_loss
    out = loss_fn(pair, batch)
    assert out.parts.keys() == {"generator", "rtd"} and out.weights == {"rtd": λ}
    assert out.n_tokens == 37
    torch.testing.assert_close(out.loss, out.parts["generator"] + λ * out.parts["rtd"])
    # by hand: evaluation samples with a generator seeded 0
    generator_loss, corrupted, replaced, hidden = _by_hand(pair, batch, original, at, torch.Generator().manual_seed(0))
    assert replaced[at].any() and not replaced[~at].any()  # some samples replaced, the rest are the originals
    scored = batch["attention_mask"].bool() if objective == "rtd" else at
    logits = pair.discriminator.rtd_logits(hidden)
    disc = F.binary_cross_entropy_with_logits(logits[scored], replaced[scored].float())
    torch.testing.assert_close(out.parts["generator"], generator_loss)
    torch.testing.assert_close(out.parts["rtd"], disc)
    torch.testing.assert_close(out.loss, generator_loss + λ * disc)
    counts = registry.get_objective(objective).counts(batch)
    assert counts == {"generator": 11, "rtd": 37 if objective == "rtd" else 11}
    # successive evaluations see the same replacements
    torch.testing.assert_close(loss_fn(pair, batch).loss, out.loss)


def test_training_samples_from_torchs_global_generator():
    pair = _pair().train()
    batch, original, at = _batch()
    torch.manual_seed(5)
    out = electra_loss(pair, batch)
    torch.manual_seed(5)
    generator_loss, _, replaced, hidden = _by_hand(pair, batch, original, at, rng=None)
    real = batch["attention_mask"].bool()
    disc = F.binary_cross_entropy_with_logits(pair.discriminator.rtd_logits(hidden)[real], replaced[real].float())
    torch.testing.assert_close(out.parts["generator"], generator_loss)
    torch.testing.assert_close(out.parts["rtd"], disc)
    torch.manual_seed(6)  # another seed, other samples
    assert not torch.equal(electra_loss(pair, batch).parts["rtd"], out.parts["rtd"])


def test_replace_mlm_loss_is_mlm_on_the_generators_samples():
    pair = _pair(rtd=False, mlm=True, settings=GeneratorConfig(generator_size=0.5)).eval()
    batch, original, at = _batch()
    out = replace_mlm_loss(pair, batch)
    assert out.parts.keys() == {"generator", "mlm"} and out.weights == {} and out.n_tokens == 37
    generator_loss, corrupted, replaced, hidden = _by_hand(pair, batch, original, at, torch.Generator().manual_seed(0))
    assert not bool((corrupted[at] == MASK).any())  # the model never sees [MASK]
    mlm = F.cross_entropy(pair.discriminator.mlm_logits(hidden)[at], original[at])
    torch.testing.assert_close(out.parts["generator"], generator_loss)
    torch.testing.assert_close(out.parts["mlm"], mlm)
    torch.testing.assert_close(out.loss, generator_loss + mlm)
    assert registry.get_objective("replace_mlm").counts(batch) == {"generator": 11, "mlm": 11}


def test_all_tokens_mlm_loss_predicts_every_token_with_a_copy_mechanism():
    pair = _pair(rtd=True, mlm=True, settings=GeneratorConfig(generator_size=0.5)).eval()
    batch, original, at = _batch()
    out = all_tokens_mlm_loss(pair, batch)
    assert out.parts.keys() == {"generator", "all_tokens"} and out.n_tokens == 37
    generator_loss, corrupted, replaced, hidden = _by_hand(pair, batch, original, at, torch.Generator().manual_seed(0))
    d = pair.discriminator
    copy = torch.sigmoid(-d.rtd_logits(hidden)).double()  # D_t = P(token t is original) = 1 - sigmoid("replaced")
    p_mlm = torch.softmax(d.mlm_logits(hidden).double(), -1).gather(-1, original[..., None]).squeeze(-1)
    p = copy * (corrupted == original).double() + (1 - copy) * p_mlm  # in probabilities, position by position
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(out.parts["all_tokens"].double(), -p[real].log().mean())
    torch.testing.assert_close(out.parts["generator"], generator_loss)
    torch.testing.assert_close(out.loss, generator_loss + out.parts["all_tokens"])
    assert registry.get_objective("all_tokens_mlm").counts(batch) == {"generator": 11, "all_tokens": 37}


@pytest.mark.parametrize("share, size", [("embeddings", 0.5), ("none", 0.5), ("all", 1.0)])
def test_no_gradient_reaches_the_generator_from_the_discriminators_loss(share, size):
    """Not a GAN (§2): the generator learns by maximum likelihood; the discrete sampling stops the gradient."""
    pair = _pair(settings=ReplacedTokenConfig(generator_size=size, share=share)).train()
    batch, _, _ = _batch()
    torch.manual_seed(0)
    out = electra_loss(pair, batch)
    shared = {id(p) for p in pair.discriminator.parameters()}
    own = [(n, p) for n, p in pair.generator.named_parameters() if id(p) not in shared]
    assert len(own) >= 5  # with share=all: the MLM head's transform, norm and bias
    grads = torch.autograd.grad(out.parts["rtd"], [p for _, p in own], allow_unused=True, retain_graph=True)
    for (name, _), grad in zip(own, grads, strict=True):
        assert grad is None or not grad.any(), name
    # the discriminator's loss does train the discriminator (and the shared embeddings, when shared)
    disc = torch.autograd.grad(out.parts["rtd"], list(pair.discriminator.parameters()), allow_unused=True)
    assert all(g is not None for g in disc)
    # and the generator's loss trains the generator only: no discriminator-only parameter sees it
    out = electra_loss(pair, batch)
    only = [p for p in pair.discriminator.parameters() if id(p) not in {id(q) for q in pair.generator.parameters()}]
    grads = torch.autograd.grad(out.parts["generator"], only, allow_unused=True)
    assert all(g is None or not g.any() for g in grads)
    out.loss.backward()  # the whole loss: the generator's own parameters get their MLM gradient
    assert all(p.grad is not None and p.grad.any() for _, p in own)


# ---------------------------------------------------------------------------------------------- the command line

PRETRAIN = ["--model", "electra", "--objective", "rtd", "vocab_size=300", "seq_len=48", "batch_size=16"]
PRETRAIN += ["model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.d_ff=64", "embedding_size=16"]
PRETRAIN += ["lr=3e-3", "warmup_steps=5", "log_every=5", "eval_every=0", "progress=false", "threads=1"]
PRETRAIN += ["sample_tokens=0"]


def test_electra_pretrains_from_the_command_line_and_fine_tunes(tmp_path):
    """A corpus of three novels: the generator's loss falls, both networks are saved, the discriminator fine-tunes."""
    from minilm import data

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for book in data.load_gutenberg()[:3]:
        (corpus / f"{book.title[:20]}.txt").write_text("\n\n".join(book.paragraphs[:150]))
    run_dir = tmp_path / "run"
    args = [f"corpus={corpus}", "max_steps=80", "generator_size=0.5", "share=embeddings", "rtd_weight=20"]
    assert pretrain_main([*PRETRAIN, *args, f"run_dir={run_dir}"]) == 0
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["model"]["embedding_size"] == 16 and saved["model"]["d_model"] == 32
    assert (saved["model"]["rtd"], saved["model"]["mlm"]) == (True, False)
    objective = saved["objective"]
    assert (objective["generator_size"], objective["share"], objective["rtd_weight"]) == (0.5, "embeddings", 20.0)
    assert (objective["mask_prob"], objective["temperature"]) == (0.15, 1.0)
    train = [e for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"]
    assert {"generator", "rtd"} <= train[0].keys() and train[-1]["step"] == 80
    for e in train:
        assert e["loss"] == pytest.approx(e["generator"] + 20 * e["rtd"], rel=1e-3)
    first, last = (sum(e["generator"] for e in part) / 2 for part in (train[:2], train[-2:]))
    assert last < first - 0.25, (first, last)
    assert sum(e["rtd"] for e in train[-2:]) < sum(e["rtd"] for e in train[:2])
    with safe_open(run_dir / "checkpoints" / "step_00000080" / "model.safetensors", "pt") as f:
        keys = set(f.keys())
    assert {"discriminator.rtd_head.out.weight", "discriminator.embedding.token.weight"} <= keys
    assert {"generator.mlm_head.transform.weight", "generator.encoder.layers.1.ffn.fc1.weight"} <= keys
    assert not {k for k in keys if not k.startswith(("discriminator.", "generator."))}
    with safe_open(run_dir / "checkpoints" / "step_00000080" / "model.safetensors", "pt") as f:
        assert f.get_tensor("generator.encoder.layers.0.ffn.fc1.weight").shape == (32, 16)  # half the width

    tuned = tmp_path / "tuned"
    argv = ["--task", "mrpc", "--pretrained", str(run_dir), "max_train_examples=32", "max_eval_examples=16"]
    argv += ["max_steps=2", "batch_size=8", "max_length=48", "progress=false", "threads=1", f"run_dir={tuned}"]
    assert finetune_main(argv) == 0
    assert json.loads((tuned / "results.json").read_text())["model"] == "electra"


@pytest.mark.parametrize(
    "args, message",
    [
        (["generator_size=2"], r"generator_size=2(\.0)? must be in \(0, 1\].*larger than the discriminator"),
        (["generator_size=0.5", "share=all"], "share=all ties every weight, so the generator must be the"),
        (["rtd_weight=0"], r"rtd_weight=0(\.0)? must be > 0: it is λ in L_MLM"),
        (["rtd_weight=-1"], r"rtd_weight=-1(\.0)? must be > 0"),
        (["share=some"], "unknown weight sharing share='some'; choose one of none, embeddings, all"),
        (["mask_prob=0"], r"mask_prob=0(\.0)? must be in \(0, 1\]"),
        (["--objective", "mlm+sop"], "electra trains with objective mlm, rtd, rtd_15, replace_mlm, all_tokens_mlm"),
    ],
)
def test_bad_electra_settings_are_one_clear_message_from_the_cli(args, message, tmp_path):
    argv = ["--model", "electra", "--objective", "rtd", *args, f"run_dir={tmp_path / 'run'}"]
    done = subprocess.run([sys.executable, "-m", "minilm.train", *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr
    assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "run").exists()  # nothing written


@pytest.mark.parametrize("distributed, share", [("ddp", "embeddings"), ("fsdp", "embeddings"), ("fsdp", "all")])
def test_two_processes_train_the_pair_with_ddp_and_fsdp(distributed, share, tmp_path):
    """The generator beside the discriminator trains under DDP and FSDP (which shards both networks' blocks, a block
    they share once), and the checkpoint holds both networks' full tensors."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m"]
    argv = ["minilm.train", "--model", "electra", "--objective", "rtd", "corpus=tinyshakespeare", "vocab_size=400"]
    argv += ["seq_len=32", "n_layers=2", "model.d_model=32", "model.n_heads=2", "embedding_size=16", "batch_size=8"]
    argv += ["max_steps=3", "eval_every=0", "progress=false", "sample_tokens=0", f"distributed={distributed}"]
    argv += [f"share={share}", f"generator_size={1 if share == 'all' else 0.25}"]
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*launcher, *argv, f"run_dir={run_dir}"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    train = [e for e in read_metrics(run_dir / "metrics.jsonl") if e["split"] == "train"]
    assert train[-1]["step"] == 3 and {"generator", "rtd"} <= train[-1].keys()
    with safe_open(run_dir / "checkpoints" / "step_00000003" / "model.safetensors", "pt") as f:
        shapes = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    assert shapes["discriminator.embedding.token.weight"] == (400, 16)
    assert shapes["generator.mlm_head.transform.weight"] == ((16, 32) if share == "all" else (16, 8))
