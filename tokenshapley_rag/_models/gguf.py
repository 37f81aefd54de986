"""The one-time conversion of a GGUF file into a plain safetensors checkpoint.

transformers can read a GGUF file, but it dequantises every tensor on each load
(about 18 s for SmolLM2, 45 s for Gemma), so the first load converts the GGUF once
into ``<cache_dir>/models/<name>-<sha256[:12]>/`` and every later load reads that
(well under a second).

The conversion is atomic and safe with concurrent processes: it is written into a
temporary directory beside its final place, a completion marker
(:data:`~tokenshapley_rag._models.fingerprint.MARKER`) is written last, and the
directory is renamed into place; a process that loses the race uses the winner's
copy. A converted directory whose marker is missing, whose files have the wrong
size, or that fails to load is rebuilt.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import torch

from tokenshapley_rag._files import (
    discard,
    exclusive_lock,
    fsync_dir,
    fsync_file,
    write_json_atomic,
)
from tokenshapley_rag._models.fingerprint import MARKER, fingerprint_names, hash_files
from tokenshapley_rag._models.pretrained import CONSTRUCTION_LOCK, from_pretrained, short_error
from tokenshapley_rag._models.registry import GgufSource
from tokenshapley_rag.errors import ModelLoadError

__all__ = ["load_converted", "read_marker"]

# Bumped whenever the layout of a converted directory changes, so old caches are
# rebuilt instead of misread.
_FORMAT_VERSION = 1
# Max absolute difference allowed between the logits of the GGUF-loaded model and of
# its converted copy. Both run the same float32 weights, so they are in fact equal.
_CONVERSION_ATOL = 1e-4
# Text of the conversion check.
_PROBE_TEXT = "Hello world. The capital of France is Paris."


def _load_gguf(gguf_path: Path) -> tuple[Any, Any]:
    """Load a GGUF file with transformers (dequantises every tensor: slow).

    Tests replace this function to check it is not called when a converted copy exists.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(
            gguf_path.parent, gguf_file=gguf_path.name, local_files_only=True
        )
        with CONSTRUCTION_LOCK:
            lm = AutoModelForCausalLM.from_pretrained(
                gguf_path.parent,
                gguf_file=gguf_path.name,
                dtype=torch.float32,
                local_files_only=True,
            )
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(
            f"transformers could not load the GGUF file {gguf_path}: {short_error(e)}"
        ) from e
    return lm, tok


def load_converted(
    source: GgufSource, cache: Path, dtype: torch.dtype, *, tokenizer_only: bool = False
) -> tuple[Any, Any, Path, str]:
    """Return (model, tokenizer, dir, weights fingerprint), converting if needed.

    With ``tokenizer_only`` the model is not loaded (``None`` in its place).
    """
    models_dir = cache / "models"
    final = models_dir / f"{source.name}-{source.sha256[:12]}"
    last_error: BaseException | None = None
    rebuilt = False
    # At most three rounds: a concurrent process may replace the directory while we
    # look at it. We rebuild at most once ourselves: if our own fresh copy does not
    # load, the cause is not a corrupt cache and another rebuild would not help.
    for _ in range(3):
        marker = read_marker(final)
        if marker is not None:
            try:
                if tokenizer_only:
                    from transformers import AutoTokenizer

                    tok = AutoTokenizer.from_pretrained(final, local_files_only=True)
                    return None, tok, final, marker["fingerprint"]
                lm, tok = from_pretrained(final, dtype, name=str(final))
                return lm, tok, final, marker["fingerprint"]
            except Exception as e:  # noqa: BLE001 - any load failure means "rebuild"
                last_error = e
                if rebuilt:
                    break
        try:
            models_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ModelLoadError(
                f"cannot create the model cache directory {models_dir}: {e}"
            ) from e
        # The lock only avoids two processes converting the same model at once; the
        # temp-dir + rename protocol stays correct without it (Windows, odd file systems).
        with exclusive_lock(models_dir / f".{final.name}.lock") as locked:
            current = read_marker(final)
            seen = marker["build_id"] if marker is not None else None
            if current is not None and current["build_id"] != seen:
                continue  # someone else (re)built it meanwhile: load theirs
            if locked:
                _remove_stale(models_dir, final.name)
            if final.exists() or final.is_symlink():
                discard(final)
            _convert(source, final)
            rebuilt = True
    raise ModelLoadError(
        f"the converted copy of {source.name!r} at {final} is unusable even after "
        f"rebuilding it: {short_error(last_error) if last_error else 'unknown error'}"
    ) from last_error


def read_marker(final: Path) -> dict[str, Any] | None:
    """The completion marker of ``final`` if the directory looks complete, else None.

    Cheap on purpose (stat calls only): it catches partial and truncated directories;
    the load that follows catches the rest.
    """
    try:
        marker = json.loads((final / MARKER).read_text(encoding="utf-8"))
        if marker.get("format") != _FORMAT_VERSION:
            return None
        fp, build_id, files = marker["fingerprint"], marker["build_id"], marker["files"]
        if not (isinstance(fp, str) and len(fp) == 64 and isinstance(build_id, str)):
            return None
        if "config.json" not in files or not any(n.endswith(".safetensors") for n in files):
            return None
        for fname, size in files.items():
            if (final / fname).stat().st_size != size:
                return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return marker


def _convert(source: GgufSource, final: Path) -> None:
    """Convert ``source`` into ``final`` atomically (temp dir + rename)."""
    from transformers import AutoModelForCausalLM

    work = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        gguf = source.path if source.path is not None else _assemble(source, work / "source.gguf")
        gguf_lm, tok = _load_gguf(gguf)
        out = work / "model"
        with torch.inference_mode():
            # save_pretrained refuses a GGUF-loaded model (its config carries a GGUF
            # quantization_config), so copy the dequantised weights into a plain one.
            config = copy.deepcopy(gguf_lm.config)
            if hasattr(config, "quantization_config"):
                del config.quantization_config
            config._name_or_path = source.name
            with CONSTRUCTION_LOCK:
                plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            plain.load_state_dict(gguf_lm.state_dict(), strict=True)
        plain.save_pretrained(out, safe_serialization=True)
        tok.save_pretrained(out)
        del plain
        if source.path is None:
            (work / "source.gguf").unlink()  # frees ~250 MB before the check below
        _verify_conversion(gguf_lm, tok, out, source.name)
        del gguf_lm

        files = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
        for fname in files:
            # safetensors writes 0600 files; a shared TOKENSHAPLEY_CACHE needs them readable.
            os.chmod(out / fname, 0o644)
            fsync_file(out / fname)
        marker = {
            "format": _FORMAT_VERSION,
            "fingerprint": hash_files(out, fingerprint_names(out)),
            "build_id": uuid.uuid4().hex,
            "files": files,
            "source": {"name": source.name, "gguf_sha256": source.sha256},
        }
        write_json_atomic(out / MARKER, marker)  # last: it declares the dir complete
        os.chmod(out / MARKER, 0o644)
        fsync_dir(out)
        try:
            os.rename(out, final)
        except OSError:
            # A concurrent process renamed its copy into place first (the target is a
            # non-empty directory): keep theirs, ours is removed with `work`.
            if read_marker(final) is None:
                raise
        fsync_dir(final.parent)
    except ModelLoadError:
        raise
    except OSError as e:
        raise ModelLoadError(f"could not write the converted model to {final.parent}: {e}") from e
    except Exception as e:  # noqa: BLE001 - e.g. a state dict that does not fit the config
        raise ModelLoadError(f"converting {source.name!r} from GGUF failed: {short_error(e)}") from e
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _verify_conversion(gguf_lm: Any, tok: Any, out: Path, name: str) -> None:
    """Check that the saved copy reproduces the GGUF model's logits."""
    from transformers import AutoModelForCausalLM

    with CONSTRUCTION_LOCK:
        copy_lm = AutoModelForCausalLM.from_pretrained(
            out, dtype=torch.float32, local_files_only=True
        )
    copy_lm.eval()
    gguf_lm.eval()
    ids = tok(_PROBE_TEXT, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        expected = gguf_lm(input_ids=ids, use_cache=False).logits
        got = copy_lm(input_ids=ids, use_cache=False).logits
    diff = (expected - got).abs().max().item()
    if not diff <= _CONVERSION_ATOL:  # `not <=` also catches NaN
        raise ModelLoadError(
            f"converting {name!r} from GGUF changed its logits (max abs diff {diff:.3g})"
        )


def _assemble(source: GgufSource, target: Path) -> Path:
    """Concatenate the chunks of ``source`` into ``target`` and check its sha256."""
    digest = hashlib.sha256()
    with target.open("wb") as out:
        for chunk in source.chunks:
            with chunk.open("rb") as f:
                while block := f.read(1 << 22):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != source.sha256:
        raise ModelLoadError(
            f"the GGUF assembled for {source.name!r} from {len(source.chunks)} chunks has "
            f"sha256 {digest.hexdigest()}, expected {source.sha256}: reinstall its packages"
        )
    return target


def _remove_stale(models_dir: Path, name: str) -> None:
    # Only called while holding the lock of `name`: no live process is writing a temp
    # or trash directory of that name, so any left over belongs to a crashed one.
    for prefix in (f".tmp-{name}-", f".trash-{name}-"):
        for stale in models_dir.glob(f"{prefix}*"):
            shutil.rmtree(stale, ignore_errors=True)
