"""Chapter 4: a miniature of RoBERTa's Table 4 (Liu et al. 2019) — more data, then longer training.

RoBERTa-large trained with BERT's 16 GB (BooksCorpus + Wikipedia) for 100K steps at batch 8K, then on 160 GB (+ CC-News,
OpenWebText, Stories) for 100K, 300K and 500K steps, and scored each downstream (SQuAD, MNLI-m, SST-2): every row
better than the last. Here, the same ladder for the tiny BERT of experiments/ch04_input_formats.py (2 layers,
d_model 128, FULL-SENTENCES, MLM with dynamic masking, about 2,048 tokens a step):

    small data, N steps          WikiText-2 (valid + test: 120 Wikipedia articles), N steps    ~ BOOKS + WIKI, 100K
    more data, N steps           WikiText-2 + the 17 Gutenberg novels, N steps                 ~ + additional data
    more data, 3N steps          the same, three times as long                                 ~ + pretrain longer
    more data, 5N steps          five times as long                                            ~ + pretrain even longer
    small data, 5N steps         the control the paper did not need: as long, without the new data

Every row starts from the same weights with one shared vocabulary (learned on both corpora's training text). Each is
scored by its MLM loss on WikiText's held-out paragraphs (the small corpus's own domain, so the extra data gets no
home advantage) and on the novels' held-out paragraphs, and by fine-tuning on SST-2 and SNLI (a small sample) with
``minilm.finetune``, as in experiments/ch04_input_formats.py.

    nice -n 5 python experiments/ch04_data_and_steps.py          # about 20-30 minutes on a shared 2-core CPU

Writes experiments/results/ch04_data_and_steps.json (read by chapters/04_roberta.py).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.ch04_input_formats import (  # noqa: E402
    MODEL,
    SEQ_LEN,
    TASKS,
    TOKENS_PER_STEP,
    downstream,
    finetune_setup,
    ladder_arguments,
    pretrain,
)
from experiments.common import begin, save_results  # noqa: E402
from minilm.recipes.bert import MaskedLMConfig, masked_lm_examples  # noqa: E402
from minilm.train.pretrain import PretrainConfig, build_tokenizer, load_documents, split_documents  # noqa: E402
from minilm.utils import reproducible  # noqa: E402

# (row of the table, corpora, multiple of the base number of steps, the paper's row)
ROWS = [
    ("small data, N steps", ("wikitext",), 1, "BOOKS + WIKI (16GB), 100K steps"),
    ("more data, N steps", ("wikitext", "gutenberg"), 1, "+ additional data (160GB), 100K steps"),
    ("more data, 3N steps", ("wikitext", "gutenberg"), 3, "+ pretrain longer, 300K steps"),
    ("more data, 5N steps", ("wikitext", "gutenberg"), 5, "+ pretrain even longer, 500K steps"),
    ("small data, 5N steps", ("wikitext",), 5, "(no such row: the control)"),
]
# Table 4 of the paper (RoBERTa-large; SQuAD v1.1/v2.0 F1, MNLI-m and SST-2 dev accuracy)
PAPER = {
    "BOOKS + WIKI (16GB), 100K steps": {"squad": (93.6, 87.3), "mnli": 89.0, "sst2": 95.3},
    "+ additional data (160GB), 100K steps": {"squad": (94.0, 87.7), "mnli": 89.3, "sst2": 95.6},
    "+ pretrain longer, 300K steps": {"squad": (94.4, 88.7), "mnli": 90.0, "sst2": 96.1},
    "+ pretrain even longer, 500K steps": {"squad": (94.6, 89.4), "mnli": 90.2, "sst2": 96.4},
}
FORMAT, OBJECTIVE = "full_sentences", "mlm"


def main() -> None:
    args = ladder_arguments(__doc__, 300, "N, the base number of pretraining steps", 120)
    begin()
    reproducible(seed=0, threads=1)
    started = time.perf_counter()

    job = PretrainConfig(model="bert", corpus="wikitext", vocab_size=4096, seq_len=SEQ_LEN)
    splits = {
        name: split_documents(load_documents(name), job.validation_fraction) for name in ("wikitext", "gutenberg")
    }
    texts = [d.text for train, _ in splits.values() for d in train]
    tokenizer = build_tokenizer(job, "bert", texts, None)  # one vocabulary for every row
    held_out = {  # masked once, with a fixed seed: every row is judged on the same inputs
        name: masked_lm_examples(val, tokenizer, job, MaskedLMConfig(format="doc_sentences"), True)
        for name, (_, val) in splits.items()
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (row, corpora, multiple, paper_row) in enumerate(ROWS):
            docs = [d for name in corpora for d in splits[name][0]]
            run_dir = Path(tmp) / f"run{i}"
            steps = multiple * args.steps
            result = pretrain(
                row, FORMAT, OBJECTIVE, docs, tokenizer, held_out["wikitext"], steps, run_dir,
                more_held_out={"gutenberg": held_out["gutenberg"]},
            )  # fmt: skip
            result["held_out_mlm_loss_wikitext"] = result.pop("held_out_mlm_loss")
            result.update(corpora=list(corpora), steps=steps, paper_row=paper_row)
            result["epochs"] = round(result["tokens_seen"] / (result["n_examples"] * result["mean_input_tokens"]), 2)
            for task, max_length in TASKS.items():
                result[f"{task}_accuracy"] = downstream(
                    run_dir, task, max_length, args.finetune_steps, args.train_examples, args.eval_examples
                )
            rows.append(result)
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}, flush=True)

    results = {
        "setup": {
            "corpora": "wikitext-2 valid+test (120 articles) and the 17 Gutenberg novels; the last 5% of each "
            "document's paragraphs held out",
            "model": {"name": "bert", **MODEL, "vocab_size": tokenizer.vocab_size, "seq_len": SEQ_LEN},
            "format": FORMAT,
            "objective": OBJECTIVE + " (dynamic masking)",
            "base_steps": args.steps,
            "tokens_per_step": TOKENS_PER_STEP,
            "held_out_examples": {name: len(examples) for name, (examples, _) in held_out.items()},
            **finetune_setup(args, TASKS),
            "seconds": round(time.perf_counter() - started),
        },
        "paper": {row: {**v, "squad": list(v["squad"])} for row, v in PAPER.items()},
        "rows": rows,
    }
    print("wrote", save_results("ch04_data_and_steps", results))


if __name__ == "__main__":
    main()
