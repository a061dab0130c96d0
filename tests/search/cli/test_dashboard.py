"""`archscout dashboard` (search/cli/dashboard.py) through `main(argv)`, and the view as
optuna-dashboard's own HTTP API serves it (its WSGI app, no browser: the picture is
tests/benchmarks/dashboard_screenshot.py)."""

import io
import json
import socket
import sys
from pathlib import Path
from wsgiref.util import setup_testing_defaults

import pytest

from search.cli.main import build_parser, main
from search.records.dashboard import STUDY_TRIAL_ATTR, default_view_path
from search.study.spec import load_spec

from tests.search.cli.test_inspect import QUICKSTART, bad_input, make_study
from tests.search.records.test_dashboard import (
    feasible_by_the_runner, one_per_design, stored_trials,
)  # fmt: skip


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    return make_study(tmp_path_factory.mktemp("dashboard_cli"))


def test_dashboard_writes_the_view_and_says_so(study, capsys):
    assert main(["dashboard", str(study)]) == 0
    out = capsys.readouterr().out
    view = default_view_path(study, load_spec(study).name)
    feasible = len(one_per_design(study, feasible_by_the_runner(stored_trials(study))))
    assert view.is_file()
    assert f"{feasible} feasible of" in out and str(view) in out
    assert "--serve" in out  # how to look at it


def test_dashboard_output_option(study, tmp_path, capsys):
    target = tmp_path / "sub" / "view.journal"
    assert main(["dashboard", str(study), "-o", str(target)]) == 0
    assert target.is_file()


def test_serve_without_optuna_dashboard_is_one_line(study, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna_dashboard", None)  # as if not installed
    bad_input(capsys, ["dashboard", str(study), "--serve"], "`--serve`",
              "archscout[dashboard]")


@pytest.mark.parametrize("port", ["0", "70000", "http"])
def test_bad_port_is_one_line(study, capsys, port):
    bad_input(capsys, ["dashboard", str(study), "--serve", "--port", port], "--port")


def test_study_never_searched_is_one_line_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "new.toml"
    path.write_text(QUICKSTART.read_text(encoding="utf-8"), encoding="utf-8")
    bad_input(capsys, ["dashboard", str(path)], "archscout search")
    assert not (tmp_path / "out").exists()


def _get(app, url: str) -> dict:
    environ: dict = {"PATH_INFO": url, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()}
    setup_testing_defaults(environ)
    status = []
    body = b"".join(app(environ, lambda s, headers, exc_info=None: status.append(s)))
    assert status[0].startswith("200"), status
    return json.loads(body)


def test_optuna_dashboard_serves_only_feasible_trials_with_names(study, capsys):
    """What the dashboard's pages are drawn from (GET /api/studies/0): the objective names, the
    feasible trials and nothing else, and a Pareto front (`best_trials`) of feasible ones."""
    optuna_dashboard = pytest.importorskip("optuna_dashboard")
    assert main(["dashboard", str(study)]) == 0
    spec = load_spec(study)
    app = optuna_dashboard.wsgi(str(default_view_path(study, spec.name)))
    studies = _get(app, "/api/studies")["study_summaries"]
    assert [s["study_name"] for s in studies] == [spec.name]
    detail = _get(app, f"/api/studies/{studies[0]['study_id']}")
    assert detail["objective_names"] == list(spec.objectives.names)
    feasible = one_per_design(study, feasible_by_the_runner(stored_trials(study)))

    def numbers(trials: list[dict]) -> list[int]:
        return sorted(int(next(a["value"] for a in t["user_attrs"]
                               if a["key"] == STUDY_TRIAL_ATTR)) for t in trials)

    assert numbers(detail["trials"]) == sorted(feasible)
    assert detail["best_trials"] and set(numbers(detail["best_trials"])) <= set(feasible)


# ---- `--serve`'s address (issue 29, item 5): checked before anything is written --------------


def test_serve_binds_this_machine_only_by_default():
    args = build_parser().parse_args(["dashboard", "study.toml", "--serve"])
    assert args.host == "127.0.0.1"


def test_a_port_in_use_is_one_line_and_writes_nothing(study, tmp_path, capsys):
    view = tmp_path / "view.journal"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        bad_input(capsys, ["dashboard", str(study), "--serve", "--port", str(port), "-o",
                           str(view)], f"`--port` ({port}) cannot be listened on at 127.0.0.1")
    assert not view.exists()


@pytest.mark.parametrize("host, fragment", [
    ("a..b", "is not a host this machine can resolve"),  # refused by the IDNA codec, no DNS
    ("192.0.2.1", "is not an address of this machine"),  # TEST-NET-1 (RFC 5737)
], ids=["unresolvable", "another-machine"])
def test_a_bad_host_is_one_line_and_writes_nothing(study, tmp_path, capsys, host, fragment):
    view = tmp_path / "view.journal"
    bad_input(capsys, ["dashboard", str(study), "--serve", "--host", host, "-o", str(view)],
              f"`--host` ({host!r}) {fragment}")
    assert not view.exists()
