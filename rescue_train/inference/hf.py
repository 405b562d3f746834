"""The transformers backend: batched greedy generation and log-likelihood scoring, on CPU or GPU.

LoRA adapters are attached with peft under their own names and switched per request; the base model is
served with the adapters disabled. Constrained answers (``{"choice": [...]}``, ``{"json": schema}``) are decoded
with xgrammar, the grammar engine vLLM uses for the same requests, so that a protocol means the same decoding on
both local backends (docs/evaluation.md, "Decoding").
"""

from __future__ import annotations

import contextlib
import copy
import json
from dataclasses import dataclass
from typing import Any, Sequence

from ..devices import native_bf16, release_memory
from .base import Backend, ChatEncoder, Messages, Scored
from .presets import model_folder


def choice_grammar(choices: Sequence[str]) -> str:
    """The EBNF grammar of exactly one of ``choices`` (as vLLM writes a choice constraint for xgrammar): JSON string
    literals are EBNF string literals with the same escapes."""
    return "root ::= " + " | ".join(json.dumps(c, ensure_ascii=False) for c in choices)


class Grammars:
    """Constraints compiled for one model's vocabulary: a choice as its EBNF grammar, a JSON schema with free
    whitespace between tokens (vLLM's default), each ending on the model's stop tokens."""

    def __init__(self, tokenizer, vocab_size: int, stop_ids: Sequence[int]):
        try:
            import xgrammar
        except ImportError as exc:
            raise ValueError("constrained decoding on backend=hf needs xgrammar (pip install xgrammar; it comes with "
                             f"vLLM), or constrained=false for free generation (import failed: {exc})") from None
        self.xgrammar = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=list(stop_ids))
        self.compiler = xgrammar.GrammarCompiler(info)

    def compile(self, constraint: dict[str, Any]):
        if "choice" in constraint:
            return self.compiler.compile_grammar(choice_grammar(constraint["choice"]))
        if "json" in constraint:
            return self.compiler.compile_json_schema(json.dumps(constraint["json"]), any_whitespace=True)
        raise ValueError(f"unknown answer constraint {sorted(constraint)}")

    def processor(self, compiled: list):
        """A fresh logits processor for one ``generate`` call (xgrammar's keeps per-row state)."""
        from xgrammar.contrib.hf import LogitsProcessor

        return LogitsProcessor(compiled)


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


@dataclass(frozen=True)
class CandidateLayout:
    """A batch of (prompt, candidates) items laid out for one forward pass: row b holds item b's prompt and
    then its candidates' tokens one after another (right-padded to the widest row), and every candidate token
    is tied to the hidden state that predicts it (the prompt's last token for a first token, else the
    candidate's previous token)."""

    ids: Any  # (rows, width) token ids
    position: Any  # (rows, width) position ids: 0.. over the prompt, and again from the prompt's length per candidate
    segment: Any  # (rows, width) -1 padding, 0 the prompt, j + 1 the row's j-th candidate
    source: Any  # the predicting hidden states, as flat indices row * width + column (each one once)
    slot: Any  # per candidate token (in order): the index in ``source`` of the state predicting it
    target: Any  # per candidate token: its id
    owner: Any  # per candidate token: its candidate, numbered over the batch in order
    candidates: int


def candidate_layout(items: Sequence[tuple[list[int], list[list[int]]]], pad: int) -> CandidateLayout:
    import torch

    width = max(len(prompt) + sum(map(len, conts)) for prompt, conts in items)
    ids, position, segment, source, slot, target, owner = [], [], [], [], [], [], []
    candidate = 0
    for row, (prompt, conts) in enumerate(items):
        row_ids, row_position, row_segment = list(prompt), list(range(len(prompt))), [0] * len(prompt)
        prompt_end = len(source)
        source.append(row * width + len(prompt) - 1)
        for j, cont in enumerate(conts, start=1):
            start = len(row_ids)
            for k, token in enumerate(cont):
                if k == 0:
                    slot.append(prompt_end)
                else:
                    slot.append(len(source))
                    source.append(row * width + start + k - 1)
                target.append(token)
                owner.append(candidate)
            candidate += 1
            row_ids += cont
            row_position += range(len(prompt), len(prompt) + len(cont))
            row_segment += [j] * len(cont)
        padding = width - len(row_ids)
        ids.append(row_ids + [pad] * padding)
        position.append(row_position + [0] * padding)
        segment.append(row_segment + [-1] * padding)
    tensor = torch.tensor
    return CandidateLayout(tensor(ids), tensor(position), tensor(segment), tensor(source), tensor(slot),
                           tensor(target), tensor(owner), candidate)


def visible(segment, position, window: int | None = None):
    """Which keys each query sees, (rows, 1, query, key) booleans: the prompt causally, a candidate the whole
    prompt and its own earlier tokens, and within ``window`` positions where the layer has a sliding window
    (as transformers' sliding-window masks: query position - key position < window). Padding sees only
    itself, since a query with no key at all turns to NaN."""
    import torch

    width = segment.shape[1]
    query, key = segment[:, :, None], segment[:, None, :]
    column = torch.arange(width, device=segment.device)
    sees = (column[:, None] >= column[None, :]) & (((key == 0) & (query >= 0)) | ((key == query) & (query > 0)))
    if window is not None:
        sees &= (position[:, :, None] - position[:, None, :]) < window
    return (sees | torch.eye(width, dtype=torch.bool, device=segment.device))[:, None]


def attention_masks(config, segment, position, dtype):
    """The custom 4D masks the decoder takes in place of a padding mask (transformers passes a 4D mask to the
    attention layers as it is): one mask, or for models that mix full and sliding-window layers (Gemma 3,
    Qwen2 with ``use_sliding_window``) one per kind of layer, keyed as ``config.layer_types`` names them.
    The masks are added to the attention scores (0 where a key is seen, the dtype's minimum elsewhere): the
    form eager attention needs, and on CPU faster than a boolean mask, which SDPA turns into that form again
    in every layer."""
    import torch

    implementation = config._attn_implementation
    if implementation not in ("sdpa", "eager"):
        raise ValueError(f"rank scoring needs sdpa or eager attention (custom 4D attention masks); the model "
                         f"uses {implementation!r}")
    window = getattr(config, "sliding_window", None)
    kinds = set(getattr(config, "layer_types", None) or ["sliding_attention" if window else "full_attention"])
    if kinds - {"full_attention", "sliding_attention"}:
        raise ValueError(f"rank scoring knows full and sliding-window attention layers, not {sorted(kinds)}")
    masks = {}
    for kind in kinds:
        seen = visible(segment, position, window if kind == "sliding_attention" else None)
        masks[kind] = torch.zeros(seen.shape, dtype=dtype, device=seen.device).masked_fill_(
            ~seen, torch.finfo(dtype).min)
    return masks if len(masks) > 1 else next(iter(masks.values()))


class HFBackend(Backend):
    name = "hf"
    constrains = True  # xgrammar, as inside vLLM

    @classmethod
    def start(cls, spec) -> HFBackend:
        engine = spec.engine
        return cls(model_folder(spec.model), adapters=spec.adapters, tokenizer=spec.tokenizer, dtype=engine.dtype,
                   device=engine.device, batch_size=spec.batch_size)

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
        self.adapters = dict(adapters or {})
        if self.adapters:
            from peft import PeftModel

            (first, path), *rest = self.adapters.items()
            net = PeftModel.from_pretrained(net, path, adapter_name=first)
            for name, path in rest:
                net.load_adapter(path, adapter_name=name)
        self.model = net.to(self.device).eval()
        self.model_path = model
        self._grammars: Grammars | None = None

    def grammars(self) -> Grammars:
        if self._grammars is None:
            stop = self.model.generation_config.eos_token_id
            self._grammars = Grammars(self.encoder.tokenizer, self.model.config.get_text_config().vocab_size,
                                      stop if isinstance(stop, list) else [stop])
        return self._grammars

    def close(self) -> None:
        # Drop the weights and give their device memory back, so that a vLLM engine (which sizes its KV cache
        # by the memory free when it starts) or a judge model can start after this backend in the process.
        if getattr(self, "model", None) is not None:
            self.model = None
            release_memory()

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "device": self.device, "dtype": str(self.torch_dtype).replace("torch.", ""),
                "batch_size": self.batch_size, "structured_outputs": True}

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

    def _batches(self, lengths: Sequence[int], indices: Sequence[int] | None = None) -> list[list[int]]:
        """Indices (``indices``, else 0..) grouped into batches of similar length (longest first), to waste little
        padding; ``lengths`` are theirs, in order."""
        indices = list(range(len(lengths))) if indices is None else list(indices)
        order = [indices[k] for k in sorted(range(len(lengths)), key=lambda k: -lengths[k])]
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
        from transformers import LogitsProcessorList

        encoded = [self.encoder.prompt_ids(m) for m in prompts]
        constraints = constraints or [None] * len(prompts)
        compiled = [self.grammars().compile(c) if c else None for c in constraints]
        texts: list[str] = [""] * len(encoded)
        config = copy.deepcopy(self.model.generation_config)
        config.do_sample, config.temperature, config.top_p, config.top_k = False, None, None, None
        config.pad_token_id = self.encoder.tokenizer.pad_token_id
        # Constrained and free prompts go in separate batches: xgrammar's processor constrains every row it gets.
        groups = [[i for i in range(len(encoded)) if (compiled[i] is None) == free] for free in (True, False)]
        with self._use(adapter), torch.inference_mode():
            for batch in (b for group in groups if group for b in self._batches([len(encoded[i]) for i in group],
                                                                               group)):
                ids, mask = self._left_pad([encoded[i] for i in batch])
                config.max_new_tokens = max(max_new_tokens[i] for i in batch)
                processors = LogitsProcessorList([self.grammars().processor([compiled[i] for i in batch])]) \
                    if compiled[batch[0]] is not None else None
                out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config,
                                          logits_processor=processors)
                for row, i in enumerate(batch):
                    # Greedy rows are independent, so cutting at the row's own limit equals generating with it.
                    new = out[row, ids.shape[1]:ids.shape[1] + max_new_tokens[i]].tolist()
                    texts[i] = self.encoder.decode(new)
                if on_answers is not None:
                    on_answers([(i, texts[i]) for i in batch])
        return texts

    def loglikelihood(self, requests: Sequence[tuple[Messages, Sequence[str]]], *,
                      adapter: str | None = None) -> list[list[Scored]]:
        """Each instance is one sequence: its prompt, then every candidate's tokens one after another, under
        a 4D attention mask that lets a candidate see the prompt and its own earlier tokens only, at positions
        that restart after the prompt for each candidate (:func:`candidate_layout`). One forward pass per batch
        scores every candidate with no KV cache and no copy of the prompt per candidate: the pass costs the
        prompts plus the candidates' few tokens, and the attention mask, which grows with the square of a
        row's width (``scripts/bench_rank.py``)."""
        import torch

        encoded = [self.encoder.scoring_ids(messages, answers) for messages, answers in requests]
        if any(len(c) == 0 for _, conts in encoded for c in conts):
            raise ValueError("an answer encoded to no tokens; cannot score it")
        results: list[list[Scored]] = [[] for _ in requests]
        with self._use(adapter), torch.inference_mode():
            for batch in self._batches([len(p) + sum(map(len, conts)) for p, conts in encoded]):
                for i, scores in zip(batch, self._score_batch([encoded[i] for i in batch])):
                    results[i] = scores
        return results

    def _score_batch(self, items: list[tuple[list[int], list[list[int]]]]) -> list[list[Scored]]:
        import torch

        layout = candidate_layout(items, self.encoder.tokenizer.pad_token_id)
        config = self.model.config.get_text_config()
        position = layout.position.to(self.device)
        masks = attention_masks(config, layout.segment.to(self.device), position, self.torch_dtype)
        hidden = self.model.get_decoder()(input_ids=layout.ids.to(self.device), position_ids=position,
                                          attention_mask=masks, use_cache=False).last_hidden_state
        hidden = hidden.reshape(-1, hidden.shape[-1])
        source, slot, target = (t.to(self.device) for t in (layout.source, layout.slot, layout.target))
        head = self.model.get_output_embeddings()
        cap = getattr(config, "final_logit_softcapping", None)  # Gemma 2's, which its forward applies to logits
        logprobs = torch.empty(len(target), device=self.device)
        # Vocabulary-wide logits for as many positions at a time as the batch has rows: no more memory than
        # the last-position logits of a plain forward pass over the prompts.
        step = len(items)
        for start in range(0, len(source), step):
            logits = head(hidden[source[start:start + step]]).float()
            if cap:
                logits = torch.tanh(logits / cap) * cap
            picked = (slot >= start) & (slot < start + step)
            logprobs[picked] = torch.log_softmax(logits, dim=-1)[slot[picked] - start, target[picked]]
        totals = torch.zeros(layout.candidates, dtype=torch.float64).index_add_(0, layout.owner,
                                                                                 logprobs.double().cpu())
        scores: list[list[Scored]] = []
        for _, conts in items:
            first = sum(map(len, scores))
            scores.append([Scored(totals[first + j].item(), len(c)) for j, c in enumerate(conts)])
        return scores
