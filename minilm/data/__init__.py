"""The data layer: registered datasets, verified downloads, and readers that return plain dataclasses.

Nothing here imports torch or tokenizers, and importing the package reads no data. See ``data/README.md``
for the datasets, their splits and the environment variables (``MINILM_DATA_DIR``, ``MINILM_CACHE_DIR``).
"""

from minilm.data.corpora import Document, load_gutenberg, load_tiny_shakespeare, load_wikitext
from minilm.data.download import cache_dir, fetch, mirror_dir
from minilm.data.errors import ChecksumError, DataError
from minilm.data.examples import (
    Answer,
    ChoiceExample,
    PairExample,
    QAExample,
    SentenceExample,
    Seq2SeqExample,
    TaggingExample,
)
from minilm.data.registry import DATASETS, DataFile, DatasetInfo, get_dataset, list_datasets
from minilm.data.sentences import split_sentences
from minilm.data.tasks import SPLITS, TASKS, TaskInfo, load_task

__all__ = [
    "DATASETS",
    "SPLITS",
    "TASKS",
    "Answer",
    "ChecksumError",
    "ChoiceExample",
    "DataError",
    "DataFile",
    "DatasetInfo",
    "Document",
    "PairExample",
    "QAExample",
    "SentenceExample",
    "Seq2SeqExample",
    "TaggingExample",
    "TaskInfo",
    "cache_dir",
    "fetch",
    "get_dataset",
    "list_datasets",
    "load_gutenberg",
    "load_task",
    "load_tiny_shakespeare",
    "load_wikitext",
    "mirror_dir",
    "split_sentences",
]
