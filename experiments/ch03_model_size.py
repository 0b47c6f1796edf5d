"""Chapter 3: a miniature of BERT's Table 6 (Devlin et al. 2019) — model size.

BERT's ablation over model size pretrained six models of L layers, hidden size H and A heads for the same number of
steps and fine-tuned each on MNLI, MRPC and SST-2: every increase in size lowered the held-out MLM perplexity and
raised the accuracy, "even for MRPC which only has 3,600 labeled training examples", from (3, 768, 12) to
(24, 1024, 16). Here the same ladder for four tiny BERTs, pretrained like experiments/ch04_input_formats.py (WikiText-2
valid + test, FULL-SENTENCES, MLM with dynamic masking, about 2,048 tokens a step, the same steps for each) and
fine-tuned on SST-2 and MRPC with ``minilm.finetune`` (the same steps for each):

    L=1, H=64,  A=2
    L=2, H=128, A=4      (the model of experiments/ch04_input_formats.py)
    L=4, H=128, A=4      deeper
    L=4, H=256, A=4      deeper and wider

Every model reads the same vocabulary and batches; the held-out perplexity is exp of the MLM loss on WikiText's
held-out paragraphs, masked once with a fixed seed.

    nice -n 5 python experiments/ch03_model_size.py          # about 15-25 minutes on a shared 2-core CPU

Writes experiments/results/ch03_model_size.json (read by chapters/03_bert.py).
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.ch04_input_formats import (  # noqa: E402
    SEQ_LEN,
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

SIZES = [(1, 64, 2), (2, 128, 4), (4, 128, 4), (4, 256, 4)]  # (L, H, A); the feed-forward width is 4H, as BERT's
TASKS = {"sst2": 64, "mrpc": 128}  # task -> max_length
# Table 6 of the paper: (L, H, A) -> held-out MLM perplexity, MNLI-m, MRPC and SST-2 dev accuracy
PAPER = {
    (3, 768, 12): {"ppl": 5.84, "mnli": 77.9, "mrpc": 79.8, "sst2": 88.4},
    (6, 768, 3): {"ppl": 5.24, "mnli": 80.6, "mrpc": 82.2, "sst2": 90.7},
    (6, 768, 12): {"ppl": 4.68, "mnli": 81.9, "mrpc": 84.8, "sst2": 91.3},
    (12, 768, 12): {"ppl": 3.99, "mnli": 84.4, "mrpc": 86.7, "sst2": 92.9},
    (12, 1024, 16): {"ppl": 3.54, "mnli": 85.7, "mrpc": 86.9, "sst2": 93.3},
    (24, 1024, 16): {"ppl": 3.23, "mnli": 86.6, "mrpc": 87.8, "sst2": 93.7},
}
FORMAT, OBJECTIVE = "full_sentences", "mlm"


def main() -> None:
    args = ladder_arguments(__doc__, 400, "pretraining steps per model", 150)
    begin()
    reproducible(seed=0, threads=1)
    started = time.perf_counter()

    job = PretrainConfig(model="bert", corpus="wikitext", vocab_size=4096, seq_len=SEQ_LEN)
    train_docs, val_docs = split_documents(load_documents(job.corpus), job.validation_fraction)
    tokenizer = build_tokenizer(job, "bert", [d.text for d in train_docs], None)  # one vocabulary for every size
    held_out = masked_lm_examples(val_docs, tokenizer, job, MaskedLMConfig(format="doc_sentences"), True)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (n_layers, d_model, n_heads) in enumerate(SIZES):
            sizes = dict(n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_ff=4 * d_model)
            run_dir = Path(tmp) / f"run{i}"
            name = f"L={n_layers}, H={d_model}, A={n_heads}"
            result = pretrain(
                name, FORMAT, OBJECTIVE, train_docs, tokenizer, held_out, args.steps, run_dir, model_sizes=sizes
            )
            result.update(sizes, held_out_perplexity=math.exp(result["held_out_mlm_loss"]))
            for task, max_length in TASKS.items():
                result[f"{task}_accuracy"] = downstream(
                    run_dir, task, max_length, args.finetune_steps, args.train_examples, args.eval_examples
                )
            rows.append(result)
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}, flush=True)

    results = {
        "setup": {
            "corpus": "wikitext-2 valid+test, last 5% of each article's paragraphs held out",
            "vocab_size": tokenizer.vocab_size,
            "seq_len": SEQ_LEN,
            "format": FORMAT,
            "objective": OBJECTIVE + " (dynamic masking)",
            "pretrain_steps": args.steps,
            "tokens_per_step": TOKENS_PER_STEP,
            "held_out_examples": len(held_out[0]),
            **finetune_setup(args, TASKS),
            "seconds": round(time.perf_counter() - started),
        },
        "paper": [{"L": L, "H": H, "A": A, **v} for (L, H, A), v in PAPER.items()],
        "rows": rows,
    }
    print("wrote", save_results("ch03_model_size", results))


if __name__ == "__main__":
    main()
