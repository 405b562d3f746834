"""The ``tiny`` model: a random-weight Qwen2 chat model with a tokenizer trained on our own bundled data.

It is built offline in seconds, cached in a local folder and rebuilt when missing, so tests and the demo
need no model hub. Its head size is 64 (hidden 128, 2 heads) because vLLM's CPU attention rejects heads
smaller than 32. A random model has no chat template of its own, so it ships one: ChatML, the layout of
Qwen2.5 (the one place the project writes a template; every other model trains with its own).
"""

from __future__ import annotations

import os
from pathlib import Path

TINY_VERSION = "2"  # bump when the recipe below changes, so caches rebuild
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<pad>"]


def cache_root() -> Path:
    return Path(os.environ.get("RESCUE_TRAIN_CACHE", Path.home() / ".cache" / "rescue_train"))


def _corpus() -> list[str]:
    """Text the tokenizer learns from: every prompt and answer the bundled data renders, plus the labels."""
    from .data import BUNDLED, load_samples, taxonomy
    from .tasks import TASKS, BuildOptions, build, render

    texts = []
    samples = load_samples(BUNDLED)
    for name, task in TASKS.items():
        for inst in build(name, samples, BuildOptions()).instances:
            for fmt in ("label", "json"):
                texts += [m["content"] for m in render(inst, "audiovisual", fmt)]
                texts.append(task.answer(inst, fmt))
    for scenario in taxonomy.SCENARIOS:
        for kind in taxonomy.KINDS:
            texts.append(taxonomy.describe(kind, scenario, style="full"))
    return texts


def build_tiny_model(out_dir: str | Path, *, vocab_size: int = 2048, hidden_size: int = 128, layers: int = 2,
                     seed: int = 0) -> Path:
    """Write a tiny Qwen2 chat model and its tokenizer to ``out_dir``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.train_from_iterator(_corpus(), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<pad>",
                                  additional_special_tokens=["<|im_start|>", "<|endoftext|>"])
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=2 * hidden_size, num_hidden_layers=layers,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16384, tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def tiny_model_path() -> Path:
    """The cached tiny model, built on first use (atomically, so parallel processes don't see half a model)."""
    target = cache_root() / f"tiny-v{TINY_VERSION}"
    if (target / "config.json").exists() and (target / "tokenizer.json").exists():
        return target
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    build_tiny_model(tmp)
    try:
        tmp.replace(target)
    except OSError:  # another process finished first; its copy is identical
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return target
