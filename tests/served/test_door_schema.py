"""The door's OpenAPI document holds against the door itself: schemathesis, with every check on, generates
requests from /openapi.json (valid ones and invalid ones) and sends them to a door with keys in front of
the session's server. Any answer the document does not promise (a status, a media type, a header, a body
that breaks its schema), any valid request refused and any invalid one accepted is a failure.

Its hooks (tests/served/door_schema_hooks.py) give the generator real images where the document asks for
images, and a pixels body's data the length its shape needs. Invalid data may also be refused with 413,
the door's answer to a body, text or image over its limit (schemathesis expects 400/422 by default).
KIT_DOOR_SCHEMA_EXAMPLES sets the examples per operation of its fuzzing phase (50 in `make test`), and
KIT_DOOR_SCHEMA_SEED its seed (25), so that a longer run draws requests no test has drawn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from door.routes import IMAGES
from tests.conftest import REPO_ROOT
from tests.served.doors import running_door
from tests.served.reliability import save_result, scale

KEY = "schema-fuzz-key"
PIXELS = 64 * 64  # the largest valid ResNet image the fuzzer sends (the served limit is larger)
# A schema-valid body an image route may still refuse, with the statuses its document gives for what no JSON Schema can
# say: base64 text (or a file) that is no image (415), or an image past the pixel limit (413).
CONFIG = f"""
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]

[[operations]]
include-tag = "{IMAGES}"
checks.positive_data_acceptance.expected-statuses = ["2xx", "413", "415"]
"""


def test_the_openapi_document_tells_the_truth_to_a_fuzzer_with_every_check(server, tmp_path):
    examples = int(scale("DOOR_SCHEMA_EXAMPLES", 50))
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    report = tmp_path / "report.json"
    with running_door(server.options.grpc_url, tmp_path / "door.log", env={"DOOR_API_KEYS": KEY}) as door:
        run = subprocess.run(
            [
                str(REPO_ROOT / ".venv" / "serve" / "bin" / "st"),
                "--config-file",
                str(config),
                "run",
                f"{door.url}/openapi.json",
                "--checks",
                "all",
                "--header",
                f"X-API-Key: {KEY}",
                "--max-examples",
                str(examples),
                "--seed",
                str(int(scale("DOOR_SCHEMA_SEED", 25))),
                "--generation-database",
                "none",  # each run is its seed's alone: nothing replayed from an earlier one
                "--workers",
                "1",
                "--request-timeout",
                "60",
                "--report",
                "json",
                "--report-json-path",
                str(report),
                "--no-color",
            ],
            cwd=REPO_ROOT,
            env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.served.door_schema_hooks", "DOOR_FUZZ_PIXELS": str(PIXELS)},
            capture_output=True,
            text=True,
            timeout=900,
        )
    summary = run.stdout[run.stdout.rfind("SUMMARY") :]
    print(summary, file=sys.stderr)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    result = json.loads(report.read_text())
    counts = {
        "generated": result["test_cases"]["generated"],
        "failures": result["test_cases"]["with_failures"],
        "errored": result["test_cases"]["errored"],
        "errors": sum(error["count"] for error in result["errors"]),
    }
    save_result("door_schema", {"examples_per_operation": examples, "operations": len(result["operations"]), **counts})
    assert counts["generated"] >= 100 and counts["failures"] == counts["errored"] == counts["errors"] == 0, counts
