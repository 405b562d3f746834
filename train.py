"""Fine-tune with LoRA: `accelerate launch train.py recipe=ssp_lora [key=value ...]` (see docs/training.md)."""

import sys

from rescue_train.cli.train import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
