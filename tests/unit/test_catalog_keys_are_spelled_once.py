"""The catalog's keys, spelled once in `store.layout` for its writer and its reader: a path in a
catalog folder (or in a bucket that is the folder), the model an index key belongs to (escaped names
included), and an index entry's engine in its folder."""

from hypothesis import given, strategies as st

from enginewright.store.keys import safe_segment
from enginewright.store.layout import (
    CATALOG,
    CatalogKeys,
    catalog_key,
    entry_engine,
    index_key,
    indexed_model,
    model_index,
    site_page,
)


def test_a_path_in_a_catalog_folder_and_in_a_bucket_that_is_the_folder():
    assert catalog_key("catalog", "m/index.json") == "catalog/m/index.json"
    assert catalog_key("", "m/index.json") == "m/index.json"
    assert catalog_key("team/catalog", site_page()) == "team/catalog/index.html"


@given(st.text(min_size=1, max_size=60).filter(lambda m: "~" not in safe_segment(m)))  # '~': shortened
def test_the_model_of_an_index_key_is_the_name_it_was_written_for(model):
    for prefix in (CATALOG, "", "a/b"):
        assert indexed_model(prefix, catalog_key(prefix, model_index(model))) == model
    assert index_key(model) == catalog_key(CATALOG, model_index(model))


def test_other_keys_are_no_model():
    assert indexed_model("catalog", "catalog/m/index.html") is None  # the model's site page
    assert indexed_model("catalog", "catalog/index.json") is None
    assert indexed_model("catalog", "catalog/m/NVIDIA-H200/ort/x/uid/provenance.json") is None
    assert indexed_model("catalog", "elsewhere/m/index.json") is None


def test_an_entry_engine_is_the_file_its_uri_names_in_its_folder():
    keys = CatalogKeys("m", "NVIDIA-H200", "onnxruntime-1.20.1", "cd" * 32, "0123456789ab", "uid-1")
    uri = f"s3://other-copy/{keys.engine('.onnx')}"
    assert entry_engine(keys.folder, uri) == keys.engine(".onnx")
    assert keys.folder.startswith(f"{CATALOG}/m/") and keys.index == index_key("m")


def test_an_index_no_model_name_is_written_as_is_not_listed_and_not_a_crash():
    # found by the property above: the escape of a long non-ASCII name is cut inside a character,
    # and unescaping it raised UnicodeDecodeError; listing it would name a model the catalog cannot
    # read back (`catalog list` and the operator's site pages would fail on the whole catalog)
    model = "::::::\x80" + "\u0800" * 26
    assert "~" in safe_segment(model)  # shortened
    assert indexed_model(CATALOG, index_key(model)) is None
    for foreign in ("%41", "a~b", "%E0%A0"):  # another writer's folders
        assert indexed_model(CATALOG, f"{CATALOG}/{foreign}/index.json") is None
    assert indexed_model(CATALOG, index_key("model %1")) == "model %1"  # an escaped name that round-trips
