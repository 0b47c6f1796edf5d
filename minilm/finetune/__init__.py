"""Fine-tuning on the same Trainer as pretraining: a task registry, generic heads, the benchmarks' own metrics.

``python -m minilm.finetune --task mrpc --pretrained RUN_DIR`` (see ``--help``); ``python -m minilm.finetune
table RUN_DIR ...`` prints a GLUE-style table. Modules: ``config`` (FinetuneConfig, resolution), ``kinds`` (a
kind per task shape: inputs, head, loss, predictions, metrics), ``text_to_text`` (every task as T5's text to text),
``mixing`` (multi-task training's mixing rates and sampler), ``model`` (body adapter and loading), ``table``, ``cli``.
"""

from minilm.finetune.cli import main, run
from minilm.finetune.config import FinetuneConfig
from minilm.finetune.kinds import task_kind
from minilm.finetune.model import FinetuneModel, encode
from minilm.finetune.table import glue_table

__all__ = ["FinetuneConfig", "FinetuneModel", "encode", "glue_table", "main", "run", "task_kind"]
