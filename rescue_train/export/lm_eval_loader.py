"""Loads the exported RESCUE-Bench instances that lie beside this file, for lm-evaluation-harness.

``rescue-train export lm-eval`` copies this module into the export folder; every task YAML names
``load`` as its ``custom_dataset`` with its task in ``dataset_kwargs``, so the folder can be moved and
still finds its data.
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(task: str, **_metadata):
    import datasets

    with open(HERE / f"rescue_{task}.jsonl", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
