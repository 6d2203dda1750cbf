"""Transformer shapes, parameter counts and training FLOPs.

The parallelism labs need one shared description of a model: how many
parameters it has, where they sit (attention, MLP, norms, embeddings), and how
much arithmetic one training token costs. :class:`TransformerConfig` holds the
shape; :data:`PRESETS` holds published models built from their official
configurations, and each preset's :meth:`~TransformerConfig.num_params`
equals the parameter count of its released checkpoint.

>>> PRESETS["llama3-8b"].num_params()
8030261248
>>> PRESETS["llama2-7b"].head_dim, PRESETS["llama3-70b"].kv_heads
(128, 8)

The closed forms Megatron-LM's papers use for GPT models (parameters,
FLOPs per iteration, days to train) live in :mod:`infralens.megatron_formulas`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields, typed
from infralens._validate import (
    check_choice,
    describe,
    divisible,
    positive_int,
    positive_number,
)

__all__ = [
    "NORMS",
    "PRESETS",
    "SHAPE_SPEC_KEYS",
    "SIZE_FIELDS",
    "TransformerConfig",
    "llama_ffn_hidden",
    "model_from",
    "parse_shape",
    "shaped_model",
    "training_flops",
]

NORMS = ("layernorm", "rmsnorm")
"""LayerNorm has a weight and a bias per channel; RMSNorm has only a weight."""


SIZE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab_size")
"""The :class:`TransformerConfig` sizes that must be positive integers."""


@dataclass(frozen=True)
class TransformerConfig:
    """The shape of a decoder-only transformer.

    ``gated_mlp`` selects a SwiGLU-style MLP (three ``hidden x ffn_hidden``
    matrices) instead of two; ``bias`` adds biases to every linear layer;
    ``learned_positions`` adds a ``seq_len x hidden`` position table (GPT-3)
    instead of rotary embeddings, which have no parameters.

    >>> TransformerConfig(layers=2, hidden=8, heads=2, kv_heads=2, ffn_hidden=32,
    ...                   vocab_size=10, seq_len=4).num_params()
    1776
    >>> TransformerConfig(layers=2, hidden=8, heads=3, kv_heads=3, ffn_hidden=32,
    ...                   vocab_size=10, seq_len=4)
    Traceback (most recent call last):
    ...
    ValueError: hidden must be divisible by heads: 8 % 3 = 2

    Raises ``ValueError`` for a size below 1, ``hidden`` not divisible by
    ``heads``, ``heads`` not divisible by ``kv_heads``, or an unknown ``norm``.
    """

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab_size: int
    seq_len: int
    gated_mlp: bool = False
    tied_embeddings: bool = False
    norm: str = "layernorm"
    bias: bool = False
    learned_positions: bool = False

    def __post_init__(self) -> None:
        for name in SIZE_FIELDS:
            positive_int(name, getattr(self, name))
        positive_int("seq_len", self.seq_len)
        check_choice("norm", self.norm, NORMS)
        divisible("hidden", self.hidden, "heads", self.heads)
        divisible("heads", self.heads, "kv_heads", self.kv_heads)
        check_fields(self)

    @property
    def head_dim(self) -> int:
        """Channels per attention head: ``hidden // heads``."""
        return self.hidden // self.heads

    def attention_params(self) -> int:
        """Parameters of one attention block: Q and O are h x h, K and V are h x (kv_heads·d).

        >>> PRESETS["llama3-8b"].attention_params()
        41943040
        """
        h, kv = self.hidden, self.kv_heads * self.head_dim
        weights = 2 * h * h + 2 * h * kv
        return weights + ((h + 2 * kv + h) if self.bias else 0)

    def mlp_params(self) -> int:
        """Parameters of one MLP: 2·h·f (3·h·f when gated), plus biases if any.

        >>> PRESETS["llama3-8b"].mlp_params()
        176160768
        """
        h, f = self.hidden, self.ffn_hidden
        matrices = 3 if self.gated_mlp else 2
        biases = (matrices - 1) * f + h if self.bias else 0
        return matrices * h * f + biases

    def norm_params(self) -> int:
        """Parameters of one normalisation layer: 2·h for LayerNorm, h for RMSNorm."""
        return 2 * self.hidden if self.norm == "layernorm" else self.hidden

    def layer_params(self) -> int:
        """Parameters of one transformer layer: attention, MLP and two norms."""
        return self.attention_params() + self.mlp_params() + 2 * self.norm_params()

    def embedding_params(self) -> int:
        """Token embedding (V·h), plus the position table (s·h) when positions are learned."""
        positions = self.seq_len * self.hidden if self.learned_positions else 0
        return self.vocab_size * self.hidden + positions

    def output_params(self) -> int:
        """The output projection to the vocabulary: V·h, or 0 when tied to the embedding."""
        return 0 if self.tied_embeddings else self.vocab_size * self.hidden

    def num_params(self) -> int:
        """All parameters: L layers, embeddings, the output layer and the final norm.

        N = L·(attention + MLP + 2·norm) + embedding + output + norm

        Buffers are not parameters: Hugging Face's Llama 2 checkpoints also
        store each layer's ``head_dim / 2`` rotary inverse frequencies, which
        the models do not train.

        >>> PRESETS["llama2-7b"].num_params()
        6738415616
        """
        body = self.layers * self.layer_params() + self.norm_params()
        return body + self.embedding_params() + self.output_params()

    def non_embedding_params(self) -> int:
        """Parameters outside the embedding and output layers: Kaplan et al.'s N.

        >>> m = PRESETS["llama3-8b"]
        >>> m.num_params() - m.non_embedding_params()
        1050673152
        """
        return self.num_params() - self.embedding_params() - self.output_params()


@typed
def training_flops(
    config: TransformerConfig, tokens: int, *, attention: bool = False
) -> int:
    """Training FLOPs for *tokens* tokens: the 6N rule, optionally with attention.

    C = 6·N·D, with N = ``config.num_params()`` and D = *tokens* (Kaplan et
    al. 2020 count only :meth:`~TransformerConfig.non_embedding_params`).
    ``attention=True`` adds Kaplan et al.'s attention term (their Table 1:
    2·n_layer·n_ctx·d_attn per token forward, three times that for training),
    6·L·s·h per token with s = ``config.seq_len`` and d_attn = h. Megatron's
    Eq. 3 (:func:`infralens.megatron_formulas.megatron_flops_per_iteration`)
    counts twice as much for attention.

    >>> f"{training_flops(PRESETS['llama3.1-405b'], 15_600_000_000_000):.2e}"
    '3.80e+25'
    >>> training_flops(PRESETS["llama3-8b"], 0)
    0

    Raises ``ValueError`` if *tokens* is negative.
    """
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise TypeError(f"tokens must be an int, got {type(tokens).__name__}")
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens}")
    per_token = 6 * config.num_params()
    if attention:
        per_token += 6 * config.layers * config.seq_len * config.hidden
    return per_token * tokens


def llama_ffn_hidden(
    dim: int, multiple_of: int, ffn_dim_multiplier: Fraction | None = None
) -> int:
    """The SwiGLU width Meta's Llama code derives from ``dim``.

    f = ⌊2·4·dim / 3⌋, then ⌊multiplier·f⌋ if a multiplier is given, then
    rounded up to a multiple of ``multiple_of``. Pass the multiplier as a
    ``Fraction`` so the floor is exact.

    >>> llama_ffn_hidden(4096, 256)
    11008
    >>> llama_ffn_hidden(16384, 4096, Fraction("1.2"))
    53248
    >>> llama_ffn_hidden(4096, 0)
    Traceback (most recent call last):
    ...
    ValueError: multiple_of must be >= 1, got 0
    """
    positive_int("dim", dim)
    positive_int("multiple_of", multiple_of)
    f = 2 * 4 * dim // 3
    if ffn_dim_multiplier is not None:
        f = int(positive_number("ffn_dim_multiplier", ffn_dim_multiplier) * f)
    return -(-f // multiple_of) * multiple_of


def _llama(
    layers: int, dim: int, heads: int, kv_heads: int, vocab: int, seq: int, ffn: int
) -> TransformerConfig:
    return TransformerConfig(
        layers=layers,
        hidden=dim,
        heads=heads,
        kv_heads=kv_heads,
        ffn_hidden=ffn,
        vocab_size=vocab,
        seq_len=seq,
        gated_mlp=True,
        norm="rmsnorm",
    )


_M13 = Fraction("1.3")
PRESETS: dict[str, TransformerConfig] = {
    # Brown et al. 2020, Table 2.1; GPT-2's 50,257-token vocabulary, learned
    # positions, biases and LayerNorm, output tied to the embedding.
    "gpt3-175b": TransformerConfig(
        layers=96,
        hidden=12288,
        heads=96,
        kv_heads=96,
        ffn_hidden=4 * 12288,
        vocab_size=50257,
        seq_len=2048,
        tied_embeddings=True,
        bias=True,
        learned_positions=True,
    ),
    # Meta's Llama 2 code (multiple_of 256; 70B: n_kv_heads 8, multiplier 1.3,
    # multiple_of 4096); 32,000 tokens and 4,096 positions (Touvron et al. 2023).
    "llama2-7b": _llama(32, 4096, 32, 32, 32000, 4096, llama_ffn_hidden(4096, 256)),
    "llama2-13b": _llama(
        40, 5120, 40, 40, 32000, 4096, llama_ffn_hidden(5120, 256)
    ),
    "llama2-70b": _llama(
        80, 8192, 64, 8, 32000, 4096, llama_ffn_hidden(8192, 4096, _M13)
    ),
    # Meta's llama-models model_args: 128,256 tokens in the released checkpoints.
    "llama3-8b": _llama(
        32, 4096, 32, 8, 128256, 8192, llama_ffn_hidden(4096, 1024, _M13)
    ),
    "llama3-70b": _llama(
        80, 8192, 64, 8, 128256, 8192, llama_ffn_hidden(8192, 4096, _M13)
    ),
    "llama3.1-405b": _llama(
        126,
        16384,
        128,
        8,
        128256,
        131072,
        llama_ffn_hidden(16384, 4096, Fraction("1.2")),
    ),
}
"""Published models, built from their official configurations (see the lab pages)."""


SHAPE_SPEC_KEYS = (*SIZE_FIELDS, "gated_mlp")
"""The keys of a shape spec (:func:`parse_shape`); the first three and ``vocab_size``
are required."""


@typed
def parse_shape(shape: str, seq_len: int) -> TransformerConfig:
    """The model a shape spec ``key=value,key=value`` (*shape*) describes, at *seq_len*
    tokens.

    Keys are those of :data:`SHAPE_SPEC_KEYS`. ``kv_heads`` defaults to ``heads``
    (multi-head attention), ``ffn_hidden`` to 4·``hidden`` and ``gated_mlp`` (``true``
    or ``false``) to false. The rest is the Llama family's: RMSNorm, no biases,
    rotary positions, an output layer apart from the embedding. The plan file's
    ``training`` keys of the same names build the same model
    (:mod:`infralens.planner.plan_file`).

    >>> m = parse_shape("layers=32,hidden=4096,heads=32,kv_heads=8,ffn_hidden=14336,"
    ...                 "vocab_size=128256,gated_mlp=true", 8192)
    >>> m.num_params() == PRESETS["llama3-8b"].num_params()
    True
    >>> parse_shape("layers=2, hidden=8, heads=2, vocab_size=10", 4).ffn_hidden
    32
    >>> parse_shape("layers=2,hiden=8,heads=2,vocab_size=10", 4)
    Traceback (most recent call last):
    ...
    ValueError: model shape has an unknown key 'hiden'; did you mean 'hidden'?
    >>> parse_shape("layers=2,hidden=8,heads=2,vocab_size=10,gated_mlp=yes", 4)
    Traceback (most recent call last):
    ...
    ValueError: model shape key gated_mlp must be true or false, got 'yes'

    Raises ``ValueError`` naming the key that is unknown, repeated, missing, not a
    whole number or a shape :class:`TransformerConfig` refuses (``hidden`` not
    divisible by ``heads``, ...).
    """
    import difflib

    given: dict[str, str] = {}
    for item in shape.split(","):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep:
            raise ValueError(
                f"model shape must be key=value pairs separated by commas; "
                f"got {describe(item.strip())}"
            )
        if key not in SHAPE_SPEC_KEYS:
            close = difflib.get_close_matches(key[:40], SHAPE_SPEC_KEYS, n=1)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else (f"use {', '.join(SHAPE_SPEC_KEYS)}")
            )
            raise ValueError(
                f"model shape has an unknown key {describe(key)}; {hint}"
            )
        if key in given:
            raise ValueError(f"model shape gives {key} twice")
        given[key] = value
    missing = [
        k for k in ("layers", "hidden", "heads", "vocab_size") if k not in given
    ]
    if missing:
        raise ValueError(f"model shape needs {', '.join(missing)}")
    sizes: dict[str, int] = {}
    for key, value in given.items():
        if key == "gated_mlp":
            if value.lower() not in ("true", "false"):
                raise ValueError(
                    f"model shape key gated_mlp must be true or false, got {describe(value)}"
                )
            continue
        if not value.isdigit() or len(value) > 19:
            raise ValueError(
                f"model shape key {key} must be a whole number, got {describe(value)}"
            )
        sizes[key] = int(value)
    gated = given.get("gated_mlp", "false").lower() == "true"
    return shaped_model(**sizes, seq_len=seq_len, gated_mlp=gated)


@typed
def shaped_model(
    layers: int,
    hidden: int,
    heads: int,
    vocab_size: int,
    seq_len: int,
    *,
    kv_heads: int | None = None,
    ffn_hidden: int | None = None,
    gated_mlp: bool = False,
) -> TransformerConfig:
    """The model a shape names, the rest the Llama family's: what a shape spec
    (:func:`parse_shape`) and a plan file's shape keys both build.

    ``kv_heads`` defaults to ``heads``, ``ffn_hidden`` to 4·``hidden``; RMSNorm, no
    biases, rotary positions, an output layer apart from the embedding.

    >>> shaped_model(2, 8, 2, 10, 4).num_params()  # 2·(256 + 512 + 16) + 8 + 2·80
    1736
    >>> shaped_model(2, 8, 2, 10, 4, kv_heads=4)
    Traceback (most recent call last):
    ...
    ValueError: heads must be divisible by kv_heads: 2 % 4 = 2

    Raises ``ValueError`` as :class:`TransformerConfig` does.
    """
    return TransformerConfig(
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=heads if kv_heads is None else kv_heads,
        ffn_hidden=4 * hidden if ffn_hidden is None else ffn_hidden,
        vocab_size=vocab_size,
        seq_len=seq_len,
        gated_mlp=gated_mlp,
        norm="rmsnorm",
    )


@typed
def model_from(model: str, seq_len: int) -> TransformerConfig:
    """A :data:`PRESETS` model by name, or the shape a spec with ``=`` describes
    (:func:`parse_shape`, at *seq_len*): what ``rank --model`` takes.

    >>> model_from("llama3-8b", 4096) is PRESETS["llama3-8b"]
    True
    >>> model_from("llama9", 4096)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: model must be one of 'gpt3-175b', 'llama2-7b', ... got 'llama9'
    """
    if "=" in model:
        return parse_shape(model, seq_len)
    if model not in PRESETS:
        names = ", ".join(repr(k) for k in PRESETS)
        raise ValueError(
            f"model must be one of {names}, or a shape "
            f"layers=..,hidden=..; got {describe(model, 16)}"
        )
    return PRESETS[model]
