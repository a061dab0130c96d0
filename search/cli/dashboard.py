"""`archscout dashboard`: a feasible-only view of a study for optuna-dashboard
(`search.records.dashboard` says why a view), written anew on each call, and served with
`--serve` (optuna-dashboard is the `dashboard` extra)."""

from __future__ import annotations

import argparse
import errno
import socket
from pathlib import Path

from search.cli.arguments import whole_number
from search.cli.errors import CommandError
from search.cli.secrets import redacting
from search.cli.study import load_study, open_for_reading
from search.records.dashboard import VIEW_NAME, DashboardView, default_view_path, write_view
from search.study.record import recorded_spec
from search.study.spec import load_spec

DEFAULT_HOST = "127.0.0.1"  # this machine only; `--host 0.0.0.0` to share it
DEFAULT_PORT = 8080  # optuna-dashboard's own default
VIEW_STUDY_URL = "/dashboard/studies/0"  # the view holds one study, the first of its journal


def write_dashboard_view(args: argparse.Namespace) -> DashboardView:
    spec = load_spec(args.study)
    handle = open_for_reading(Path(args.study), spec, args.storage)
    try:
        study = load_study(spec, handle)
        spec = recorded_spec(study, spec, str(args.study))
        path = Path(args.output) if args.output else default_view_path(Path(args.study),
                                                                        spec.name)
        return write_view(spec, study, path, handle.description)
    finally:
        handle.close()


def serve(view: DashboardView, host: str, port: int) -> None:
    """optuna-dashboard on the view until Ctrl-C."""
    try:
        import optuna_dashboard
    except ImportError:
        raise CommandError("`--serve` needs optuna-dashboard: pip install "
                           "'archscout[dashboard]' (or open the view with any optuna-dashboard: "
                           f"optuna-dashboard {view.path})") from None
    print(f"serving http://{host}:{port}{VIEW_STUDY_URL} (Ctrl-C stops it)", flush=True)
    try:
        optuna_dashboard.run_server(str(view.path), host=host, port=port)
    except KeyboardInterrupt:
        pass
    except OSError as exc:  # taken between the check and the server's own bind
        raise address_error(host, port, exc) from None


def check_address(host: str, port: int) -> None:
    """That the server can listen on `host`:`port`, tried before anything is written: an
    unknown host, an address of another machine or a port in use is one line naming the
    option. The family is the one optuna-dashboard's server (bottle's wsgiref) binds: IPv6 for
    a host with a colon, else IPv4."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        address = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)[0][4]
    except (OSError, UnicodeError, ValueError) as exc:  # gaierror; idna; an embedded NUL
        raise CommandError(f"`--host` ({host!r}) is not a host this machine can resolve: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
        try:
            probe.bind(address)
        except OSError as exc:
            raise address_error(host, port, exc) from None


def address_error(host: str, port: int, exc: OSError) -> CommandError:
    why = exc.strerror or str(exc)
    if exc.errno == errno.EADDRNOTAVAIL:
        return CommandError(f"`--host` ({host!r}) is not an address of this machine ({why})")
    return CommandError(f"`--port` ({port}) cannot be listened on at {host}: {why}; choose "
                        "another with --port")


def run_dashboard(args: argparse.Namespace) -> int:
    if args.serve:
        check_address(args.host, args.port)
    view = write_dashboard_view(args)
    print(f"dashboard view of `{view.study}`: {view.feasible} feasible of {view.complete} "
          f"complete trials ({view.finished} finished) in {view.path}")
    if args.serve:
        serve(view, args.host, args.port)
    else:
        print(f"serve it: archscout dashboard {args.study} --serve  (or: optuna-dashboard "
              f"{view.path}); run the command again to refresh it")
    return 0


_port = whole_number(1, 65535, "a port number")  # argparse type of --port: a TCP port


def add_parser(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("dashboard", help="a feasible-only view of a study for optuna-dashboard "
                       "(and serve it)")
    d.add_argument("study", help="study file (TOML)")
    d.add_argument("--storage", default=None, help="Optuna storage URL (default: the study's)")
    d.add_argument("-o", "--output", default=None, help="the view's journal file (default: "
                   f"out/<study>/{VIEW_NAME} beside the study)")
    d.add_argument("--serve", action="store_true", help="then run optuna-dashboard on it")
    d.add_argument("--host", default=DEFAULT_HOST, help=f"--serve: address (default "
                   f"{DEFAULT_HOST})")
    d.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"--serve: port (default "
                   f"{DEFAULT_PORT})")
    d.set_defaults(func=redacting(run_dashboard))
