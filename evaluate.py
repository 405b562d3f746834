"""Evaluate a model on RESCUE-Bench: ``python evaluate.py model=... key=value ...`` (see docs/evaluation.md)."""

import sys

from rescue_train.cli import main

if __name__ == "__main__":  # the guard matters: vLLM's workers re-import this module
    sys.exit(main(["eval", *sys.argv[1:]]))
