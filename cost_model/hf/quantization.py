"""The number formats a checkpoint ships, from its `quantization_config` (or ModelOpt's
`hf_quant_config.json`), per component of a deployment — and back, for exports.

`checkpoint_formats(config)` reads the schemes serving engines load:

- ModelOpt (`quant_method` "modelopt", or a `quant_algo` / `hf_quant_config.json`): `quant_algo`
  FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_BLOCK_SCALES, NVFP4, W4A16*, W8A16*, MIXED_PRECISION with
  `quantized_layers`; `kv_cache_quant_algo` (or `kv_cache_scheme`); `exclude_modules` / `ignore`.
  Names: TensorRT-LLM's `QuantAlgo` (tensorrt_llm/quantization/mode.py).
- `fp8` (DeepSeek-V3's block FP8 when `weight_block_size` is set, per-tensor otherwise) and
  `fbgemm_fp8` (per-channel weights, per-token activations: priced as fp8);
  `modules_to_not_convert`.
- `mxfp4` (gpt-oss: MXFP4 experts; `modules_to_not_convert` keeps attention in BF16).
- `compressed-tensors`: each of `config_groups` by its weights' and input activations'
  `num_bits` / `type` / `strategy` / `group_size` (FP8 W8A8, FP8 block, NVFP4, MXFP4, W4A16,
  W8A16), its `targets` ("Linear": every layer; a name or regex: its component); `ignore`;
  `kv_cache_scheme`.
- `bitsandbytes` (4-bit: w4a16, 8-bit: w8a16), `awq` and `gptq` (by `bits`): weight-only.

Components (`cost_model.hf.modules`): attention (and linear mixers), dense MLPs with shared
experts, routed experts, the KV cache. A component the checkpoint keeps unquantized is in its
`torch_dtype` (BF16/FP16); an unquantized KV cache too (engines' `kv_cache_dtype` "auto").
A scheme the cost model has no format for leaves the component unset (`unmodelled` says why).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cost_model.errors import ConfigError
from cost_model.hf.modules import COMPONENTS, EXPERTS, components_of
from cost_model.hf.modules import excluded_components as _excluded
from cost_model.sourced import shown

# ModelOpt / TensorRT-LLM QuantAlgo -> our format (weight-only variants by their weight width)
MODELOPT_ALGOS = {
    "FP8": "fp8", "FP8_PER_CHANNEL_PER_TOKEN": "fp8", "FP8_BLOCK_SCALES": "fp8_block",
    "NVFP4": "nvfp4", "NVFP4_AWQ": "nvfp4", "MXFP4": "mxfp4", "W4A16": "w4a16",
    "W4A16_AWQ": "w4a16", "W4A16_GPTQ": "w4a16", "W4A16_MXFP4": "w4a16", "W4A16_NVFP4": "w4a16",
    "W8A16": "w8a16", "W8A16_GPTQ": "w8a16",
}
KV_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4"}
WEIGHT_ONLY = {4: "w4a16", 8: "w8a16"}  # weight bits -> weight-only format (BF16 activations)
FP4_GROUPS = {16: "nvfp4", 32: "mxfp4"}  # FP4 block size -> format (NVFP4: 16, OCP MX: 32)
DTYPES = {"bfloat16": "bf16", "float16": "fp16"}  # a checkpoint's dtype; any other: bf16
UNQUANTIZED = frozenset({"bf16", "fp16", "fp32"})
UNMODELLED = "?"  # prefix of a component's "format" the cost model does not have


@dataclass(frozen=True)
class CheckpointFormats:
    """Each component's format as the checkpoint stores it (None: none the cost model has)."""

    attention: str | None
    dense: str | None
    experts: str | None
    kv: str | None
    scheme: str  # what the config says, e.g. "quant_method mxfp4"
    origin: str = "quantization_config"  # or "hf_quant_config.json"
    unmodelled: str | None = None  # why some component has no format


@dataclass(frozen=True)
class _Read:
    """A scheme read: per component its quantized format, None (left in the checkpoint's dtype)
    or "?<why>" (a scheme the cost model has no format for); the KV format (None: the dtype)."""

    formats: Mapping[str, str | None]
    kv: str | None
    scheme: str


def checkpoint_formats(config: Mapping[str, Any],
                       hf_quant_config: Mapping[str, Any] | None = None
                       ) -> CheckpointFormats | None:
    """The checkpoint's formats from `config` (a config.json dict, a multimodal wrapper's
    `text_config` included) or ModelOpt's `hf_quant_config.json`; None when it has neither."""
    wrapped = config.get("text_config")
    text: Mapping[str, Any] = wrapped if isinstance(wrapped, Mapping) else {}
    qc, origin = config.get("quantization_config", text.get("quantization_config")), \
        "quantization_config"
    if qc is None and hf_quant_config is not None:
        qc, origin = _flatten_hf_quant_config(hf_quant_config), "hf_quant_config.json"
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise ConfigError(f"`quantization_config` ({shown(qc)}) must be a JSON object")
    layers = _int_or_none(text.get("num_hidden_layers", config.get("num_hidden_layers")))
    read = _reader(qc)(qc, layers)
    dtype = DTYPES.get(str(config.get("torch_dtype") or config.get("dtype")
                           or text.get("torch_dtype") or text.get("dtype")), "bf16")
    values = {c: read.formats.get(c) for c in COMPONENTS}
    odd = sorted({v[1:] for v in values.values() if v and v.startswith(UNMODELLED)})
    formats = {c: None if v and v.startswith(UNMODELLED) else v or dtype
               for c, v in values.items()}
    return CheckpointFormats(**formats, kv=read.kv or dtype, scheme=read.scheme, origin=origin,
                             unmodelled="; ".join(odd) or None)


def _reader(qc: Mapping[str, Any]) -> Callable[[Mapping[str, Any], int | None], _Read]:
    method = qc.get("quant_method")
    if method in (None, "modelopt") and "quant_algo" in qc:
        return _modelopt
    if method in _READERS:
        return _READERS[method]
    return lambda _qc, _layers: _unmodelled(f"quant_method {method!r}",
                                            f"quant_method {method!r}")


def _unmodelled(scheme: str, why: str, kv: str | None = None) -> _Read:
    return _Read(dict.fromkeys(COMPONENTS, UNMODELLED + why), kv, scheme)


def _flatten_hf_quant_config(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """ModelOpt's hf_quant_config.json: {"producer": …, "quantization": {quant_algo, …}}."""
    inner = doc.get("quantization")
    if not isinstance(inner, Mapping) or "quant_algo" not in inner:
        raise ConfigError(f"`hf_quant_config.json` `quantization` ({shown(inner)}) must be an "
                          "object with `quant_algo` (ModelOpt's format)")
    return {**inner, "quant_method": "modelopt"}


# ---- one reader per quant_method ---------------------------------------------------------------


def _modelopt(qc: Mapping[str, Any], layers: int | None) -> _Read:
    algo = qc.get("quant_algo")
    kv = _kv_format(qc.get("kv_cache_quant_algo", qc.get("kv_cache_scheme")))
    scheme = f"ModelOpt {algo}"
    if algo == "MIXED_PRECISION":
        return _modelopt_mixed(qc, kv, scheme)
    formats = _uniform(_algo_format(algo), _names(qc, "exclude_modules", "ignore"), layers)
    return _Read(_with_moe_algo(formats, qc), kv, scheme)


def _modelopt_mixed(qc: Mapping[str, Any], kv: str | None, scheme: str) -> _Read:
    """MIXED_PRECISION: `quantized_layers` {module: {quant_algo}}; unlisted modules unquantized;
    each component takes its most common format."""
    layers = qc.get("quantized_layers")
    if not isinstance(layers, Mapping):
        raise ConfigError(f"`quantized_layers` ({shown(layers)}) must map modules to their "
                          "`quant_algo` when `quant_algo` is MIXED_PRECISION")
    seen: dict[str, Counter] = {c: Counter() for c in COMPONENTS}
    for name, entry in layers.items():
        algo = entry.get("quant_algo") if isinstance(entry, Mapping) else entry
        for component in components_of(str(name)):
            seen[component][_algo_format(algo)] += 1
    formats = {c: counts.most_common(1)[0][0] if counts else None for c, counts in seen.items()}
    return _Read(formats, kv, scheme)


def _fp8(qc: Mapping[str, Any], layers: int | None) -> _Read:
    block = qc.get("weight_block_size")
    label = "quant_method fp8" + ("" if block is None else f", weight_block_size {shown(block)}")
    if block is None:
        fmt = "fp8"
    elif isinstance(block, list) and block == [128, 128]:
        fmt = "fp8_block"
    else:
        fmt = f"{UNMODELLED}weight_block_size {shown(block)} (fp8_block is 128×128)"
    formats = _uniform(fmt, _names(qc, "modules_to_not_convert"), layers)
    return _Read(_with_moe_algo(formats, qc), None, label)


def _single(fmt: str, label: str, skip_key: str = "modules_to_not_convert"):
    def read(qc: Mapping[str, Any], layers: int | None) -> _Read:
        return _Read(_uniform(fmt, _names(qc, skip_key), layers), None, label)
    return read


def _weight_bits(method: str):
    """AWQ / GPTQ: `bits` (AWQ's older `w_bit`) wide weights, BF16 activations."""
    def read(qc: Mapping[str, Any], layers: int | None) -> _Read:
        bits = qc.get("bits", qc.get("w_bit"))
        fmt = WEIGHT_ONLY.get(bits, f"{UNMODELLED}{bits!r}-bit weights")
        return _single(fmt, f"quant_method {method}, bits {bits!r}")(qc, layers)
    return read


def _bitsandbytes(qc: Mapping[str, Any], layers: int | None) -> _Read:
    four = qc.get("load_in_4bit", qc.get("_load_in_4bit"))
    eight = qc.get("load_in_8bit", qc.get("_load_in_8bit"))
    bits = 4 if four else 8 if eight else None
    fmt = f"{UNMODELLED}neither load_in_4bit nor load_in_8bit" if bits is None \
        else WEIGHT_ONLY[bits]
    label = f"quant_method bitsandbytes, {bits}-bit weights"
    return _single(fmt, label, "llm_int8_skip_modules")(qc, layers)


def _compressed_tensors(qc: Mapping[str, Any], layers: int | None) -> _Read:
    groups = qc.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise ConfigError(f"`config_groups` ({shown(groups)}) must name at least one group "
                          "with `quant_method` compressed-tensors")
    formats: dict[str, str | None] = dict.fromkeys(COMPONENTS)
    named: set[str] = set()
    for name, group in groups.items():
        fmt = _group_format(str(name), group)
        for component, by_name in _targets(group):
            if by_name or component not in named:  # a named target beats the `Linear` class
                formats[component] = fmt
                named |= {component} if by_name else set()
    excluded = _excluded(_names(qc, "ignore"), layers)
    formats = {c: None if c in excluded else f for c, f in formats.items()}
    label = f"compressed-tensors {qc.get('format') or ''}".strip()
    return _Read(formats, _kv_format(qc.get("kv_cache_scheme")), label)


def _targets(group: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """(component, named by a module name or regex rather than the `Linear` class)."""
    targets = group.get("targets") or ["Linear"]
    out = []
    for target in targets if isinstance(targets, list) else [targets]:
        if target == "Linear":
            out += [(c, False) for c in COMPONENTS]
        else:
            out += [(c, True) for c in components_of(str(target))]
    return out


def _group_format(name: str, group: Any) -> str:
    """One compressed-tensors group's format (UNMODELLED + why when the cost model has none)."""
    if not isinstance(group, Mapping) or not isinstance(group.get("weights"), Mapping):
        raise ConfigError(f"`config_groups.{name}.weights` must be an object (num_bits, type, "
                          f"strategy…); got {shown(group)}")
    w, a = group["weights"], group.get("input_activations")
    bits, kind = w.get("num_bits"), w.get("type", "int")
    if not isinstance(a, Mapping):
        return WEIGHT_ONLY.get(bits, f"{UNMODELLED}{bits!r}-bit weight-only groups")
    if kind == "float" and a.get("type") == "float" and bits == a.get("num_bits") == 8:
        return "fp8_block" if w.get("strategy") == "block" else "fp8"
    if kind == "float" and bits == 4 and a.get("num_bits") == 4:
        groups = w.get("group_size")
        return FP4_GROUPS.get(groups, f"{UNMODELLED}FP4 in groups of {groups!r}")
    return (f"{UNMODELLED}{kind} {bits!r}-bit weights with {a.get('type')} "
            f"{a.get('num_bits')!r}-bit activations")


_READERS = {
    "modelopt": _modelopt, "fp8": _fp8, "compressed-tensors": _compressed_tensors,
    "mxfp4": _single("mxfp4", "quant_method mxfp4"),
    "fbgemm_fp8": _single("fp8", "quant_method fbgemm_fp8"),
    "bitsandbytes": _bitsandbytes, "awq": _weight_bits("awq"), "gptq": _weight_bits("gptq"),
}


# ---- helpers -----------------------------------------------------------------------------------


def _uniform(fmt: str | None, excluded: list[str],
             layers: int | None) -> dict[str, str | None]:
    """`fmt` on every component but those the excluded modules keep unquantized (None)."""
    kept = _excluded(excluded, layers)
    return {c: None if c in kept else fmt for c in COMPONENTS}


def _algo_format(algo: Any) -> str | None:
    return MODELOPT_ALGOS.get(algo, f"{UNMODELLED}`quant_algo` {algo!r}") if algo else None


def _with_moe_algo(formats: dict[str, str | None], qc: Mapping[str, Any]) -> dict:
    """ModelOpt's `moe_quant_algo` (e.g. NVFP4 experts under an FP8 checkpoint)."""
    moe = qc.get("moe_quant_algo")
    return formats if moe is None else {**formats, EXPERTS: _algo_format(moe)}


def _names(qc: Mapping[str, Any], *keys: str) -> list[str]:
    names: list[str] = []
    for key in keys:
        value = qc.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            raise ConfigError(f"`quantization_config.{key}` ({shown(value)}) must be a list of "
                              "module names")
        names += [str(v) for v in value]
    return names


def _kv_format(value: Any) -> str | None:
    """ModelOpt `kv_cache_quant_algo` ("FP8") or compressed-tensors `kv_cache_scheme`
    ({num_bits 8, type float}, or "FP8"); None: the KV cache is not quantized."""
    if value is None:
        return None
    if isinstance(value, str):
        if value.upper() in KV_ALGOS:
            return KV_ALGOS[value.upper()]
        raise ConfigError(f"`kv_cache_quant_algo` ({value!r}) must be one of "
                          f"{', '.join(KV_ALGOS)} (or null)")
    if isinstance(value, Mapping) and value.get("type") == "float" \
            and value.get("num_bits") in (4, 8):
        return "fp8" if value["num_bits"] == 8 else "nvfp4"
    raise ConfigError(f"`kv_cache_scheme` ({shown(value)}) must be FP8 (num_bits 8, type "
                      "float), NVFP4 (num_bits 4) or null")


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
