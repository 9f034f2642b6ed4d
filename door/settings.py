"""The door's own settings: where Triton is, who may call, how long a body may take to arrive.

Each is a flag of `python -m door` and an environment variable (`triton_timeout` is
`--triton-timeout` and $DOOR_TRITON_TIMEOUT; door.cli). The models' limits are not here: they come
from the configs Triton serves (door.contract).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kit.server.runtime import GRPC_ADMIN_HEADER, is_loopback

ENV_PREFIX = "DOOR_"
API_KEYS_ENV = "DOOR_API_KEYS"
API_KEYS_FILE_ENV = "DOOR_API_KEYS_FILE"


class SettingsError(ValueError):
    """The door cannot start with these settings; the message says what to change."""


def flag_env(name: str) -> tuple[str, str]:
    """A setting's flag and environment variable: `max_texts` -> `--max-texts`, `DOOR_MAX_TEXTS`."""
    return f"--{name.replace('_', '-')}", f"{ENV_PREFIX}{name.upper()}"


def parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    if text.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if text.strip().lower() in ("", "0", "false", "no", "off"):
        return False
    raise ValueError(f"not a yes or no: {text!r}")


def parse_origins(text: str) -> list[str]:
    """Comma-separated origins (the environment's form, and a flag's)."""
    return [origin.strip() for origin in text.split(",") if origin.strip()]


def setting(default, parse: Callable, help_text: str, repeatable: bool = False):
    """A field with what door.cli needs to make it a flag: its parser, its help, and whether the flag
    may be repeated (each use adds to the list)."""
    return field(default=default, metadata={"parse": parse, "help": help_text, "repeatable": repeatable})


@dataclass(frozen=True)
class DoorSettings:
    """What the door needs besides the served configs; each field's help says what it does.
    `rate_window` and `max_retry_after` shape Retry-After (door.flow)."""

    FROM_ENVIRONMENT = frozenset({"api_keys"})  # read by api_keys() below, from their own variables

    triton: str = setting("127.0.0.1:8001", str, "Triton's gRPC address (host:port)")
    api_keys: frozenset[str] = frozenset()
    cors_origins: tuple[str, ...] = setting(
        (), parse_origins, "origins allowed to call from a browser: comma-separated, or the flag repeated", repeatable=True
    )
    max_texts: int = setting(64, int, "texts per call of a text route")
    coalesce_in_flight: int = setting(
        8,
        int,
        "requests to a text model (or an image classifier) the door keeps in flight before concurrent texts (images) "
        "wait to go together in the next one (door.coalesce); 0 sends each in a request of its own",
    )
    coalesce_waiting: int = setting(
        2048, int, "texts the door holds waiting for a request to a text model; beyond, a call is refused with 429"
    )
    max_in_flight: int = setting(
        512,
        int,
        "inference requests the door holds at once; beyond, one is refused with 429 before its body is read (a flood's "
        "memory is bounded)",
    )
    body_timeout: float = setting(30.0, float, "seconds for a whole body to arrive (a slow drip holds nothing longer)")
    triton_timeout: float = setting(120.0, float, "seconds for Triton's answer to one request")
    rate_window: float = setting(10.0, float, "seconds over which a model's answer rate is measured for Retry-After")
    max_retry_after: int = setting(30, int, "the longest Retry-After the door sends, in seconds")
    unavailable_retry_after: int = setting(2, int, "the Retry-After sent while Triton is unreachable or restarting")
    canary_interval: float = setting(300.0, float, "seconds between runs of the served-numerics canary (also run at start)")
    shared_memory_mb: int = setting(
        64,
        int,
        "MiB of system shared memory each worker reserves for large tensors to Triton, where Triton runs beside it "
        "(door.shared_memory); 0: every tensor goes in the gRPC message",
    )
    triton_admin_key: str = setting(
        "",
        str,
        "the key of Triton's admin APIs ($TRITON_ADMIN_KEY of kit.server.serve, which passes it), where Triton has one: "
        "the door reads the model index and registers its shared memory with it",
    )
    tei: str = setting(
        "", str, "the text model that text-embeddings-inference's routes serve (/embed, /predict, /info); none: no such routes"
    )

    @property
    def admin_headers(self) -> dict[str, str] | None:
        """The gRPC metadata of Triton's admin calls: the key, where there is one."""
        return {GRPC_ADMIN_HEADER: self.triton_admin_key} if self.triton_admin_key else None

    def __post_init__(self) -> None:
        for name in ("body_timeout", "triton_timeout", "rate_window", "canary_interval"):
            if not getattr(self, name) > 0:
                raise SettingsError(
                    f"the {name.replace('_', ' ')} must be a positive number of seconds, not {getattr(self, name)}"
                )
        for name in ("coalesce_in_flight", "shared_memory_mb"):
            if getattr(self, name) < 0:
                raise SettingsError(f"the {name.replace('_', ' ')} must be 0 (off) or more, not {getattr(self, name)}")
        for name in ("max_texts", "coalesce_waiting", "max_in_flight", "max_retry_after", "unavailable_retry_after"):
            if getattr(self, name) < 1:
                raise SettingsError(f"the {name.replace('_', ' ')} must be at least 1, not {getattr(self, name)}")


def api_keys(host: str, environ: Mapping[str, str], disabled: bool = False) -> frozenset[str]:
    """The keys inference needs: $DOOR_API_KEYS (comma-separated) and the lines of the file named by
    $DOOR_API_KEYS_FILE. None on loopback unless given; beyond loopback the door refuses to start
    without one, unless `disabled` says so on purpose (e.g. behind a gateway that authenticates)."""
    if disabled:
        return frozenset()
    keys = {key.strip() for key in environ.get(API_KEYS_ENV, "").split(",")}
    if environ.get(API_KEYS_FILE_ENV):
        try:
            keys |= {line.strip() for line in Path(environ[API_KEYS_FILE_ENV]).read_text().splitlines()}
        except OSError as exc:
            raise SettingsError(f"${API_KEYS_FILE_ENV}: {exc}") from None
    keys.discard("")
    if not keys and not is_loopback(host):
        raise SettingsError(
            f"the door listens on {host}, beyond loopback: set ${API_KEYS_ENV} or ${API_KEYS_FILE_ENV}, "
            "or pass --no-api-keys to serve inference without keys"
        )
    return frozenset(keys)
