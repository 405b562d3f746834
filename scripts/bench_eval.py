"""Evaluation throughput: instances/s per backend and protocol on the same model and instances.

    python scripts/bench_eval.py                                  # tiny model, hf backend, CPU
    python scripts/bench_eval.py --backends hf,vllm               # vLLM in .venv (CPU or GPU build)
    python scripts/bench_eval.py --model Qwen/Qwen2.5-7B-Instruct --backends hf,vllm --limit 200   # on a GPU

Prints instances/s for each (backend, protocol) over the closed-set tasks (ITP, RPP, STP, SSP), the
rank-vs-generate ratio per closed-set instance and, with both backends, vLLM vs HF. Each protocol is timed
``--repeats`` times in turn (the median is reported, with the machine's load average per round); on vLLM the
prefix cache is emptied before each timing, so no protocol reuses prompts another one computed (the
protocols share their prompts). Generation runs at the protocol's default budget; a random tiny model never
stops early, a trained one usually does, so on real models the generate side gets somewhat faster.
Targets, for a real model on a GPU: hf rank at least 3x sft generation, vLLM rank at least 1x vLLM sft
generation.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

RANK_VS_SFT_TARGETS = {"hf": 3.0, "vllm": 1.0}


def empty_prefix_cache(backend) -> None:
    engine = getattr(backend, "llm", None)  # the vllm backend's engine
    if engine is not None:
        engine.reset_prefix_cache()


def main() -> None:
    import torch

    from rescue_train.data import load_samples
    from rescue_train.evaluation.models import find_adapter
    from rescue_train.evaluation.protocols import predict
    from rescue_train.inference import BackendSpec, EngineOptions, make_backend
    from rescue_train.tasks import CLOSED_SET_TASKS, build

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--data", default="bundled")
    parser.add_argument("--backends", default="hf", help="comma-separated: hf, vllm")
    parser.add_argument("--protocols", default="rank,sft,paper")
    parser.add_argument("--limit", type=int, default=24, help="instances per closed-set task")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    samples = load_samples(args.data)
    instances = [i for t in CLOSED_SET_TASKS for i in build(t, samples).instances[:args.limit]]
    protocols = args.protocols.split(",")
    print(f"model {args.model}, {len(instances)} closed-set instances ({args.limit} per task), "
          f"{torch.get_num_threads()} torch threads in this process")
    rates: dict[tuple[str, str], float] = {}
    for backend_name in args.backends.split(","):
        adapters = {"adapter": str(find_adapter(Path(args.adapter))[0])} if args.adapter else {}
        spec = BackendSpec(backend=backend_name, model=args.model, adapters=adapters,
                           engine=EngineOptions(max_model_len=16384), batch_size=args.batch_size, progress=False)
        started = time.perf_counter()
        backend = make_backend(spec)
        print(f"{backend_name}: model loaded in {time.perf_counter() - started:.1f} s")
        adapter = next(iter(adapters), None)
        for protocol in protocols:  # warm-up
            predict(backend, instances[:2], protocol=protocol, mode="dialogue", adapter=adapter)
        seconds: dict[str, list[float]] = {p: [] for p in protocols}
        for round_ in range(args.repeats):
            for protocol in protocols:
                empty_prefix_cache(backend)
                started = time.perf_counter()
                predict(backend, instances, protocol=protocol, mode="dialogue", adapter=adapter)
                seconds[protocol].append(time.perf_counter() - started)
            print(f"  round {round_ + 1}: " + ", ".join(f"{p} {s[-1]:.2f} s" for p, s in seconds.items())
                  + f" (load average {os.getloadavg()[0]:.2f})")
        for protocol in protocols:
            rates[(backend_name, protocol)] = len(instances) / statistics.median(seconds[protocol])
            print(f"{backend_name:5s} {protocol:6s} {len(instances)} instances: "
                  f"{rates[(backend_name, protocol)]:8.2f} inst/s (median of {args.repeats})")
        backend.close()
    import torch

    target_applies = torch.cuda.is_available() and args.model != "tiny"
    for backend_name in args.backends.split(","):
        if (backend_name, "rank") in rates and (backend_name, "sft") in rates:
            ratio = rates[(backend_name, "rank")] / rates[(backend_name, "sft")]
            target = RANK_VS_SFT_TARGETS[backend_name]
            verdict = (f"{'meets' if ratio >= target else 'below'} the {target:g}x target" if target_applies else
                       f"the {target:g}x target is for a real model on a GPU, where generation dominates")
            print(f"{backend_name}: rank vs sft generation per closed-set instance: {ratio:.2f}x ({verdict})")
    for protocol in protocols:
        if ("vllm", protocol) in rates and ("hf", protocol) in rates:
            print(f"{protocol}: vLLM vs HF: {rates[('vllm', protocol)] / rates[('hf', protocol)]:.2f}x")


if __name__ == "__main__":  # vLLM's workers re-import this module
    main()
