"""Task heads: pooling, classification/regression, token labels, SQuAD spans, multiple choice."""

import pytest
import torch
import torch.nn.functional as F

from minilm.heads import (
    IGNORE_INDEX,
    NO_ANSWER,
    MultipleChoiceHead,
    SequenceClassificationHead,
    SpanExtractionHead,
    TokenClassificationHead,
    align_labels_to_tokens,
    best_span,
    classification_loss,
    pool,
    regression_loss,
    word_predictions,
)

# --- pooling ---


@pytest.fixture
def padded():
    """Two rows of T = 4, C = 2: position t of row b holds [10 * b + t, -(10 * b + t)]."""
    values = torch.tensor([[0.0, 1, 2, 3], [10, 11, 12, 13]])  # (B, T)
    hidden = torch.stack([values, -values], dim=-1)  # (B, T, C)
    right = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])  # real tokens first
    left = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]])  # real tokens last
    return hidden, right, left


def test_pool_right_padding(padded):
    hidden, right, _ = padded
    assert pool(hidden, right, "first").tolist() == [[0, 0], [10, -10]]
    assert pool(hidden, right, "last").tolist() == [[2, -2], [11, -11]]
    assert pool(hidden, right, "mean").tolist() == [[1, -1], [10.5, -10.5]]


def test_pool_left_padding(padded):
    hidden, _, left = padded
    assert pool(hidden, left, "first").tolist() == [[1, -1], [12, -12]]
    assert pool(hidden, left, "last").tolist() == [[3, -3], [13, -13]]
    assert pool(hidden, left, "mean").tolist() == [[2, -2], [12.5, -12.5]]


def test_pool_without_mask_uses_every_position(padded):
    hidden, _, _ = padded
    assert pool(hidden, None, "first").tolist() == [[0, 0], [10, -10]]
    assert pool(hidden, None, "last").tolist() == [[3, -3], [13, -13]]
    assert pool(hidden, None, "mean").tolist() == [[1.5, -1.5], [11.5, -11.5]]


def test_pool_errors(padded):
    hidden, right, _ = padded
    with pytest.raises(ValueError, match="unknown pooling"):
        pool(hidden, right, "max")
    with pytest.raises(ValueError, match=r"\(B, T, C\)"):
        pool(hidden[0], right, "first")
    with pytest.raises(ValueError, match="attention_mask must be"):
        pool(hidden, right[:, :3], "first")
    with pytest.raises(ValueError, match="no real token"):
        pool(hidden, torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]]), "mean")


# --- sequence classification / regression ---


def test_classification_shapes_and_loss_equal_cross_entropy():
    head = SequenceClassificationHead(8, n_labels=3, hidden_layer=True)
    hidden, mask = torch.randn(4, 5, 8), torch.ones(4, 5, dtype=torch.long)
    logits = head(hidden, mask)
    assert logits.shape == (4, 3)
    labels = torch.tensor([0, 2, 1, 2])
    torch.testing.assert_close(head.loss(logits, labels), F.cross_entropy(logits, labels))


def test_regression_head_loss_equals_mse():
    head = SequenceClassificationHead(8, n_labels=1, pooling="mean")
    logits = head(torch.randn(4, 5, 8))
    assert logits.shape == (4, 1)
    targets = torch.tensor([0.5, 1.0, -2.0, 3.0])
    torch.testing.assert_close(head.loss(logits, targets), F.mse_loss(logits.squeeze(-1), targets))
    torch.testing.assert_close(regression_loss(logits, targets), F.mse_loss(logits[:, 0], targets))


def test_classification_head_overfits_a_separable_problem():
    torch.manual_seed(0)
    hidden = torch.randn(32, 6, 16)
    labels = (hidden[:, -1, 0] > 0).long() + (hidden[:, -1, 1] > 0).long()  # 3 classes, from the last token
    mask = torch.ones(32, 6, dtype=torch.long)
    head = SequenceClassificationHead(16, n_labels=3, pooling="last", dropout=0.0)
    opt = torch.optim.AdamW(head.parameters(), lr=0.05)
    first = None
    for _ in range(150):
        loss = head.loss(head(hidden, mask), labels)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.2 * first
    assert (head(hidden, mask).argmax(-1) == labels).float().mean() > 0.95


def test_bad_labels_are_reported():
    head = SequenceClassificationHead(8, n_labels=3)
    logits = head(torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match="label 5 is outside the task's 3 labels"):
        head.loss(logits, torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="label -2 is outside"):
        head.loss(logits, torch.tensor([-2, 0]))
    with pytest.raises(ValueError, match="must be integers"):
        head.loss(logits, torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="do not match"):
        head.loss(logits, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="d_model = 8"):
        head(torch.randn(2, 4, 6))
    with pytest.raises(ValueError, match="unknown pooling"):
        SequenceClassificationHead(8, 3, pooling="cls")


# --- token classification ---


def test_align_labels_hand_worked():
    word_ids = [None, 0, 0, 1, 2, 2, None]
    assert align_labels_to_tokens([3, 5, 7], word_ids) == [-100, 3, -100, 5, 7, -100, -100]
    assert align_labels_to_tokens([3, 5, 7], word_ids, label_all_subwords=True) == [-100, 3, 3, 5, 7, 7, -100]
    padded = [None, 0, 1, 1, None, None, None]
    assert align_labels_to_tokens([4, 2], padded) == [-100, 4, 2, -100, -100, -100, -100]
    with pytest.raises(ValueError, match="word 2"):
        align_labels_to_tokens([3, 5], word_ids)


def test_word_predictions_round_trip():
    word_ids = [None, 0, 0, 1, 2, 2, 2, 3, None, None]
    word_labels = [1, 0, 4, 2]
    token_labels = align_labels_to_tokens(word_labels, word_ids)
    assert word_predictions(token_labels, word_ids) == word_labels
    token_predictions = torch.tensor([9, 1, 8, 0, 4, 7, 7, 2, 9, 9])  # later sub-words and specials disagree
    assert word_predictions(token_predictions, word_ids) == word_labels


def test_token_head_shapes_and_loss_ignores_unlabelled_tokens():
    head = TokenClassificationHead(8, n_labels=5, dropout=0.0)
    logits = head(torch.randn(2, 7, 8))
    assert logits.shape == (2, 7, 5)
    labels = torch.tensor([align_labels_to_tokens([3, 1, 4], [None, 0, 0, 1, 2, 2, None])] * 2)
    keep = labels != IGNORE_INDEX
    torch.testing.assert_close(head.loss(logits, labels), F.cross_entropy(logits[keep], labels[keep]))
    labels[0, 1] = 5
    with pytest.raises(ValueError, match="label 5 is outside the task's 5 labels"):
        head.loss(logits, labels)


# --- span extraction ---


def brute_force_best_span(start, end, context, max_len, null_index, threshold):
    best, best_score = None, float("-inf")
    T = len(start)
    for i in range(T):
        for j in range(i, min(T, i + max_len)):
            if context[i] and context[j] and start[i] + end[j] > best_score:
                best, best_score = (i, j), start[i] + end[j]
    if best is None or (null_index is not None and not best_score > start[null_index] + end[null_index] + threshold):
        return None
    return best


def test_best_span_hand_computed():
    # [CLS] q  [SEP] c0  c1  c2  c3 [SEP]
    start = torch.tensor([0.0, 9, 0, 1, 5, 2, 0, 0])
    end = torch.tensor([0.0, 9, 0, 4, 1, 3, 5, 0])
    context = torch.tensor([0, 0, 0, 1, 1, 1, 1, 0])
    # (1, 1) scores 9 + 9 but the question is not context; best in context: start 4 (5) + end 6 (5) = 10
    assert best_span(start, end, context) == (4, 6)
    assert best_span(start, end, context, max_answer_length=2) == (4, 5)  # 5 + 3 = 8 beats (5, 6) = 7
    assert best_span(start, end, context, max_answer_length=1) == (4, 4)  # 5 + 1 = 6 beats 5, 5, 5
    assert best_span(start, end, torch.zeros(8)) is None


def test_best_span_never_ends_before_it_starts():
    start = torch.tensor([0.0, 0, 9, 0])
    end = torch.tensor([0.0, 9, 0, 1])
    # (2, 1) would score 18; the valid spans score at most (2, 3) = 10 ((1, 1) and (2, 2) score 9)
    assert best_span(start, end, torch.tensor([0, 1, 1, 1])) == (2, 3)


def test_best_span_null_score_and_threshold():
    start = torch.tensor([4.0, 0, 3, 1, 0])
    end = torch.tensor([4.0, 0, 1, 3, 0])
    context = torch.tensor([0, 0, 1, 1, 1])
    assert best_span(start, end, context) is None  # null 8 > best span 3 + 3 = 6
    assert best_span(start, end, context, null_threshold=-2.5) == (2, 3)  # 6 > 8 - 2.5
    assert best_span(start, end, context, null_threshold=-2.0) is None  # 6 is not > 6
    assert best_span(start, end, context, null_index=None) == (2, 3)
    start[0] = end[0] = 2.0
    assert best_span(start, end, context) == (2, 3)  # 6 > 4
    assert best_span(start, end, context, null_threshold=3.0) is None


@pytest.mark.parametrize("seed", range(40))
def test_best_span_matches_brute_force(seed):
    g = torch.Generator().manual_seed(seed)
    T = int(torch.randint(1, 40, (), generator=g))
    start, end = torch.randn(T, generator=g) * 3, torch.randn(T, generator=g) * 3
    context = torch.rand(T, generator=g) < 0.7
    max_len = int(torch.randint(1, 12, (), generator=g))
    null_index = None if seed % 4 == 0 else 0
    threshold = float(torch.randn((), generator=g))
    expected = brute_force_best_span(start.tolist(), end.tolist(), context.tolist(), max_len, null_index, threshold)
    assert best_span(start, end, context, max_len, null_index, threshold) == expected


def test_span_head_shapes_loss_and_no_answer():
    head = SpanExtractionHead(8)
    start_logits, end_logits = head(torch.randn(3, 6, 8))
    assert start_logits.shape == end_logits.shape == (3, 6)
    starts, ends = torch.tensor([2, NO_ANSWER, 4]), torch.tensor([3, NO_ANSWER, 4])
    expected = (
        F.cross_entropy(start_logits, torch.tensor([2, 0, 4])) + F.cross_entropy(end_logits, torch.tensor([3, 0, 4]))
    ) / 2
    torch.testing.assert_close(head.loss(start_logits, end_logits, starts, ends), expected)
    last = SpanExtractionHead(8, null_index=5)  # e.g. a model whose summary token comes last
    expected = (
        F.cross_entropy(start_logits, torch.tensor([2, 5, 4])) + F.cross_entropy(end_logits, torch.tensor([3, 5, 4]))
    ) / 2
    torch.testing.assert_close(last.loss(start_logits, end_logits, starts, ends), expected)
    with pytest.raises(ValueError, match="label 6 is outside the task's 6 labels"):
        head.loss(start_logits, end_logits, starts, torch.tensor([3, 6, 4]))


# --- multiple choice ---


def test_multiple_choice_reshapes_one_score_per_choice():
    head = MultipleChoiceHead(8, dropout=0.0, pooling="mean")
    B, n, T = 2, 4, 5
    hidden = torch.randn(B * n, T, 8)
    mask = torch.ones(B * n, T, dtype=torch.long)
    mask[3, 2:] = 0
    logits = head(hidden, mask, n_choices=n)
    assert logits.shape == (B, n)
    one = head(hidden[3:4, :2], n_choices=1)  # choice 3 of example 0 on its own, padding cut off
    torch.testing.assert_close(logits[0, 3], one[0, 0])
    labels = torch.tensor([3, 1])
    torch.testing.assert_close(head.loss(logits, labels), F.cross_entropy(logits, labels))
    with pytest.raises(ValueError, match="groups of n_choices = 3"):
        head(hidden, mask, n_choices=3)
    with pytest.raises(ValueError, match="label 4 is outside the task's 4 labels"):
        head.loss(logits, torch.tensor([4, 0]))


# --- gradients ---


def test_gradients_flow_to_hidden_states_and_head():
    hidden = torch.randn(4, 5, 8, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 0, 0, 0, 0]])
    heads = [
        (SequenceClassificationHead(8, 3, pooling="mean", hidden_layer=True), lambda h: h(hidden, mask).sum()),
        (TokenClassificationHead(8, 3), lambda h: h(hidden).sum()),
        (SpanExtractionHead(8), lambda h: sum(x.sum() for x in h(hidden))),
        (MultipleChoiceHead(8, pooling="last"), lambda h: h(hidden, mask, n_choices=2).sum()),
    ]
    for head, objective in heads:
        hidden.grad = None
        objective(head).backward()
        assert hidden.grad.abs().sum() > 0
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())
    pooled = torch.randn(4, 5, 8, requires_grad=True)
    pool(pooled, mask, "mean").sum().backward()
    assert (pooled.grad[..., 0] == (mask / mask.sum(1, keepdim=True))).all()  # padding gets no gradient


def test_classification_loss_skips_ignore_index():
    logits, labels = torch.randn(3, 4), torch.tensor([1, IGNORE_INDEX, 3])
    torch.testing.assert_close(classification_loss(logits, labels), F.cross_entropy(logits[[0, 2]], labels[[0, 2]]))


# --- parity with transformers' BERT heads ---


@pytest.fixture(scope="module")
def tiny_bert_config():
    transformers = pytest.importorskip("transformers")
    return transformers, dict(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )


def test_parity_with_bert_for_sequence_classification(tiny_bert_config):
    transformers, kw = tiny_bert_config
    bert = transformers.BertForSequenceClassification(transformers.BertConfig(num_labels=3, **kw)).eval()
    head = SequenceClassificationHead(16, 3, pooling="first", hidden_layer=True).eval()
    head.dense.load_state_dict(bert.bert.pooler.dense.state_dict())
    head.classifier.load_state_dict(bert.classifier.state_dict())
    input_ids = torch.randint(0, 50, (2, 7))
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    with torch.no_grad():
        out = bert(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
        torch.testing.assert_close(head(out.hidden_states[-1], mask), out.logits)


def test_parity_with_bert_for_question_answering(tiny_bert_config):
    transformers, kw = tiny_bert_config
    bert = transformers.BertForQuestionAnswering(transformers.BertConfig(**kw)).eval()
    head = SpanExtractionHead(16)
    head.qa_outputs.load_state_dict(bert.qa_outputs.state_dict())
    input_ids = torch.randint(0, 50, (3, 9))
    starts, ends = torch.tensor([2, 0, 5]), torch.tensor([4, 0, 5])
    with torch.no_grad():
        out = bert(input_ids=input_ids, start_positions=starts, end_positions=ends, output_hidden_states=True)
        start_logits, end_logits = head(out.hidden_states[-1])
        torch.testing.assert_close(start_logits, out.start_logits)
        torch.testing.assert_close(end_logits, out.end_logits)
        torch.testing.assert_close(head.loss(start_logits, end_logits, starts, ends), out.loss)
