"""`archscout loss MODEL --training-tokens N [--training-precision P] [--law L] [--json]`: the
accuracy proxy of one architecture (`objectives.accuracy`): central loss, band (with the families
of difference it sums), ranked loss, each term's factor, effective parameters, ΔL / CEF against
the compute-optimal dense model, and flags.

MODEL is a Hugging Face config.json (or its folder) or archscout's own JSON. Bad input is a
`ConfigError` (one line, exit code 2 through `search.cli.main.main`). Register with
`loss_command.add_parser(sub)` in search/cli/main.py.
"""

from __future__ import annotations

import argparse

from cost_model import load_architecture
from objectives import BASE_LAWS, DEFAULT_LAW, LossProxy, predict_loss, summarize_shape
from search.cli.errors import CommandError
from search.records.tables import print_json
from search.study.spec import TRAINING_TOKENS_MAX

EXIT_OK = 0
GIGA = 1e9


def _tokens(text: str) -> float:
    """A token count: a plain number or with a T/B/M suffix ("15T", "2.5e12")."""
    scale = {"T": 1e12, "B": 1e9, "M": 1e6}.get(text[-1:].upper(), 1.0)
    body = text[:-1] if scale != 1.0 else text
    try:
        tokens = float(body) * scale
    except ValueError as exc:
        raise CommandError(
            f"`--training-tokens` must be a number (optionally with T/B/M); got {text!r}"
        ) from exc
    if not 0 < tokens <= TRAINING_TOKENS_MAX:  # NaN fails too; the study's bound (spec.py)
        raise CommandError(f"`--training-tokens` must be > 0 and at most "
                           f"{TRAINING_TOKENS_MAX:.0e}; got {text!r}")
    return tokens


def loss_document(model: str, proxy: LossProxy, tokens: float, precision: str) -> dict:
    return {"model": model, "training_tokens": tokens, "training_precision": precision,
            **proxy.to_dict(), "compute_optimum": {
                "params": proxy.compute_optimum.model_params,
                "tokens": proxy.compute_optimum.training_tokens,
                "loss_nats": proxy.compute_optimum.loss_nats}}  # fmt: skip


def _print(doc: dict, total_params: float, active_params: float) -> None:
    low, high = doc["band_nats"]
    print(f"{doc['model']}: {total_params / GIGA:.2f}B total, {active_params / GIGA:.2f}B active, "
          f"{doc['training_tokens']:.3g} tokens in {doc['training_precision']} ({doc['law']} law)")
    print(f"loss      {doc['loss_nats']:.4f} nats (central)  band [{low:.4f}, {high:.4f}] "
          f"({', '.join(doc['band_families'])})")
    ranked = "high end: a hard flag fired" if doc["hard_flags"] else "central: no hard flag"
    print(f"ranked    {doc['ranked_loss_nats']:.4f} nats ({ranked})")
    print(f"base      {doc['base_loss_nats']:.4f} nats at the active params; N_eff "
          f"{doc['effective_params'] / GIGA:.2f}B")
    print(f"vs dense  ΔL {doc['delta_loss_nats']:+.4f} nats, "
          f"CEF {doc['compute_equivalence_frac']:.3f}")
    print("terms     " + "  ".join(f"{name} {factor:.4f}" for name, factor in doc["terms"].items()))
    for flag in doc["flags"] or ["(no flags)"]:
        print(f"  {flag}")


def run_loss(args: argparse.Namespace) -> int:
    arch = load_architecture(args.model)
    tokens = _tokens(args.training_tokens)
    proxy = predict_loss(arch, tokens, args.training_precision, law=args.law)
    doc = loss_document(arch.name, proxy, tokens, args.training_precision)
    if args.json:
        print_json(doc)
    else:
        shape = summarize_shape(arch)
        _print(doc, shape.total_params, shape.active_params)
    return EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("loss", help="the accuracy proxy of one architecture: loss, band, ranked "
                       "loss, each term and the flags")  # fmt: skip
    p.add_argument("model", help="Hugging Face config.json (or its folder) or archscout JSON")
    p.add_argument("--training-tokens", required=True, help="training tokens (e.g. 15e12 or 15T)")
    p.add_argument("--training-precision", default="bf16", help="training format (default bf16)")
    p.add_argument("--law", default=DEFAULT_LAW, choices=sorted(BASE_LAWS), help="base law")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(func=run_loss)
