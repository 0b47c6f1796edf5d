"""Model families, one file each, composed from :mod:`minilm.nn`; :func:`from_pretrained` loads a Hugging Face
checkpoint of any family minilm converts (:mod:`minilm.models.hf`); :func:`course_checkpoint`, the course's own
pretrained GPT, BERT and ELMo (:mod:`minilm.models.course`). What the encoder–decoders share (teacher
forcing, features, generation) is :mod:`minilm.models.encoder_decoder`; checkpoints, :mod:`minilm.models.pretrained`."""

from .albert import ALBERT_PRESETS, Albert, AlbertConfig, albert_config
from .bart import BART_PRESETS, Bart, BartConfig, bart_config
from .bert import BERT_PRESETS, Bert, BertConfig, RobertaConfig
from .course import COURSE_MODELS, CourseCheckpoint, course_checkpoint, course_run_dir, untrained_like
from .distilbert import DISTILBERT_PRESETS, DistilBert, DistilBertConfig, distilbert_config, student_from_teacher
from .electra import ELECTRA_PRESETS, Electra, ElectraConfig, ElectraPretraining, electra_config, generator_config
from .gpt import GPT, GPT_PRESETS, GPTConfig, gpt_config
from .hf import from_pretrained
from .t5 import T5, T5_PRESETS, T5Config, t5_config
from .transformer import TRANSFORMER_BASE, TRANSFORMER_BIG, Transformer, TransformerConfig

__all__ = [
    "ALBERT_PRESETS",
    "BART_PRESETS",
    "BERT_PRESETS",
    "COURSE_MODELS",
    "DISTILBERT_PRESETS",
    "ELECTRA_PRESETS",
    "GPT",
    "GPT_PRESETS",
    "T5",
    "T5_PRESETS",
    "TRANSFORMER_BASE",
    "TRANSFORMER_BIG",
    "Albert",
    "AlbertConfig",
    "Bart",
    "BartConfig",
    "Bert",
    "BertConfig",
    "CourseCheckpoint",
    "DistilBert",
    "DistilBertConfig",
    "Electra",
    "ElectraConfig",
    "ElectraPretraining",
    "GPTConfig",
    "RobertaConfig",
    "T5Config",
    "Transformer",
    "TransformerConfig",
    "albert_config",
    "bart_config",
    "course_checkpoint",
    "course_run_dir",
    "distilbert_config",
    "electra_config",
    "from_pretrained",
    "generator_config",
    "gpt_config",
    "student_from_teacher",
    "t5_config",
    "untrained_like",
]
