"""`archscout loss` (search/cli/loss.py), driven through its own parser: it is registered in
search/cli/main.py by that file's owner, so these tests build a parser with `add_parser` alone."""

import argparse
import json
from pathlib import Path

import pytest

from search.cli.errors import CommandError
from search.cli import loss as loss_command

LLAMA = Path(__file__).resolve().parents[3] / "studies" / "models" / "Llama-3.1-8B.json"


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    loss_command.add_parser(parser.add_subparsers())
    args = parser.parse_args(["loss", *argv])
    return args.func(args)


def test_loss_json_document(capsys):
    assert _run(str(LLAMA), "--training-tokens", "15T", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    # Llama-3-8B is the reference shape: every term 1, the ranked loss the central one
    assert set(doc["terms"].values()) == {1.0} and doc["ranked_loss_nats"] == doc["loss_nats"]
    assert doc["band_nats"][0] < doc["loss_nats"] < doc["band_nats"][1]
    assert doc["band_families"] == ["depth_width"]  # a standard dense shape: depth/width only
    assert doc["training_tokens"] == 15e12 and doc["hard_flags"] == []


def test_loss_table_names_every_term(capsys):
    assert _run(str(LLAMA), "--training-tokens", "1.5e13", "--training-precision", "fp8_block") == 0
    out = capsys.readouterr().out
    assert "band [" in out and "(depth_width, precision)" in out and "ranked" in out
    assert "precision 1.0012" in out
    assert "soft: D/N_eff (tokens per param)" in out


@pytest.mark.parametrize("tokens", ["many", "15X"])
def test_bad_tokens(tokens):
    with pytest.raises(CommandError, match="`--training-tokens` must be a number"):
        _run(str(LLAMA), "--training-tokens", tokens)


@pytest.mark.parametrize("tokens", ["1e30", "0", "-5", "nan", "inf"])
def test_tokens_past_any_training_run_are_refused(tokens):
    """The study's bound (search/study/spec.py TRAINING_TOKENS_MAX, 1e15: ~28x Qwen3's 36T):
    a typo such as 1e30 is one line naming the flag, not a loss far outside every law's data."""
    with pytest.raises(CommandError, match=r"`--training-tokens` must be > 0 and at most 1e\+15"):
        _run(str(LLAMA), "--training-tokens", tokens)
