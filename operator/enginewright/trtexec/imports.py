"""trtexec tuning caches imported into a local cache directory (`enginewright cache import`).

One import is one folder, its file kept byte for byte beside what we read from it:

    <root>/runs/<target>/imports/<compiler>/<sha12>/trtexec.jsonl   the file as trtexec wrote it
    <root>/runs/<target>/imports/<compiler>/<sha12>/import.json     compiler, source, digest, line counts,
                                                                     damaged lines, threshold, knob defaults

`<compiler>` is the compiler the file came from (`tensorrt-tuner-2.19.15` for trtexec's files), so
imports of different versions or compilers never mix; `<sha12>` is the file's digest, so importing
the same file twice changes nothing. A file per route would cost 100,000 files for a 100,000-line
cache (83.7 s to import, 395 MB on disk, measured before this layout): the file itself is the
compact format, and its entries are read from it when a run needs them (`entries`). `export` writes
it back unchanged, which is the only way to reproduce every number as nlohmann's dump() printed it
(its shortest-digits algorithm does not always agree with Python's: 1.2345678901234567e+15 vs
1234567890123456.8).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from enginewright.api.cache import CacheEntry, now_iso
from enginewright.api.models import Accuracy as AccuracySpec, Search, default_of
from enginewright.store.keys import safe_segment
from enginewright.trtexec.format import TrtexecCache

CACHE_FILE = "trtexec.jsonl"
META_FILE = "import.json"


@dataclass(frozen=True)
class Import:
    """One imported trtexec file."""

    folder: Path
    meta: dict

    @property
    def compiler(self) -> str:
        return self.meta["compiler"]

    @property
    def target(self) -> str:
        return self.meta["target"]

    @property
    def path(self) -> Path:
        return self.folder / CACHE_FILE

    def read(self, keep_entries: bool = True) -> TrtexecCache:
        """The file read again with the options it was imported with."""
        with open(self.path, "rb") as lines:
            return TrtexecCache(
                lines,
                target=self.target,
                threshold=self.meta.get("threshold"),
                defaults=self.meta.get("defaults"),
                keep_entries=keep_entries,
            )

    def entries(self) -> list[CacheEntry]:
        return self.read().entries


def imports_under(root: Path, target: str | None = None) -> list[Import]:
    """Every import under `root` (a cache directory, or a folder above several), oldest first."""
    found = []
    for meta_path in Path(root).rglob(f"imports/*/*/{META_FILE}"):
        meta = json.loads(meta_path.read_text())
        if target is None or meta.get("target") == target:
            found.append(Import(meta_path.parent, meta))
    return sorted(found, key=lambda i: (i.meta.get("importedAt", ""), str(i.folder)))


def imports_folder(root: Path, target: str) -> Path:
    return Path(root) / "runs" / safe_segment(target) / "imports"


class ImportRefused(ValueError):
    """The file does not fit what is already there (or the knob list given); `--force` imports it anyway."""


def import_file(
    root: Path,
    source: Path,
    *,
    target: str = "local",
    threshold: float | None = None,
    knobs: Sequence | None = None,
    knobs_version: str | None = None,
    force: bool = False,
    replace: bool = False,
    own_compilers: Sequence[str] = (),
) -> tuple[Import, TrtexecCache, bool]:
    """Import `source` under `root` for `target`. Returns (the import, what was read, whether it was
    new: False when the same file was imported before). Refused (ImportRefused) unless `force`
    when `knobs_version` (the tuner version of the knob list given) is not the file's, or when the
    target already holds imports of another compiler or version, or entries of another compiler
    (`own_compilers`: the compiler names of the entries measured there)."""
    from enginewright.catalog.compatibility import compiler_name

    digest = _sha256(source)
    with open(source, "rb") as lines:
        cache = TrtexecCache(lines, target=target, threshold=threshold, knobs=knobs, keep_entries=False)
    version = str(cache.header.get("tuner_version"))
    problems = []
    if knobs_version is not None and knobs_version != version:
        problems.append(f"the file's tuner_version is {version}, the knob list given (--knobs) is {knobs_version}")
    others = sorted({i.compiler for i in imports_under(imports_folder(root, target).parent, target)} - {cache.compiler})
    if others:
        problems.append(
            f"{root} already holds imports for target {target} from {', '.join(others)}, and this "
            f"file is from {cache.compiler}: their results are not comparable"
        )
    foreign = sorted({c for c in own_compilers if c != compiler_name(cache.compiler)})
    if foreign:
        problems.append(
            f"{root} holds entries measured with {', '.join(foreign)} for target {target}; this file "
            f"is from {cache.compiler}"
        )
    if problems and not force:
        raise ImportRefused(
            "; ".join(problems) + ". Import it into another --out directory, or give --force to "
            "keep it beside them (each compiler's entries stay apart and are used only by it)."
        )
    folder = imports_folder(root, target) / safe_segment(cache.compiler) / digest[:12]
    if (folder / META_FILE).exists():
        meta = json.loads((folder / META_FILE).read_text())
        if (meta.get("threshold"), meta.get("defaults"), meta.get("replace")) == (
            cache.threshold,
            cache.defaults,
            replace,
        ):
            return Import(folder, meta), cache, False
        # The same file with other options (--threshold, --knobs, --replace): read it their way from now on.
        meta.update(
            {
                "threshold": cache.threshold,
                "defaults": cache.defaults,
                "replace": replace,
                "outcomes": dict(cache.outcomes),
                "importedAt": now_iso(),
            }
        )
        _write_json(folder / META_FILE, meta)
        return Import(folder, meta), cache, True
    meta = {
        "target": target,
        "compiler": cache.compiler,
        "tunerVersion": version,
        "source": str(source.resolve()),
        "sha256": digest,
        "importedAt": now_iso(),
        "lines": cache.lines,
        "outcomes": dict(cache.outcomes),
        "repeats": cache.repeats,
        "damaged": [list(d) for d in cache.damaged],
        "threshold": cache.threshold,
        "defaults": cache.defaults,
        "replace": replace,
        "forced": bool(problems),
    }
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copyfile(source, tmp / CACHE_FILE)
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
    os.replace(tmp, folder)
    return Import(folder, meta), cache, True


def usable_entries(root: Path, target: str, compiler: str) -> tuple[dict[str, CacheEntry], list[str]]:
    """The imported entries a run of `compiler` (e.g. onnxruntime-1.23.2, tensorrt-tuner-2.19.15) may
    use, by route id, and notes on the imports it may not. Older imports win over newer ones unless
    a newer one was imported with --replace. Routes trtexec finished without a time (gpu_time null
    or 0, not crashed) are left out: they are measured again."""
    entries: dict[str, CacheEntry] = {}
    notes = []
    for imported in imports_under(imports_folder(root, target).parent, target):
        if imported.compiler != compiler:
            notes.append(
                f"{imported.meta.get('source')} (imported into {imported.folder}) is from "
                f"{imported.compiler}; this run is {compiler}: not used"
            )
            continue
        for entry in imported.entries():
            if entry.timing is None and entry.outcome.value == "ok":
                continue
            if entry.route_id not in entries or imported.meta.get("replace"):
                entries[entry.route_id] = entry
    return entries, notes


def export_imports(
    out: Path, imports: Sequence[Import], entries: Sequence[CacheEntry], metric: str | None = None
) -> int:
    """Write `imports` (of one compiler) to `out` as they were imported, byte for byte: the first
    one whole, the iteration lines of the others after it; then, as trtexec's writer lays them out
    with `iter` counting on, the `entries` measured since with that compiler that the imports do not
    hold. Returns how many of those were written."""
    from enginewright.catalog.compatibility import compiler_name
    from enginewright.trtexec.format import export_trtexec, trtexec_metric

    first, compiler = imports[0], imports[0].compiler
    shutil.copyfile(first.path, out)
    lines = first.meta.get("lines", 0)
    with open(out, "ab") as f:
        if out.stat().st_size and not _ends_with_newline(first.path):
            f.write(b"\n")  # a truncated last line: trtexec's --continue appends after it
        for other in imports[1:]:
            with open(other.path, "rb") as lines_in:
                next(lines_in, None)  # its header: the first import's stands for all
                for line in lines_in:
                    f.write(line if line.endswith(b"\n") else line + b"\n")
            lines += other.meta.get("lines", 0)
        since = [
            e
            for e in entries
            if e.stage != "imported" and e.versions and compiler_name(e.versions.compiler) == compiler_name(compiler)
        ]
        if since:
            known = set().union(*(i.read(keep_entries=False).route_ids for i in imports))
            since = [e for e in since if e.route_id not in known]
        if since:
            header = first.read(keep_entries=False).header
            parameters = header.get("accuracy_parameter") or {}
            text = export_trtexec(
                sorted(since, key=lambda e: (e.stage, e.started_at or "", e.route)),
                metric=metric
                or trtexec_metric(header.get("accuracy_algorithm", ""))
                or default_of(AccuracySpec, "metric").value,
                atol=parameters.get("atol", default_of(AccuracySpec, "atol")),
                rtol=parameters.get("rtol", default_of(AccuracySpec, "rtol")),
                search_mode=header.get("searching_algorithm", default_of(Search, "mode").value),
                header=header,
                first_iter=lines,
            )
            f.write("".join(line + "\n" for line in text.splitlines()[1:]).encode())
    return len(since)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return True
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
