"""Builds HHEM-2.1-Open look-alikes and saves them in the published checkpoint layout.

Same architecture as Vectara's checkpoint (T5 encoder, gated-GELU FFN,
relative position buckets, 2-label token-classification head, weights under
`t5.`), tiny dimensions, random weights, and a T5-style Unigram tokenizer
trained locally with the `tokenizers` library. The real loader reads it; the
reference model (transformers' T5ForTokenClassification on the same weights)
is kept for comparisons. Scores of random weights mean nothing: tests assert
arithmetic, plumbing and accounting, never quality.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, T5Config, T5ForTokenClassification

# Written out here, not imported: the tests check the code against the published template.
HHEM_PROMPT = (
    "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {text1}\n\nHypothesis: {text2}"
)
# fmt: off
WORDS = (
    "the", "a", "of", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at", "from", "it",
    "this", "are", "be", "or", "an", "which", "has", "have", "had", "not", "but", "mars", "moon", "moons",
    "planet", "orbit", "two", "phobos", "deimos", "rover", "landed", "curiosity", "year", "atmosphere",
    "thick", "thin", "cold", "policy", "refund", "days", "customer", "order", "shipping", "return",
    "account", "password", "reset", "support", "premium", "plan", "price", "invoice", "tax", "europe",
    "germany", "france", "poland", "portugal", "law", "contract", "clause", "warranty", "battery",
    "device", "screen", "determine", "if", "hypothesis", "true", "given", "premise", "answer", "question",
    "document", "source", "claim", "supported", "unsupported",
)
# fmt: on


def corpus(seed: int = 7, lines: int = 400) -> list[str]:
    """Sentences over WORDS plus the prompt template, to train a tokenizer on."""
    rng = random.Random(seed)
    text = [HHEM_PROMPT.format(text1="a b c", text2="d e f")]
    for _ in range(lines):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 16))]
        words[0] = words[0].capitalize()
        text.append(" ".join(words) + rng.choice([".", ".", "!", "?"]))
    return text


def train_tokenizer(
    path: Path, texts: list[str] | None = None, vocab_size: int = 300, kind: str = "unigram"
) -> Tokenizer:
    """A T5-shaped fast tokenizer: Metaspace, `</s>` appended, <pad>=0 </s>=1 <unk>=2.

    `unigram` is T5's own kind; `bpe` (punctuation split off) comes closer to
    flan-t5's tokens per word when trained on a small, repetitive corpus.
    """
    special = ["<pad>", "</s>", "<unk>"]
    metaspace = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    trainer: trainers.Trainer
    if kind == "bpe":
        tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([metaspace, pre_tokenizers.Punctuation()])
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False)
    else:
        tokenizer = Tokenizer(models.Unigram())
        tokenizer.pre_tokenizer = metaspace
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size, special_tokens=special, unk_token="<unk>", show_progress=False
        )
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.train_from_iterator(texts if texts is not None else corpus(), trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    tokenizer.save(str(path))
    return tokenizer


def small_config(vocab_size: int, d_model: int = 32, d_kv: int = 8, d_ff: int = 48, **extra: Any) -> T5Config:
    """A tiny T5 of the HHEM's architecture; larger sizes and `extra` settings (dropout) for one that is
    trained (tests/e2e/trained_hhem.py)."""
    return T5Config(
        vocab_size=vocab_size,
        d_model=d_model,
        d_kv=d_kv,
        d_ff=d_ff,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        feed_forward_proj="gated-gelu",
        pad_token_id=0,
        eos_token_id=1,
        **extra,
    )


def random_model(config: T5Config, seed: int, head_std: float = 0.15) -> T5ForTokenClassification:
    torch.manual_seed(seed)
    model = T5ForTokenClassification(config).eval()
    with torch.no_grad():
        # The default init saturates the softmax (scores of exactly 0 or 1), which
        # would hide arithmetic errors; a smaller head keeps scores inside (0, 1).
        model.classifier.weight.normal_(0.0, head_std)
        model.classifier.bias.zero_()
    return model


def save_hhem(
    model: T5ForTokenClassification, directory: Path, foundation: str, keep: str = "shared"
) -> None:
    """Write `model` the way Vectara's checkpoint is laid out: config.json + t5.-prefixed safetensors."""
    directory.mkdir(parents=True, exist_ok=True)
    drop = "transformer.encoder.embed_tokens.weight" if keep == "shared" else "transformer.shared.weight"
    tensors = {f"t5.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items() if k != drop}
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["HHEMv2ForSequenceClassification"],
        "model_type": "HHEMv2Config",
        "foundation": foundation,
        "prompt": HHEM_PROMPT,
        "torch_dtype": "float32",
    }
    (directory / "config.json").write_text(json.dumps(config, indent=2))


def random_hhem(foundation: Path, directory: Path, named: str, seed: int) -> T5ForTokenClassification:
    """An untrained tiny HHEM in `directory` (its config naming the foundation `named`), the foundation's
    tokenizer and T5 config in `foundation`; returns the model."""
    foundation.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(foundation / "tokenizer.json")
    config = small_config(vocab_size=max(320, tokenizer.get_vocab_size()))
    config.to_json_file(str(foundation / "config.json"))
    model = random_model(config, seed=seed)
    save_hhem(model, directory, named)
    return model


@dataclass
class TinyHHEM:
    model_dir: Path
    foundation_dir: Path
    reference: T5ForTokenClassification
    reference_tokenizer: PreTrainedTokenizerFast

    def reference_scores(self, pairs: list[tuple[str, str]]) -> list[float]:
        """The model card's predict(): template, pad the whole batch, one forward pass, position 0, softmax."""
        texts = [HHEM_PROMPT.format(text1=p, text2=h) for p, h in pairs]
        inputs = self.reference_tokenizer(texts, return_tensors="pt", padding=True)
        with torch.no_grad():
            logits = self.reference(**inputs).logits[:, 0, :]
        return torch.softmax(logits, dim=-1)[:, 1].tolist()
