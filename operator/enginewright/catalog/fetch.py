"""`enginewright fetch`: the engine tuned for this machine, from the catalog into a directory.

The engine's bytes are streamed into a temporary folder (beside DIR when on the same file system,
else a hidden one inside DIR), hashed on the way, and compared with the sha256 of the index entry
and of its provenance, and the entry's model sha256 with the provenance's (`model_digest_problem`);
only then are `provenance.json` and the engine renamed into DIR (engine last,
so an engine file in DIR always has its provenance beside it). A mismatch, a broken stream or any
error removes the temporary folder: a partial or tampered engine never appears in DIR.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from enginewright.catalog.compatibility import Consumer, Offer, Selection, select
from enginewright.catalog.reader import Catalog

# Exit codes of `enginewright fetch` and `enginewright catalog verify` (argparse uses 2 for usage).
EXIT_OK, EXIT_ERROR, EXIT_NOT_FOUND, EXIT_INCOMPATIBLE, EXIT_TAMPERED = 0, 1, 3, 4, 5


class TamperedEngine(RuntimeError):
    """The engine's bytes (or its index entry and provenance) disagree on its sha256."""


@dataclass(frozen=True)
class Fetched:
    engine: Path
    provenance: Path
    selection: Selection
    sha256: str


def model_digest_problem(entry: dict, provenance: dict) -> str | None:
    """Why an index entry's engine is not of the model the entry claims, or None: its provenance must
    record the entry's `modelSha256`, and the entry's folder (`.../<model-sha12>-<shapes>/<run>`) must
    carry it too. An engine of another model under this model's name is never handed out."""
    claimed = entry.get("modelSha256")
    recorded = (provenance.get("model") or {}).get("sha256")
    folder_digest = str(entry.get("folder", "")).rstrip("/").split("/")[-2:-1]
    if not claimed or recorded != claimed:
        return (
            f"the index entry of run {entry.get('runUid')} claims model sha256 {claimed}, its provenance "
            f"records {recorded}"
        )
    if not folder_digest or not folder_digest[0].startswith(claimed[:12]):
        return (
            f"the index entry of run {entry.get('runUid')} claims model sha256 {claimed}, its folder "
            f"{entry.get('folder')} is another model's"
        )
    return None


def _scratch(dest: Path) -> Path:
    """A temporary folder from which a rename into `dest` is atomic: beside DIR when that is the
    same file system (an emptyDir mount usually is not), else hidden inside DIR."""
    parent = dest.resolve().parent
    try:
        if os.stat(parent).st_dev == os.stat(dest).st_dev and os.access(parent, os.W_OK):
            return Path(tempfile.mkdtemp(prefix=f".{dest.name}.fetch-", dir=parent))
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix=".enginewright-fetch-", dir=dest))


def fetch(
    catalog: Catalog,
    model: str,
    consumer: Consumer,
    dest: Path,
    *,
    prefer: str = "newest",
    run_uid: str | None = None,
    require_validated: bool = False,
    same_driver: bool = False,
) -> Fetched:
    """Choose the engine for `consumer` and write it with its provenance into `dest`. Raises
    NotInCatalog, NoCompatibleEngine or TamperedEngine (and leaves `dest` as it was)."""
    found = catalog.offers(model)
    selection = select(
        [o for o, _, _ in found],
        consumer,
        model=model,
        prefer=prefer,
        run_uid=run_uid,
        require_validated=require_validated,
        same_driver=same_driver,
    )
    offer: Offer = selection.offer
    _, entry, provenance_raw = next(item for item in found if item[0] is offer)
    expected = offer.sha256
    if provenance_raw is None:
        raise TamperedEngine(
            f"{catalog.uri(catalog.provenance_key(entry))} is missing: the engine cannot be "
            f"checked against its provenance"
        )
    provenance_doc = json.loads(provenance_raw)
    provenance_sha = (provenance_doc.get("engine") or {}).get("sha256")
    if provenance_sha != expected:
        raise TamperedEngine(
            f"{catalog.uri(catalog.index_key(model))} says sha256 {expected} for run "
            f"{offer.run_uid}, its provenance says {provenance_sha}: refusing the engine"
        )
    if problem := model_digest_problem(entry, provenance_doc):
        raise TamperedEngine(f"{catalog.uri(catalog.index_key(model))}: {problem}: refusing the engine")
    dest.mkdir(parents=True, exist_ok=True)
    key = catalog.engine_key(entry)
    name = key.rsplit("/", 1)[-1]
    scratch = _scratch(dest)
    try:
        partial = scratch / name
        with open(partial, "wb") as out:
            got = catalog.stream(key, out)
            out.flush()
            os.fsync(out.fileno())
        if got != expected:
            raise TamperedEngine(
                f"{catalog.uri(key)} has sha256 {got}, its provenance says {expected}: the "
                f"engine was changed or damaged in the store; nothing was written to {dest}"
            )
        (scratch / "provenance.json").write_bytes(provenance_raw)
        os.replace(scratch / "provenance.json", dest / "provenance.json")
        os.replace(partial, dest / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Fetched(dest / name, dest / "provenance.json", selection, expected)


@dataclass(frozen=True)
class Checked:
    model: str
    entry: dict
    outcome: str  # ok, mismatch, missing
    detail: str


def verify(catalog: Catalog, models: list[str] | None = None) -> list[Checked]:
    """Re-read every published engine and compare its sha256 with its index entry and provenance."""
    results = []
    for model in models or catalog.models():
        for entry in catalog.index(model):
            key = catalog.engine_key(entry)
            raw = catalog.provenance_bytes(entry)
            if raw is None:
                results.append(Checked(model, entry, "missing", f"no {catalog.uri(catalog.provenance_key(entry))}"))
                continue
            provenance_doc = json.loads(raw)
            provenance_sha = (provenance_doc.get("engine") or {}).get("sha256")
            if problem := model_digest_problem(entry, provenance_doc):
                results.append(Checked(model, entry, "mismatch", problem))
                continue
            try:
                with open(os.devnull, "wb") as sink:
                    got = catalog.stream(key, sink)
            except FileNotFoundError as exc:  # MissingObject
                results.append(Checked(model, entry, "missing", str(exc)))
                continue
            if got == entry["sha256"] == provenance_sha:
                results.append(Checked(model, entry, "ok", f"{catalog.uri(key)} sha256 {got}"))
            else:
                results.append(
                    Checked(
                        model,
                        entry,
                        "mismatch",
                        f"{catalog.uri(key)} has sha256 {got}; index says "
                        f"{entry['sha256']}, provenance says {provenance_sha}",
                    )
                )
    return results
