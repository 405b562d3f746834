"""Test-wide settings: no model hub, no telemetry, a private cache for built models."""

import os
from pathlib import Path

import pytest

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# --help wraps to the terminal: tests read it at one width, whatever terminal (if any) a test worker sees
os.environ.setdefault("COLUMNS", "120")

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


# The longest test files, longest first (``pytest --durations=0`` on two cores): the docs' command blocks, which run
# in order in one worker, then the end-to-end runs.
LONGEST = ("test_docs.py", "test_compare_lora.py", "test_cv_e2e.py", "test_vllm.py", "test_resume.py",
           "test_adapter_serving.py", "test_gpu_check.py")


def pytest_collection_modifyitems(items):
    """Each test file runs whole in one worker (scripts/test.sh: ``--dist loadfile``); the longest go first, so
    that the workers share the short ones at the end and finish together."""
    rank = {name: i for i, name in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST)))  # a stable sort: every other order is kept


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    """The real samples beside the checkout (research-only data, never copied into the project)."""
    if not (FIXTURES / "real").is_dir():
        pytest.skip(f"real fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture()
def one_torch_thread():
    """Tiny models run fastest on one thread, and far slower when two threads compete with other test
    processes on a 2-core machine; restore the setting afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def slurm() -> list[str]:
    """The ``launch.*`` overrides that send runs to the local one-node SLURM cluster (tests/slurm_helpers.py), or a
    skip naming why there is none."""
    from slurm_helpers import overrides, skip_reason

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    return overrides()
