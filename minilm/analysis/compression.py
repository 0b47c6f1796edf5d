"""Compressing a model by dynamic int8 quantization, and the three measures of a compressed model.

    small = quantize_dynamic(model)                                   # a copy; nn.Linear weights in int8
    row = compression_row("int8", model_size_bytes(model), model_size_bytes(small), 100.0, score, t_float, t_int8)
    row.compression, row.performance, row.speedup                     # x smaller, % of the score kept, x faster

BERT is overparametrized, and the second half of Rogers, Kovaleva & Rumshisky's survey ("A Primer in BERTology",
TACL 2020, §6) collects the ways to make it smaller: distillation, pruning, quantization. Its Table 1 compares
them by three numbers, all relative to the uncompressed model: **compression** (base size / compressed size),
**performance** (the compressed model's score as a % of the base model's) and **speed-up** (base inference time /
compressed time). :class:`CompressionRow` holds them, :func:`compression_row` computes them from the raw
measurements and :data:`SURVEY_ROWS` quotes a few of the survey's rows, to put a miniature beside.

Dynamic quantization (post-training; no data, no retraining) stores each ``nn.Linear`` weight W (out, in) as int8
with one scale per output row, ``s_i = max_j |W_ij| / 127.5`` (symmetric: zero point 0), so W ≈ s_i · q_ij. At run
time each input is quantized to unsigned integers with one scale computed from *that* input's min and max (hence
"dynamic": no calibration data), the product is accumulated in int32 and rescaled to float, and the bias is added in
float. The inputs get 7 bits with torch's x86 / fbgemm kernels (``reduce_range``: pairs of products then fit the
int16 sums of CPUs without VNNI instructions) and 8 with qnnpack; with one scale for a whole activation tensor, a
few large activations stretch the range of all the others, and much of the error comes from there. Zafrir et al.
(2019, "Q8BERT") quantize BERT's embeddings and fully connected layers to 8 bits symmetrically too, but *train* with
the quantization simulated; here the trained float model is converted as it is. Embeddings, LayerNorms and the
attention's softmax stay float: the Linear weights are most of an encoder's multiply-adds (not of its bytes when the
vocabulary is large: all-MiniLM-L6-v2's float token embedding is half of its 90.9 MB).

The engine is torch's own ``torch.ao.quantization.quantize_dynamic``. torch has marked ``torch.ao.quantization``
deprecated in favour of the separate torchao package, but torch 2.13 still ships it and it works on CPU (torchao is
not a dependency of this course); its deprecation warnings are silenced around the conversion. The int8 kernels
come from the quantized engine ``torch.backends.quantized.engine`` (x86 / fbgemm on Intel and AMD CPUs, qnnpack on
ARM): the weights are packed for the engine that is active when the model is converted and must be run under it.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear
from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig

ENGINES = ("x86", "fbgemm", "qnnpack")  # CPU engines with int8 dynamic Linear kernels, in order of preference
_PER_CHANNEL = (torch.per_channel_affine, torch.per_channel_symmetric)
QPARAM_BYTES = 16  # per scale of a quantized weight: a float64 scale and an int64 zero point, as torch stores them


# --- quantization -------------------------------------------------------------------------------------------------


def quantize_dynamic(model: nn.Module, *, skip: Iterable[str] = (), per_channel: bool = True) -> nn.Module:
    """A copy of ``model`` in eval mode whose ``nn.Linear`` layers compute in int8 (see the module docstring); the
    original is not modified.

    A Linear stays float when its name is in ``skip`` (names as in ``model.named_modules()``, e.g.
    ``"encoder.layers.5.ffn.fc2"``) or when its weight is **tied** to another module's parameter: BERT's MLM decoder
    *is* the token embedding matrix (``mlm_head.decoder.weight is embedding.token.weight``), and an int8 copy of it
    would untie the two and store the vocabulary matrix twice. So ``Bert``'s MLM decoder stays float, like the
    embedding it shares. ``per_channel=False``: one scale per weight matrix instead of one per output row (a little
    smaller, less accurate). Only exactly ``nn.Linear`` modules are converted (torch's mapping ignores subclasses).
    Run the copy on CPU, under the quantized engine that was active here (when none was, this sets
    ``torch.backends.quantized.engine`` to the first of ``ENGINES`` that torch supports).
    """
    skip = set(skip)
    linears = {name for name, module in model.named_modules() if type(module) is nn.Linear}
    unknown = sorted(skip - linears)
    if unknown:
        raise ValueError(f"skip names {unknown} are not nn.Linear modules of the model: use names of named_modules()")
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ValueError("dynamic int8 quantization runs on CPU: pass the model after .cpu()")
    _choose_engine()
    qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
    spec = {name: qconfig for name in sorted(linears - skip - _tied_linears(model))}
    with warnings.catch_warnings():  # torch.ao.quantization's deprecation notices (see the module docstring)
        warnings.filterwarnings("ignore", message=r".*(torch\.ao\.quantization|quantize_per_).*deprecated")
        return torch.ao.quantization.quantize_dynamic(model, spec)


def _tied_linears(model: nn.Module) -> set[str]:
    """Names of the nn.Linear modules whose weight is also a parameter of another module (weight tying)."""
    owners: dict[int, set[str]] = {}
    for name, module in model.named_modules(remove_duplicate=False):
        for parameter in module.parameters(recurse=False):
            owners.setdefault(id(parameter), set()).add(name)
    return {
        name
        for name, module in model.named_modules()
        if type(module) is nn.Linear and len(owners[id(module.weight)]) > 1
    }


def _choose_engine() -> None:
    """Keep the active quantized engine; when there is none, switch to the first of ENGINES this build supports."""
    supported = torch.backends.quantized.supported_engines
    if torch.backends.quantized.engine != "none":
        return
    available = [engine for engine in ENGINES if engine in supported]
    if not available:
        raise ValueError(f"this torch build has no int8 CPU engine ({supported}): install a CPU build with fbgemm")
    torch.backends.quantized.engine = available[0]


# --- size ---------------------------------------------------------------------------------------------------------


def model_size_bytes(model: nn.Module) -> int:
    """The bytes of the tensors in ``model.state_dict()``: what ``torch.save(model.state_dict(), ...)`` writes, less
    the file's container (its pickle, zip headers and 64-byte alignment: a few hundred bytes per tensor; 0.04 % more
    for all-MiniLM-L6-v2 in float, 0.14 % in int8).

    Each storage counts once, so a tied weight (BERT's MLM decoder and token embedding) counts once, as torch.save
    writes it once. A quantized weight counts as its int8 values plus ``QPARAM_BYTES`` per scale (one per output row,
    or one per matrix); a quantized Linear's bias stays float32, and its two unused output quantization parameters
    (a float32 scale and an int64 zero point, in every state dict) count too.
    """
    seen: set[int] = set()
    total = 0

    def add(value) -> None:
        nonlocal total
        if isinstance(value, (tuple, list)):  # a quantized Linear's packed params: (int8 weight, float bias or None)
            for item in value:
                add(item)
        elif isinstance(value, Tensor):
            storage = value.untyped_storage()
            if storage.data_ptr() in seen:
                return
            seen.add(storage.data_ptr())
            total += storage.nbytes()
            if value.is_quantized:
                n_scales = value.size(value.q_per_channel_axis()) if value.qscheme() in _PER_CHANNEL else 1
                total += QPARAM_BYTES * n_scales

    state = model.state_dict()  # alive to the end: the unpacked int8 weights keep distinct addresses
    for value in state.values():
        add(value)
    return total


def linear_weight_bytes(model: nn.Module) -> int:
    """Bytes of the weight matrices of the model's Linear layers, float or int8 (with their scales), a tied one
    counted once: the part of :func:`model_size_bytes` that quantization shrinks about 4x."""
    total = 0
    float_weights = {id(m.weight): m.weight for m in model.modules() if type(m) is nn.Linear}  # tied: one entry
    for weight in float_weights.values():
        total += weight.numel() * weight.element_size()
    for module in model.modules():
        if isinstance(module, DynamicQuantizedLinear):
            weight = module.weight()  # (out, in) int8, unpacked from the engine's format
            total += weight.numel() + QPARAM_BYTES * (weight.size(0) if weight.qscheme() in _PER_CHANNEL else 1)
    return total


# --- the survey's measures ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompressionRow:
    """One row of a compression table, relative to the uncompressed model (the survey's Table 1 columns)."""

    method: str
    compression: float  # base size / compressed size (x)
    performance: float  # compressed score as a % of the base model's
    speedup: float | None  # base inference time / compressed time (x); None when not reported
    paper: str = ""  # where a quoted row comes from
    evaluation: str = ""  # what the performance was measured on


def compression_row(
    name: str,
    base_size: float,
    size: float,
    base_score: float,
    score: float,
    base_seconds: float | None = None,
    seconds: float | None = None,
    *,
    evaluation: str = "",
) -> CompressionRow:
    """The survey's three numbers from raw measurements: sizes (bytes or parameters, the same unit for both),
    scores (higher is better), inference times (seconds; leave both out when not measured: speed-up None)."""
    for label, value in (("base_size", base_size), ("size", size), ("base_score", base_score)):
        if value <= 0:
            raise ValueError(f"{label} must be positive, got {value}")
    if (base_seconds is None) != (seconds is None):
        raise ValueError("give both base_seconds and seconds, or neither")
    if seconds is not None and (base_seconds <= 0 or seconds <= 0):
        raise ValueError(f"inference times must be positive, got {base_seconds} and {seconds}")
    speedup = None if seconds is None else base_seconds / seconds
    return CompressionRow(name, base_size / size, 100.0 * score / base_score, speedup, evaluation=evaluation)


# Rows of Rogers, Kovaleva & Rumshisky (2020), "A Primer in BERTology", Table 1 (relative to BERT-base; the
# performance is the ratio of the compressed model's average score to BERT-base's on the benchmark's tasks the paper
# reports, mostly GLUE), as the course's source notes reproduce it (the "BERT compression" table of the slides "BERT:
# model, analysis and modifications"). Two of the survey's figures differ from the original papers' abstracts, and
# the rows keep the survey's: DistilBERT's compression is x2.5 in the survey, while its 66M parameters against
# BERT-base's 110M are 1.7x; its 90% is lower than DistilBERT's own "97% of its language understanding
# capabilities"; MobileBERT's x4 speed-up is 5.5x in its paper (on a Pixel 4 phone).
SURVEY_ROWS: tuple[CompressionRow, ...] = (
    CompressionRow("distillation: DistilBERT (6 layers)", 2.5, 90.0, 1.6, "Sanh et al. 2019", "GLUE"),
    CompressionRow("distillation: TinyBERT (4 layers)", 7.5, 96.0, 9.4, "Jiao et al. 2019", "GLUE"),
    CompressionRow("distillation: MobileBERT (24 thin layers)", 4.3, 100.0, 4.0, "Sun et al. 2020", "GLUE"),
    CompressionRow(
        "distillation: BERT6-PKD (6 layers)", 1.6, 97.0, 1.9, "Sun et al. 2019a", "GLUE, no WNLI, CoLA, STS-B"
    ),
    # a 1-layer biLSTM distilled from BERT-large: its compression and speed-up are against BERT-large
    CompressionRow(
        "distillation: BiLSTM soft (1 biLSTM layer)", 110.0, 91.0, 434.0, "Tang et al. 2019", "MNLI, QQP, SST-2"
    ),
    CompressionRow("quantization: Q8BERT (8-bit)", 4.0, 99.0, None, "Zafrir et al. 2019", "GLUE"),
    CompressionRow("quantization: Q-BERT (mixed precision)", 13.0, 99.0, None, "Shen et al. 2019", "MNLI, SST-2"),
    # sharing and factorised embeddings: ALBERT-base is 9x smaller than BERT-base (its xxlarge is 2x bigger, x0.47,
    # and better, 107%). The x5.6 is ALBERT's Table 2 speed-up, a training throughput against BERT-large (BERT-base
    # is 4.7x there): against BERT-base, ALBERT-base does the same computation per token, so no faster
    CompressionRow("sharing: ALBERT-base (factorised embeddings)", 9.0, 97.0, 5.6, "Lan et al. 2019", "MNLI, SST-2"),
)


def time_inference(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` calls, after ``warmup`` untimed ones; under
    ``torch.inference_mode`` and with the thread count the caller set (``torch.set_num_threads``). A median, not a
    mean: on a shared machine the slow outliers are someone else's work."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    seconds = []
    with torch.inference_mode():
        for _ in range(warmup):
            fn()
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)
