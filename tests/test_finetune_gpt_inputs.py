"""GPT's fine-tuning (Radford et al. 2018, §3.3): input transformations and the auxiliary LM loss L3 = L2 + λ·L1."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from minilm.data.examples import ChoiceExample, PairExample, SentenceExample
from minilm.data.tasks import TASKS
from minilm.finetune.cli import run
from minilm.finetune.config import DEFAULT_TRAIN, FinetuneConfig
from minilm.finetune.kinds import TaskEncoder, task_kind
from minilm.finetune.model import (
    GPT_DELIM,
    GPT_EXTRACT,
    GPT_START,
    FinetuneModel,
    apply_input_format,
    auto_pooling,
    from_scratch,
    gpt_inputs,
)
from minilm.models.gpt import GPT, GPTConfig
from minilm.tokenizers import train_tokenizer
from minilm.train.config import ConfigError

TEXTS = ["the film was good and fun", "the plot was dull", "a great actor in a bad scene", "it rained"] * 5
TINY = {"n_layers": 2, "d_model": 16, "n_heads": 2, "max_len": 48}


def gpt_body(input_format="gpt", name="gpt", **overrides):
    body = from_scratch(name, "tiny", {**TINY, **overrides}, TEXTS, 300, None)
    apply_input_format(body, input_format)
    return body


def test_gpt_inputs_wrap_texts_in_start_delimiter_and_extract_tokens():
    body = gpt_body()
    tok = body.tokenizer
    start, delim, extract = (tok.token_to_id(t) for t in (GPT_START, GPT_DELIM, GPT_EXTRACT))
    a, b = tok.encode("the film", add_special_tokens=False), tok.encode("was dull", add_special_tokens=False)
    assert tok.encode("the film") == [start, *a, extract]  # classification
    assert tok.encode("the film", "was dull") == [start, *a, delim, *b, extract]  # entailment: premise $ hypothesis
    assert [start, delim, extract] == list(range(300, 303))  # new ids after the trained vocabulary ...
    assert body.model.config.vocab_size == tok.vocab_size == 303  # ... with embedding rows of their own
    assert gpt_inputs(tok).vocab_size == 303  # applying it again adds nothing
    assert auto_pooling(tok, "gpt") == "last"  # the extract token's state feeds the head
    long = tok(["the film was good " * 20], ["the plot was dull " * 20], max_length=24).input_ids[0]
    assert len(long) == 24 and long[0] == start and long[-1] == extract and delim in long  # longest-first truncation


def test_auto_pooling_reads_the_last_position_of_decoders_and_encoder_decoders():
    bert = train_tokenizer(TEXTS, "bert", vocab_size=300)
    gpt2 = gpt_body("template").tokenizer
    assert auto_pooling(bert, "template", "encoder") == "first"  # [CLS], trained as the summary
    assert auto_pooling(gpt2, "template", "encoder") == "last"  # a template without a leading special token
    assert auto_pooling(bert, "template", "decoder") == "last"  # a causal decoder's last position read everything
    assert auto_pooling(bert, "template", "encoder-decoder") == "last"  # BART: the decoder's final token


def test_template_inputs_leave_the_body_alone():
    body = gpt_body("template")
    assert body.tokenizer.vocab_size == body.model.config.vocab_size == 300
    assert body.tokenizer.token_to_id(GPT_START) is None


def test_resizing_keeps_old_rows_and_ties_the_head():
    model = GPT(GPTConfig(vocab_size=10, max_len=8, n_layers=1, n_heads=2, d_model=8))
    old = model.embedding.token.weight.detach().clone()
    model.resize_token_embeddings(13)
    assert torch.equal(model.embedding.token.weight[:10], old) and model.config.vocab_size == 13
    assert model.lm_head.weight is model.embedding.token.weight
    assert model(torch.tensor([[12, 3]])).shape == (1, 2, 13)
    with pytest.raises(ValueError, match="cannot shrink"):
        model.resize_token_embeddings(5)


def pair_model(task, both_orders):
    body = gpt_body(dropout=0.0)
    kind = task_kind(TASKS[task])
    encoder = TaskEncoder(body.tokenizer, 48, "last", both_orders=both_orders)
    model = FinetuneModel(body, kind.head(16, "last"), kind, lm_weight=0.0).eval()
    return model, kind, encoder


def pair_logits(model, kind, encoder, a, b):
    batch = kind.collate(kind.encode_examples([PairExample(a, b, 1)], encoder))
    with torch.no_grad():
        return model(batch)[0]


def test_similarity_reads_both_orders_and_sums_them():
    a, b = "the film was good and fun", "a great actor"
    model, kind, encoder = pair_model("mrpc", both_orders=True)
    (encoded,) = kind.encode_examples([PairExample(a, b, 1)], encoder)
    tok = encoder.tokenizer
    assert encoded.input_ids == [tok.encode(a, b), tok.encode(b, a)]  # (a, b) and (b, a)
    torch.testing.assert_close(pair_logits(model, kind, encoder, a, b), pair_logits(model, kind, encoder, b, a))
    one_way = dataclasses.replace(encoder, both_orders=False)
    assert not torch.allclose(pair_logits(model, kind, one_way, a, b), pair_logits(model, kind, one_way, b, a))
    (rte,) = task_kind(TASKS["rte"]).encode_examples([PairExample(a, b, 1)], encoder)
    assert rte.input_ids == [tok.encode(a, b)]  # entailment has an order: one sequence


def test_multiple_choice_scores_each_option_as_its_own_sequence():
    tok = gpt_body().tokenizer
    kind = task_kind(TASKS["copa"])
    example = ChoiceExample(1, "it rained", "effect", ["the film", "the plot"], 0)
    (encoded,) = kind.encode_examples([example], TaskEncoder(tok, 48, "last"))
    assert encoded.input_ids == [tok.encode("it rained", "so the film"), tok.encode("it rained", "so the plot")]
    assert all(ids[-1] == tok.token_to_id(GPT_EXTRACT) for ids in encoded.input_ids)


def test_auxiliary_lm_loss_is_added_while_training_only():
    body = gpt_body(dropout=0.0)
    kind = task_kind(TASKS["sst2"])
    encoder = TaskEncoder(body.tokenizer, 48, "last")
    examples = [SentenceExample(t, i % 2) for i, t in enumerate(TEXTS[:4])]
    batch = kind.collate(kind.encode_examples(examples, encoder))
    model = FinetuneModel(body, kind.head(16, "last"), kind, lm_weight=0.5)
    model.head.dropout.p = 0.0
    logits, out = model.train()(batch)
    l3 = out.loss
    l2 = F.cross_entropy(logits, batch["labels"])
    lm_logits = body.model(batch["input_ids"])[:, :-1]  # (B, T-1, V): next-token predictions
    targets = batch["input_ids"][:, 1:].masked_fill(batch["attention_mask"][:, 1:] == 0, -100)  # padding skipped
    l1 = F.cross_entropy(lm_logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
    torch.testing.assert_close(l3, l2 + 0.5 * l1)
    torch.testing.assert_close(out.parts["task"], l2)  # the two parts, each a mean over its own units ...
    torch.testing.assert_close(out.parts["lm"], l1)
    assert out.weights == {"lm": 0.5}
    real = int((targets != -100).sum())  # ... the examples, and the tokens L1 predicts (padding predicts nothing)
    assert {k: int(v) for k, v in model.counts(batch).items()} == {"task": 4, "lm": real} and real < targets.numel()
    evaluation = model.eval()(batch)[1]
    torch.testing.assert_close(evaluation.loss, l2)  # evaluation reports the task loss
    assert evaluation.weights == {"lm": 0.0} and evaluation.parts.keys() == {"task", "lm"}
    l3.backward()
    assert body.model.embedding.token.weight.grad[302].abs().sum() > 0  # the extract token's new row learns


def test_lm_weight_needs_a_causal_lm_body_that_trains():
    body = gpt_body("template", name="bert")
    kind = task_kind(TASKS["sst2"])
    with pytest.raises(ConfigError, match="bert \\(encoder\\) is not a causal language model"):
        FinetuneModel(body, kind.head(16, "first"), kind, lm_weight=0.5)
    with pytest.raises(ConfigError, match="lm_weight must be >= 0"):
        FinetuneConfig(lm_weight=-1).validate()
    with pytest.raises(ConfigError, match="freeze_body=true keeps frozen"):
        FinetuneConfig(lm_weight=0.5, freeze_body=True).validate()
    with pytest.raises(ConfigError, match="cannot grow its vocabulary"):
        elmo = dict(n_layers=2, filters=((1, 8),), hidden_size=8, projection_dim=8)
        apply_input_format(from_scratch("elmo", "tiny", elmo, TEXTS, 300, None), "gpt")


@pytest.mark.parametrize("task", ["stsb", "copa"])
def test_gpt_fine_tuning_runs_end_to_end_with_the_auxiliary_loss(tmp_path, task):
    job = FinetuneConfig(task=task, max_train_examples=32, max_eval_examples=16, vocab_size=300, lm_weight=0.5)
    train = dataclasses.replace(DEFAULT_TRAIN, max_steps=3, batch_size=8, warmup_steps=1, progress=False, threads=1)
    results = run(job, dataclasses.replace(train, run_dir=str(tmp_path)), {**TINY, "max_len": 128})
    assert results["step"] == 3 and results["config"]["job"]["input_format"] == "auto"
    assert (tmp_path / "tokenizer").is_dir()
