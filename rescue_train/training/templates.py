"""Training chat templates: each model family's chat layout, with ``{% generation %}`` markers.

trl's ``assistant_only_loss`` puts the loss on the tokens a template emits inside
``{% generation %}...{% endgeneration %}``; stock templates rarely carry these markers, so we ship our
own. Each one renders system/user/assistant messages exactly as the family's stock template does for
our prompts (always with a system message), and marks the answer plus the end-of-turn token, so the
model learns to stop. The run folder stores the template with the tokenizer, and the evaluator renders
prompts with it, so training and evaluation see the same text.
"""

from __future__ import annotations

# Qwen2/Qwen2.5, SmolLM2 and the tiny model: <|im_start|>role\n...<|im_end|>\n
CHATML = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- generation %}{{- message['content'] + '<|im_end|>' }}{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Llama 3.1 Instruct: header blocks closed by <|eot_id|>; the stock template opens the system message
# with its knowledge-cutoff lines, kept here so fine-tuning starts from the layout the model knows.
LLAMA3 = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- generation %}{{- message['content'] | trim + '<|eot_id|>' }}{%- endgeneration %}"
    "{%- elif message['role'] == 'system' %}"
    "{{- 'Cutting Knowledge Date: December 2023\\nToday Date: 26 Jul 2024\\n\\n' }}"
    "{{- message['content'] | trim + '<|eot_id|>' }}"
    "{%- else %}"
    "{{- message['content'] | trim + '<|eot_id|>' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)

TEMPLATES = {"chatml": CHATML, "llama3": LLAMA3}
# The token that closes an assistant turn in each template (what the loss must include).
END_OF_TURN = {"chatml": "<|im_end|>", "llama3": "<|eot_id|>"}


def get_template(name: str) -> str:
    try:
        return TEMPLATES[name]
    except KeyError:
        raise ValueError(f"unknown chat template {name!r}; expected one of {', '.join(TEMPLATES)}") from None
