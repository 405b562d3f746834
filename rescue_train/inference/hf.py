"""The transformers backend: batched greedy generation and log-likelihood scoring, on CPU or GPU.

LoRA adapters are attached with peft under their own names and switched per request; the base model is
served with the adapters disabled. Structured outputs are not available here: generation is plain greedy.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from typing import Any, Sequence

from ..devices import native_bf16, release_memory
from .base import Backend, ChatEncoder, Messages, Scored


def resolve_dtype(dtype: str, device: str):
    import torch

    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if native_bf16() else torch.float16
        return torch.float32
    try:
        return getattr(torch, dtype)
    except AttributeError:
        raise ValueError(f"dtype must be auto, float32, bfloat16 or float16, got {dtype!r}") from None


def stop_tokens_only(config):
    """The model's generation config reduced to its special tokens.

    Greedy evaluation follows one rule in both local backends: the model's generation config says when to
    stop (its end-of-sequence tokens) and nothing else; its sampling settings and penalties (Qwen2.5 sets
    ``repetition_penalty=1.05``) are not applied. vLLM does the same, as it takes only the stop tokens from
    the config when given sampling parameters. transformers would fill every setting a request leaves unset
    from the model's config, so the config itself is reduced."""
    from transformers import GenerationConfig

    tokens = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
    return GenerationConfig(**{k: getattr(config, k) for k in tokens if getattr(config, k, None) is not None})


class HFBackend(Backend):
    name = "hf"

    def __init__(self, model: str, *, adapters: dict[str, str] | None = None, tokenizer: str | None = None,
                 dtype: str = "auto", device: str | None = None, batch_size: int = 8):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.batch_size = batch_size
        tok = AutoTokenizer.from_pretrained(tokenizer or model)
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "left"
        self.encoder = ChatEncoder(tok)
        self.torch_dtype = resolve_dtype(dtype, self.device)
        net = AutoModelForCausalLM.from_pretrained(model, dtype=self.torch_dtype)
        net.generation_config = stop_tokens_only(net.generation_config)
        # transformers renamed the KV cache argument from past_key_values to cache (5.2x).
        self._cache_arg = "cache" if "cache" in inspect.signature(net.forward).parameters else "past_key_values"
        self.adapters = dict(adapters or {})
        if self.adapters:
            from peft import PeftModel

            (first, path), *rest = self.adapters.items()
            net = PeftModel.from_pretrained(net, path, adapter_name=first)
            for name, path in rest:
                net.load_adapter(path, adapter_name=name)
        self.model = net.to(self.device).eval()
        self.model_path = model

    def close(self) -> None:
        # Drop the weights and give their device memory back, so that a vLLM engine (which sizes its KV cache
        # by the memory free when it starts) or a judge model can start after this backend in the process.
        if getattr(self, "model", None) is not None:
            self.model = None
            release_memory()

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "device": self.device, "dtype": str(self.torch_dtype).replace("torch.", ""),
                "batch_size": self.batch_size, "structured_outputs": False}

    @contextlib.contextmanager
    def _use(self, adapter: str | None):
        if not self.adapters:
            if adapter is not None:
                raise ValueError(f"adapter {adapter!r} requested but no adapter was loaded")
            yield
        elif adapter is None:
            with self.model.disable_adapter():
                yield
        else:
            self.model.set_adapter(adapter)
            yield

    def _batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indices grouped into batches of similar length (longest first), to waste little padding."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        return [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def _left_pad(self, sequences: list[list[int]]):
        import torch

        width = max(len(s) for s in sequences)
        pad = self.encoder.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(s)) + s for s in sequences], device=self.device)
        mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences], device=self.device)
        return ids, mask

    def generate(self, prompts: Sequence[Messages], *, max_new_tokens: Sequence[int],
                 constraints=None, adapter: str | None = None, on_answers=None) -> list[str]:
        import torch

        encoded = [self.encoder.prompt_ids(m) for m in prompts]
        texts: list[str] = [""] * len(encoded)
        config = copy.deepcopy(self.model.generation_config)
        config.do_sample, config.temperature, config.top_p, config.top_k = False, None, None, None
        config.pad_token_id = self.encoder.tokenizer.pad_token_id
        with self._use(adapter), torch.inference_mode():
            for batch in self._batches([len(e) for e in encoded]):
                ids, mask = self._left_pad([encoded[i] for i in batch])
                config.max_new_tokens = max(max_new_tokens[i] for i in batch)
                out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
                for row, i in enumerate(batch):
                    # Greedy rows are independent, so cutting at the row's own limit equals generating with it.
                    new = out[row, ids.shape[1]:ids.shape[1] + max_new_tokens[i]].tolist()
                    texts[i] = self.encoder.decode(new)
                if on_answers is not None:
                    on_answers([(i, texts[i]) for i in batch])
        return texts

    def loglikelihood(self, requests: Sequence[tuple[Messages, Sequence[str]]], *,
                      adapter: str | None = None) -> list[list[Scored]]:
        """Prompts are run once, in batches; each prompt's KV cache row is copied to its candidates, which
        then cost only their own few tokens: a batch of closed-set instances takes two forward passes."""
        import torch

        encoded = [self.encoder.scoring_ids(messages, answers) for messages, answers in requests]
        results: list[list[Scored]] = [[] for _ in requests]
        with self._use(adapter), torch.inference_mode():
            for batch in self._batches([len(p) for p, _ in encoded]):
                for i, scores in zip(batch, self._score_batch([encoded[i] for i in batch])):
                    results[i] = scores
        return results

    def _score_batch(self, items: list[tuple[list[int], list[list[int]]]]) -> list[list[Scored]]:
        import torch

        if any(len(c) == 0 for _, conts in items for c in conts):
            raise ValueError("an answer encoded to no tokens; cannot score it")
        ids, mask = self._left_pad([p for p, _ in items])
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                         use_cache=True, logits_to_keep=1)
        first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # predicts each answer's first token
        rows = [b for b, (_, conts) in enumerate(items) for _ in conts]
        conts = [c for _, cs in items for c in cs]
        width = max(len(c) for c in conts)
        rest = None
        if width > 1:
            cache = out[self._cache_arg]
            cache.batch_select_indices(torch.tensor(rows, device=self.device))  # one cache row per candidate
            pad = self.encoder.tokenizer.pad_token_id
            cand = torch.tensor([c + [pad] * (width - len(c)) for c in conts], device=self.device)
            cand_mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in conts], device=self.device)
            start = torch.tensor([len(items[b][0]) for b in rows], device=self.device).unsqueeze(-1)
            logits = self.model(input_ids=cand, attention_mask=torch.cat([mask[rows], cand_mask], dim=-1),
                                position_ids=start + torch.arange(width, device=self.device),
                                use_cache=False, **{self._cache_arg: cache}).logits
            rest = torch.log_softmax(logits[:, :-1].float(), dim=-1)  # position t predicts answer token t + 1
        scores: list[list[Scored]] = [[] for _ in items]
        for j, (b, c) in enumerate(zip(rows, conts)):
            total = first[b, c[0]].item()
            if len(c) > 1:
                total += rest[j, :len(c) - 1].gather(-1, cand[j, 1:len(c)].unsqueeze(-1)).sum().item()
            scores[b].append(Scored(total, len(c)))
        return scores
