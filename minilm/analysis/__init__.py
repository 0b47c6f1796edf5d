"""What the chapters and experiments measure about pretrained models, never used by the models themselves.

- :mod:`~minilm.analysis.probing`: each layer's frozen vectors (``layer_features``, ``sense_vectors``) and linear
  probes of them (``linear_probe``, ``probe_layers``), as in Peters et al. (2018), §5.3;
- :mod:`~minilm.analysis.transitions`: how much each layer changes its input (``layer_transitions``, ALBERT's
  Figure 1) and how much such a per-layer curve zigzags
  (``oscillation``);
- :mod:`~minilm.analysis.zero_shot`: a language model's zero-shot classification by label words (Radford et al.
  2018, §5), raw and calibrated;
- :mod:`~minilm.analysis.records`: the recorded results of ``experiments/``, found from anywhere in the repository.
"""

from minilm.analysis.probing import (
    ProbeResult,
    layer_features,
    linear_probe,
    probe_layers,
    sense_vectors,
    standardize,
)
from minilm.analysis.records import Recorded, recorded_results
from minilm.analysis.transitions import layer_transitions, oscillation
from minilm.analysis.zero_shot import zero_shot_scores

__all__ = [
    "ProbeResult",
    "Recorded",
    "layer_features",
    "layer_transitions",
    "linear_probe",
    "oscillation",
    "probe_layers",
    "recorded_results",
    "sense_vectors",
    "standardize",
    "zero_shot_scores",
]
