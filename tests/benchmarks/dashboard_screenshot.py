"""optuna-dashboard on a study's feasible-only view, in a real browser (issue 17, item 4).

Searches the quick-start study (in a temporary folder), counts the infeasible trials on the
Pareto front that optuna-dashboard computes (its HTTP API, `best_trials`) for the study itself
and for the view `archscout dashboard` writes, then serves the view with
`archscout dashboard STUDY --serve --port P` and takes a screenshot of its study page with
headless Chromium (Debian's `chromium` package: `apt-get install chromium`) into
docs/img/dashboard.png. `--raw PATH` also photographs the study itself (the misleading front).
Needs the dashboard extra (`pip install -e '.[dashboard]'`).
Run: python tests/benchmarks/dashboard_screenshot.py [--trials 384] [-o docs/img/dashboard.png]
     [--raw PATH] [--page analytics]
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from wsgiref.util import setup_testing_defaults

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import optuna_dashboard

from search.records.dashboard import default_view_path
from search.study.spec import load_spec
from search.study.storage import default_journal_path

QUICKSTART = ROOT / "studies" / "quickstart.toml"
WINDOW = "1600,1000"  # pixels: the study page with its Pareto-front plot in view
RENDER_BUDGET_MS = 20_000  # virtual time Chromium gives the page's scripts before the shot
SERVER_WAIT_S = 60.0
BROWSER_TIMEOUT_S = 120


def search(folder: Path, trials: int) -> Path:
    text = re.sub(r"(?m)^trials = \d+", f"trials = {trials}", QUICKSTART.read_text("utf-8"))
    study = folder / "quickstart.toml"
    study.write_text(text, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "search.cli.main", "search", str(study),
                    "--no-progress"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return study


def api(storage: str, url: str) -> dict:
    """GET `url` of optuna-dashboard's WSGI app on `storage` (what its pages are drawn from)."""
    app = optuna_dashboard.wsgi(storage)
    environ: dict = {"PATH_INFO": url, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()}
    setup_testing_defaults(environ)
    return json.loads(b"".join(app(environ, lambda *args: None)))


def front_counts(storage: str) -> dict:
    """Trials, Pareto-front trials and infeasible ones among them, as the dashboard shows."""
    detail = api(storage, "/api/studies/0")

    def infeasible(t: dict) -> bool:
        return any(a["key"] == "feasible" and a["value"] == "False" for a in t["user_attrs"])

    return {"trials": len(detail["trials"]), "front": len(detail["best_trials"]),
            "front_infeasible": sum(map(infeasible, detail["best_trials"])),
            "objective_names": detail.get("objective_names")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + SERVER_WAIT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the dashboard did not answer at {url} within {SERVER_WAIT_S:.0f} s")


def screenshot(url: str, out: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("no Chromium on this machine: apt-get install chromium")
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={WINDOW}", f"--virtual-time-budget={RENDER_BUDGET_MS}",
                    f"--screenshot={out}", url], check=True, timeout=BROWSER_TIMEOUT_S,
                   capture_output=True)


def served(command: list[str], page: str, out: Path) -> None:
    """Start `command` (a dashboard server on a free port), photograph `page`, stop it."""
    port = free_port()
    proc = subprocess.Popen([*command, "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(f"http://127.0.0.1:{port}/api/studies", proc)
        screenshot(f"http://127.0.0.1:{port}/dashboard/studies/0{page}", out)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=384)
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "docs" / "img" /
                        "dashboard.png")
    parser.add_argument("--raw", type=Path, default=None, help="also photograph the study")
    parser.add_argument("--page", default="", help="sub-page of the study, e.g. /analytics")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dashboard_") as tmp:
        study = search(Path(tmp), args.trials)
        name = load_spec(study).name
        journal = default_journal_path(study, name)
        subprocess.run([sys.executable, "-m", "search.cli.main", "dashboard", str(study)],
                       cwd=ROOT, check=True)
        view = default_view_path(study, name)
        print(f"study as the dashboard shows it: {front_counts(str(journal))}")
        print(f"view  as the dashboard shows it: {front_counts(str(view))}")
        served([sys.executable, "-m", "search.cli.main", "dashboard", str(study), "--serve"],
               args.page, args.output)
        print(f"wrote {args.output}")
        if args.raw:
            served([sys.executable, "-m", "optuna_dashboard._cli", str(journal), "--host",
                    "127.0.0.1"], args.page, args.raw)
            print(f"wrote {args.raw}")


if __name__ == "__main__":
    main()
