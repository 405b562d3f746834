"""Shared pieces of the evaluator's tests: offline settings, a tiny LoRA adapter, counting backends."""

from __future__ import annotations

import os

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_name] = "1"

from pathlib import Path  # noqa: E402


def make_adapter(model_dir: str | Path, out_dir: str | Path, seed: int = 0) -> Path:
    """A LoRA adapter with random (not zero) B matrices, so it really changes the model's outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                        init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    with torch.no_grad():  # large enough to move the ranking of the random tiny model
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.mul_(20.0)
    model.save_pretrained(out_dir)
    return Path(out_dir)


def adapter_run(folder: str | Path, test_fold: int, seed: int = 0, recipe: str = "rpp_lora") -> Path:
    """A training run folder as `rescue-train train` leaves it, on the bundled data's default 5-fold split: an
    adapter with the tiny model's tokenizer, the split manifest, config.yaml and provenance.json (the adapter is
    a random LoRA, so that no training is needed)."""
    import json

    from transformers import AutoTokenizer

    from rescue_train.data import load_samples
    from rescue_train.data.splits import make_manifest
    from rescue_train.tiny import tiny_model_path

    folder = Path(folder)
    make_adapter(tiny_model_path(), folder / "adapter", seed=seed)
    AutoTokenizer.from_pretrained(tiny_model_path()).save_pretrained(folder / "adapter")
    make_manifest(load_samples("bundled"), "kfold", 5, 0).save(folder / "data" / "split_manifest.json")
    task = recipe.split("_")[0]
    (folder / "config.yaml").write_text(f"name: {recipe}\ndata:\n  split: kfold\n  test_fold: {test_fold}\n")
    (folder / "provenance.json").write_text(json.dumps({
        "kind": "lora_sft", "recipe": recipe, "tasks": {task: 1.0}, "base_model": str(tiny_model_path()),
        "model_path": "tiny", "adapter": "adapter", "split_manifest": "data/split_manifest.json",
        "data": {"test_fold": test_fold}, "status": "finished"}))
    return folder


def with_repetition_penalty(model_dir: str | Path, out_dir: str | Path, penalty: float = 2.0) -> Path:
    """A copy of a model folder whose generation config sets a repetition penalty, as Qwen2.5's does (1.05;
    2.0 here, enough to change the tiny random model's greedy answers)."""
    import json
    import shutil

    out = Path(shutil.copytree(model_dir, out_dir))
    config = json.loads((out / "generation_config.json").read_text())
    (out / "generation_config.json").write_text(json.dumps({**config, "repetition_penalty": penalty}))
    return out


class Counting:
    """Wraps a backend and counts the instances it is asked about; optionally fails after some calls,
    like a run killed mid-way."""

    def __init__(self, inner, fail_after_calls: int | None = None):
        self.inner, self.fail_after_calls = inner, fail_after_calls
        self.calls = 0
        self.generated = 0
        self.scored = 0
        self.name, self.can_rank = inner.name, inner.can_rank

    def _tick(self):
        if self.fail_after_calls is not None and self.calls >= self.fail_after_calls:
            raise KeyboardInterrupt("simulated kill")
        self.calls += 1

    def generate(self, prompts, **kwargs):
        self._tick()
        self.generated += len(prompts)
        return self.inner.generate(prompts, **kwargs)

    def loglikelihood(self, requests, **kwargs):
        self._tick()
        self.scored += len(requests)
        return self.inner.loglikelihood(requests, **kwargs)

    def describe(self):
        return self.inner.describe()

    def close(self):
        pass


def task_answer(content: str) -> str:
    """A well-formed answer to a task or judge prompt: judge prompts are graded by comparing predicted and
    reference emotion, task prompts get a fixed answer (the first candidate for closed-set questions)."""
    import json
    import re

    if "Reference emotion:" in content:
        ref = re.search(r"Reference emotion: (.*)", content).group(1)
        pred = re.search(r"Predicted emotion: (.*)", content).group(1)
        return json.dumps({"score": 5 if ref == pred else 2, "reason": "compared"})
    if "Reference viewpoints" in content:
        if "source_target_score" in content:
            return 'Grades: {"source_target_score": 1, "viewpoint_score": 3, "reason": "close"}'
        return '{"score": 3, "reason": "partly"}'
    if '"intensity"' in content or "predicted_intensity_score" in content:
        return '{"emotion": "feels hurt", "intensity": 5}'
    if "viewpoint" in content:
        return '{"viewpoints": [{"target": "Therapist", "viewpoint": "she does not listen"}]}'
    match = re.search(r"Candidates: ([^,\n]+)", content)
    return match.group(1).strip() if match else "no idea"


class FakeOpenAIServer:
    """A real local HTTP server speaking the OpenAI chat-completions protocol, with answers that depend on
    the request: judge prompts are graded by comparing predicted and reference emotion, task prompts get a
    fixed well-formed answer (the first candidate for closed-set questions). ``fail_first`` requests get a
    500 (to exercise the client's retries); prompts containing ``REJECT`` get a 400. ``answer`` (the last
    message's text -> the reply) replaces the built-in answers."""

    def __init__(self, fail_first: int = 0, answer=None):
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests: list[dict] = []
        self.fail_first = fail_first
        server = self
        reply = answer or task_answer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                body["_auth"] = self.headers.get("Authorization")
                server.requests.append(body)
                content = body["messages"][-1]["content"]
                if len(server.requests) <= server.fail_first:
                    self._send(500, {"error": {"message": "try again"}})
                elif "REJECT" in content:
                    self._send(400, {"error": {"message": "content filter"}})
                else:
                    self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                     "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                         "role": "assistant", "content": reply(content)}}]})

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("retry-after-ms", "10")  # keep the client's backoff short in tests
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
