"""Rank scoring on transformers: one pass per batch with every candidate after its prompt under a 4D mask
gives the log-likelihoods of scoring each prompt + candidate as its own sequence (the reference), on every
closed-set task, in both answer formats, with an adapter, for each model family the presets cover (random
tiny weights; the sliding-window families with a window shorter than the prompts), under SDPA and eager
attention."""

from __future__ import annotations

import pytest
from evaluation_helpers import make_adapter

from rescue_train.data import load_samples
from rescue_train.evaluation.protocols import rank_request
from rescue_train.inference.hf import HFBackend, candidate_layout, visible
from rescue_train.tasks import CLOSED_SET_TASKS, build
from rescue_train.tiny import tiny_model_path

TOLERANCE = 1e-4  # float32
WINDOW = 48  # shorter than every prompt, so the sliding-window layers really cut


def reference(backend: HFBackend, requests, adapter=None) -> list[list[float]]:
    """Each prompt + candidate run alone through the model's own forward, the log-probabilities of the
    candidate's tokens summed (what lm-evaluation-harness computes)."""
    import torch

    scores = []
    with backend._use(adapter), torch.inference_mode():
        for messages, answers in requests:
            prompt, conts = backend.encoder.scoring_ids(messages, answers)
            row = []
            for cont in conts:
                ids = torch.tensor([prompt + cont])
                logprobs = torch.log_softmax(backend.model(input_ids=ids).logits[0].float(), dim=-1)
                row.append(sum(logprobs[len(prompt) - 1 + k, t].item() for k, t in enumerate(cont)))
            scores.append(row)
    return scores


def assert_matches(backend, requests, adapter=None):
    ours = backend.loglikelihood(requests, adapter=adapter)
    theirs = reference(backend, requests, adapter)
    assert [len(row) for row in ours] == [len(row) for row in theirs]
    worst = max(abs(a.logprob - b) for x, y in zip(ours, theirs) for a, b in zip(x, y))
    assert worst < TOLERANCE, worst


@pytest.fixture(scope="module")
def requests():
    """Two instances of every closed-set task, in the label and the JSON answer format."""
    samples = load_samples("bundled")
    return [rank_request(inst, "dialogue", fmt) for fmt in ("label", "json") for task in CLOSED_SET_TASKS
            for inst in build(task, samples).instances[:2]]


def family_model(tmp_path, family: str):
    """A random two-layer model of ``family`` on the tiny model's tokenizer and chat template."""
    import torch
    import transformers
    from transformers import AutoTokenizer

    tiny = tiny_model_path()
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    common = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                  pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    configs = {
        "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
        "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
        # one sliding-window layer and one full one: the masks go in per layer kind
        "qwen2-sliding": ("Qwen2Config", "Qwen2ForCausalLM",
                          {"use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": 1}),
        "mistral-sliding": ("MistralConfig", "MistralForCausalLM", {"sliding_window": WINDOW}),
        "phi3-sliding": ("Phi3Config", "Phi3ForCausalLM", {"sliding_window": WINDOW}),
        # Gemma 3 alternates sliding and full layers; its config also takes a final logit softcap (Gemma 2's)
        "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                   {"head_dim": 16, "sliding_window": WINDOW, "sliding_window_pattern": 2,
                    "final_logit_softcapping": 5.0}),
    }
    config_class, model_class, extra = configs[family]
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**common, **extra))
    out = tmp_path / family
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


def test_layout_restarts_positions_and_ties_each_token_to_its_predictor():
    layout = candidate_layout([([5, 6, 7], [[8, 9], [10]]), ([5], [[11]])], pad=0)
    assert layout.ids.tolist() == [[5, 6, 7, 8, 9, 10], [5, 11, 0, 0, 0, 0]]
    assert layout.position.tolist() == [[0, 1, 2, 3, 4, 3], [0, 1, 0, 0, 0, 0]]
    assert layout.segment.tolist() == [[0, 0, 0, 1, 1, 2], [0, 1, -1, -1, -1, -1]]
    # predictors: row 0's prompt end (column 2) for 8 and 10, token 8 (column 3) for 9; row 1's prompt end
    assert layout.source.tolist() == [2, 3, 6]
    assert [layout.source[s].item() for s in layout.slot] == [2, 3, 2, 6]
    assert layout.target.tolist() == [8, 9, 10, 11] and layout.owner.tolist() == [0, 0, 1, 2]
    sees = visible(layout.segment, layout.position)[0, 0].int().tolist()
    assert sees == [[1, 0, 0, 0, 0, 0],
                    [1, 1, 0, 0, 0, 0],
                    [1, 1, 1, 0, 0, 0],
                    [1, 1, 1, 1, 0, 0],
                    [1, 1, 1, 1, 1, 0],
                    [1, 1, 1, 0, 0, 1]]  # the second candidate skips the first
    padded = visible(layout.segment, layout.position)[1, 0].int().tolist()
    assert padded[1][:2] == [1, 1] and padded[3] == [0, 0, 0, 1, 0, 0]  # padding sees itself only
    windowed = visible(layout.segment, layout.position, window=2)[0, 0].int().tolist()
    assert windowed[4] == [0, 0, 0, 1, 1, 0] and windowed[5] == [0, 0, 1, 0, 0, 1]  # by position, not column


@pytest.mark.slow
def test_tiny_model_matches_the_reference_with_and_without_adapter(requests, tmp_path, one_torch_thread):
    tiny = str(tiny_model_path())
    backend = HFBackend(tiny, adapters={"lora": str(make_adapter(tiny, tmp_path / "lora"))}, dtype="float32",
                        device="cpu", batch_size=3)
    for adapter in (None, "lora"):
        assert_matches(backend, requests, adapter)
    moved = backend.loglikelihood(requests[:2], adapter="lora")[0][0].logprob
    assert abs(moved - backend.loglikelihood(requests[:2])[0][0].logprob) > 0.1  # the adapter applies


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "qwen3", "qwen2-sliding", "mistral-sliding", "phi3-sliding",
                                    "gemma3"])
def test_model_families_match_the_reference(family, requests, tmp_path, one_torch_thread):
    backend = HFBackend(family_model(tmp_path, family), dtype="float32", device="cpu", batch_size=4)
    assert_matches(backend, requests)
    if family in ("qwen2-sliding", "gemma3"):  # eager attention adds the mask: 0 / dtype-min floats
        backend.model.set_attn_implementation("eager")
        assert_matches(backend, requests)


def test_attention_without_custom_masks_is_refused(tmp_path):
    from rescue_train.inference.hf import attention_masks

    class Config:
        _attn_implementation = "flash_attention_2"

    layout = candidate_layout([([1, 2], [[3]])], pad=0)
    with pytest.raises(ValueError, match="sdpa or eager"):
        attention_masks(Config(), layout.segment, layout.position, None)
