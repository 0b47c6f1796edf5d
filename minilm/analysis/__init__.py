"""What the chapters and experiments measure about pretrained models, never used by the models themselves.

- :mod:`~minilm.analysis.probing`: each layer's frozen vectors (``layer_features`` for ELMo, ``word_layer_vectors``
  for any model, ``sense_vectors``, ``subword_sense_vectors``) and linear probes of them (``linear_probe``,
  ``probe_layers``), as in Peters et al. (2018), §5.3; control tasks and selectivity (``control_labels``,
  ``probe_with_control``: Hewitt & Liang 2019); nearest-neighbour word senses (``knn_sense_accuracy``) and 2-D maps
  (``project_2d``);
- :mod:`~minilm.analysis.attention`: attention maps of any encoder, Clark et al. (2019)'s per-head statistics,
  Kovaleva et al. (2019)'s pattern classes and Brunner et al. (2020)'s effective attention;
- :mod:`~minilm.analysis.representations`: how contextual each layer is (Ethayarajh 2019: anisotropy,
  self-similarity, intra-sentence similarity, MEV) and how much each input token contributes (Brunner et al. 2020);
- :mod:`~minilm.analysis.pruning`: head importance and iterative pruning, by mask and for real (Michel et al. 2019);
- :mod:`~minilm.analysis.compression`: dynamic int8 quantization, model sizes and the compression table (Rogers et
  al. 2020, Table 1);
- :mod:`~minilm.analysis.transitions`: how much each layer changes its input (``layer_transitions``, ALBERT's
  Figure 1) and how much such a per-layer curve zigzags (``oscillation``);
- :mod:`~minilm.analysis.zero_shot`: a language model's zero-shot classification by label words (Radford et al.
  2018, §5), raw and calibrated;
- :mod:`~minilm.analysis.plateau`: the unigram plateau, the loss of a model that predicts token frequencies alone
  (``unigram_entropy`` of the tokens a loss predicts, ``scored_targets``, ``past_plateau``);
- :mod:`~minilm.analysis.records`: the recorded results of ``experiments/``, found from anywhere in the repository.

The submodules with heavier dependencies (attention, representations, pruning, compression) are imported by name:
``from minilm.analysis.pruning import head_importance``.
"""

from minilm.analysis.probing import (
    ProbeResult,
    control_labels,
    knn_sense_accuracy,
    knn_sense_by_layer,
    layer_features,
    linear_probe,
    probe_layers,
    probe_with_control,
    project_2d,
    selectivity,
    sense_vectors,
    standardize,
    subword_sense_vectors,
    word_layer_vectors,
)
from minilm.analysis.records import Recorded, recorded_results
from minilm.analysis.transitions import layer_transitions, oscillation
from minilm.analysis.zero_shot import zero_shot_scores

__all__ = [
    "ProbeResult",
    "Recorded",
    "control_labels",
    "knn_sense_accuracy",
    "knn_sense_by_layer",
    "layer_features",
    "layer_transitions",
    "linear_probe",
    "oscillation",
    "probe_layers",
    "probe_with_control",
    "project_2d",
    "recorded_results",
    "selectivity",
    "sense_vectors",
    "standardize",
    "subword_sense_vectors",
    "word_layer_vectors",
    "zero_shot_scores",
]
