#!/usr/bin/env bash
# The whole loop on the bundled synthetic data, on a CPU, in a few minutes:
# stats -> convert -> train a tiny LoRA (accelerate launch) -> evaluate base and adapter -> report -> baselines.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
OUT=${DEMO_OUT:-runs/demo}
rm -rf "$OUT"

echo "== 1. what the task rules make of the bundled data (beside the paper's Table 6)"
rescue-train stats bundled | head -16
echo "== 2. convert to training and evaluation datasets"
rescue-train convert bundled --output-dir "$OUT/data"
echo "== 3. fine-tune the tiny model with LoRA on SSP (fold 0 held out)"
accelerate launch --num_processes 1 --num_machines 1 --mixed_precision no --dynamo_backend no \
    train.py recipe=ssp_lora model=tiny train.max_steps=30 train.eval_steps=15 output_dir="$OUT/ssp_lora"
echo "== 4. evaluate base model and adapter on the held-out fold (rank scoring, transformers backend)"
rescue-train eval run="$OUT/ssp_lora" include_base=true tasks=[ssp,stp,rpp,itp] protocol=rank \
    bertscore=none output_dir="$OUT/eval"
echo "== 5. report beside the paper's Table 5 / Table 11"
rescue-train report "$OUT/eval/base" "$OUT/eval/ssp_lora" --output-dir "$OUT/report"
echo "== 6. trivial baselines on the same held-out instances, beside the two models (both scenarios)"
rescue-train baselines bundled --tasks itp rpp stp ssp --test-fold 0 \
    --predictions base="$OUT/eval/base" tiny-lora="$OUT/eval/ssp_lora" | sed -n '/== both ==/,$p'
echo "Demo outputs are in $OUT/ (report: $OUT/report)."
