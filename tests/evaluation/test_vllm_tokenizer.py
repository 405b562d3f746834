"""Which tokenizer folder the vLLM engine gets (no vLLM needed to decide it): an adapter folder has a tokenizer
but no model config, which vLLM tries to read and logs as an error on every run; the base model's tokenizer
serves instead when its vocabulary is the adapter's, since prompts reach vLLM as token ids."""

from __future__ import annotations

from transformers import AutoTokenizer

from rescue_train.inference.vllm import engine_tokenizer
from rescue_train.tiny import tiny_model_path


def test_an_adapters_tokenizer_is_replaced_by_the_base_models_only_when_the_vocabulary_is_the_same(tmp_path):
    base = str(tiny_model_path())
    same = tmp_path / "adapter"
    AutoTokenizer.from_pretrained(base).save_pretrained(same)  # as training saves it beside the adapter
    assert engine_tokenizer(str(same), base, AutoTokenizer.from_pretrained(same)) == base

    grown = AutoTokenizer.from_pretrained(base)
    grown.add_tokens(["<new_token>"])
    grown.save_pretrained(tmp_path / "grown")
    assert engine_tokenizer(str(tmp_path / "grown"), base, grown) == str(tmp_path / "grown")
    # no tokenizer given, or a model folder (it has a config vLLM can read): as given
    assert engine_tokenizer(None, base, None) == base
    assert engine_tokenizer(base, "other", None) == base
