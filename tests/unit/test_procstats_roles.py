"""perf.engine.procstats splits a server tree's CPU time by what each process does."""

import subprocess
import sys
import time

import psutil

from perf.engine.procstats import cpu_seconds, cpu_seconds_by_role, role

BUSY = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(30)"


def test_a_stub_is_named_by_its_model_and_its_cpu_counted_under_it(tmp_path):
    stub_path = str(tmp_path / "repository" / "radar_classifier" / "1" / "model.py")
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BUSY!r}, {stub_path!r}])"]
    )
    try:
        stub = None
        for _ in range(100):
            children = psutil.Process(parent.pid).children()
            if children and sum(children[0].cpu_times()[:2]) >= 0.25:
                stub = children[0]
                break
            time.sleep(0.1)
        assert stub is not None, "the child never got busy"
        assert role(stub) == "radar_classifier"
        assert role(psutil.Process(parent.pid)) == psutil.Process(parent.pid).name()
        by_role = cpu_seconds_by_role(parent.pid)
        assert by_role["radar_classifier"] >= 0.25
        assert abs(sum(by_role.values()) - cpu_seconds(parent.pid)) < 0.05
    finally:
        for process in psutil.Process(parent.pid).children(recursive=True):
            process.kill()
        parent.kill()
        parent.wait()


def test_a_python_module_is_named_by_the_module_and_several_trees_add_up():
    door = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"], stdout=subprocess.DEVNULL)
    other = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        time.sleep(0.5)
        assert role(psutil.Process(door.pid)) == "http.server"
        both = cpu_seconds_by_role((door.pid, other.pid))
        assert set(both) == {"http.server", psutil.Process(other.pid).name()}
        assert abs(sum(both.values()) - cpu_seconds(door.pid) - cpu_seconds(other.pid)) < 0.05
    finally:
        for process in (door, other):
            process.kill()
            process.wait()
