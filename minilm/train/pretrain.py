"""Pretraining: a corpus, a tokenizer trained on it, a registered model and objective, and the Trainer.

``python -m minilm.train`` with no arguments pretrains a tiny GPT on the Gutenberg novels for a few minutes on a
CPU and ends with the validation perplexity, a generated sample and the run directory. See ``--help``.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from minilm.train import registry
from minilm.train.cli import (
    SHORT,
    command_line_layer,
    exit_code,
    field_help,
    models_help,
    parse_command_line,
    resolve_layers,
    resumed_run,
    settings_help,
    start_run,
    unknown_key,
)
from minilm.train.config import ConfigError
from minilm.train.device import resolve_device
from minilm.train.distributed import is_main_process
from minilm.train.registry import (
    ObjectiveEntry,
    get_model,
    get_objective,
    model_config,
    needed_settings,
    objective_config,
    objective_keys,
    objectives,
    objectives_with_key,
)
from minilm.train.trainer import TrainConfig, Trainer, default_collate
from minilm.utils import count_parameters, seed_all

BUILTIN_CORPORA = ("gutenberg", "wikitext", "tinyshakespeare", "sst2-sentences")


@dataclass
class PretrainConfig:
    model: str = "gpt"  # a registered model (see the list below)
    size: str = "tiny"  # a size preset of the model (see the list below)
    objective: str = "clm"  # a registered objective (see the list below)
    corpus: str = "gutenberg"  # gutenberg, wikitext, tinyshakespeare, sst2-sentences, or .txt file(s) (a folder)
    vocab_size: int = 8192  # size of the tokenizer trained on the corpus
    seq_len: int = 128  # tokens per training example (at most the model's max_len)
    validation_fraction: float = 0.05  # the last paragraphs of each document held out for validation
    seed: int = 0  # for the corpus's examples (pairs, static masks); the training seed is train.seed
    prompt: str = "It was"  # start of the sample generated at the end
    sample_tokens: int = 60  # tokens of that sample (0: none)

    def validate(self) -> None:
        if self.seq_len < 1 or self.vocab_size < 1:
            raise ConfigError("seq_len and vocab_size must be positive")
        for key in ("seed", "sample_tokens"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{key} must be >= 0, got {getattr(self, key)}")
        if not 0 < self.validation_fraction < 1:
            raise ConfigError(f"validation_fraction must be between 0 and 1, got {self.validation_fraction}")


SHORTHANDS = ("model", "objective", "size")  # --model X is model=X
DEFAULT_TRAIN = TrainConfig(max_steps=400, eval_every=200, save_every=200, lr=2e-3, warmup_steps=40)


# ---------------------------------------------------------------------------------------------- data


def load_documents(corpus: str):
    """The corpus as minilm.data Documents: a built-in corpus, or plain-text files (blank lines = paragraphs)."""
    from minilm import data

    if corpus == "gutenberg":
        return data.load_gutenberg()
    if corpus == "wikitext":
        return data.load_wikitext("valid") + data.load_wikitext("test")
    if corpus == "tinyshakespeare":
        return [data.load_tiny_shakespeare()]
    if corpus == "sst2-sentences":  # movie-review text: SST-2's training sentences, their labels dropped
        sentences = [example.text for example in data.load_task("sst2", "train")]
        return [data.Document("SST-2 training sentences", sentences)]
    path = Path(corpus)
    if not path.exists():
        raise ConfigError(f"corpus {corpus!r} is neither one of {', '.join(BUILTIN_CORPORA)} nor an existing path")
    files = sorted(path.rglob("*.txt")) if path.is_dir() else [path]
    docs = []
    for f in files:
        paragraphs = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", read_corpus_file(f))]
        docs.append(data.Document(f.stem, [p for p in paragraphs if p]))
    return docs


def read_corpus_file(path: Path) -> str:
    """The file's text, which must be UTF-8: a binary file or another encoding is one ConfigError naming the file.

    Latin-1 and its kin are refused rather than guessed: any byte sequence decodes as Latin-1, so a guess would
    train silently on mojibake when the file is really Windows-1252, Shift-JIS or not text at all.
    """
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        if raw.startswith(b"\x7fELF") or b"\x00" in raw[:8192]:
            raise ConfigError(
                f"corpus file {path} is binary (not text); give a UTF-8 .txt file or a folder of them"
            ) from None
        raise ConfigError(
            f"corpus file {path} is not UTF-8 text (byte {raw[err.start]:#04x} at offset {err.start}; Latin-1 or "
            f"Windows-1252?); convert it first, e.g. iconv -f latin1 -t utf-8 {path} > {path.stem}.utf8.txt"
        ) from None


def split_documents(docs, fraction: float) -> tuple[list, list]:
    """Train and validation documents: the last ``fraction`` of each document's paragraphs is held out."""
    from minilm.data import Document

    train, validation = [], []
    for doc in docs:
        n_val = max(1, round(len(doc.paragraphs) * fraction)) if len(doc.paragraphs) > 1 else 0
        cut = len(doc.paragraphs) - n_val
        train.append(Document(doc.title, doc.paragraphs[:cut]))
        validation.append(Document(doc.title, doc.paragraphs[cut:]))
    return [d for d in train if d.paragraphs], [d for d in validation if d.paragraphs]


def build_tokenizer(
    job: PretrainConfig,
    family: str,
    train_texts: list[str],
    run_dir: Path | None,
    resume: bool = False,
    given: Callable[[], object] | None = None,
):
    """The run's tokenizer: a resumed run's own (``run_dir/tokenizer``); else ``given()`` when the objective brings
    one (a teacher's vocabulary), or one trained on ``train_texts``; saved there by the main process alone. Every
    process of a new run makes its own (training is reproducible across processes) and never reads the folder, which
    the main process may be writing at that moment."""
    from minilm.tokenizers import Tokenizer, train_tokenizer

    saved = run_dir / "tokenizer" if run_dir is not None else None
    if resume and saved is not None and saved.exists():
        return Tokenizer.load(saved)
    if given is not None:
        tokenizer = given()
    else:
        tokenizer = train_tokenizer(train_texts, family=family, vocab_size=job.vocab_size)
    if saved is not None and is_main_process():
        saved.parent.mkdir(parents=True, exist_ok=True)
        tokenizer.save(saved)
    return tokenizer


# ---------------------------------------------------------------------------------------------- the job


def job_model_config(job: PretrainConfig, model_overrides: dict, vocab_size: int, settings: dict):
    """The job's model config (``settings``: what the objective needs of it, e.g. an NSP head, applied last), checked
    to take the job's sequences."""
    config = model_config(get_model(job.model), job.size, vocab_size, {**model_overrides, **settings})
    max_len = getattr(config, "max_len", None)
    if max_len is not None and job.seq_len > max_len:
        raise ConfigError(
            f"seq_len={job.seq_len} is longer than the model allows (max_len={max_len}); lower seq_len or set "
            f"model.max_len={job.seq_len}"
        )
    return config


def check_job(
    job: PretrainConfig, train: TrainConfig, model_overrides: dict, objective: ObjectiveEntry, settings=None
) -> None:
    """Every setting checked before any data is read or any time spent: the device exists here, the vocabulary
    holds the tokenizer family's special tokens and alphabet, the model's config (heads, sizes) and seq_len fit, and
    the objective's settings fit the job (its ``check``: a seq_len it can use, a teacher that can teach)."""
    resolve_device(train.device)
    if objective.check is not None:
        objective.check(job, settings)
    if objective.tokenizer is None:  # an objective that brings its tokenizer brings its vocabulary size too
        registry.check_vocab_size(get_model(job.model), job.vocab_size)
    job_model_config(job, model_overrides, job.vocab_size, needed_settings(get_model(job.model), objective))


def build_model(job: PretrainConfig, model_overrides: dict, tokenizer, settings: dict):
    """The job's model for ``tokenizer``'s vocabulary, and its config."""
    config = job_model_config(job, model_overrides, tokenizer.vocab_size, settings)
    return registry.build_model(get_model(job.model), config, tokenizer), config


def run_config(job: PretrainConfig, config, settings) -> dict:
    """What a pretraining run records in config.json besides [train]: the job, the model's and the objective's
    configs (read back by --resume and by fine-tuning's --pretrained)."""
    return {
        "job": dataclasses.asdict(job),
        "model": dataclasses.asdict(config),
        "objective": dataclasses.asdict(settings) if settings is not None else {},
    }


def run(
    job: PretrainConfig, train: TrainConfig, model_overrides: dict, resume: str | None = None, settings=None
) -> dict:
    """Prepare data, tokenizer and model; train; print the validation loss, a sample and the run directory.

    ``settings``: the objective's config (None: its defaults, see ``objective.<key>=`` in ``--help``).
    """
    entry, objective = get_model(job.model), get_objective(job.objective, job.model)
    if settings is None:
        settings = objective_config(objective, {})
    check_job(job, train, model_overrides, objective, settings)
    seed_all(train.seed)  # before anything is built (a teacher's tokenizer, the examples); again before the model
    run_dir = Path(train.run_dir) if train.run_dir else None
    docs = load_documents(job.corpus)
    train_docs, val_docs = split_documents(docs, job.validation_fraction)
    if not train_docs:
        raise ConfigError(f"corpus {job.corpus!r} is empty: it holds no text to train on")
    given = (lambda: objective.tokenizer(settings)) if objective.tokenizer is not None else None
    tokenizer = build_tokenizer(job, entry.tokenizer_family, [d.text for d in train_docs], run_dir, bool(resume), given)
    try:
        train_examples, collate = objective.prepare(train_docs, tokenizer, job, settings)
        val_examples, val_collate = (None, None)
        if val_docs:
            val_examples, val_collate = objective.prepare(val_docs, tokenizer, job, settings, validation=True)
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(f"corpus {job.corpus!r} is too small for seq_len={job.seq_len}: {err}") from None
    seed_all(train.seed)  # the same initial weights in every process and every rerun
    model, config = build_model(job, model_overrides, tokenizer, needed_settings(get_model(job.model), objective))
    trainer = Trainer(
        objective.wrap_model(model, config, settings, tokenizer),
        objective.loss,
        train_examples,
        train,
        eval_data=val_examples,
        collate=collate or default_collate,
        eval_collate=val_collate,
        run_config=run_config(job, config, settings),
        counts=objective.counts,
        perplexity=objective.perplexity,
    )
    if resume:
        step = trainer.resume(resume)
        print(f"resumed from {resume} at step {step}")
    if trainer.dist.is_main:
        n_params = count_parameters(trainer.model)
        print(
            f"{job.model} ({job.size}, {n_params / 1e6:.1f}M parameters) on {job.corpus}: "
            f"{len(train_examples):,} training examples of up to {job.seq_len} tokens ({job.objective}); "
            f"device {trainer.device}, {trainer.dtype}, {trainer.dist.world_size} process(es)"
        )
    start = time.perf_counter()
    metrics = trainer.fit()
    if trainer.dist.is_main:
        report(job, objective.body(trainer.model), trainer, tokenizer, metrics, time.perf_counter() - start)
    return metrics


def report(job: PretrainConfig, model, trainer: Trainer, tokenizer, metrics: dict, seconds: float) -> None:
    """Print the validation loss (and perplexity, where the objective has one), a sample from ``model`` (when it
    generates) and the run directory."""
    if metrics:
        perplexity = f", perplexity {metrics['perplexity']:.1f}" if "perplexity" in metrics else ""
        print(f"validation loss {metrics['loss']:.3f}{perplexity} ({seconds:.0f} s)")
    if job.sample_tokens and hasattr(model, "generate"):
        print(sample(job, model, tokenizer, trainer.device))
    if trainer.run_dir is not None:
        print(f"run directory: {trainer.run_dir}")


def sample(job: PretrainConfig, model, tokenizer, device) -> str:
    """A sample from the trained model, from ``job.prompt``: its continuation (a language model) or, for an
    encoder-decoder, what it writes for ``prompt <blank> </s>`` (BART's ``<s> ... <mask> </s>``: the whole text
    reconstructed; T5's ``<extra_id_0>``: the blank filled in)."""
    prompt = tokenizer.encode(job.prompt, add_special_tokens=False)
    seq2seq = hasattr(model, "encode")
    if seq2seq:
        blank = tokenizer.mask_id if tokenizer.mask_id is not None else tokenizer.sentinel_ids[0]
        start = [tokenizer.bos_id] if tokenizer.bos_id is not None else []
        prompt = [*start, *prompt, blank, tokenizer.eos_id]
    room = getattr(model.config, "max_len", 1 << 30) - (1 if seq2seq else len(prompt))
    model.eval()
    ids = model.generate(
        torch.tensor([prompt], device=device),
        max_new_tokens=min(job.sample_tokens, room),
        do_sample=True,
        temperature=0.8,
        top_k=40,
        generator=torch.Generator(device).manual_seed(0),
    )
    text = tokenizer.decode(ids[0].tolist())
    return f"sample ({job.prompt!r} + {tokenizer.id_to_token(blank)}): {text}" if seq2seq else f"sample: {text}"


# ---------------------------------------------------------------------------------------------- CLI


def objectives_help() -> list[str]:
    """Help lines for the registered objectives: the models they train and their ``objective.<key>`` settings."""
    lines = ["  [objective] objective.<key>=value (or key=value) sets the objective's settings:"]
    for name, entry in objectives().items():
        lines.append(f"    {name} (models: {', '.join(entry.models)}): {entry.description}")
        if entry.config_class is not None:
            defaults = entry.config_class()
            for key, _, text in field_help(entry.config_class):
                lines.append(f"        {f'{key}={getattr(defaults, key)}':<26} {text}")
    return lines


def _options_text() -> str:
    sections = [("job", PretrainConfig()), ("train", DEFAULT_TRAIN)]
    lines = settings_help(sections, tables=("model", "objective")) + models_help("")
    return "\n".join(lines + objectives_help())


def parse_args(argv: list[str] | None):
    return parse_command_line(
        argv,
        prog="python -m minilm.train",
        description="Pretrain a language model. With no arguments: a tiny GPT on the Gutenberg novels (a few "
        "minutes on a CPU). Distributed: torchrun --nproc_per_node N -m minilm.train ...",
        epilog=_options_text(),
        shorthands=SHORTHANDS,
        example="lr=3e-4 model.n_layers=6",
    )


def short_keys(
    short: dict, job: PretrainConfig, train: TrainConfig, objective: ObjectiveEntry, model_fields: set[str]
) -> tuple[dict, dict]:
    """The objective's settings and the model's among the command line's short keys (``format=segment_pair``,
    ``share=all``): (objective settings, model overrides).

    [job] and [train] come first, then the objective's settings, then the model's config (``model_fields``). A key
    of the objective's settings that [job] or [train] has too is ambiguous (write it with its section), as is a key
    both the objective and the model have; a key none has is unknown, and the message names the objectives that do
    have it.
    """
    run_keys = {f.name for f in dataclasses.fields(job)} | {f.name for f in dataclasses.fields(train)}
    keys = objective_keys(objective)
    settings, model = {}, {}
    for key, value in short.items():
        if key in keys and (key in run_keys or key in model_fields):
            sections = [name for name, config in (("job", job), ("train", train)) if hasattr(config, key)]
            sections += ["model"] if key in model_fields and not sections else []
            spellings = " or ".join(f"{section}.{key}={value}" for section in [*sections, "objective"])
            raise ConfigError(
                f"key {key!r} is ambiguous: {objective.name}'s settings and [{']['.join(sections)}] have it; "
                f"write {spellings}"
            )
        if key in keys:
            settings[key] = value
        elif key in model_fields and key not in run_keys:
            model[key] = value
        elif key not in run_keys:
            owners = objectives_with_key(key)
            if owners:
                takes = f"its settings: {', '.join(keys)}" if keys else "it takes no settings"
                whose = f"objective {', '.join(owners)}, not of {objective.name} ({takes})"
                raise ConfigError(f"{key}= is a setting of {whose}")
            raise unknown_key(key, run_keys | set(keys) | model_fields)
    return settings, model


MOVED_TO_OBJECTIVE = ("format", "masking", "whole_word")  # [job] keys before objectives had their own settings


def upgrade_saved(saved: dict) -> dict:
    """A run directory's config.json from before objectives had settings -> today's sections: the masked LMs'
    ``job.format`` / ``masking`` / ``whole_word`` go to [objective] when its objective takes them, else away (every
    run saved them, GPT's too), so such a run still resumes."""
    job = dict(saved.get("job", {}))
    moved = {key: job.pop(key) for key in MOVED_TO_OBJECTIVE if key in job}
    if not moved:
        return saved
    entry = registry.objectives().get(job.get("objective"))
    fields = {f.name for f in dataclasses.fields(entry.config_class)} if entry and entry.config_class else set()
    objective = {key: value for key, value in moved.items() if key in fields} | dict(saved.get("objective", {}))
    return {**saved, "job": job, "objective": objective}


def check_same_settings(resume: str, saved: dict, objective: ObjectiveEntry, settings) -> None:
    """Refuse a resumed run whose objective's settings changed (noise=, noise_density=, rtd_weight=, ELECTRA's share=
    and generator_size=): config.json records one set of settings for the whole run, so a run goes on with the
    settings its first steps were trained with, and another setting is another run."""
    before = saved.get("objective") or {}
    if settings is None or not isinstance(before, dict):
        return
    try:
        recorded = objective_config(objective, {k: v for k, v in before.items() if k in objective_keys(objective)})
    except ConfigError:
        return  # a record this minilm cannot read: loading the checkpoint says what differs
    for key in before:
        if key in objective_keys(objective) and getattr(recorded, key) != getattr(settings, key):
            raise ConfigError(
                f"--resume {resume} was trained with {key}={getattr(recorded, key)}, not {getattr(settings, key)}: "
                f"a run keeps its objective's settings (its config.json says what trained every step); drop "
                f"{key}=..., or start a new run with it in another run_dir"
            )


def resolve(args) -> tuple[PretrainConfig, TrainConfig, dict, object]:
    """(job, train, model overrides, the objective's settings): defaults <- the resumed run's config <- the TOML
    file <- the command line."""
    job, train = PretrainConfig(), DEFAULT_TRAIN
    shorthands = {key: getattr(args, key) for key in SHORTHANDS}
    layer = command_line_layer(args.overrides, shorthands, job, train, objective_keys=True)
    short = layer.pop(SHORT)
    job, train, open_sections = resolve_layers(job, train, args.resume, args.config, layer, upgrade=upgrade_saved)
    model = get_model(job.model)  # an unknown model is the first thing to say
    objective = get_objective(job.objective, job.model)
    model_fields = {f.name for f in dataclasses.fields(model.config_class)}
    from_short, model_short = short_keys(short, job, train, objective, model_fields)
    settings = objective_config(objective, {**open_sections["objective"], **from_short})
    if args.resume:
        check_same_settings(args.resume, upgrade_saved(resumed_run(args.resume)[1]), objective, settings)
    if not train.run_dir:
        train = dataclasses.replace(train, run_dir=f"runs/{job.model}-{job.objective}-{time.strftime('%Y%m%d-%H%M%S')}")
    return job, train, {**open_sections["model"], **model_short}, settings


def main(argv: list[str] | None = None) -> int:
    def pretrain():
        args = parse_args(argv)
        job, train, model_overrides, settings = resolve(args)
        with start_run(args.resume, train, "python -m minilm.train") as resume:
            run(job, train, model_overrides, resume=resume, settings=settings)

    return exit_code(pretrain)
