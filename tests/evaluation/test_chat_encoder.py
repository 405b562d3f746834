"""The rank protocol's continuations: the one-rendering shortcut gives what one rendering per answer gives."""

import copy

import pytest
from transformers import AutoTokenizer

from rescue_train.data import load_samples
from rescue_train.inference.base import ChatEncoder
from rescue_train.tasks import TASKS, build, render
from rescue_train.tiny import tiny_model_path


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(tiny_model_path())


def test_shortcut_continuations_equal_per_answer_renderings(tokenizer):
    encoder = ChatEncoder(tokenizer)
    inst = build("rpp", load_samples("bundled")).instances[0]
    messages = render(inst)
    answers = [TASKS["rpp"].answer(inst, "label", c) for c in inst.candidates]
    prompt, continuations = encoder.continuation_texts(messages, answers)
    assert prompt == encoder.prompt_text(messages)
    assert continuations == [encoder._continuation(prompt, messages, a) for a in answers]
    assert continuations[0] == "pursue_withdraw<|im_end|>"   # the answer and the end-of-turn token only


def test_a_template_that_rewrites_answers_gets_one_rendering_each(tokenizer):
    rewriting = copy.deepcopy(tokenizer)
    # appends each answer's length: the placeholder shortcut would write "(15)" for every answer
    rewriting.chat_template = tokenizer.chat_template.replace(
        "message['content'] + '<|im_end|>", "message['content'] + ' (' + (message['content'] | length | string) "
        "+ ')<|im_end|>")
    _, continuations = ChatEncoder(rewriting).continuation_texts([{"role": "user", "content": "Which?"}],
                                                                 ["track", "reframe"])
    assert continuations == ["track (5)<|im_end|>", "reframe (7)<|im_end|>"]


def test_scoring_ids_encode_each_text_on_its_own(tokenizer):
    encoder = ChatEncoder(tokenizer)
    inst = build("ssp", load_samples("bundled")).instances[0]
    messages = render(inst)
    answers = [TASKS["ssp"].answer(inst, "json", c) for c in inst.candidates]
    prompt, continuations = encoder.continuation_texts(messages, answers)
    assert encoder.scoring_ids(messages, answers) == (encoder.encode(prompt),
                                                      [encoder.encode(c) for c in continuations])
