"""draftlattice.assets: one variable per kind of file, and errors that say what and where."""

from __future__ import annotations

import pytest

from draftlattice.assets import AssetNotFoundError, data_dir, data_file, model_asset


def test_data_variable_is_the_only_place_looked_at(tmp_path, monkeypatch):
    (tmp_path / "wikitext-2").mkdir()
    (tmp_path / "wikitext-2" / "test.txt").write_text("x\n")
    monkeypatch.setenv("DRAFTLATTICE_DATA", str(tmp_path))
    assert data_dir() == tmp_path
    assert data_file("wikitext-2/test.txt") == tmp_path / "wikitext-2" / "test.txt"
    with pytest.raises(AssetNotFoundError, match=r"'lm/none.arpa' not found; tried:\n  .*lm/none.arpa") as error:
        data_file("lm/none.arpa")
    assert "DRAFTLATTICE_DATA" in str(error.value)
    monkeypatch.setenv("DRAFTLATTICE_DATA", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="shared data directory not found"):
        data_dir()


def test_models_variable_and_explicit_directory(tmp_path, monkeypatch):
    (tmp_path / "katz4.dlm").write_bytes(b"")
    monkeypatch.setenv("DRAFTLATTICE_MODELS", str(tmp_path))
    assert model_asset("katz4.dlm") == tmp_path / "katz4.dlm"
    with pytest.raises(AssetNotFoundError, match=f"'default' not found; tried:\n  {tmp_path / 'default'}\n"):
        model_asset("default")
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(AssetNotFoundError, match="the directory given"):
        model_asset("katz4.dlm", other)  # an explicit directory is never replaced by the variable's


def test_default_search_finds_the_checkout(monkeypatch):
    monkeypatch.delenv("DRAFTLATTICE_MODELS", raising=False)
    monkeypatch.delenv("DRAFTLATTICE_DATA", raising=False)
    assert (model_asset("smollm2/heads") / "config.json").is_file()
    assert data_file("wikitext-2/test.txt").is_file()
