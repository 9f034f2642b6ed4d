"""Which of the GPU host's packages the Python-backend stubs must not see, found by importing what they import.

The stubs run the carried numpy 1.x (the 2.51 stub reads numpy 2 arrays wrongly) under the host's packages, some
of them built for numpy 2. transformers imports several optional packages whenever they are installed
(scikit-learn, SciPy, pandas, accelerate), though the kit's models need none of them: one that fails under numpy
1.x fails every PyTorch-runner model's load, as "Could not import module 'AutoModel'". This check imports, in a
process that sees what a stub sees, everything the kit's model.py files import (deploy/triton/check_imports.py).
Where an import fails inside a host package, that package is hidden (`sys.modules[name] = None`: an import of it
fails, and importlib.util.find_spec answers None, which is how transformers asks whether it is installed) and the
check runs again. It prints each reason, writes the hidden names (a JSON list) for run.sh's stub line, and exits
non-zero when an import fails in a package the kit needs.

    python -m deploy.gpu_host.stub_imports --stub-site DIR --out FILE      # from the repository's root
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the kit's models import on purpose: hiding one of these would only move the failure.
NEEDED = frozenset({"numpy", "torch", "transformers", "tokenizers", "safetensors", "huggingface_hub", "PIL", "cv2"})
MAX_HIDDEN = 8

# What the stubs import: their numpy 1.x under the host's torch, and every kit module a model.py imports.
STUB_IMPORTS = """
import numpy, torch
assert numpy.__version__ < "2", f"the stubs get numpy {numpy.__version__}"
assert torch.from_numpy(numpy.arange(4, dtype=numpy.int64)).half().numpy().tolist() == [0, 1, 2, 3]
from deploy.triton.check_imports import check
check(Path("model_repository"), sorted(Path("kit/adapters").glob("*_model.py")))
"""

# Runs in a child that sees what a stub sees (the hidden packages gone, the stubs' own packages first) and prints
# one JSON line: what it imported, or each exception of the failure's chain with its frames' files.
CHILD = """
import json, sys, textwrap, traceback
from pathlib import Path
sys.modules.update(dict.fromkeys(json.loads(sys.argv[2])))
sys.path.insert(0, sys.argv[1])
try:
    exec(textwrap.dedent(sys.argv[3]))
except BaseException as error:
    chain = []
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    print(json.dumps({
        "error": "\\n".join(f"{type(e).__name__}: {e}" for e in chain),
        "files": [[frame.filename for frame in traceback.extract_tb(e.__traceback__)] for e in reversed(chain)],
    }))
    sys.exit(1)
versions = {name: sys.modules[name].__version__ for name in ("numpy", "torch") if name in sys.modules}
print(json.dumps({"imported": versions}))
"""


def package_of(filename: str) -> str | None:
    """The top-level package a file of site-packages belongs to (None outside site-packages)."""
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts[:-1]:
            top = parts[parts.index(marker) + 1]
            return top.removesuffix(".py")
    return None


def culprit(chain: list[list[str]], stub_site: Path) -> str | None:
    """The host package whose own code raised: the innermost site-packages frame not of a needed package, in the
    innermost exception that has one (`chain`: each exception's frames, the innermost exception first)."""
    for files in chain:
        for filename in reversed(files):
            name = package_of(filename)
            if name and name not in NEEDED and not Path(filename).resolve().is_relative_to(stub_site):
                return name
    return None


def probe(stub_site: Path, hidden: list[str], imports: str = STUB_IMPORTS) -> dict:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(stub_site), json.dumps(hidden), imports],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = child.stdout.strip().splitlines()
    if not lines:
        return {"error": child.stderr[-3000:] or f"exit status {child.returncode}", "files": []}
    return json.loads(lines[-1])


def hidden_packages(stub_site: Path, imports: str = STUB_IMPORTS) -> list[str]:
    hidden: list[str] = []
    while True:
        result = probe(stub_site, hidden, imports)
        if "error" not in result:
            versions = ", ".join(f"{name} {version}" for name, version in result["imported"].items())
            print(f"stub_imports: the stubs import every model's modules ({versions})")
            return hidden
        print(result["error"].rstrip())
        name = culprit(result["files"], stub_site)
        if name is None or name in hidden or len(hidden) >= MAX_HIDDEN:
            raise SystemExit("stub_imports: the stubs cannot import the kit's models, and no optional package is to blame")
        print(f"stub_imports: {name} fails under the stubs' numpy: the stubs will not see it")
        hidden.append(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stub-site", type=Path, required=True, help="the folder of the stubs' own packages")
    parser.add_argument("--out", type=Path, required=True, help="where the hidden names go (a JSON list)")
    args = parser.parse_args()
    hidden = hidden_packages(args.stub_site.resolve())
    args.out.write_text(json.dumps(hidden))
    print(f"stub_imports: hidden from the stubs: {', '.join(hidden) or 'nothing'}")


if __name__ == "__main__":
    main()
