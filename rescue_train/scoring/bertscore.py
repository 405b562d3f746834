"""BERTScore F1 for the generation tasks, through the bert-score package.

Defaults follow the reference scripts: distilbert-base-uncased, its default layer (5), no idf weighting,
no baseline rescaling. A local model folder needs ``num_layers`` (bert-score only knows layers by name).

What is compared is the task's choice (``Task.bertscore_texts``):

* ER: the predicted emotion phrase against the annotated emotion description;
* VP (our protocol; the authors never implemented one): the predicted viewpoint strings joined with
  ``"; "`` in the model's order, against the gold viewpoint strings joined the same way in annotation order;
* RSG: the generated therapist turn against the real one.

An empty prediction (a parse failure) scores 0 without calling the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ..settings import meaning
from ..tasks import TASKS


@dataclass
class BertScoreConfig:
    model: str = field(default="distilbert-base-uncased", metadata=meaning(
        "a name bert-score knows, a local folder, or none"))
    num_layers: Optional[int] = field(default=None, metadata=meaning(
        "None: bert-score's default for a known name (distilbert: 5)", low=1))
    idf: bool = field(default=False, metadata=meaning("weight tokens by inverse document frequency (the references')"))
    rescale: bool = field(default=False, metadata=meaning("rescale with bert-score's baseline (known models only)"))
    batch_size: int = field(default=64, metadata=meaning("pairs per BERTScore batch", low=1, hashed=False))
    device: Optional[str] = field(default=None, metadata=meaning(
        "cpu, cuda, ... (default: a GPU when there is one)", hashed=False))


def texts(task: str, gold: Any, prediction: Any) -> tuple[str, str]:
    """(candidate, reference) strings for one record."""
    return TASKS[task].bertscore_texts(gold, prediction)


def _unavailable(model: str, exc: Exception) -> ValueError:
    return ValueError(f"BERTScore model {model!r} could not be loaded ({str(exc).splitlines()[0]}); offline, point "
                      "bertscore.model at a local folder with bertscore.num_layers, or turn it off with bertscore=none")


def check_model(model: str, num_layers: int | None) -> None:
    """Fail now, not after every prediction, when the BERTScore model cannot be used: a folder or hub name
    without a layer bert-score knows, or a model whose configuration cannot be found (offline, a typo)."""
    from bert_score.utils import model2layers
    from transformers import AutoConfig

    if num_layers is None and model not in model2layers:
        raise ValueError(f"bertscore.model={model!r} is not a model bert-score knows by name: give "
                         "bertscore.num_layers too (e.g. 6 for all-MiniLM-L6)")
    try:
        AutoConfig.from_pretrained(model)
    except (OSError, ValueError) as exc:
        raise _unavailable(model, exc) from None


class BertScore:
    def __init__(self, model: str = "distilbert-base-uncased", num_layers: int | None = None, idf: bool = False,
                 rescale: bool = False, batch_size: int = 64, device: str | None = None,
                 idf_sentences: Sequence[str] | None = None):
        import bert_score

        check_model(model, num_layers)
        try:
            self.scorer = bert_score.BERTScorer(
                model_type=model, num_layers=num_layers, idf=idf, idf_sents=list(idf_sentences or []) if idf else None,
                rescale_with_baseline=rescale, lang="en" if rescale else None, batch_size=batch_size, device=device)
        except OSError as exc:
            raise _unavailable(model, exc) from None
        self.settings = {"model": model, "num_layers": self.scorer.num_layers, "idf": idf, "rescale": rescale}

    def f1(self, candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        scores = [0.0] * len(candidates)
        kept = [i for i, (c, r) in enumerate(zip(candidates, references)) if c.strip() and r.strip()]
        if kept:
            _, _, f1 = self.scorer.score([candidates[i] for i in kept], [references[i] for i in kept])
            for i, value in zip(kept, f1.tolist()):
                scores[i] = float(value)
        return scores
