"""Which component of the cost model a checkpoint's module name (or pattern) belongs to.

Quantization configs name modules as checkpoints do (`model.layers.3.self_attn.q_proj`), as
globs (`model.layers.*.self_attn`, `*.mlp.shared_expert.*`) or as compressed-tensors regexes
(`re:.*self_attn.*`). The cost model prices three linear components and the KV cache:

- `attention`: the projections of attention and of linear mixers (Gated DeltaNet, Mamba-2);
- `dense`: dense MLPs and shared experts;
- `experts`: routed experts.

Routers, the LM head, embeddings, norms, convolutions, the DSA indexer, vision towers and MTP
layers are none of them (`None`): the cost model keeps them in BF16 whatever the checkpoint says.
A name covering a whole layer (`model.layers.0*`) covers each component of that layer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ATTENTION, DENSE, EXPERTS = "attention", "dense", "experts"
COMPONENTS = (ATTENTION, DENSE, EXPERTS)
ALL_LAYERS = -1  # a pattern without a layer index applies to every layer

_OTHER = re.compile(
    r"lm_head|embed|vision|visual|mm_projector|multi_modal|audio|mtp|norm|indexer|e_score|"
    r"router|conv1d|shared_experts?_gate|(^|[.*:])gate($|[.*$])|(^|[.*:])head$"
)
_EXPERTS = re.compile(r"experts?\b|experts?[._*]")
_ATTENTION = re.compile(
    r"attn|attention|mixer|(^|[.*])(q|k|v|o|qkv|wq|wk|wv|wo|wqkv|q_a|q_b|kv_a|kv_b)(_proj)?"
    r"($|[.*_$])|in_proj|out_proj"
)
_DENSE_PROJECTIONS = re.compile(r"(gate|up|down|gate_up)_proj|fc1|fc2|(^|[.*])w[123]($|[.*$])")
_DENSE = re.compile(r"mlp|ffn|feed_forward")
_WHOLE_LAYER = re.compile(r"layers\\?\.(\d+|\*)(\\?\.)?\*?\$?$")
_LAYER = re.compile(r"layers\\?\.(\d+)")


def components_of(name: str) -> tuple[str, ...]:
    """The components a module name or pattern covers (several for a whole layer)."""
    text = name.lower().removeprefix("re:")
    if _OTHER.search(text):
        return ()
    if _WHOLE_LAYER.search(text):
        return COMPONENTS
    if "shared_expert" in text:
        return (DENSE,)
    if _EXPERTS.search(text):
        return (EXPERTS,)
    if _DENSE_PROJECTIONS.search(text):
        return (DENSE,)
    if _ATTENTION.search(text):
        return (ATTENTION,)
    return (DENSE,) if _DENSE.search(text) else ()


def _layer_of(name: str) -> int:
    """The layer index a name names (`ALL_LAYERS` for a pattern over layers)."""
    found = _LAYER.search(name)
    return int(found.group(1)) if found else ALL_LAYERS


def excluded_components(names: Iterable[str], num_layers: int | None) -> frozenset[str]:
    """Components a list of excluded (unquantized) modules keeps out of the quantized format:
    those excluded on every layer by a pattern, or on at least half of the `num_layers` layers
    (a component left quantized on most layers is priced in the quantized format)."""
    layers: dict[str, set[int]] = {c: set() for c in COMPONENTS}
    for name in names:
        if not isinstance(name, str):
            continue
        for component in components_of(name):
            layers[component].add(_layer_of(name))
    return frozenset(c for c, seen in layers.items() if _most_layers(seen, num_layers))


def _most_layers(seen: set[int], num_layers: int | None) -> bool:
    if ALL_LAYERS in seen:
        return True
    if not seen:
        return False
    return num_layers is None or 2 * len(seen) >= num_layers
