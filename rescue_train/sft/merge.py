"""``rescue-train merge RUN_DIR [--out DIR]``: base model + LoRA adapter -> one plain model folder.

A merged model needs no adapter at inference, which suits bulk evaluation with engines that serve one
model fast. The tokenizer (with the run's chat template) is saved beside it, and ``merge.json`` names
the run it came from.
"""

from __future__ import annotations

from pathlib import Path

from ..io import read_json, write_json_atomic
from ..provenance import unfinished_training_run, versions
from .models import compute_dtype


def merge(run_dir: Path, out: Path) -> Path:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    provenance_file = run_dir / "provenance.json"
    if not provenance_file.exists():
        raise FileNotFoundError(f"{provenance_file} not found: is {run_dir} a run folder of `rescue-train train`?")
    prov = read_json(provenance_file, {"base_model": str}, "a training run's provenance")
    unfinished_training_run(run_dir, prov)
    adapter = run_dir / prov.get("adapter", "adapter")
    if not (adapter / "adapter_config.json").exists():
        raise FileNotFoundError(f"{adapter}/adapter_config.json not found: did the run finish?")
    # bf16 on a GPU that has it, else fp32. A QLoRA adapter (trained on 4-bit NF4 base weights) is merged into
    # this unquantized base too, as the evaluator applies it: merge.json records the difference.
    dtype = compute_dtype("auto")
    base = AutoModelForCausalLM.from_pretrained(prov["base_model"], dtype=dtype)
    merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
    merged.save_pretrained(out)
    AutoTokenizer.from_pretrained(adapter).save_pretrained(out)
    write_json_atomic(out / "merge.json", {"run_dir": str(run_dir), "base_model": prov["base_model"],
                                           "adapter": str(adapter), "dtype": str(dtype),
                                           "trained_base_quantization": prov.get("base_quantization", "none"),
                                           "versions": versions()})
    return out
