"""Run the front door in front of a running Triton.

    python -m door [--triton 127.0.0.1:8001] [--host 127.0.0.1] [--port 8080] [--cors-origin URL ...]
                   [--canary-interval 300] [--triton-timeout 120] [--rate-window 10] [--max-retry-after 30] ...

Every option can also be set by an environment variable, named in its help (`--triton-timeout` is
$DOOR_TRITON_TIMEOUT); a flag wins over the variable, the variable over the default. A container or
pod sets the door up by its environment alone.

Waits for Triton to be ready, reads the served configs (door.contract), then serves on uvicorn with
the httptools parser (a chunked body of a million tiny chunks is parsed in C, not in Python on the
event loop) and TCP_NODELAY on every connection (door.nodelay). API keys: $DOOR_API_KEYS
(comma-separated) or $DOOR_API_KEYS_FILE (one a line); needed
beyond loopback unless --no-api-keys. Where a served text model carries its export's golden set, the
door runs it through Triton before it serves and every --canary-interval seconds (door.canary).
`make serve` starts it beside Triton (kit.server.serve). With --workers N, N processes share the port
(uvicorn's workers), each a whole door; /metrics adds up all of theirs (prometheus_client's multiprocess mode).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import tempfile

import uvicorn

from door.app import create_app
from door.contract import ContractError, contract_from_configs, served_configs
from door.observe import MULTIPROC_ENV
from door.settings import DoorSettings, SettingsError, api_keys, flag_env, parse_bool
from door.tei_api import tei_model

log = logging.getLogger("door")

# The door's own options beside DoorSettings' fields: how it listens and starts.
PROCESS_OPTIONS = {
    "host": (str, "127.0.0.1", "address to listen on (default: loopback only)"),
    "port": (int, 8080, "port to listen on"),
    "wait": (float, 3600.0, "seconds to wait for Triton to be ready at start"),
    "log_level": (str, "info", "uvicorn's and the door's log level"),
    "no_api_keys": (parse_bool, False, "serve inference without keys, even beyond loopback"),
    "workers": (int, 1, "processes serving the door, each with its own event loop and gRPC connection; metrics add up"),
}


def add_option(parser, environ, name: str, kind, default, help_text: str, repeatable: bool = False) -> None:
    flag, env = flag_env(name)
    default = list(default) if repeatable else default
    if kind is parse_bool:
        shape = {"nargs": "?", "const": True}  # `--no-api-keys` alone, or with a value
    elif repeatable:
        shape = {"action": "extend"}  # each use adds to the list
    else:
        shape = {}
    if env in environ:
        try:
            default = kind(environ[env])
        except ValueError as exc:
            parser.error(f"${env}: {exc}")
    parser.add_argument(flag, type=kind, default=default, help=f"{help_text} (${env}; default {default!r})", **shape)


def parse_args(argv, environ=os.environ):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, (kind, default, help_text) in PROCESS_OPTIONS.items():
        add_option(parser, environ, name, kind, default, help_text)
    for field in dataclasses.fields(DoorSettings):
        if field.name in DoorSettings.FROM_ENVIRONMENT:
            continue
        meta = field.metadata
        add_option(parser, environ, field.name, meta["parse"], field.default, meta["help"], meta["repeatable"])
    return parser.parse_args(argv)


def settings_from(args, environ=os.environ) -> DoorSettings:
    keys = api_keys(args.host, environ, disabled=args.no_api_keys)
    values = {field.name: getattr(args, field.name) for field in dataclasses.fields(DoorSettings) if hasattr(args, field.name)}
    values["cors_origins"] = tuple(values["cors_origins"])
    return DoorSettings(api_keys=keys, **values)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    try:
        settings = settings_from(args)
        contract = contract_from_configs(served_configs(settings.triton, args.wait, settings.admin_headers))
        tei_model(contract, settings.tei)
    except (SettingsError, ContractError) as exc:
        print(f"door: error: {exc}", file=sys.stderr)
        return 2
    log.info(
        "serving %s from Triton at %s; API keys %s",
        ", ".join(contract.models) or "no model",
        settings.triton,
        "on" if settings.api_keys else "off",
    )
    listen = listen_options(args)
    if args.workers < 1:
        print(f"door: error: --workers must be at least 1, not {args.workers}", file=sys.stderr)
        return 2
    if args.workers == 1:
        uvicorn.run(create_app(contract, settings), **listen)
        return 0
    with tempfile.TemporaryDirectory(prefix="door-metrics-") as values:
        # The workers are new interpreters: they read their settings from this environment, as a container would.
        os.environ.update(environment_of(args) | {MULTIPROC_ENV: values})
        uvicorn.run(f"{__name__}:app_from_environment", factory=True, workers=args.workers, **listen)
    return 0


def listen_options(args) -> dict:
    """uvicorn's settings for the door, one worker or N."""
    return {
        "host": args.host,
        "port": args.port,
        "http": "door.nodelay:NoDelayHttpToolsProtocol",  # httptools, Nagle off on every connection
        "access_log": False,  # door.observe writes one line per request, with its id
        "log_level": args.log_level,
        "timeout_graceful_shutdown": 10,
    }


def environment_of(args) -> dict[str, str]:
    """The variables that give a worker these parsed options (flag_env's names; lists comma-separated)."""
    env = {}
    for name, value in vars(args).items():
        if name == "workers":
            continue
        text = ",".join(value) if isinstance(value, list) else str(value)
        env[flag_env(name)[1]] = text
    return env


def app_from_environment():
    """A worker's app (uvicorn's factory): its options from the environment main() set, the contract read again."""
    args = parse_args([])
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    settings = settings_from(args)
    return create_app(contract_from_configs(served_configs(settings.triton, args.wait, settings.admin_headers)), settings)
