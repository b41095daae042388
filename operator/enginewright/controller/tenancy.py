"""What a TuningRun may name on the operator's credentials, decided from the spec, the run's
namespace, the operator's settings and the catalog index (pure: no API or store calls).

A namespace is a tenant boundary. A run's image, its publish bucket and its catalog model name are
privileges the operator grants with its own key, so each is checked against the settings:

- `spec.compiler.image`: only the worker images the operator is configured with, or an image
  matching `allowed_images` (globs); anything else runs code next to the namespace's store key.
- `spec.publish.bucket`: only the catalog bucket, or one of `publish_buckets`.
- `spec.search.seedCache`: read with the run's own key (as the model is), and never a key of the runs
  bucket outside `runs/<its namespace>/`: in a shared runs bucket every namespace's key may read
  it, and another namespace's entries are not this one's to take.
- `spec.publish.modelName`: when a `model_owners` pattern matches the name, only the namespaces it
  lists may publish it; otherwise the name belongs to the namespace that first published it (the
  index records it as `owner`), and every other namespace is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from enginewright.api.models import TuningRunSpec
from enginewright.controller.settings import Settings
from enginewright.store.keys import object_key
from enginewright.store.objects import parse_s3_uri


@dataclass(frozen=True)
class Refusal:
    """Why a run may not do what it asks; `reason` becomes the Stalled condition's reason."""

    reason: str
    message: str


def _matches(value: str, patterns) -> bool:
    return any(fnmatchcase(value, p) for p in patterns)


def image_refusal(spec: TuningRunSpec, settings: Settings) -> Refusal | None:
    """A `spec.compiler.image` that is neither the compiler's worker image nor allowed by the settings."""
    image = spec.compiler.image
    compiler = spec.compiler.name.value
    if image is None or image == settings.default_image(compiler) or _matches(image, settings.allowed_images):
        return None
    allowed = [settings.default_image(compiler), *settings.allowed_images]
    return Refusal(
        "ImageNotAllowed",
        f"spec.compiler.image: {image!r} is not an allowed worker image (allowed: "
        f"{', '.join(allowed)}); leave the field out to use the operator's {compiler} worker, or ask "
        f"the operator's administrators to add the image to the Helm value tenancy.allowedImages",
    )


def publish_bucket(spec: TuningRunSpec, settings: Settings) -> str:
    return spec.publish.bucket or settings.catalog_bucket


def bucket_refusal(spec: TuningRunSpec, settings: Settings) -> Refusal | None:
    """A `spec.publish.bucket` other than the catalog bucket and the allowed publish buckets."""
    bucket = publish_bucket(spec, settings)
    if not spec.publish.enabled or bucket == settings.catalog_bucket or bucket in settings.publish_buckets:
        return None
    allowed = [settings.catalog_bucket, *settings.publish_buckets]
    return Refusal(
        "PublishBucketNotAllowed",
        f"spec.publish.bucket: runs may publish only to {', '.join(allowed)} "
        f"(got {bucket!r}); leave the field out for the catalog bucket, or ask the operator's "
        f"administrators to add the bucket to the Helm value tenancy.publishBuckets",
    )


def seed_refusal(spec: TuningRunSpec, namespace: str, settings: Settings) -> Refusal | None:
    """A `spec.search.seedCache` in the runs bucket outside this namespace's `runs/<namespace>/`."""
    if not spec.search.seed_cache:
        return None
    bucket, key = parse_s3_uri(spec.search.seed_cache)
    own = object_key("runs", namespace) + "/"
    if bucket != settings.runs_bucket or (key + "/").startswith(own):
        return None
    return Refusal(
        "SeedCacheNotAllowed",
        f"spec.search.seedCache: {spec.search.seed_cache} is in the runs bucket outside this namespace's "
        f"runs (s3://{bucket}/{own}): a run may seed from its own namespace's runs or from a bucket its "
        f"store key reads, not from another namespace's runs",
    )


def catalog_owner(index: dict | None) -> str | None:
    """The namespace a catalog model belongs to: the index's `owner`, or (an index written before
    owners were recorded) the namespace of its earliest entry."""
    if not index:
        return None
    owner = (index.get("owner") or {}).get("namespace")
    if owner:
        return owner
    entries = sorted(
        (e for e in index.get("entries") or [] if "/" in str(e.get("run", ""))),
        key=lambda e: str(e.get("publishedAt", "")),
    )
    return entries[0]["run"].split("/", 1)[0] if entries else None


def model_refusal(namespace: str, model: str, index_uri: str, index: dict | None, settings: Settings) -> Refusal | None:
    """May `namespace` publish catalog model `model` (whose index at `index_uri`, if any, is `index`)?"""
    rules = [namespaces for pattern, namespaces in settings.model_owners.items() if fnmatchcase(model, pattern)]
    if rules:
        if any(_matches(namespace, namespaces) for namespaces in rules):
            return None
        return Refusal(
            "CatalogModelNotAllowed",
            f"spec.publish.modelName: namespace {namespace} may not publish "
            f"catalog model {model!r} (the operator's tenancy.modelOwners reserves it for other "
            f"namespaces); choose another model name",
        )
    owner = catalog_owner(index)
    if owner is None or owner == namespace:
        return None
    # The owning namespace is not named: a tenant learns only that the name is taken.
    return Refusal(
        "CatalogModelTaken",
        f"spec.publish.modelName: catalog model {model!r} ({index_uri}) belongs "
        f"to another namespace (the one that first published it); choose another model name, or ask "
        f"the operator's administrators to share it through the Helm value tenancy.modelOwners",
    )


def claimed(index: dict, namespace: str, settings: Settings) -> dict:
    """The index with its owner recorded (first publication under the first-come rule)."""
    model = index.get("model", "")
    if index.get("owner") or any(fnmatchcase(model, pattern) for pattern in settings.model_owners):
        return index
    return {**index, "owner": {"namespace": catalog_owner(index) or namespace}}
