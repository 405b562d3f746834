"""Our evaluator beside its peers, on the same model and the same requests.

    python scripts/bench_peers.py                          # SmolLM2-135M-Instruct on CPU: ours vs lm-eval-harness
    python scripts/bench_peers.py --model tiny --per-task 4        # a quick look with the random tiny model
    python scripts/bench_peers.py --vllm                   # also our hf backend vs our vllm backend

Closed-set instances (ITP, RPP, STP, SSP; ``--per-task`` each) are scored two ways over exactly the same
strings: our rank protocol (``HFBackend.loglikelihood``: a batch of instances in one forward pass, every
candidate after its prompt under a 4D attention mask) and lm-evaluation-harness's ``HFLM.loglikelihood``
(one context+continuation sequence per candidate), both
float32 on CPU with the model loaded beforehand, in turn for ``--repeats`` rounds (the machine's load
average is printed per round). Prints the median seconds per instance, the speed ratio (target: ours at
least 4x faster) and the share of instances whose top-ranked candidate agrees (target: 100%).
With ``--vllm`` our vllm backend runs the same rank requests and generation
with the sft prompts, beside our hf backend, each from an empty prefix cache.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

SPEED_TARGET = 4.0


def top1(scores: list[float]) -> int:
    return scores.index(max(scores))


def timed(label: str, work):
    started = time.perf_counter()
    result = work()
    seconds = time.perf_counter() - started
    print(f"  {label}: {seconds:.2f} s")
    return result, seconds


def main() -> None:
    import torch
    from lm_eval.api.instance import Instance as HarnessRequest
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoTokenizer

    from rescue_train.data import load_samples
    from rescue_train.evaluation.protocols import predict
    from rescue_train.export.lm_eval import documents
    from rescue_train.inference import BackendSpec, EngineOptions, make_backend
    from rescue_train.inference.base import ChatEncoder
    from rescue_train.inference.presets import model_folder
    from rescue_train.tasks import CLOSED_SET_TASKS, build

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="a model preset (configs/model: smollm2, ...), tiny, or a local model folder")
    parser.add_argument("--data", default="bundled")
    parser.add_argument("--per-task", type=int, default=12, help="instances per closed-set task")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--vllm", action="store_true", help="also run our vllm backend")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    path = model_folder(args.model)
    samples = load_samples(args.data)
    instances = [i for t in CLOSED_SET_TASKS for i in build(t, samples).instances[:args.per_task]]
    docs = documents(instances, ChatEncoder(AutoTokenizer.from_pretrained(path)), "dialogue")
    print(f"{len(instances)} closed-set instances, {sum(len(d['choices']) for d in docs)} candidates, "
          f"model {args.model}, {torch.get_num_threads()} torch threads")

    ours = make_backend(BackendSpec(backend="hf", model=path, batch_size=args.batch_size,
                                    engine=EngineOptions(dtype="float32", device="cpu")))
    harness = HFLM(pretrained=path, dtype="float32", device="cpu", batch_size=args.batch_size)
    requests = [HarnessRequest("loglikelihood", doc, (doc["prompt"], choice), j)
                for doc in docs for j, choice in enumerate(doc["choices"])]
    predict(ours, instances[:2], protocol="rank", mode="dialogue", adapter=None)  # warm-up
    harness.loglikelihood(requests[:2], disable_tqdm=True)
    ours_s, theirs_s = [], []
    for round_ in range(args.repeats):
        records, seconds = timed("ours (rank protocol, hf backend)",
                                 lambda: predict(ours, instances, protocol="rank", mode="dialogue", adapter=None))
        ours_s.append(seconds)
        scored, seconds = timed("lm-eval-harness (HFLM.loglikelihood)",
                                lambda: harness.loglikelihood(requests, disable_tqdm=True))
        theirs_s.append(seconds)
        print(f"  round {round_ + 1} (load average {os.getloadavg()[0]:.2f})")
    ours_top = [r["prediction"][0] for r in records]
    theirs_top, at = [], 0
    for doc in docs:
        lls = [ll for ll, _ in scored[at:at + len(doc["choices"])]]
        theirs_top.append(doc["candidates"][top1(lls)])
        at += len(doc["choices"])

    n = len(instances)
    agree = sum(a == b for a, b in zip(ours_top, theirs_top)) / n
    ours_median, theirs_median = statistics.median(ours_s), statistics.median(theirs_s)
    ratio = theirs_median / ours_median
    print(f"ours {ours_median / n:.4f} s/instance, lm-eval {theirs_median / n:.4f} s/instance (medians of "
          f"{args.repeats}): ours {ratio:.2f}x faster ({'meets' if ratio >= SPEED_TARGET else 'below'} the "
          f"{SPEED_TARGET:g}x target); top-1 agreement {agree:.1%} ({'meets' if agree == 1 else 'below'} the 100% "
          "target)")

    if args.vllm:
        ours.close()
        engine = make_backend(BackendSpec(backend="vllm", model=path, seed=0, progress=False,
                                          engine=EngineOptions(dtype="float32", max_model_len=16384)))
        predict(engine, instances[:2], protocol="rank", mode="dialogue", adapter=None)
        predict(engine, instances[:2], protocol="sft", mode="dialogue", adapter=None)
        engine.llm.reset_prefix_cache()  # the two protocols share their prompts: each starts from an empty cache
        ranked, vllm_rank_s = timed("ours (rank protocol, vllm backend)",
                                    lambda: predict(engine, instances, protocol="rank", mode="dialogue", adapter=None))
        engine.llm.reset_prefix_cache()
        _, vllm_sft_s = timed("ours (sft generation, vllm backend)",
                              lambda: predict(engine, instances, protocol="sft", mode="dialogue", adapter=None))
        vllm_agree = sum(r["prediction"][0] == t for r, t in zip(ranked, ours_top)) / n
        print(f"vllm rank {vllm_rank_s / n:.4f} s/instance: {ours_median / vllm_rank_s:.2f}x our hf rank, "
              f"{vllm_sft_s / vllm_rank_s:.2f}x vllm sft generation; top-1 agreement with hf {vllm_agree:.1%}")


if __name__ == "__main__":  # vLLM's workers re-import this module
    main()
