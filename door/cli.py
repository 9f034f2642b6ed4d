"""Run the front door in front of a running Triton.

    python -m door [--triton 127.0.0.1:8001] [--host 127.0.0.1] [--port 8080] [--cors-origin URL ...]
                   [--canary-interval 300]

Waits for Triton to be ready, reads the served configs (door.contract), then serves on uvicorn with
the httptools parser (a chunked body of a million tiny chunks is parsed in C, not in Python on the
event loop). API keys: $DOOR_API_KEYS (comma-separated) or $DOOR_API_KEYS_FILE (one a line); needed
beyond loopback unless --no-api-keys. Where the served `radar` carries the export's golden set, the
door runs it through Triton before it serves and every --canary-interval seconds (door.canary).
`make serve` starts it beside Triton (kit.control.serve).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import uvicorn

from door.app import create_app
from door.contract import ContractError, contract_from_configs, served_configs
from door.settings import DoorSettings, SettingsError, api_keys

log = logging.getLogger("door")


def parse_args(argv):
    defaults = DoorSettings()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--triton", default=defaults.triton, help="Triton's gRPC address (host:port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--no-api-keys", action="store_true", help="serve inference without keys, even beyond loopback")
    parser.add_argument("--cors-origin", action="append", default=[], help="an origin allowed to call from a browser (repeat)")
    parser.add_argument("--max-texts", type=int, default=defaults.max_texts, help="texts per RADAR call")
    parser.add_argument("--body-timeout", type=float, default=defaults.body_timeout, help="seconds for a body to arrive")
    parser.add_argument(
        "--canary-interval",
        type=float,
        default=defaults.canary_interval,
        help="seconds between runs of the served-numerics canary (also run at start)",
    )
    parser.add_argument("--wait", type=float, default=3600.0, help="seconds to wait for Triton to be ready at start")
    parser.add_argument("--log-level", default="info")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    try:
        keys = api_keys(args.host, os.environ, disabled=args.no_api_keys)
        settings = DoorSettings(
            triton=args.triton,
            api_keys=keys,
            cors_origins=tuple(args.cors_origin),
            max_texts=args.max_texts,
            body_timeout=args.body_timeout,
            canary_interval=args.canary_interval,
        )
        contract = contract_from_configs(served_configs(args.triton, args.wait))
    except (SettingsError, ContractError) as exc:
        print(f"door: error: {exc}", file=sys.stderr)
        return 2
    log.info(
        "serving %s from Triton at %s; API keys %s",
        ", ".join(contract.models) or "no model",
        args.triton,
        "on" if keys else "off",
    )
    uvicorn.run(
        create_app(contract, settings),
        host=args.host,
        port=args.port,
        http="httptools",
        access_log=False,  # door.observe writes one line per request, with its id
        log_level=args.log_level,
        timeout_graceful_shutdown=10,
    )
    return 0
