"""The label convention every loss of the library shares (that of ``F.cross_entropy`` and ``transformers``)."""

IGNORE_INDEX = -100  # label of a position no loss scores: unmasked tokens (MLM), padding, later sub-words (tagging)
