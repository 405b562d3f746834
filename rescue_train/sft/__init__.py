"""LoRA supervised fine-tuning of chat models (trl + peft): the typed recipe config, the fold's SFT data,
class-balanced sampling and answer-token weights, the trainer, model presets, merging. ``rescue_train.cli.train``
is the one ``train`` entry; it hands classifier recipes (``*_cls``) to :mod:`rescue_train.classifiers`."""
