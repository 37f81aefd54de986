"""The device plumbing, proved on the CPU: which devices are accepted, that a wrong one is a
typed error raised before any weights load, and that an explicit CPU device is the default path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tokenshapley_rag import TokenShapley
from tokenshapley_rag._models.loading import usable_device
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError


@pytest.mark.parametrize("device", ["cpu", "cpu:0", torch.device("cpu")])
def test_cpu_is_usable(device) -> None:
    assert usable_device(device).type == "cpu"


@pytest.mark.parametrize(
    ("device", "names"),
    [
        ("meta", "holds no weights"),
        ("tpu", "unknown device 'tpu'"),
        ("", "unknown device ''"),
        pytest.param(
            "cuda", "no CUDA device",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device"),
        ),
        pytest.param(
            "mps", "no MPS",
            marks=pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has Metal"),
        ),
    ],
)
def test_unusable_device_is_named(device, names: str) -> None:
    with pytest.raises(InvalidInputError, match=names):
        usable_device(device)


def test_cuda_index_past_the_last_device() -> None:
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(InvalidInputError, match="CUDA"):
        usable_device(f"cuda:{count}")


def test_wrong_device_fails_before_any_loading(tmp_path) -> None:
    # The model path does not exist: were the weights looked for first, this would be a
    # ModelNotFoundError. The device is checked first, so a typo costs no load.
    missing = tmp_path / "no-such-model"
    with pytest.raises(InvalidInputError, match="meta"):
        TokenShapley.from_pretrained(missing, device="meta", cache_dir=tmp_path)
    with pytest.raises(InvalidInputTypeError, match="device must be"):
        TokenShapley.from_pretrained(missing, device=0, cache_dir=tmp_path)


def test_explicit_cpu_device_gives_the_default_citations(ts, cache_root) -> None:
    explicit = TokenShapley.from_pretrained(device=torch.device("cpu"), cache_dir=cache_root)
    assert next(explicit.encoder.loaded.model.parameters()).device.type == "cpu"
    sources = ["The Eiffel Tower is 330 metres tall.", "Big Ben was completed in 1859."]
    response = "The Eiffel Tower is 330 metres tall; Big Ben dates from 1859."
    a = ts.attribute(query="How tall?", sources=sources, response=response)
    b = explicit.attribute(query="How tall?", sources=sources, response=response)
    assert [(c.text, c.status, c.best.source_id if c.best else None) for c in a.citations] == [
        (c.text, c.status, c.best.source_id if c.best else None) for c in b.citations
    ]
    np.testing.assert_allclose([c.support for c in a.citations], [c.support for c in b.citations], atol=1e-6)


def test_cpu_encoder_searches_on_the_host(ts) -> None:
    builder = ts.pipeline.builder
    assert builder.search_device is None and not builder.searches_on_device(10**6)


def test_device_search_gives_the_host_attribution(ts, monkeypatch) -> None:
    # The builder as it is with a CUDA encoder, torch's CPU standing in for the GPU: the
    # datastore is searched by the device path, and every score is the host search's.
    sources = [
        "The Danube is 2,850 kilometres long. It flows into the Black Sea.",
        "The Rhine is 1,230 kilometres long and flows into the North Sea.",
    ]
    response = "The Danube is 2,850 kilometres long and ends in the Black Sea."
    host = ts.attribute(query="How long is the Danube?", sources=sources, response=response).to_dict()
    builder = ts.pipeline.builder
    monkeypatch.setattr(builder, "search_device", torch.device("cpu"))
    monkeypatch.setattr(builder, "device_search_above", 0)
    store = ts.build_datastore(sources)
    assert store.search_device == torch.device("cpu") and not store.approximate
    builder.forget()
    try:
        device = ts.attribute(query="How long is the Danube?", sources=sources, response=response).to_dict()
    finally:
        builder.forget()
    assert device == host


def test_each_sources_rows_go_to_the_device_once(ts, monkeypatch) -> None:
    # A new list of known sources copies nothing to the device: each source's float16 rows
    # are kept there and stacked (torch's CPU standing in for the GPU), with the host's
    # attribution.
    a = "The Danube is 2,850 kilometres long. It flows into the Black Sea."
    b = "The Rhine is 1,230 kilometres long and flows into the North Sea."
    c = "The Elbe rises in the Krkonoše mountains."
    response = "The Danube is 2,850 kilometres long and ends in the Black Sea."
    host = ts.attribute(query="How long is the Danube?", sources=[c, b, a], response=response).to_dict()
    builder = ts.pipeline.builder
    monkeypatch.setattr(builder, "search_device", torch.device("cpu"))
    monkeypatch.setattr(builder, "device_search_above", 0)
    builder.forget()
    copies = []
    real = torch.Tensor.to
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *args, **kw: copies.append(self.shape) or real(self, *args, **kw))
    try:
        ts.build_datastore([a, b])
        first = [builder._rows_on_device.get(text) for text in (a, b)]
        assert all(rows is not None and rows.dtype == torch.float16 for rows in first)
        n_copies = len(copies)
        store = ts.build_datastore([c, b, a])  # a new list: only the Elbe's rows are copied
        assert all(builder._rows_on_device.get(text) is rows for text, rows in zip((a, b), first))
        assert [tuple(shape) for shape in copies[n_copies:]].count(tuple(builder._rows_on_device.get(c).shape)) >= 1
        assert not any(tuple(shape) == tuple(first[0].shape) for shape in copies[n_copies:])
        assert store.search_device == torch.device("cpu") and store._entry_keys is not None
        builder._datastores.clear()
        device = ts.attribute(query="How long is the Danube?", sources=[c, b, a], response=response).to_dict()
    finally:
        builder.forget()
    assert device == host


def test_warmup_compiles_the_device_search_with_a_device_encoder(ts, monkeypatch) -> None:
    from tokenshapley_rag import _kernels
    from tokenshapley_rag._warmup import warm_up

    builder = ts.pipeline.builder
    monkeypatch.setattr(builder, "search_device", torch.device("cpu"))
    searched = []
    real = _kernels.measure_kept_rows
    monkeypatch.setattr("tokenshapley_rag._device_search.measure_kept_rows",
                        lambda *a: searched.append(a[0].shape) or real(*a))
    try:
        report = warm_up(ts)
    finally:
        builder.forget()
    assert report.n_citations > 0 and searched == [(2, builder.encoder.loaded.model.config.hidden_size)]
    from tokenshapley_rag._defaults import DEVICE_SEARCH_ABOVE

    assert builder.device_search_above == DEVICE_SEARCH_ABOVE  # put back
