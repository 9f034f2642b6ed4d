"""A chaos run's verdict (perf.chaos.report): memory flat in all and process by process, a run whose server does
not say at the end which versions serve reported as failed, not crashed, and a kit not ready at the end reported with
what it said for itself."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psutil

from perf.chaos.report import problems
from perf.chaos.run import radar_serves
from perf.chaos.watch import answer_of, zombies


def figures(by_role: dict[str, tuple[float, ...]]) -> dict:
    """A run that passed but for its memory: each role's (first fifth, last fifth) median MB, and the most it held in
    each half (by default the first fifth's, then the last's)."""
    roles = {
        name: {"first_mb": mb[0], "last_mb": mb[1], "max_mb": max(mb), "halves_max_mb": list(mb[2:] or mb[:2])}
        for name, mb in by_role.items()
    }
    first, last = (sum(role[key] for role in roles.values()) for key in ("first_mb", "last_mb"))
    return {
        "requests": {"radar door": {"sent": 10, "right": 10, "wrong": 0, "failed": 0, "lost": 0}},
        "faults": [],
        "unfinished_faults": [],
        "ready_at_end": True,
        "radar_serves": ["1"],
        "supervisor_failure": None,
        "left_behind": {"stubs_running": [], "shm_regions": []},
        "memory": {"total": {"first_mb": first, "last_mb": last, "max_mb": last}, "by_role": roles},
    }


def test_one_process_that_grows_fails_the_run_though_the_total_stays_within_its_bound():
    """The door's growth of the 20-minute run (101 -> 176 MB) hid in the total's slack (1,165 -> 1,246 MB); a steady
    leak's first half peaks about midway, and its end is its highest."""
    run = figures({"door": (100.8, 176.4, 140.0, 176.4), "resnet50_backbone": (605.3, 608.7), "tritonserver": (61.9, 63.8)})
    assert problems(run) == ["door's resident memory grew from 100.8 to 176.4 MB"]


def test_a_role_whose_stubs_a_deploy_replaced_early_and_that_ends_below_its_first_half_mark_did_not_grow():
    """A loaded run's radar_texts: the deploy at 38 s left fresh stubs in the first fifth (57 MB), warm ones at the end
    (109 MB), after 276 MB in the first half."""
    run = figures({"radar_texts": (56.8, 109.0, 276.3, 210.2), "door": (95.4, 95.1)})
    assert problems(run) == []
    assert problems(figures({"radar_texts": (56.8, 109.0, 100.0, 109.0)})) == [
        "radar_texts's resident memory grew from 56.8 to 109.0 MB"
    ]


def test_flat_processes_and_a_role_of_a_moment_pass():
    run = figures({"door": (100.8, 110.0), "tritonserver": (61.9, 63.8), "addr2line": (0.0, 0.0), "sh": (0.0, 1.6)})
    assert problems(run) == []


def test_a_server_that_refuses_the_last_question_fails_the_run_with_why():
    """Asked which versions of radar serve at the end, a refused connection is the run's answer, not a traceback."""
    with socket.socket() as bound:  # bound, never listening: every connection to it is refused, and nobody can take it
        bound.bind(("127.0.0.1", 0))
        kit = SimpleNamespace(
            repository=Path("."), server=SimpleNamespace(options=SimpleNamespace(http_url=f"127.0.0.1:{bound.getsockname()[1]}"))
        )
        serves = radar_serves(kit, print)
    assert "Connection refused" in serves
    run = figures({"door": (100.8, 110.0)}) | {"radar_serves": serves}
    assert problems(run) == [f"the server did not say which versions of radar serve at the end: {serves}"]


def test_a_kit_not_ready_at_the_end_fails_the_run_with_what_the_door_and_triton_said():
    """The door's 503 body is the run's answer to why (its dead stubs, models, canary), and a question nobody answers
    says so instead of raising."""
    bodies = {"/health/ready": b'{"ready": false, "dead_stubs": [4242]}', "/text": b"not JSON"}

    class NotReady(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = bodies[self.path]
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotReady) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        said = answer_of(f"http://127.0.0.1:{server.server_address[1]}/health/ready")
        assert answer_of(f"http://127.0.0.1:{server.server_address[1]}/text") == "not JSON"
        server.shutdown()
    assert said == {"ready": False, "dead_stubs": [4242]}
    with socket.socket() as bound:  # bound, never listening: refused
        bound.bind(("127.0.0.1", 0))
        assert "Connection refused" in answer_of(f"http://127.0.0.1:{bound.getsockname()[1]}/health/ready")
    why = {"door": said, "triton_not_ready": [], "zombie_stubs": {4242: "never seen alive"}}
    run = figures({"door": (100.8, 110.0)}) | {"ready_at_end": False, "why_not_ready": why}
    assert problems(run) == [f"the kit was not ready at the end: {why}"]


def test_a_child_that_ended_unreaped_is_a_zombie_of_its_parent_and_a_live_one_is_not():
    ended = subprocess.Popen(["true"])
    running = subprocess.Popen(["sleep", "60"])
    try:
        child, deadline = psutil.Process(ended.pid), time.monotonic() + 60
        while child.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:  # unreaped until `ended.wait()`
            time.sleep(0.05)
        assert ended.pid in zombies(os.getpid())
        assert running.pid not in zombies(os.getpid())
    finally:
        running.kill()
        running.wait()
        ended.wait()
    assert ended.pid not in zombies(os.getpid())
