"""The course's own pretrained checkpoints, one per family — a small GPT, a BERT with its MLM head, an ELMo biLM,
an ALBERT, an ELECTRA, a BART, a T5 and a DistilBERT — trained on the Gutenberg novels by
``experiments/course_checkpoints.py`` for longer than a notebook can, and committed under
``checkpoints/course/<name>/``.

    gpt = course_checkpoint("gpt")             # .model (in eval mode, float32), .tokenizer, .folder
    ids = gpt.tokenizer.encode("It was", add_special_tokens=False)

GPT and BERT are Hugging Face checkpoint folders (config.json + model.safetensors, stored in float16, and the
tokenizer's tokenizer.json), so :func:`minilm.models.from_pretrained` and transformers read them too. ELMo has no
Hugging Face model type: its folder holds minilm's own config.json (``model_type: minilm-elmo`` and the
:class:`~minilm.models.elmo.ELMoConfig` fields) and model.safetensors (:func:`save_elmo`, :func:`load_elmo`). Each
folder also keeps ``minilm_run.json``, the pretraining run's job, model and objective settings, from which
:func:`course_run_dir` rebuilds a run directory that ``minilm.finetune`` (``pretrained=``) fine-tunes.

Every course checkpoint has left the *unigram plateau*: its record states its held-out language-model loss beside the
unigram entropy of the tokens it predicts (``held_out_loss``, ``unigram_entropy``; :mod:`minilm.analysis.plateau`),
at least a nat below it (the T5's 1.10 nats are mostly its targets' layout, not the hidden words: Chapter 8).

The second half's models — an ALBERT (MLM + SOP, every layer shared), an ELECTRA (its
discriminator with its generator), a BART (text infilling + sentence permutation), a T5 (span corruption) and a
DistilBERT distilled from the course BERT — are small Hugging Face checkpoints too; ELECTRA's folder holds the
discriminator, its generator in ``generator/``, and loads as the pair it was trained as.

The checkpoints are found like recorded results (:func:`minilm.analysis.recorded_results`): in the repository that
holds the current folder, else in the one this ``minilm`` was imported from. Their record (command, commit, data,
steps, validation perplexity, each file's sha256) is ``experiments/results/course_checkpoints.json``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import NamedTuple

import torch
from safetensors.torch import load_file, save
from torch import nn

from minilm.files import CheckpointError, atomic_write_bytes, atomic_write_text
from minilm.models.electra import ElectraPretraining
from minilm.models.elmo import ELMo, ELMoConfig
from minilm.models.pretrained import HF_PACKAGE
from minilm.tokenizers import Tokenizer

COURSE_MODELS = ("gpt", "bert", "elmo", "albert", "electra", "bart", "t5", "distilbert")
FOLDER = Path("checkpoints") / "course"  # relative to the repository root
RUN_FILE = "minilm_run.json"  # the pretraining run's job, model and objective settings
ELMO_MODEL_TYPE = "minilm-elmo"
CONFIG_NAME, WEIGHTS_NAME = "config.json", "model.safetensors"
GENERATOR_FOLDER = "generator"  # ELECTRA: the generator's Hugging Face folder, beside the discriminator's files


class CourseCheckpoint(NamedTuple):
    model: nn.Module  # in eval mode
    tokenizer: Tokenizer  # the one it was pretrained with
    folder: Path


def course_checkpoint_folder(name: str, start: str | Path | None = None) -> Path:
    """``checkpoints/course/<name>`` of the repository that holds ``start`` (default: the current folder), else of
    the repository this ``minilm`` was imported from."""
    if name not in COURSE_MODELS:
        raise ValueError(f"no course checkpoint named {name!r}; choose one of {', '.join(COURSE_MODELS)}")
    start = Path.cwd() if start is None else Path(start)
    folders = [*dict.fromkeys([start.resolve(), *start.resolve().parents, Path(__file__).resolve().parents[2]])]
    candidates = [folder / FOLDER / name for folder in folders]
    found = next((c for c in candidates if (c / CONFIG_NAME).is_file()), None)
    if found is None:
        looked = "\n  ".join(str(c) for c in candidates)
        raise FileNotFoundError(
            f"no course checkpoint {name!r}; looked in\n  {looked}\nrun from inside the minilm repository (a clone "
            "with its checkpoints/ folder), or train them: python experiments/course_checkpoints.py"
        )
    return found


def course_checkpoint(
    name: str, start: str | Path | None = None, dtype: torch.dtype = torch.float32
) -> CourseCheckpoint:
    """The course checkpoint ``name`` (one of :data:`COURSE_MODELS`): its model in eval mode (``dtype``: float32 by
    default; they are stored in float16), its tokenizer and its folder. ELECTRA's model is the pair
    (:class:`~minilm.models.electra.ElectraPretraining`: ``.discriminator``, ``.generator``) as it was trained."""
    return load_course_folder(course_checkpoint_folder(name, start), dtype)


def load_course_folder(folder: str | Path, dtype: torch.dtype = torch.float32) -> CourseCheckpoint:
    """A checkpoint folder as the course saves them (Hugging Face's layout, or minilm's ELMo) with its tokenizer;
    with a ``generator/`` folder inside, ELECTRA's generator and discriminator as one pair."""
    folder = Path(folder)
    tokenizer = Tokenizer.load(folder)
    if json.loads((folder / CONFIG_NAME).read_text(encoding="utf-8")).get("model_type") == ELMO_MODEL_TYPE:
        return CourseCheckpoint(load_elmo(folder, tokenizer, dtype), tokenizer, folder)
    hf = importlib.import_module(HF_PACKAGE)  # by name, as PretrainedMixin does: hf imports the model files
    model = hf.from_pretrained(folder, tokenizer, dtype=dtype)
    if (folder / GENERATOR_FOLDER / CONFIG_NAME).is_file():
        generator = hf.from_pretrained(folder / GENERATOR_FOLDER, tokenizer, dtype=dtype)
        share = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))["config"]["objective"]["share"]
        model = ElectraPretraining(model, generator, share=share).eval()
    return CourseCheckpoint(model, tokenizer, folder)


def save_elmo(model: ELMo, folder: str | Path, dtype: torch.dtype = torch.float16) -> Path:
    """Write ``model`` as minilm's ELMo checkpoint: config.json (``model_type`` and the ELMoConfig fields) and
    model.safetensors (the parameters in ``dtype``; not the spelling table, which :func:`load_elmo` rebuilds from
    the tokenizer saved beside them)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {"model_type": ELMO_MODEL_TYPE, "architectures": ["ELMo"], **dataclasses.asdict(model.config)}
    tensors = {name: p.detach().to("cpu", dtype).contiguous() for name, p in model.named_parameters()}
    atomic_write_bytes(folder / WEIGHTS_NAME, save(tensors, metadata={"format": "pt"}))
    atomic_write_text(folder / CONFIG_NAME, json.dumps(config, indent=2, sort_keys=True) + "\n")
    return folder


def load_elmo(folder: str | Path, tokenizer: Tokenizer, dtype: torch.dtype = torch.float32) -> ELMo:
    """An ELMo written by :func:`save_elmo`, in eval mode, spelling ``tokenizer``'s vocabulary."""
    folder = Path(folder)
    config = json.loads((folder / CONFIG_NAME).read_text(encoding="utf-8"))
    if config.pop("model_type", None) != ELMO_MODEL_TYPE:
        raise CheckpointError(f"{folder / CONFIG_NAME} is not an ELMo checkpoint (model_type {ELMO_MODEL_TYPE!r})")
    config.pop("architectures", None)
    with torch.device("meta"):  # no initialisation: every parameter comes from the file
        model = ELMo(ELMoConfig(**config))
    model.char_table = torch.zeros(model.char_table.shape, dtype=torch.long)  # filled by set_vocabulary
    model.load_state_dict(
        {name: t.to(dtype) for name, t in load_file(folder / WEIGHTS_NAME).items()}, strict=False, assign=True
    )
    missing = [name for name, p in model.named_parameters() if p.is_meta]
    if missing:
        raise CheckpointError(f"{folder / WEIGHTS_NAME} lacks {len(missing)} ELMo tensor(s): {', '.join(missing[:5])}")
    model.set_vocabulary([tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)])
    return model.eval()


def untrained_like(checkpoint: CourseCheckpoint, seed: int = 0) -> nn.Module:
    """The control of a course checkpoint: the same architecture (and, for ELMo, spelling of the same vocabulary)
    with freshly initialised weights drawn with ``seed``, in eval mode."""
    model = checkpoint.model
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if isinstance(model, ElectraPretraining):
            d, g = model.discriminator, model.generator
            return ElectraPretraining(type(d)(d.config), type(g)(g.config), share=model.share).eval()
        fresh = type(model)(model.config)
    if isinstance(fresh, ELMo):
        fresh.set_vocabulary([checkpoint.tokenizer.id_to_token(i) for i in range(checkpoint.tokenizer.vocab_size)])
    return fresh.eval()


def course_run_dir(
    name: str, directory: str | Path, start: str | Path | None = None, *, untrained: bool = False, seed: int = 0
) -> Path:
    """Write the course checkpoint ``name`` as a pretraining run directory (``checkpoints/step_N`` and
    ``tokenizer/``, as ``python -m minilm.train`` leaves one), for ``minilm.finetune``'s ``pretrained=``; return it.
    The weights are the checkpoint's body (ELECTRA's discriminator; no generator, no teacher), in float32, under a
    run config that names its model and no pretraining objective (nothing to wrap it in); ``untrained=True``: those
    of :func:`untrained_like` (``seed``), saved as step 0 with the same tokenizer — the "without pretraining" row of
    an ablation."""
    from minilm.train.checkpoint import save_checkpoint  # the training side, needed only here

    checkpoint = course_checkpoint(name, start)
    model = untrained_like(checkpoint, seed) if untrained else checkpoint.model
    if isinstance(model, ElectraPretraining):
        model = model.discriminator
    run = json.loads((checkpoint.folder / RUN_FILE).read_text(encoding="utf-8"))
    config = {**run["config"], "job": {**run["config"]["job"], "objective": None}, "objective": {}}
    directory = Path(directory)
    save_checkpoint(directory, 0 if untrained else run["steps"], model, config=config, keep_last=None)
    checkpoint.tokenizer.save(directory / "tokenizer")
    return directory
