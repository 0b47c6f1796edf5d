"""Recipes: one module per model family gluing its models to the training engine.

A recipe registers its models and pretraining objectives with :mod:`minilm.train.registry` and holds what is
particular to the family: how the corpus becomes training examples, the loss of a batch from the model's outputs
(with named parts), the units each part averages over. ``gpt`` (GPT, causal LM), ``elmo`` (ELMo, biLM), ``bert``
(BERT and RoBERTa, masked LM and NSP), ``albert`` (ALBERT, masked LM and SOP), ``electra`` (ELECTRA,
replaced-token detection and its ablations, with a generator beside the trained model), ``bart`` (BART, denoising),
``t5`` (T5, span corruption), ``distilbert`` (DistilBERT, distilled from a frozen BERT teacher beside it);
``language_model`` holds what the language models share, ``seq2seq`` what the encoder–decoders share. The registry
imports them on first use (``registry.RECIPES``); the engine (``minilm.train``) knows none of them.
"""
