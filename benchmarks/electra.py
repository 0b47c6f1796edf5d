"""ELECTRA's pretraining throughput (generator + discriminator, replaced-token detection): minilm's
ElectraPretraining against transformers' ElectraForMaskedLM + ElectraForPreTraining on the same configs, with the
same optimizer, weights and batches.

    python benchmarks/electra.py              # 2 torch threads, then 1; 12 timed rounds; 2-3.5 minutes
    python benchmarks/electra.py --quick      # 4 rounds, for a smoke test
    python benchmarks/electra.py --threads 1  # one thread count only

minilm: the ``tiny`` ELECTRA discriminator (4 layers, 4 heads, width 256, FFN 1024, embedding size E = 128, 256
positions, 8192-token vocabulary, dropout 0) wrapped by ``minilm.recipes.electra.wrap`` with the
``ReplacedTokenConfig()`` defaults (a generator a quarter of its width, FFN and heads: width 64, FFN 256, 1 head;
embeddings shared; λ = 50), trained through the real ``Trainer.train_step`` with ``electra_loss`` and
``electra_counts`` (the generator's vocabulary logits only at the masked positions, Gumbel sampling there; fused
AdamW, clipping at 1.0, LambdaLR), as ``--model electra --objective rtd`` trains it.

transformers: ``ElectraForMaskedLM`` (the generator, its config converted from minilm's ``generator_config``) and
``ElectraForPreTraining`` (the discriminator), the embeddings shared as transformers documents it (the
discriminator's word, position and token-type embeddings and their LayerNorm are the generator's; each keeps its own
``embeddings_project``), in a hand loop: the generator's MLM loss from ``labels=`` (full-vocabulary logits at every
position, as it is usually run), Gumbel-max sampling at the masked positions without gradient, the discriminator's
loss from ``labels=`` (its binary cross-entropy over the attention mask), total = generator + 50 x discriminator; the
same AdamW groups, betas, ``fused=True``, clipping and schedule as benchmarks/mlm.py's hand loop (both
benchmarks/common.py's ``hand_train_step``).

Both start from the same weights (transformers' initialisation, converted) and read the same batches: 16 rows of 128
random tokens ([CLS] ... [SEP]), masked once ahead of timing with ELECTRA's masking (15 %, 85 % of them [MASK], 15 %
left as they are; no random tokens). The samples differ (each draws its own noise), so the first-step *generator*
losses must agree (to 5 decimals) and the discriminator losses only be close. A context row gives minilm with the
generator's logits at every position. Timing as in benchmarks/mlm.py: round-robin, medians of wall clock and CPU
time.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool (benchmarks/attention.py)

import torch  # noqa: E402
from common import (  # noqa: E402
    hand_train_step,
    import_transformers,
    minilm_trainer,
    ordered_batches,
    print_per_thread_count,
    print_table,
    rounds_note,
    run_header,
    same_parameter_count,
    speed_up_table,
    time_round_robin,
    timing_args,
)
from mlm import N_BATCHES, VOCAB_SIZE, mlm_examples  # noqa: E402

from minilm.models.electra import ELECTRA_SIZES, Electra, ElectraConfig, ElectraPretraining  # noqa: E402
from minilm.models.electra import generator_config as electra_generator_config  # noqa: E402
from minilm.models.hf import load_hf_state_dict  # noqa: E402
from minilm.models.hf.electra import config_to_hf  # noqa: E402
from minilm.objectives.mlm import mlm_loss  # noqa: E402
from minilm.objectives.rtd import replace_tokens, rtd_loss, sample_replacements  # noqa: E402
from minilm.recipes.electra import ReplacedTokenConfig, electra_counts, electra_loss, wrap  # noqa: E402
from minilm.train.trainer import LossOutput, default_collate  # noqa: E402
from minilm.utils import count_parameters  # noqa: E402

MINILM = "minilm ElectraPretraining, Trainer.train_step"
PRIMARY = "transformers ElectraForMaskedLM + ElectraForPreTraining, labels= (primary)"
EVERYWHERE = "minilm, generator logits at every position"


# ------------------------------------------------------------------------------------------ models


def minilm_configs(seq_len: int) -> tuple[ElectraConfig, ElectraConfig, ReplacedTokenConfig]:
    """The tiny discriminator (the rtd objective's model: its head only), its generator, the recipe's settings."""
    settings = ReplacedTokenConfig()
    config = ElectraConfig(vocab_size=VOCAB_SIZE, **ELECTRA_SIZES["tiny"], dropout=0.0, attention_dropout=0.0)
    if seq_len > config.max_len:
        raise SystemExit(f"--seq-len {seq_len} is longer than the tiny model's {config.max_len} positions")
    return config, electra_generator_config(config, settings.generator_size, settings.share), settings


def transformers_models(config: ElectraConfig, gen_config: ElectraConfig):
    """ElectraForMaskedLM (generator) and ElectraForPreTraining (discriminator) with shared embeddings."""
    from transformers import ElectraConfig as HFElectraConfig
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    generator = ElectraForMaskedLM(HFElectraConfig(**config_to_hf(gen_config), attn_implementation="sdpa"))
    discriminator = ElectraForPreTraining(HFElectraConfig(**config_to_hf(config), attn_implementation="sdpa"))
    # transformers has no joint model: share the generator's embeddings (its MLM decoder stays tied to its word
    # embeddings); each model keeps its own embeddings_project (E -> 64 and E -> 256)
    for part in ("word_embeddings", "position_embeddings", "token_type_embeddings", "LayerNorm"):
        setattr(discriminator.electra.embeddings, part, getattr(generator.electra.embeddings, part))
    if generator.generator_lm_head.weight is not generator.electra.embeddings.word_embeddings.weight:
        raise SystemExit("transformers' generator_lm_head is not tied to the word embeddings")
    return generator, discriminator


def minilm_model(config: ElectraConfig, settings: ReplacedTokenConfig, generator, discriminator) -> ElectraPretraining:
    """The recipe's pair (wrap: a fresh generator, embeddings shared) with the transformers pair's weights."""
    pair = wrap(Electra(config), config, settings)
    load_hf_state_dict(pair.discriminator, discriminator.state_dict())  # every name and shape checked, one to one
    load_hf_state_dict(pair.generator, generator.state_dict())  # the shared tables again: the same values
    return pair


# ------------------------------------------------------------------------------------------ data


def electra_examples(batch_size: int, seq_len: int, generator: torch.Generator) -> list[dict]:
    """benchmarks/mlm.py's random rows, each batch masked once with ELECTRA's masking (GeneratorConfig.mask_config's:
    15 %, 85 % [MASK], 15 % unchanged, no random tokens)."""
    return mlm_examples(batch_size, seq_len, generator, mask_prob=0.15, replace_prob=0.85, random_prob=0.0)


# ------------------------------------------------------------------------------------------ training steps


def minilm_step(pair: ElectraPretraining, loss_fn, data, batch_size: int):
    """A Trainer as the CLI builds it for the rtd objective (counts=electra_counts); its train_step, returning
    (loss, tokens, generator loss, discriminator loss)."""
    trainer = minilm_trainer(pair, loss_fn, data, batch_size, counts=electra_counts)

    def train_step() -> tuple[float, int, float, float]:
        loss, tokens = trainer.train_step()
        return loss, tokens, trainer.last_losses["generator"], trainer.last_losses["rtd"]

    return train_step


def full_vocab_electra_loss(pair: ElectraPretraining, batch) -> LossOutput:
    """electra_loss with the generator's logits at every position (B, T, V), as a model without the masked-only
    path computes them; the samples are drawn at the masked rows only, as before."""
    labels, mask, segments = batch["labels"], batch["attention_mask"], batch["token_type_ids"]
    hidden = pair.generator.features(batch["input_ids"], mask, segments).last_hidden_state
    logits = pair.generator.mlm_logits(hidden)  # (B, T, V)
    generator_loss = mlm_loss(logits, labels)
    samples = sample_replacements(logits.detach()[labels != -100], pair.settings.temperature)
    corrupted, replaced = replace_tokens(batch["input_ids"], labels, samples)
    disc_hidden = pair.discriminator.features(corrupted, mask, segments).last_hidden_state
    disc = rtd_loss(pair.discriminator.rtd_logits(disc_hidden), replaced, weights=mask)
    weight = pair.settings.rtd_weight
    parts = {"generator": generator_loss, "rtd": disc}
    return LossOutput(generator_loss + weight * disc, n_tokens=int(mask.sum()), parts=parts, weights={"rtd": weight})


def transformers_step(generator, discriminator, data, batch_size: int, rtd_weight: float):
    """The Trainer's step for the transformers pair: the same batches (same order and collate), AdamW groups and
    settings, clipping and schedule; each model's loss from its own ``labels=``, total = gen + λ disc."""
    both = torch.nn.ModuleList([generator, discriminator])  # shared tensors appear once in parameters()

    def loss_of(batch):
        input_ids, labels = batch["input_ids"], batch["labels"]
        mask, segments = batch["attention_mask"], batch["token_type_ids"]
        out = generator(input_ids=input_ids, attention_mask=mask, token_type_ids=segments, labels=labels)
        with torch.no_grad():  # Gumbel-max sampling at the masked positions, no gradient through it
            masked = labels != -100
            logits = out.logits[masked]  # (|M|, V)
            exponential = -torch.log(torch.rand_like(logits).clamp(1e-9, 1.0))  # -log u ~ Exp(1)
            gumbel = -torch.log(exponential.clamp(min=1e-9))
            samples = (logits + gumbel).argmax(-1)
            corrupted = input_ids.clone()
            corrupted[masked] = samples
            original = torch.where(masked, labels, input_ids)
            replaced = (corrupted != original).long()
        disc_loss = discriminator(
            input_ids=corrupted, attention_mask=mask, token_type_ids=segments, labels=replaced
        ).loss
        return out.loss + rtd_weight * disc_loss, int(mask.sum()), out.loss, disc_loss  # the step: numbers

    return hand_train_step(both, loss_of, ordered_batches(data, batch_size, default_collate), batch_size)


# ------------------------------------------------------------------------------------------ tables


def table(threads: int, args, configs, data: list[dict]) -> str:
    config, gen_config, settings = configs
    tokens = args.batch_size * args.seq_len
    generator, discriminator = transformers_models(config, gen_config)
    variants = {
        MINILM: minilm_step(
            minilm_model(config, settings, generator, discriminator), electra_loss, data, args.batch_size
        ),
        PRIMARY: transformers_step(generator, discriminator, data, args.batch_size, settings.rtd_weight),
        EVERYWHERE: minilm_step(
            minilm_model(config, settings, generator, discriminator), full_vocab_electra_loss, data, args.batch_size
        ),
    }
    median, first = time_round_robin(variants, args.rounds, warmup=args.warmup)
    gen = [first[n][2] for n in median]
    if max(gen) - min(gen) > 1e-5:
        raise SystemExit(f"first-step generator losses differ: {gen} (same weights and batch: they should agree)")
    rows = [
        f"{rounds_note(threads, args.rounds)}; first-step losses, same weights and batch (minilm, transformers, "
        "minilm every position): generator "
        + ", ".join(f"{first[n][2]:.5f}" for n in median)
        + "; discriminator (own samples) "
        + ", ".join(f"{first[n][3]:.5f}" for n in median)
        + "\n",
    ]
    return "\n".join(rows + speed_up_table(median, MINILM, {"tokens": tokens}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=16, help="rows per step (16)")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per row (128)")
    args = timing_args(parser, rounds=12)
    transformers = import_transformers()
    configs = minilm_configs(args.seq_len)
    config, gen_config, settings = configs
    generator, discriminator = transformers_models(config, gen_config)
    pair = minilm_model(config, settings, generator, discriminator)
    n_minilm = same_parameter_count(pair, torch.nn.ModuleList([generator, discriminator]))
    data = electra_examples(args.batch_size, args.seq_len, torch.Generator().manual_seed(0))
    masked = sum(int((e["labels"] != -100).sum()) for e in data) / N_BATCHES

    print(run_header(f"transformers {transformers.__version__}"))
    c, g = config, gen_config
    print("\nConfig (both pairs: fp32, same initial weights, the same optimizer and batches):\n")
    settings_rows = [
        (
            "vocabulary / positions / segments / embedding size E",
            f"{c.vocab_size} / {c.max_len} / {c.n_segments} / {c.embedding_size}",
        ),
        ("discriminator: layers / heads / width / FFN", f"{c.n_layers} / {c.n_heads} / {c.d_model} / {c.d_ff}"),
        (
            f"generator (size {settings.generator_size:g}): layers / heads / width / FFN",
            f"{g.n_layers} / {g.n_heads} / {g.d_model} / {g.d_ff}",
        ),
        (
            "sharing, λ",
            f"{settings.share} (token, position, segment embeddings and their LayerNorm), {settings.rtd_weight:g}",
        ),
        ("activation, dropout", f"{c.activation}, {c.dropout}"),
        (
            "parameters: discriminator / generator / pair (shared once)",
            f"{count_parameters(pair.discriminator):,} / {count_parameters(pair.generator):,} / {n_minilm:,} "
            "(minilm = transformers)",
        ),
        ("batch", f"{args.batch_size} x {args.seq_len}, {masked:.0f} masked tokens per step (mean)"),
    ]
    print_table(("setting", "value"), settings_rows)
    print(
        f"\nELECTRA training step (generator + discriminator), {args.batch_size * args.seq_len:,} tokens/step "
        "(speed-up: their time / ours):\n"
    )
    print_per_thread_count(args.thread_counts, lambda threads: table(threads, args, configs, data))


if __name__ == "__main__":
    main()
