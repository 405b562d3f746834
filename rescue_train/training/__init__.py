"""Training: LoRA SFT recipes, class-balanced classifiers, the offline tiny model."""
