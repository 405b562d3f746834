"""Fine-tune with LoRA: `accelerate launch train.py recipe=ssp_lora [key=value ...]` (see docs/training.md)."""

import sys

from rescue_train.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
