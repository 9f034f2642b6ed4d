"""The chaos run, short (perf.chaos; `make chaos` runs it for 20 minutes): the served kit on a server of its own, 64
closed-loop clients of texts, images and a user spec's model through the door and over gRPC with the clients' own
retry policy, and a fault every 20-60 s from a seeded deck. Its verdict holds whatever the run's counts: no wrong
answer, nothing lost, every error a clear retryable refusal, the kit ready and serving one RADAR version at the end,
memory flat, and nothing of a dead stub left behind. KIT_CHAOS_SECONDS sets its length (120 s)."""

from __future__ import annotations

from perf.chaos.run import Options, run
from tests.served.reliability import save_result, scale

SECONDS = scale("CHAOS_SECONDS", 120)
SEED = 40  # its first faults: a deploy with a stub killed during it, a stub killed, the door stopped


def test_faults_under_load_end_in_right_answers_or_clear_refusals_with_nothing_lost(tmp_path, radar_artifacts):
    figures = run(Options(seconds=SECONDS, seed=SEED, work=tmp_path))
    # Everything but the clients' names: what explains a failure (the supervisor's events, the stubs it knew at the
    # end, readiness) is in the saved result, not only in the kit's logs that the test's tmp_path rotates away.
    save_result("chaos_test", {key: value for key, value in figures.items() if key != "clients"})
    assert figures["problems"] == [], figures["problems"]
