"""Pure tenancy rules: which worker images, publish buckets and catalog model names a run's namespace
may use; which child objects are a run's to adopt; settings that would write outside the work
directory; and an index entry whose engine is another model's."""

import pytest
from pydantic import ValidationError

from enginewright.api.models import TuningRunSpec
from enginewright.catalog.fetch import model_digest_problem
from enginewright.catalog.reader import owned_entries
from enginewright.controller.children import RunRef, is_ours, labels
from enginewright.controller.settings import Settings
from enginewright.controller.tenancy import bucket_refusal, catalog_owner, claimed, image_refusal, model_refusal


def spec(**compiler) -> TuningRunSpec:
    return TuningRunSpec.model_validate(
        {
            "model": {"uri": "s3://models/m.onnx"},
            "compiler": {"name": "onnxruntime", **compiler},
            "accuracy": {"disabled": True, "reason": "test"},
            "targets": [{"gpuType": "cpu", "gpusPerJob": 0}],
        }
    )


def with_publish(**publish) -> TuningRunSpec:
    return spec().model_copy(update={"publish": spec().publish.model_copy(update=publish)})


def test_only_the_configured_worker_image_or_an_allowed_glob_runs():
    settings = Settings(
        worker_images={"onnxruntime": "reg.example.com/ew/worker-onnxruntime:1"},
        allowed_images=("reg.example.com/team-images/*",),
    )
    assert image_refusal(spec(), settings) is None
    assert image_refusal(spec(image="reg.example.com/ew/worker-onnxruntime:1"), settings) is None
    assert image_refusal(spec(image="reg.example.com/team-images/ort:2"), settings) is None
    refused = image_refusal(spec(image="docker.io/evil/miner:latest"), settings)
    assert refused.reason == "ImageNotAllowed"
    assert "spec.compiler.image" in refused.message and "docker.io/evil/miner:latest" in refused.message
    assert "tenancy.allowedImages" in refused.message
    # The default (no worker image configured) is the chart's own worker image, and only that.
    assert image_refusal(spec(image=Settings().default_image("onnxruntime")), Settings()) is None
    assert image_refusal(spec(image="enginewright/worker-onnxruntime:evil"), Settings()).reason == "ImageNotAllowed"


def test_publish_buckets_are_the_catalog_bucket_and_the_allowed_ones():
    settings = Settings(catalog_bucket="catalog", publish_buckets=("team-catalog",))
    assert bucket_refusal(with_publish(), settings) is None
    assert bucket_refusal(with_publish(bucket="catalog"), settings) is None
    assert bucket_refusal(with_publish(bucket="team-catalog"), settings) is None
    refused = bucket_refusal(with_publish(bucket="other-teams-models"), settings)
    assert refused.reason == "PublishBucketNotAllowed" and "other-teams-models" in refused.message
    assert bucket_refusal(with_publish(bucket="other-teams-models", enabled=False), settings) is None


def test_a_catalog_model_belongs_to_the_namespace_that_first_published_it():
    settings = Settings()
    assert model_refusal("team-a", "demo-mlp", "s3://c/i", None, settings) is None  # nobody owns it yet
    index = claimed({"model": "demo-mlp", "entries": []}, "team-b", settings)
    assert index["owner"] == {"namespace": "team-b"} and catalog_owner(index) == "team-b"
    assert model_refusal("team-b", "demo-mlp", "s3://c/i", index, settings) is None
    refused = model_refusal("team-a", "demo-mlp", "s3://c/i", index, settings)
    assert refused.reason == "CatalogModelTaken" and "demo-mlp" in refused.message
    assert "team-b" not in refused.message  # the owner is not told to other tenants
    assert claimed(index, "team-a", settings)["owner"] == {"namespace": "team-b"}  # a claim is never moved


def test_an_index_from_before_owners_belongs_to_its_earliest_publisher():
    index = {
        "model": "m",
        "entries": [
            {"run": "team-b/r2", "publishedAt": "2026-11-02T00:00:00Z"},
            {"run": "team-c/r1", "publishedAt": "2026-11-01T00:00:00Z"},
        ],
    }
    assert catalog_owner(index) == "team-c"
    assert model_refusal("team-b", "m", "s3://c/i", index, Settings()).reason == "CatalogModelTaken"
    assert claimed(index, "team-b", Settings())["owner"] == {"namespace": "team-c"}


def test_model_owner_rules_decide_for_the_names_they_match():
    settings = Settings(model_owners={"shared-*": ("team-a", "team-b"), "vision-*": ("vision-*",)})
    owned_by_a = {"model": "shared-mlp", "owner": {"namespace": "team-a"}, "entries": []}
    assert model_refusal("team-b", "shared-mlp", "s3://c/i", owned_by_a, settings) is None
    assert model_refusal("vision-prod", "vision-det", "s3://c/i", None, settings) is None
    refused = model_refusal("team-c", "shared-mlp", "s3://c/i", None, settings)
    assert refused.reason == "CatalogModelNotAllowed"
    assert "owner" not in claimed({"model": "shared-mlp", "entries": []}, "team-a", settings)


def test_tenancy_settings_from_the_environment():
    settings = Settings.from_env(
        {
            "ENGINEWRIGHT_ALLOWED_IMAGES": "a/b:1,reg/x/*",
            "ENGINEWRIGHT_PUBLISH_BUCKETS": "b1, b2",
            "ENGINEWRIGHT_MODEL_OWNERS": '{"shared-*": ["team-a"]}',
        }
    )
    assert settings.allowed_images == ("a/b:1", "reg/x/*") and settings.publish_buckets == ("b1", "b2")
    assert settings.model_owners == {"shared-*": ("team-a",)}
    assert Settings.from_env({}).allowed_images == () and Settings.from_env({}).model_owners == {}


def test_only_children_with_the_runs_owner_reference_and_labels_are_adopted():
    run = RunRef("victim", "ns", "uid-1")
    wanted = labels(run, "cpu", component="plan")
    ours = {"ownerReferences": [run.owner_reference()], "labels": dict(wanted)}
    assert is_ours(ours, run, wanted)
    assert not is_ours({"labels": dict(wanted)}, run, wanted)  # a user's ConfigMap with copied labels
    assert not is_ours({"ownerReferences": [run.owner_reference()], "labels": {}}, run, wanted)
    other = RunRef("victim", "ns", "uid-2").owner_reference()
    assert not is_ours({"ownerReferences": [other], "labels": dict(wanted)}, run, wanted)


@pytest.mark.parametrize("value", ["../../x", "/etc/passwd", "~/x", "a/../../b", "..", "x\\..\\y"])
def test_a_setting_that_leaves_the_work_directory_is_refused_naming_it(value):
    key = "session.optimized_model_external_initializers_file_name"
    with pytest.raises(ValidationError) as refused:
        spec(settings={key: value, "intra_op_num_threads": "1"})
    assert f"spec.compiler.settings[{key}]" in str(refused.value) and "work directory" in str(refused.value)
    assert "intra_op_num_threads" not in str(refused.value)


@pytest.mark.parametrize("value", ["weights.bin", "sub/weights.bin", "a..b", "..hidden", "1"])
def test_plain_names_inside_the_work_directory_are_fine(value):
    assert spec(settings={"session.optimized_model_external_initializers_file_name": value})


def test_an_entry_whose_provenance_records_another_model_is_refused():
    sha = "ab" * 32
    entry = {"modelSha256": sha, "folder": f"catalog/m/cpu/ort-1/{sha[:12]}-cdcdcdcdcdcd/uid", "runUid": "uid"}
    assert model_digest_problem(entry, {"model": {"sha256": sha}}) is None
    assert "ef" * 32 in model_digest_problem(entry, {"model": {"sha256": "ef" * 32}})
    assert model_digest_problem(entry, {}) is not None
    moved = {**entry, "folder": f"catalog/m/cpu/ort-1/{'ef' * 6}-cdcdcdcdcdcd/uid"}
    assert "another model" in model_digest_problem(moved, {"model": {"sha256": sha}})


def test_fetch_offers_only_entries_from_the_owner_namespace():
    a, b = {"run": "team-a/r", "runUid": "1"}, {"run": "team-b/r", "runUid": "2"}
    assert owned_entries({"owner": {"namespace": "team-a"}, "entries": [a, b]}) == [a]
    assert owned_entries({"entries": [a, b]}) == [a, b]  # no owner recorded: nothing to filter by
