"""Rank scoring on transformers beside its floor: time and peak memory for 2, 10 and 20 candidates.

    python scripts/bench_rank.py                         # SmolLM2-135M-Instruct, float32, CPU
    python scripts/bench_rank.py --model tiny --per-task 4 --repeats 1      # a quick look

The floor is one plain forward pass over the same prompts (rendered and tokenized the same way, batched
the same way, the logits of the last position only, no KV cache kept): what scoring would cost if the
candidates were free. ``HFBackend.loglikelihood`` scores every candidate of a batch of instances in one
pass (the candidates after the prompt under a 4D attention mask). Each instance gets ``n`` candidates: its
own answers, then labels of the other closed-set tasks, cut to ``n``.

Time: the median over ``--repeats`` rounds, the floor and each ``n`` measured in turn in every round (the
machine's load average is printed with each round). Peak memory: what torch allocates on the CPU during the
pass, beyond what was allocated before it (the weights), from a torch.profiler memory profile: every
allocation and free of torch's CPU allocator, in order, and the highest running total. Kernels' scratch
buffers are tensors from that allocator too, so they count; Python objects do not. On a GPU,
``torch.cuda.max_memory_allocated`` gives the same figure. Targets: both ratios at most 1.2.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

TARGET = 1.2


def with_candidates(requests, labels: list[str], n: int):
    """Each request's own answers first, then other labels it lacks, cut to ``n``."""
    out = []
    for messages, answers in requests:
        extra = [label for label in labels if label not in answers]
        out.append((messages, (list(answers) + extra)[:n]))
    return out


def floor_pass(backend, requests) -> None:
    """A plain forward pass over the prompts: the last position's logits, no cache kept."""
    import torch

    prompts = [backend.encoder.prompt_ids(messages) for messages, _ in requests]
    with torch.inference_mode():
        for batch in backend._batches([len(p) for p in prompts]):
            ids, mask = backend._left_pad([prompts[i] for i in batch])
            backend.model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                          use_cache=False, logits_to_keep=1)


def peak_allocated(work) -> int:
    """Bytes torch holds at most during ``work`` beyond what it held before: the highest running total of
    the CPU allocator's allocations and frees in a profiler memory profile."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        work()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type().name == "CPU")
    total = peak = 0
    for _, nbytes in events:
        total += nbytes
        peak = max(peak, total)
    return peak


def main() -> None:
    import torch

    from rescue_train.data import load_samples
    from rescue_train.evaluation.protocols import rank_request
    from rescue_train.inference import BackendSpec, EngineOptions, make_backend
    from rescue_train.inference.presets import model_folder
    from rescue_train.tasks import CLOSED_SET_TASKS, build

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="a model preset (configs/model: smollm2, ...), tiny, or a local model folder")
    parser.add_argument("--data", default="bundled")
    parser.add_argument("--per-task", type=int, default=6, help="instances per closed-set task")
    parser.add_argument("--candidates", default="2,10,20")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    samples = load_samples(args.data)
    instances = [i for t in CLOSED_SET_TASKS for i in build(t, samples).instances[:args.per_task]]
    requests = [rank_request(inst, "dialogue") for inst in instances]
    labels = list(dict.fromkeys(a for _, answers in requests for a in answers))
    sizes = [int(n) for n in args.candidates.split(",")]
    runs = {n: with_candidates(requests, labels, n) for n in sizes}
    backend = make_backend(BackendSpec(backend="hf", model=model_folder(args.model), batch_size=args.batch_size,
                                       engine=EngineOptions(dtype="float32", device="cpu")))
    prompt_tokens = sum(len(backend.encoder.prompt_ids(m)) for m, _ in requests)
    print(f"model {args.model}, float32 on CPU, {torch.get_num_threads()} torch threads, batch {args.batch_size}, "
          f"{len(instances)} instances ({args.per_task} per closed-set task), {prompt_tokens} prompt tokens, "
          f"{len(labels)} distinct labels for the candidates")
    for n, run in runs.items():
        tokens = sum(len(c) for m, a in run for c in backend.encoder.scoring_ids(m, a)[1])
        print(f"  {n} candidates: {sum(len(a) for _, a in run)} candidates, {tokens} candidate tokens")

    work = {"floor": lambda: floor_pass(backend, requests)}
    work.update({n: (lambda run=run: backend.loglikelihood(run)) for n, run in runs.items()})
    floor_pass(backend, requests[:2])  # warm-up
    backend.loglikelihood(runs[sizes[-1]][:2])
    seconds: dict = {key: [] for key in work}
    for round_ in range(args.repeats):
        for key, job in work.items():
            started = time.perf_counter()
            job()
            seconds[key].append(time.perf_counter() - started)
        print(f"round {round_ + 1}: " + ", ".join(f"{k}: {s[-1]:.2f} s" for k, s in seconds.items())
              + f" (load average {os.getloadavg()[0]:.2f})")
    peaks = {key: peak_allocated(job) for key, job in work.items()}
    floor_s = statistics.median(seconds["floor"])
    print(f"floor: {floor_s:.2f} s (median), peak {peaks['floor'] / 2**20:.1f} MiB allocated by the pass")
    for n in sizes:
        time_ratio = statistics.median(seconds[n]) / floor_s
        memory_ratio = peaks[n] / peaks["floor"]
        verdict = "meets" if max(time_ratio, memory_ratio) <= TARGET else "misses"
        print(f"{n:3d} candidates: {statistics.median(seconds[n]):.2f} s, time {time_ratio:.2f}x the floor; "
              f"peak {peaks[n] / 2**20:.1f} MiB, memory {memory_ratio:.2f}x the floor ({verdict} the "
              f"{TARGET}x targets)")


if __name__ == "__main__":
    main()
