"""Issue 29, through the real command lines (and the API where it is the API): every family's settings have a range
checked before any run directory is made or data read, a model that reads another checks its family first,
DistilBERT fine-tunes on sentence pairs, fine-tuning is reproducible and records its model, a resumed run keeps its
objective's settings, and a Ctrl-C is the same documented exit in both CLIs."""

import dataclasses
import json
import math
import shutil
import typing

import pytest
from test_runs import cli, one_error, train_losses

from minilm.models import GPT, GPTConfig, from_pretrained, student_from_teacher
from minilm.objectives.denoising import poisson_span_lengths
from minilm.objectives.span_corruption import random_spans_helper
from minilm.ranges import MODEL_RANGES, OBJECTIVE_RANGES
from minilm.train import registry
from minilm.train.config import ConfigError

SMALL = ["corpus=tinyshakespeare", "vocab_size=300", "seq_len=32", "batch_size=8", "eval_every=0"]
SMALL += ["sample_tokens=0", "progress=false", "threads=1", "model.d_model=32", "model.n_heads=2"]
GPT_RUN = ["--model", "gpt", "--objective", "clm", *SMALL, "model.n_layers=1", "max_steps=2"]
BERT_RUN = ["--model", "bert", "--objective", "mlm", *SMALL, "model.n_layers=1", "model.d_ff=64", "max_steps=2"]
ELECTRA_RUN = ["--model", "electra", "--objective", "rtd", *SMALL, "model.n_layers=2", "model.d_ff=64"]
ELECTRA_RUN += ["embedding_size=16", "max_steps=2"]
FINETUNE = ["--task", "sst2", "max_train_examples=32", "max_eval_examples=16", "max_steps=3", "batch_size=8"]
FINETUNE += ["warmup_steps=1", "log_every=1", "eval_every=0", "progress=false", "threads=1", "max_length=32"]
SCRATCH = ["vocab_size=300", "model.n_layers=1", "model.d_model=32", "model.n_heads=2"]


def a_run(tmp_path_factory, name: str, argv: list[str]):
    run_dir = tmp_path_factory.mktemp(name) / "run"
    code, _, err = cli(*argv, f"run_dir={run_dir}")
    assert code == 0, err
    return run_dir


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory):
    return a_run(tmp_path_factory, "gpt", GPT_RUN)


@pytest.fixture(scope="module")
def bert_run(tmp_path_factory):
    return a_run(tmp_path_factory, "bert", BERT_RUN)


@pytest.fixture(scope="module")
def electra_run(tmp_path_factory):
    return a_run(tmp_path_factory, "electra", ELECTRA_RUN)


def refused(code: int, err: str, run_dir, *expected: str) -> str:
    """A failure before anything was made: exit 2, one ``error:`` line holding ``expected``, no run directory."""
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert all(text in lines[0] for text in expected), lines[0]
    assert not run_dir.exists(), "the run directory was made before the setting was checked"
    return lines[0]


# ---------------------------------------------------------------------------------------------- ranges


def numeric_fields(config_class) -> list[str]:
    """The int and float fields of a config (``X | None`` too), not bools."""
    hints = typing.get_type_hints(config_class)
    numeric = {int, float, int | None, float | None}
    return [f.name for f in dataclasses.fields(config_class) if hints[f.name] in numeric]


def test_every_numeric_setting_of_every_family_has_a_range():
    for name, entry in registry.models().items():
        missing = set(numeric_fields(entry.config_class)) - MODEL_RANGES.keys()
        assert not missing, f"model {name}: {missing}"
    for name, entry in registry.objectives().items():
        if entry.config_class is not None:
            missing = set(numeric_fields(entry.config_class)) - OBJECTIVE_RANGES.keys()
            assert not missing, f"objective {name}: {missing}"


@pytest.mark.parametrize("model", sorted(registry.models()))
def test_every_models_dropout_outside_0_1_is_a_config_error(model):
    entry = registry.get_model(model)
    for key in {"dropout", "attention_dropout", "classifier_dropout"} & set(numeric_fields(entry.config_class)):
        for value in ("-0.1", "1.5", "nan"):
            with pytest.raises(ConfigError, match=rf"model: {key} must be in \[0, 1\), got"):
                registry.model_config(entry, "tiny", 300, {key: value})


@pytest.mark.parametrize("objective", sorted(registry.objectives()))
def test_every_objective_setting_out_of_range_is_a_config_error(objective):
    entry = registry.get_objective(objective)
    for key in numeric_fields(entry.config_class) if entry.config_class else []:
        for value in ("-1", "nan"):
            with pytest.raises(ConfigError, match=key):
                registry.objective_config(
                    entry, {key: value, "teacher": "t"} if objective == "distill" else {key: value}
                )


def test_the_objective_functions_refuse_degenerate_settings():
    with pytest.raises(ValueError, match="poisson_lambda=1e-12 must be a finite number >= 0.1"):
        poisson_span_lengths(100, 1e-12)  # it sized an array of budget/λ draws: 36 TB for BART's budget
    with pytest.raises(ValueError, match="inputs_length=2 is too short for span corruption.*at least 3 tokens"):
        random_spans_helper(2)
    assert random_spans_helper(3) == (2, 1)  # the shortest inputs that leave a text to corrupt


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--model", "bart", "--objective", "denoise", "model.dropout=1.5"], "model: dropout must be in [0, 1)"),
        (["--model", "albert", "--objective", "mlm+sop", "model.attention_dropout=-0.1"], "attention_dropout must"),
        (["--model", "t5", "--objective", "span_corruption", "model.dropout=2"], "model: dropout must be in [0, 1)"),
        (["--model", "bart", "--objective", "denoise", "poisson_lambda=1e-12"], "poisson_lambda=1e-12 must be"),
        (["--model", "bart", "--objective", "denoise", "seq_len=2"], "seq_len=2 is too short for denoising"),
        (["--model", "t5", "--objective", "span_corruption", "seq_len=2"], "seq_len=2: inputs_length=2 is too short"),
        (["--model", "electra", "--objective", "rtd", "mask_prob=0"], "mask_prob"),
    ],
    ids=[
        "bart-dropout",
        "albert-attention-dropout",
        "t5-dropout",
        "poisson-lambda",
        "bart-seq-len",
        "t5-seq-len",
        "mp",
    ],
)
def test_bad_settings_are_refused_before_the_run_directory(argv, expected, tmp_path):
    run_dir = tmp_path / "run"
    code, _, err = cli(*argv, "corpus=tinyshakespeare", "vocab_size=300", "max_steps=1", f"run_dir={run_dir}")
    refused(code, err, run_dir, expected)


def test_fine_tuning_refuses_a_classifier_dropout_outside_0_1(tmp_path):
    run_dir = tmp_path / "run"
    argv = [*FINETUNE, "--model", "albert", *SCRATCH, "model.classifier_dropout=-0.5", f"run_dir={run_dir}"]
    code, _, err = cli(*argv, module="minilm.finetune")
    refused(code, err, run_dir, "classifier_dropout must be in [0, 1), got -0.5")


# ---------------------------------------------------------------------------------------------- families


def test_distilbert_fine_tunes_on_sentence_pairs(tmp_path):
    """BERT's tokenizer marks sentence B with token type 1, which DistilBERT (no segment embeddings) ignores."""
    run_dir = tmp_path / "run"
    argv = [*FINETUNE, "--task", "rte", "--model", "distilbert", *SCRATCH, "model.d_ff=64", f"run_dir={run_dir}"]
    code, out, err = cli(*argv, module="minilm.finetune")
    assert code == 0, err
    results = json.loads((run_dir / "results.json").read_text())
    assert results["model"] == "distilbert" and results["task"] == "rte" and results["step"] == 3


def test_a_teacher_of_another_family_is_named_before_any_data(gpt_run, tmp_path):
    run_dir = tmp_path / "run"
    argv = ["--model", "distilbert", "--objective", "distill", f"teacher={gpt_run}", *SMALL, f"run_dir={run_dir}"]
    code, _, err = cli(*argv)
    refused(code, err, run_dir, f"teacher={gpt_run} is a gpt run", "families that can teach: bert, distilbert")


def test_a_hugging_face_teacher_of_another_family_is_named_from_its_config(tmp_path):
    from minilm.recipes.distilbert import check_teacher_family

    GPT(GPTConfig(vocab_size=50, max_len=8, n_layers=1, n_heads=2, d_model=16)).save_pretrained(tmp_path / "gpt2")
    with pytest.raises(ConfigError, match="is a gpt2 Hugging Face folder: a DistilBERT student learns from a BERT"):
        check_teacher_family(str(tmp_path / "gpt2"))


def test_student_from_teacher_names_the_teachers_family():
    with pytest.raises(ValueError, match="not of a GPT \\(GPTConfig\\): only BERT-family encoders can teach"):
        student_from_teacher(GPT(GPTConfig(vocab_size=50, max_len=8, n_layers=2, n_heads=2, d_model=16)))


@pytest.mark.parametrize("model", ["bart", "t5", "bert"])
def test_lm_weight_is_refused_where_there_is_no_causal_lm(model, tmp_path):
    run_dir = tmp_path / "run"
    code, _, err = cli(*FINETUNE, "--model", model, "lm_weight=0.5", f"run_dir={run_dir}", module="minilm.finetune")
    refused(code, err, run_dir, f"lm_weight=0.5 adds a causal LM loss, and {model}", "set lm_weight=0")


def test_text_to_text_on_an_encoder_names_every_encoder_decoder(tmp_path):
    argv = ["--task", "squad2_gen", "--model", "bert", "max_train_examples=8", f"run_dir={tmp_path / 'run'}"]
    code, _, err = cli(*argv, module="minilm.finetune")
    assert "needs an encoder-decoder model (bart, t5)" in one_error(code, err, 2)


# ---------------------------------------------------------------------------------------------- fine-tuning


def test_fine_tuning_twice_logs_identical_losses(gpt_run, tmp_path):
    """The head and GPT's new input rows are drawn after seeding with train.seed: the same command, the same run."""
    losses = []
    for name in ("first", "second"):
        run_dir = tmp_path / name
        code, _, err = cli(*FINETUNE, f"--pretrained={gpt_run}", f"run_dir={run_dir}", module="minilm.finetune")
        assert code == 0, err
        losses.append(train_losses(run_dir))
    assert len(losses[0]) == 3 and losses[0] == losses[1]
    assert all(math.isfinite(loss) for loss in losses[0].values())


def test_fine_tuning_records_the_pretrained_model_and_refuses_another(bert_run, tmp_path):
    run_dir = tmp_path / "run"
    code, _, err = cli(*FINETUNE, f"--pretrained={bert_run}", f"run_dir={run_dir}", module="minilm.finetune")
    assert code == 0, err
    recorded = json.loads((run_dir / "config.json").read_text())["job"]
    assert (recorded["model"], recorded["size"]) == ("bert", "")  # the body's model; its size is its own, not "tiny"
    other = tmp_path / "other"
    argv = [*FINETUNE, f"--pretrained={bert_run}", "--model", "gpt", f"run_dir={other}"]
    code, _, err = cli(*argv, module="minilm.finetune")
    refused(code, err, other, f"--pretrained {bert_run} is a bert run, which brings its own model: drop --model gpt")
    # a fine-tuning run is no pretrained body: said so, with the run it started from
    again = tmp_path / "again"
    code, _, err = cli(*FINETUNE, f"--pretrained={run_dir}", f"run_dir={again}", module="minilm.finetune")
    line = one_error(code, err, 1)
    assert f"--pretrained {run_dir} is a fine-tuning run (task sst2)" in line and f"--pretrained {bert_run}" in line
    assert not again.exists()


def test_from_pretrained_on_a_run_directory_says_how_runs_load(gpt_run):
    with pytest.raises(Exception, match=r"is a minilm run .* minilm\.finetune\.model\.from_pretrained"):
        from_pretrained(gpt_run)


# ---------------------------------------------------------------------------------------------- resume


@pytest.mark.parametrize(
    "change, recorded",
    [
        ("share=none", "share=embeddings, not none"),
        ("generator_size=0.5", "generator_size=0.25, not 0.5"),
        ("rtd_weight=5", "rtd_weight=50.0, not 5.0"),
    ],
)
def test_resuming_with_other_objective_settings_is_refused(change, recorded, electra_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(electra_run, run_dir)
    saved = (run_dir / "config.json").read_text()
    code, _, err = cli("--resume", run_dir, change, "max_steps=4")
    line = one_error(code, err, 2)
    assert f"--resume {run_dir} was trained with {recorded}" in line and "start a new run" in line, line
    assert (run_dir / "config.json").read_text() == saved  # the record still says what trained every step
    code, out, err = cli("--resume", run_dir, "max_steps=3")  # the same settings go on
    assert code == 0 and "at step 2" in out, err


def test_ctrl_c_is_the_same_exit_in_both_clis(tmp_path):
    run_dir = tmp_path / "run"
    argv = [*FINETUNE, "--model", "gpt", *SCRATCH, "max_steps=6", "save_every=2", f"run_dir={run_dir}"]
    code, _, err = cli(*argv, module="minilm.finetune", moment="step", at=4)
    assert code == 130 and "Traceback" not in err, err
    assert err.strip().startswith("interrupted at step 4; saved") and f"--resume {run_dir}" in err, err
