"""The carry for the GPU host (`make gpu-carry`): what deploy/gpu_host/run.sh needs there and the host lacks.

The H100 host has no package index and takes at most 64 MiB of files, the working tree and the carried folder
together. Its Python has PyTorch, transformers, tokenizers, numpy 2, grpcio and aiohttp, but no tritonserver,
tritonclient, FastAPI or Flask. The carry holds:

- `tritonserver-py<X.Y>.tar.xz`: the GPU build of tritonserver from the pinned nvidia-pytriton wheel, repacked
  with only the server, the Python backend, the caches, the stub of the host's Python and the bundled libraries
  (without the bundled libpython of another Python), in the wheel's own layout: the binaries find their
  libraries through RPATHs relative to it. Unpacked, `pytriton/tritonserver` is what KIT_TRITON_DIST names;
- `wheels/`: the pinned wheels the host lacks, built for its Python: tritonclient's pure-Python wheel (its
  platform wheel is 14 MB of perf_analyzer), FastAPI and Flask with the dependencies the host does not have;
- `stub-wheels/`: numpy 1.x for the Python-backend stubs alone. The stub of tritonserver 2.51 reads numpy 2
  arrays wrongly (seen: `radar` dies deserialising its BYTES input, and an INT64 tensor sent over BLS arrives
  empty), so run.sh puts these first on the path of the stub processes only; every other process keeps the
  host's numpy 2;
- `MANIFEST.json`: the commit of the tree it was built with, every file's size and the total with the working
  tree, refused above the limit.

Versions are the serve lock's. Wheels are downloaded once into a cache (build/gpu-cache) and copied.

    python -m deploy.gpu_host.carry --python 3.12 --out .gpu
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from perf.engine.revision import tree_commit

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCK = REPO_ROOT / "requirements" / "serve.lock"
CACHE = REPO_ROOT / "build" / "gpu-cache"
LIMIT_BYTES = 64 * 2**20
SERVER_WHEEL = "nvidia-pytriton"
# What the GPU host's Python lacks (docs/GPU.md; the device notes' package list), as the serve lock names them.
# typing-extensions and werkzeug are there, but maybe older than pydantic and Flask need: newer ones shadow them.
# pyclipper and qrcode come with the OCR workload, which the perf workloads' registry imports; pybase64 with the door,
# whose image decoding the pixels workload's baselines share.
CARRIED = (
    "tritonclient",
    "python-rapidjson",
    "fastapi",
    "opentelemetry-api",
    "starlette",
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "annotated-doc",
    "typing-inspection",
    "typing-extensions",
    "uvicorn",
    "flask",
    "werkzeug",
    "itsdangerous",
    "blinker",
    "pyclipper",
    "qrcode",
    "pybase64",
)
STUB_CARRIED = ("numpy",)
# manylinux tags pip matches exactly; `any` last, so that tritonclient comes as its pure-Python wheel.
PLATFORMS = ("manylinux_2_35_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "any")
SERVER_DIRS = ("pytriton/tritonserver/bin/", "pytriton/tritonserver/backends/", "pytriton/tritonserver/caches/")
LIBS = "nvidia_pytriton.libs/"
BUNDLED_LIBPYTHON = re.compile(r"libpython(\d+)-[0-9a-f]+\.(\d+)\.so")


class CarryError(RuntimeError):
    """The carry cannot be built, or would not fit; the message says why."""


def normalized(name: str) -> str:
    """A distribution name as wheel file names and lock files may spell it, in one form."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_versions(text: str) -> dict[str, str]:
    """`name==version` lines of a lock file, by normalized name."""
    pins = (line.split("#")[0].strip() for line in text.splitlines())
    return {normalized(name): version for name, _, version in (p.partition("==") for p in pins if "==" in p)}


def pins(names: tuple[str, ...], versions: dict[str, str]) -> list[str]:
    missing = [n for n in names if normalized(n) not in versions]
    if missing:
        raise CarryError(f"{LOCK.name} pins no {', '.join(missing)}")
    return [f"{n}=={versions[normalized(n)]}" for n in names]


def wheel_name(path: Path) -> str:
    return normalized(path.name.split("-")[0])


def download(requirements: list[str], python: str, cache: Path) -> dict[str, Path]:
    """The wheels for `python`, one per requirement (pip keeps those already in `cache`), by normalized name."""
    cache.mkdir(parents=True, exist_ok=True)
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", python, "--implementation", "cp", *platforms, "--dest", str(cache), *requirements]
    subprocess.run(command, check=True)
    wanted = {normalized(r.split("==")[0]): r.split("==")[1] for r in requirements}
    found = {wheel_name(p): p for p in cache.glob("*.whl") if wanted.get(wheel_name(p)) == p.name.split("-")[1]}
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise CarryError(f"pip left no wheel for {', '.join(missing)} in {cache}")
    return found


def keeps(member: str, python: str) -> bool:
    """Whether a file of the nvidia-pytriton wheel belongs to the repacked server for `python` (e.g. "3.12")."""
    if member.endswith("/"):
        return False
    if member.startswith(SERVER_DIRS):
        return True
    if member == f"pytriton/tritonserver/python_backend_stubs/{python}/triton_python_backend_stub":
        return True
    if member.startswith(LIBS):
        bundled = BUNDLED_LIBPYTHON.match(member[len(LIBS) :])
        return bundled is None or f"{bundled[1]}.{bundled[2]}" == python
    return False


def file_mode(info: zipfile.ZipInfo) -> int:
    """The Unix mode the wheel recorded (executables stay executable), or rw-r--r--."""
    return (info.external_attr >> 16) & 0o777 or 0o644


def repack_server(wheel: Path, python: str, out: Path) -> int:
    """Write the server's tarball (xz) for `python`; returns the unpacked size in bytes."""
    with zipfile.ZipFile(wheel) as source:
        members = [info for info in source.infolist() if keeps(info.filename, python)]
        if not any("/python_backend_stubs/" in info.filename for info in members):
            raise CarryError(f"{wheel.name} has no Python-backend stub for Python {python}")
        with tarfile.open(out, "w:xz", preset=9) as tar:
            for info in members:
                entry = tarfile.TarInfo(info.filename)
                entry.size, entry.mode = info.file_size, file_mode(info)
                tar.addfile(entry, io.BytesIO(source.read(info)))
    return sum(info.file_size for info in members)


def tree_bytes(root: Path = REPO_ROOT) -> int:
    """The working tree that travels with every device call: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root, capture_output=True, check=True
    )
    paths = (root / p for p in listed.stdout.decode().split("\0") if p)
    return sum(p.stat().st_size for p in paths if p.is_file())


def check_ignored(carry: Path, root: Path = REPO_ROOT) -> None:
    """A carried folder must be one git ignores, or it would travel twice: as the working tree and as the carry."""
    if subprocess.run(["git", "check-ignore", "-q", str(carry.resolve())], cwd=root).returncode != 0:
        raise CarryError(f"{carry} is not ignored by git: add it to .gitignore, or it travels twice")


def manifest(carry: Path, tree: int, limit: int = LIMIT_BYTES) -> dict:
    """Every carried file's size, and the carry with the working tree against the device's limit."""
    files = {p.relative_to(carry).as_posix(): p.stat().st_size for p in sorted(carry.rglob("*")) if p.is_file()}
    files.pop("MANIFEST.json", None)
    carried = sum(files.values())
    return {"files": files, "carry_bytes": carried, "tree_bytes": tree, "total_bytes": carried + tree, "limit_bytes": limit}


def check_size(summary: dict) -> None:
    if summary["total_bytes"] > summary["limit_bytes"]:
        mib = lambda n: f"{n / 2**20:.1f} MiB"  # noqa: E731
        raise CarryError(
            f"carry {mib(summary['carry_bytes'])} + working tree {mib(summary['tree_bytes'])} = {mib(summary['total_bytes'])} "
            f"exceeds the device's {mib(summary['limit_bytes'])}"
        )


def build_carry(python: str, out: Path, cache: Path = CACHE) -> dict:
    versions = lock_versions(LOCK.read_text())
    wheels = download(pins((SERVER_WHEEL, *CARRIED, *STUB_CARRIED), versions), python, cache / f"py{python}")
    server = wheels.pop(normalized(SERVER_WHEEL))
    folders = {name: "stub-wheels" if name in map(normalized, STUB_CARRIED) else "wheels" for name in wheels}
    out.mkdir(parents=True, exist_ok=True)
    check_ignored(out)
    tarball = out / f"tritonserver-py{python}.tar.xz"
    for stale in out.glob("tritonserver-py*.tar.xz"):
        if stale != tarball:
            stale.unlink()
    if not tarball.is_file() or tarball.stat().st_mtime < server.stat().st_mtime:
        print(f"repacking {server.name} for Python {python} (xz, about a minute)", flush=True)
        unpacked = repack_server(server, python, tarball.with_suffix(".partial"))
        tarball.with_suffix(".partial").rename(tarball)
        print(f"  {unpacked / 2**20:.0f} MiB unpacked", flush=True)
    for folder in set(folders.values()):
        shutil.rmtree(out / folder, ignore_errors=True)
        (out / folder).mkdir()
    for name, wheel in wheels.items():
        shutil.copy2(wheel, out / folders[name] / wheel.name)
    summary = {"python": python, "commit": tree_commit(REPO_ROOT), **manifest(out, tree_bytes())}
    (out / "MANIFEST.json").write_text(json.dumps(summary, indent=1) + "\n")
    check_size(summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default="3.12", help="the GPU host's Python version (the stub and wheels are per version)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / ".gpu", help="the carried folder (ignored by git)")
    args = parser.parse_args(argv)
    try:
        summary = build_carry(args.python, args.out)
    except (CarryError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, size in summary["files"].items():
        print(f"  {size / 2**20:7.2f} MiB  {name}")
    print(
        f"carry {summary['carry_bytes'] / 2**20:.1f} MiB + working tree {summary['tree_bytes'] / 2**20:.1f} MiB = "
        f"{summary['total_bytes'] / 2**20:.1f} MiB of the device's {summary['limit_bytes'] / 2**20:.0f} MiB, in {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
