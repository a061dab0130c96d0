"""The architecture of a decoder-only LLM: one frozen pydantic model of three parts by concern,
derived values as properties.

Conventions are those of transformers' modeling code (which `params.py` counts exactly). The core
fields (name, family, vocabulary, hidden size, layers, positions, norms, tied embeddings) sit on
`Architecture`; the rest in its parts (`cost_model.architecture_parts`, where each part's fields
and conventions are described): `attention` (`AttentionConfig`: GQA/MLA/DSA, sliding and global
layers, QK norms, sinks, the output gate, attention biases), `ffn` (`FfnConfig`: the dense MLP,
experts, router, shared experts and which layers are MoE) and `mixer` (`MixerConfig`: each
layer's token mixer and the linear-attention mixers' shape). Each part checks its own fields;
the rules across parts (one entry per layer in every per-layer list, MoE placement within the
layers, norms of a per-layer pattern, sliding windows with a mixer pattern) are here.

Users write one flat dict of field names (study TOML, `--batch` columns, our JSON, a record):
`Architecture` routes each key to the part whose `model_fields` declare it (`_route_flat`) and
dumps back to the same flat dict (`_dump_flat`), so stored files and records read back
unchanged, and an error names the field as the user wrote it (`config_error_from`). Code reads
the parts (`arch.ffn.num_experts`); a table that names fields as data reads them by their flat
name with `field_value`.
"""

from __future__ import annotations

import hashlib
import re
import weakref
from collections.abc import Mapping
from operator import attrgetter
from typing import Annotated, Any, Callable, Literal, Self

from pydantic import (
    BaseModel, ConfigDict, Field, SerializationInfo, SerializerFunctionWrapHandler, StrictBool,
    StrictInt, ValidationError, model_serializer, model_validator,
)

from cost_model.architecture_parts import (
    ATTENTION_MIXER, FULL_ATTENTION, GATED_DELTANET_MIXER, KIMI_DELTA_MIXER, LINEAR_MIXERS,
    MAMBA2_MIXER, MAX_EXPERTS, MAX_HEADS, MAX_LAYERS, MAX_TOKENS, MAX_VOCAB, MAX_WIDTH, NO_MIXER,
    PARALLEL_MAMBA2_MIXER, SLIDING_ATTENTION, AttentionConfig, FfnConfig, Layers, LayerType,
    MixerConfig, Tokens, Width,
)
from cost_model.errors import ConfigError

__all__ = [
    "ATTENTION_MIXER", "FULL_ATTENTION", "GATED_DELTANET_MIXER", "KIMI_DELTA_MIXER",
    "LINEAR_MIXERS", "MAMBA2_MIXER", "MAX_EXPERTS", "MAX_HEADS", "MAX_LAYERS", "MAX_TOKENS",
    "MAX_VOCAB", "MAX_WIDTH", "NO_MIXER", "PARALLEL_MAMBA2_MIXER", "SLIDING_ATTENTION",
    "Architecture", "AttentionConfig", "FfnConfig", "MixerConfig", "config_error_from",
    "design_name", "field_path", "field_value", "make_architecture", "mixer_pattern_name",
    "periodic_layer_types",
]

_WITH_ATTENTION = (ATTENTION_MIXER, PARALLEL_MAMBA2_MIXER)


class Architecture(BaseModel):
    """Shape of a decoder-only transformer LM; every field a transformers config can express."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    family: str = Field(default="custom", min_length=1)  # HF model_type it came from
    vocab_size: Annotated[StrictInt, Field(ge=1, le=MAX_VOCAB)]
    hidden_size: Width
    num_layers: Layers
    max_position_embeddings: Tokens
    # per layer (Gemma-2: 4 around attention and MLP; Gemma 4's MoE block 3 more:
    # transformers' Gemma4TextDecoderLayer post_feedforward_layernorm_1/_2,
    # pre_feedforward_layernorm_2)
    norms_per_layer: Annotated[StrictInt, Field(ge=1, le=7)] = 2
    tie_word_embeddings: StrictBool = False
    attention: AttentionConfig
    ffn: FfnConfig
    mixer: MixerConfig = MixerConfig()

    @model_validator(mode="before")
    @classmethod
    def _route_flat(cls, data: Any) -> Any:
        """A flat dict of field names -> each part's keys under the part (by the parts' own
        `model_fields`, so a new field needs no edit here); unknown keys stay at the top, where
        `extra="forbid"` names them. A part given whole (a dict or the part) is kept."""
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        routed: dict[str, dict[str, Any]] = {part: {} for part in _PARTS}
        for key, value in data.items():
            part = _PART_OF_FIELD.get(key)
            (out if part is None else routed[part])[key] = value
        for part, fields in routed.items():
            given = out.get(part, {})
            if isinstance(given, BaseModel) and fields:
                given = given.model_dump()
            out[part] = {**given, **fields} if isinstance(given, dict) else given
        return out

    @model_serializer(mode="wrap")
    def _dump_flat(self, handler: SerializerFunctionWrapHandler,
                   info: SerializationInfo) -> dict[str, Any]:
        """The flat dict users write: core fields, then each part's fields in its order."""
        dumped = handler(self)
        for part in _PARTS:
            dumped.update(dumped.pop(part, None) or {})
        return dumped

    def with_fields(self, **fields: Any) -> Architecture:
        """A validated copy with `fields` (flat names, as users write them) changed, each in
        its part."""
        return type(self).model_validate({**self.model_dump(), **fields})

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Architecture:
        """pydantic's unvalidated copy; `update` names fields of `Architecture` itself (a part's
        field by its flat name would be set beside the part, silently: use `with_fields`)."""
        misplaced = sorted(set(update or {}) - set(type(self).model_fields))
        if misplaced:
            raise TypeError(f"model_copy(update=...) of {misplaced}: fields of a part, "
                            "use `with_fields`")
        return super().model_copy(update=update, deep=deep)

    def __hash__(self) -> int:
        """pydantic's hash of a frozen model (of every field's value), kept per object: the
        caches keyed by an architecture look it up several times a trial (`kept`)."""
        return kept(self, "hash", _fields_hash)

    @model_validator(mode="after")
    def _cross_part_rules(self) -> Self:
        for rule in (_check_per_layer_lengths, _check_moe_layers, _check_layer_pattern):
            rule(self)
        return self

    # ---- layers of each kind (read from two parts, or a part and the layer count) ---------------
    @property
    def num_attention_layers(self) -> int:
        """Layers whose mixer is attention (full or sliding); the others have no mixer."""
        mixers = self.mixer.layer_mixers
        if mixers is None:
            return self.num_layers
        return sum(mixers.count(kind) for kind in _WITH_ATTENTION)

    @property
    def num_mixer_layers(self) -> int:
        """Layers with a token mixer of any kind (attention, linear or both)."""
        mixers = self.mixer.layer_mixers
        return self.num_layers if mixers is None else self.num_layers - mixers.count(NO_MIXER)

    @property
    def is_heterogeneous(self) -> bool:
        """True when layers differ beyond the sliding/MoE patterns (`layer_mixers`, FFN widths)."""
        return any(v is not None for v in (self.mixer.layer_mixers, self.ffn.layer_ffn_widths,
                                           self.ffn.layer_moe))

    @property
    def layer_is_sliding(self) -> tuple[bool, ...]:
        att = self.attention
        if att.sliding_window is None:
            return (False,) * self.num_layers
        if att.layer_types is None:
            return (True,) * self.num_layers
        return tuple(kind == SLIDING_ATTENTION for kind in att.layer_types)

    @property
    def num_sliding_layers(self) -> int:
        att = self.attention
        if att.sliding_window is None:
            return 0
        return (self.num_layers if att.layer_types is None
                else att.layer_types.count(SLIDING_ATTENTION))

    @property
    def num_full_attention_layers(self) -> int:
        """Attention layers that are not sliding (layers without a mixer are neither)."""
        return self.num_attention_layers - self.num_sliding_layers

    @property
    def num_global_attention_layers(self) -> int:
        """Full-attention layers shaped by `global_head_dim` / `num_global_kv_heads` (Gemma 4);
        0 when every attention layer has `head_dim` / `num_kv_heads`."""
        return self.num_full_attention_layers if self.attention.global_head_dim else 0

    @property
    def sliding_pattern(self) -> Literal["none", "all", "mixed"]:
        """Whether no layer, every layer or some layers use sliding-window attention."""
        sliding = self.num_sliding_layers
        return "none" if sliding == 0 else "all" if sliding == self.num_layers else "mixed"

    @property
    def layer_is_moe(self) -> tuple[bool, ...]:
        return tuple(self._is_moe_layer(i) for i in range(self.num_layers))

    def _is_moe_layer(self, layer: int) -> bool:
        ffn = self.ffn
        if ffn.layer_moe is not None:
            return ffn.is_moe and ffn.layer_moe[layer]
        after_dense = layer >= ffn.first_dense_layers
        return ffn.is_moe and after_dense and (layer + 1) % ffn.moe_layer_period == 0

    @property
    def num_moe_layers(self) -> int:
        """Layers i >= first_dense_layers with (i + 1) a multiple of moe_layer_period."""
        ffn = self.ffn
        if not ffn.is_moe:
            return 0
        if ffn.layer_moe is not None:
            return sum(ffn.layer_moe)
        period, first = ffn.moe_layer_period, min(ffn.first_dense_layers, self.num_layers)
        return self.num_layers // period - first // period

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense FFN (with `layer_ffn_widths`: those of width > 0)."""
        if self.ffn.layer_ffn_widths is not None:
            return sum(1 for width in self.ffn.layer_ffn_widths if width > 0)
        return self.num_layers - self.num_moe_layers

    @property
    def dense_ffn_widths(self) -> tuple[int, ...]:
        """Each layer's dense FFN width (0: an MoE layer or a layer without FFN)."""
        if self.ffn.layer_ffn_widths is not None:
            return self.ffn.layer_ffn_widths
        return tuple(0 if moe else self.ffn.intermediate_size for moe in self.layer_is_moe)

    @property
    def mean_dense_ffn_width(self) -> float:
        """Mean width over the dense-FFN layers: Σ widths / dense layers, so that dense layers x
        this width gives the exact dense FFN weights (`intermediate_size` when homogeneous)."""
        dense, widths = self.num_dense_layers, self.ffn.layer_ffn_widths
        if widths is None or dense == 0:
            return float(self.ffn.intermediate_size)
        return sum(widths) / dense

    # ---- identity ----------------------------------------------------------------------------
    @property
    def design_key(self) -> tuple[tuple[str, Any], ...]:
        """The design as (field, value) pairs of the flat dict: every field but the labels
        `name` and `family`, with the values no layer uses normalized, so two architectures
        share a key iff they are the same model. Normalized: the dense `intermediate_size` when
        no layer is dense (an MoE whose every layer is MoE), `layer_types` naming every layer
        sliding (= None), every attention field when no layer attends (a pure Mamba-2 stack)
        and every linear-mixer field when no layer is linear (None). Per-layer patterns equal
        on every layer, expert fields of a dense model, the shared-expert width without shared
        experts and the QK-norm scope without QK norms are fixed by the validators. Computed
        once per object (`kept`)."""
        return kept(self, "design_key", Architecture._design_key)

    def _design_key(self) -> tuple[tuple[str, Any], ...]:
        fields = self.model_dump(exclude={"name", "family"})
        if self.num_dense_layers == 0:
            fields["intermediate_size"] = 0
        if self.attention.layer_types is not None and self.num_sliding_layers == self.num_layers:
            fields["layer_types"] = None
        if self.num_attention_layers == 0:
            fields.update(dict.fromkeys(AttentionConfig.model_fields))
        if self.mixer.num_linear_attention_layers == 0:
            fields.update(dict.fromkeys(set(MixerConfig.model_fields) - {"layer_mixers"}))
        return tuple(fields.items())


_PARTS: dict[str, type[BaseModel]] = {
    name: info.annotation for name, info in Architecture.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
}
_PART_OF_FIELD = {field: part for part, model in _PARTS.items() for field in model.model_fields}
# a part's derived values, read by name as its fields are (`field_value`)
_PART_OF_NAME = {**_PART_OF_FIELD, **{
    name: part for part, model in _PARTS.items()
    for name, value in vars(model).items() if isinstance(value, property)}}


def field_path(name: str) -> str:
    """Where the field (or derived value) users call `name` lives: "ffn.num_experts",
    "hidden_size", "ffn.is_moe", "num_moe_layers"."""
    part = _PART_OF_NAME.get(name)
    return name if part is None else f"{part}.{name}"


_GETTERS: dict[str, attrgetter[Any]] = {}
# values computed once per `Architecture` object (frozen: they cannot go stale), by id, each
# object's entry dropped when it is freed (`weakref.finalize`: an id is reused only after that)
_KEPT: dict[int, dict[str, Any]] = {}


def kept(arch: Architecture, what: str, compute: Callable[[Architecture], Any]) -> Any:
    """`compute(arch)`, computed once per object and kept while it lives (a search asks an
    architecture's hash, design key and table fields many times)."""
    memo = _KEPT.get(id(arch))
    if memo is None:
        memo = _KEPT[id(arch)] = {}
        weakref.finalize(arch, _KEPT.pop, id(arch), None)
    if what not in memo:
        memo[what] = compute(arch)
    return memo[what]


def _fields_hash(arch: Architecture) -> int:
    return hash(tuple(arch.__dict__[name] for name in type(arch).model_fields))


def field_value(arch: Architecture, name: str) -> Any:
    """The value of the field users call `name` (for tables that name fields as data); kept per
    object (`kept`: the table of weight GEMMs reads a few fields of an architecture hundreds of
    times, derived ones like `num_moe_layers` among them)."""
    values = kept(arch, "fields", _no_fields)
    found = values.get(name, _MISSING)
    if found is _MISSING:
        getter = _GETTERS.get(name)
        if getter is None:
            getter = _GETTERS[name] = attrgetter(field_path(name))
        found = getter(arch)
        if isinstance(found, _IMMUTABLE):
            values[name] = found
    return found


_MISSING = object()
_IMMUTABLE = (int, float, str, tuple, type(None))


def _no_fields(arch: Architecture) -> dict[str, Any]:
    return {}


def design_name(arch: Architecture, show_vocab: bool = False) -> str:
    """A short name of the shape that names every field a searched design varies in and none it
    does not use: `H{hidden}-L{layers}`, then `-A{q heads}x{head dim}kv{kv heads}` when some
    layer attends, the layer pattern and linear-mixer shape when layers differ
    (`mixer_pattern_name`), `-E{experts}k{top-k}x{expert width}s{shared experts}` for an MoE, then
    the dense MLPs: `-F{width}` when every layer is dense, `-F{dense layers}x{width}` for an MoE's
    dense layers (none: nothing), and `-V{vocab}` when `show_vocab` (a study that searches the
    vocabulary)."""
    a, att, ffn = arch, arch.attention, arch.ffn
    name = f"H{a.hidden_size}-L{a.num_layers}"
    if a.num_attention_layers:
        name += f"-A{att.num_attention_heads}x{att.head_dim}kv{att.num_kv_heads}"
    name += mixer_pattern_name(a)
    if ffn.is_moe:
        name += (f"-E{ffn.num_experts}k{ffn.experts_per_token}x{ffn.moe_intermediate_size}"
                 f"s{ffn.num_shared_experts}")
        if a.num_dense_layers:
            name += f"-F{a.num_dense_layers}x{ffn.intermediate_size}"
    elif a.num_dense_layers:
        name += f"-F{ffn.intermediate_size}"
    if show_vocab:
        name += f"-V{a.vocab_size}"
    return name


# One letter per mixer in design names: G Gated DeltaNet, K Kimi Delta Attention, M Mamba-2,
# P attention + Mamba-2 in parallel, A attention, N no mixer.
MIXER_LETTERS: dict[str, str] = {
    GATED_DELTANET_MIXER: "G", KIMI_DELTA_MIXER: "K", MAMBA2_MIXER: "M",
    PARALLEL_MAMBA2_MIXER: "P", ATTENTION_MIXER: "A", NO_MIXER: "N",
}
_MAX_UNIT_NAME_CHARS = 12  # a longer repeating unit is named by its counts and a digest
_DIGEST_HEX_CHARS = 6


def mixer_pattern_name(arch: Architecture) -> str:
    """The per-layer pattern in a design name ("" for a homogeneous model). A pattern that
    repeats a short unit is the unit run-length coded (Qwen3-Next's 3 Gated DeltaNet + 1
    attention: `-G3A1`); otherwise the mixer counts plus a digest of the exact per-layer lists
    (mixers, FFN widths, MoE layers: `-M54A10N54#1f0c2e`), so distinct placements get distinct
    names. Linear layers add their shape `-S{v heads}x{v dim}g{key heads}x{key dim}c{conv
    taps}` (`b`: conv bias, `u`: no gated norm)."""
    if not arch.is_heterogeneous:
        return ""
    mix = arch.mixer
    letters = "".join(MIXER_LETTERS[m] for m in mix.layer_mixers or ())
    unit = _run_length(_repeating_unit(letters)) if letters else ""
    exact = bool(unit) and len(unit) <= _MAX_UNIT_NAME_CHARS \
        and arch.ffn.layer_ffn_widths is None and arch.ffn.layer_moe is None
    name = f"-{unit}" if exact else f"-{_letter_counts(letters)}#{_pattern_digest(arch)}"
    if mix.num_linear_attention_layers:
        name += (f"-S{mix.linear_num_value_heads}x{mix.linear_value_head_dim}"
                 f"g{mix.linear_num_key_heads}x{mix.linear_key_head_dim}c{mix.linear_conv_kernel}"
                 f"{'b' if mix.linear_conv_bias else ''}{'' if mix.linear_norm else 'u'}")
    return name


def _repeating_unit(letters: str) -> str:
    """The shortest unit whose repetition is `letters`."""
    size = len(letters)
    return next(letters[:p] for p in range(1, size + 1)
                if size % p == 0 and letters[:p] * (size // p) == letters)


def _run_length(unit: str) -> str:
    """`GGGA` -> `G3A1`."""
    return "".join(f"{m.group(1)}{len(m.group(0))}" for m in re.finditer(r"(.)\1*", unit))


def _letter_counts(letters: str) -> str:
    """Mixer counts in `MIXER_LETTERS` order (`M54A10N54`); `F` when only FFN widths vary."""
    counts = [f"{c}{letters.count(c)}" for c in MIXER_LETTERS.values() if letters.count(c)]
    return "".join(counts) or "F"


def _pattern_digest(arch: Architecture) -> str:
    """A short digest of the exact per-layer lists (stable across processes and runs)."""
    lists = (arch.mixer.layer_mixers, arch.ffn.layer_ffn_widths, arch.ffn.layer_moe)
    return hashlib.sha1(repr(lists).encode()).hexdigest()[:_DIGEST_HEX_CHARS]


def periodic_layer_types(num_layers: int, full_attention_period: int) -> tuple[LayerType, ...]:
    """Sliding layers with every `full_attention_period`-th layer full (Gemma-2, gpt-oss: 2)."""
    if full_attention_period < 1:
        raise ConfigError(f"`full_attention_period` ({full_attention_period}) must be >= 1")
    is_full = [(i + 1) % full_attention_period == 0 for i in range(num_layers)]
    return tuple(FULL_ATTENTION if full else SLIDING_ATTENTION for full in is_full)


def make_architecture(**fields: Any) -> Architecture:
    """Build an `Architecture`, turning pydantic's ValidationError into a `ConfigError`."""
    try:
        return Architecture.model_validate(fields)
    except ValidationError as exc:
        raise config_error_from(exc, str(fields.get("name", "architecture"))) from exc


def config_error_from(exc: ValidationError, source: str) -> ConfigError:
    """One `ConfigError` whose message names every bad field, its rule and its value."""
    return ConfigError(f"{source}: " + "; ".join(_describe(err) for err in exc.errors()))


def _describe(err: Any) -> str:
    if err["type"] == "value_error":  # our cross-field rules: the message already names fields
        return str(err["ctx"]["error"])
    loc = err["loc"]
    if len(loc) > 1 and loc[0] in _PARTS:  # a part's field: named as the user wrote it (flat)
        loc = loc[1:]
    field = ".".join(str(part) for part in loc) or "architecture"
    value = err.get("input")
    shown = "missing" if err["type"] == "missing" else repr(value)
    return f"`{field}` ({shown}): {err['msg']}"



# ---- cross-part rules (each raises ValueError naming the fields, the rule and the values) ------


def _check_per_layer_lengths(arch: Architecture) -> None:
    for part in _PARTS:
        model = getattr(arch, part)
        for field in getattr(model, "per_layer_fields", ()):
            values = getattr(model, field)
            if values is not None and len(values) != arch.num_layers:
                raise ValueError(f"`{field}` ({len(values)} entries) must have one entry per "
                                 f"layer (`num_layers` = {arch.num_layers})")


def _check_moe_layers(arch: Architecture) -> None:
    ffn = arch.ffn
    for field in ("first_dense_layers", "moe_layer_period"):
        if getattr(ffn, field) > arch.num_layers:
            raise ValueError(
                f"`{field}` ({getattr(ffn, field)}) must be <= `num_layers` ({arch.num_layers})"
            )
    if ffn.is_moe and arch.num_moe_layers == 0:
        raise ValueError(
            f"`num_experts` ({ffn.num_experts}) > 0 but no layer is MoE (`first_dense_layers` = "
            f"{ffn.first_dense_layers}, `moe_layer_period` = {ffn.moe_layer_period})"
        )
    if arch.num_dense_layers > 0 and ffn.intermediate_size < 1:
        raise ValueError(
            f"`intermediate_size` ({ffn.intermediate_size}) must be >= 1: "
            f"{arch.num_dense_layers} layers are dense"
        )


def _check_layer_pattern(arch: Architecture) -> None:
    if not arch.is_heterogeneous:
        return
    if arch.norms_per_layer != 2:
        raise ValueError(f"`norms_per_layer` ({arch.norms_per_layer}) must be 2 with a per-layer "
                         "pattern (one pre-norm per attention and per FFN)")
    if arch.mixer.layer_mixers is not None and arch.attention.sliding_window is not None:
        raise ValueError(
            "`sliding_window` must be None with `layer_mixers` (not supported together)"
        )
