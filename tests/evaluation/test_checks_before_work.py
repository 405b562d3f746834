"""What an evaluation or an audit will need is checked before any work, one line each: an API endpoint that does
not answer (a real closed port), OpenAI's API without a key, the judge only when a task it grades is evaluated,
GPUs for data_parallel x tensor_parallel_size, data_parallel only with vLLM."""

from __future__ import annotations

import socket

from rescue_train.cli import main


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_eval_refuses_an_endpoint_that_does_not_answer_before_loading_anything(tmp_path, capsys, monkeypatch):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    out = tmp_path / "out"
    assert main(["eval", "model=served", "backend=openai", f"base_url={url}", "tasks=[ssp]", f"output_dir={out}"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"rescue-train eval: error: base_url={url}: the server does not answer (")
    assert error.rstrip().endswith("start it, or correct base_url") and not out.exists()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["eval", "model=gpt-5.4", "backend=openai", "tasks=[ssp]", f"output_dir={out}"]) == 2
    assert "backend=openai: set the API key in the environment variable OPENAI_API_KEY" in capsys.readouterr().err


def test_the_judge_is_checked_when_a_task_it_grades_is_evaluated(tmp_path, capsys):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    judge = ["judge.backend=openai", "judge.model=j", f"judge.base_url={url}"]
    base = ["model=tiny", "limit=1", "max_new_tokens=2", "bertscore=none", "progress=false"]
    assert main(["eval", *base, "tasks=[er]", *judge, f"output_dir={tmp_path / 'er'}"]) == 2
    assert f"judge.base_url={url}: the server does not answer" in capsys.readouterr().err
    assert not (tmp_path / "er").exists()
    assert main(["eval", *base, "tasks=[itp]", *judge, f"output_dir={tmp_path / 'itp'}"]) == 0  # ITP is not judged
    assert (tmp_path / "itp" / "results.json").is_file()


def test_data_parallel_needs_vllm_and_its_gpus(tmp_path, capsys, monkeypatch):
    assert main(["eval", "model=tiny", "backend=hf", "data_parallel=2", f"output_dir={tmp_path}"]) == 2
    assert "data_parallel=2: it takes a count >= 1, and more than one engine only with backend=vllm" in \
        capsys.readouterr().err
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    assert main(["eval", "model=tiny", "backend=vllm", "data_parallel=2", "tensor_parallel_size=2",
                 f"output_dir={tmp_path}"]) == 2
    assert "data_parallel=2 x tensor_parallel_size=2 needs 4 GPUs; 3 visible" in capsys.readouterr().err


def test_audit_checks_its_judge_before_any_request(tmp_path, capsys):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    out = tmp_path / "audit"
    assert main(["audit", "reference", "data=bundled", "backend=openai", "model=judge", f"base_url={url}",
                 f"output_dir={out}", "limit=1"]) == 2
    assert f"base_url={url}: the server does not answer" in capsys.readouterr().err


def test_a_hub_model_not_in_the_cache_offline_names_offline_mode_and_the_fetch_command(tmp_path, capsys,
                                                                                       monkeypatch):
    import sys

    import huggingface_hub

    monkeypatch.setattr(sys.modules[huggingface_hub.is_offline_mode.__module__], "HF_HUB_OFFLINE", True)
    name = "rescue-train-tests/not-cached"
    assert main(["eval", f"model={name}", "tasks=[itp]", f"output_dir={tmp_path / 'out'}"]) == 2
    assert capsys.readouterr().err == (
        f"rescue-train eval: error: model={name}: not in the Hugging Face cache, and offline mode (HF_HUB_OFFLINE=1) "
        f"downloads nothing: fetch it once online with `hf download {name}`, or unset HF_HUB_OFFLINE\n")
    assert not (tmp_path / "out").exists()
