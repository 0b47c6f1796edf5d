"""Chapter 3, a miniature of BERT's Table 7 (Devlin et al. 2019): feature-based vs fine-tuning on a tagging task.

The paper tags CoNLL-2003 named entities with BERT_BASE fine-tuned (96.4 dev F1) or frozen, feeding a BiLSTM with
the embeddings (91.0), the second-to-last hidden layer (95.6), the last (94.9), the sum of the last four (95.9) or
their concatenation (96.1). Here the tiny BERT pretrained by experiments/ch03_pretraining_ablation.py (MLM + NSP,
past the plateau; reused from runs/ch03/ or pretrained again) tags UD English-EWT parts of speech, with a linear head
on its frozen features (no BiLSTM), against fine-tuning the whole model; every row once for each of three seeds,
scored on the test split. A frozen *untrained* BERT is the floor: what a linear head gets from random features.

    nice -n 5 python experiments/ch03_feature_based.py      # ~15 minutes on 2 CPU cores (plus ~15 to pretrain)

writes experiments/results/ch03_feature_based.json.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.ch03_pretraining_ablation import (  # noqa: E402
    FINETUNE,
    SEEDS,
    SIZE,
    VARIANTS,
    over_seeds,
    pretrain,
    run_name,
)
from experiments.common import begin, save_results  # noqa: E402
from minilm.utils import reproducible  # noqa: E402

TASK = "ud_pos"
FROZEN_LR = 2e-3  # a linear head alone takes a larger learning rate than the whole model (5e-4)
# row -> FinetuneConfig options; the paper's Table 7 rows, in its order
ROWS = {
    "fine-tuning (all parameters)": {},
    "feature-based: embeddings": dict(freeze_body=True, features="embeddings"),
    "feature-based: second-to-last hidden": dict(freeze_body=True, features="second_to_last"),
    "feature-based: last hidden": dict(freeze_body=True, features="last"),
    "feature-based: weighted sum of all layers": dict(freeze_body=True, features="weighted_all"),
    "feature-based: sum last four hidden": dict(freeze_body=True, features="sum_last_four"),
    "feature-based: concat last four hidden": dict(freeze_body=True, features="concat_last_four"),
}


def main() -> None:
    begin()
    reproducible(seed=0, threads=2)
    start = time.perf_counter()
    name, model, objective, settings = VARIANTS[0]  # BERT (MLM + NSP)
    run_dir = pretrain(model, objective, run_name(model, objective))
    table = {}
    for row, options in ROWS.items():
        lr = FROZEN_LR if options.get("freeze_body") else FINETUNE.lr
        table[row] = over_seeds(str(run_dir), TASK, "accuracy", lr=lr, **options)
    table["frozen untrained BERT: last hidden"] = over_seeds(
        "", TASK, "accuracy", lr=FROZEN_LR, freeze_body=True, features="last"
    )
    results = {
        "task": TASK,
        "metric": "accuracy",
        "pretrained": f"{name}, {SIZE}",
        "learning_rates": {"fine-tuning": FINETUNE.lr, "feature-based (head only)": FROZEN_LR},
        "pretraining": json.loads((run_dir / "plateau.json").read_text()),
        "finetuning_seeds": list(SEEDS),
        "eval": "UD English-EWT's test split",
        "table": table,
        "paper_conll2003_dev_f1": {
            "fine-tuning (all parameters)": 96.4,
            "feature-based: embeddings": 91.0,
            "feature-based: second-to-last hidden": 95.6,
            "feature-based: last hidden": 94.9,
            "feature-based: weighted sum of all layers": 95.5,
            "feature-based: sum last four hidden": 95.9,  # the paper's is a weighted sum of the last four
            "feature-based: concat last four hidden": 96.1,
        },
        "seconds": round(time.perf_counter() - start),
    }
    print(f"saved {save_results('ch03_feature_based', results)} ({results['seconds']} s)")


if __name__ == "__main__":
    main()
