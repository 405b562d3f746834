"""``rescue-train cv``: a fine-tuned model's row over the whole benchmark, by cross-validation.

    rescue-train cv recipe=all_lora model=qwen2.5-7b-instruct data=/data/benchmark_191.jsonl \\
        launch.config_file=single_gpu eval.backend=vllm output_dir=runs/cv/qwen7b

One training run per test fold of the recipe's grouped k-fold split (the ordinary training path under
``accelerate launch``, each resumable), each evaluated on its own test fold with ``rescue-train eval run=`` (the
prompts it trained on), pooled into one ordinary results file in which every instance of the benchmark's
tasks is predicted exactly once, by the model that never saw its couple or family; optionally the base model
zero-shot on the same instances, with the paired difference per cell.

Parts: :mod:`.config` (the settings), :mod:`.plan` (data, split manifest, instances, the job list, estimates),
:mod:`.pool` (the pooling and its checks, the pooled results document), :mod:`.runner` (the whole). The
command is ``rescue_train.cli.cv``; runs are started as :mod:`rescue_train.jobs` says and executed by
:mod:`rescue_train.executor` (``launch.*``: local slots or SLURM jobs).
"""
