"""`enginewright catalog list`: per model, GPU products x compiler versions, so a platform team sees
coverage and gaps at a glance. Pure: offers in, a table (or plain data for `--json`) out."""

from __future__ import annotations

from enginewright.catalog.compatibility import Offer, release

GAP = "-"


def _version_key(version: str):
    name, _, rest = version.partition("-")
    return name, release(rest.removeprefix("torch-")), version


def coverage(model: str, offers: list[Offer]) -> dict:
    """Plain data: the model's GPU products, compiler versions, every cell's entries (newest first)
    and the gaps (a product and a version with no engine)."""
    products = sorted({o.gpu_product for o in offers})
    versions = sorted({o.compiler_version for o in offers}, key=_version_key)
    cells = []
    for product in products:
        for version in versions:
            here = sorted(
                (o for o in offers if (o.gpu_product, o.compiler_version) == (product, version)),
                key=lambda o: (o.published_at, o.run_uid),
                reverse=True,
            )
            if here:
                cells.append(
                    {
                        "gpuProduct": product,
                        "compilerVersion": version,
                        "entries": [
                            {
                                "run": o.run,
                                "runUid": o.run_uid,
                                "speedup": o.speedup,
                                "confirmed": o.confirmed,
                                "worstLoss": o.worst_loss,
                                "accuracyValidated": o.accuracy_validated,
                                "publishedAt": o.published_at,
                                "computeCapability": o.compute_capability,
                                "sha256": o.sha256,
                                "engine": o.engine,
                                "driverMajor": o.driver_major,
                                "cuda": o.cuda,
                                "supersededBy": o.superseded_by,
                            }
                            for o in here
                        ],
                    }
                )
    filled = {(c["gpuProduct"], c["compilerVersion"]) for c in cells}
    gaps = [[p, v] for p in products for v in versions if (p, v) not in filled]
    return {"model": model, "gpuProducts": products, "compilerVersions": versions, "cells": cells, "gaps": gaps}


def _cell(entries: list[dict]) -> str:
    newest = entries[0]
    speed = f"{newest['speedup']:.2f}x" if newest["speedup"] is not None else "?x"
    loss = (
        "loss off"
        if newest["accuracyValidated"] is False
        else f"loss {newest['worstLoss']:.1e}"
        if newest["worstLoss"] is not None
        else "loss ?"
    )
    more = f" (+{len(entries) - 1})" if len(entries) > 1 else ""
    drivers = sorted({e["driverMajor"] for e in entries if e["driverMajor"]})
    stacks = f" driver {'/'.join(drivers)}" if drivers else ""
    return f"{speed} {loss} {newest['publishedAt'][:10]} {newest['run']}{more}{stacks}"


def render_table(data: dict) -> str:
    """One model's coverage as a text table: a row per GPU product, a column per compiler version;
    each cell shows the newest engine (speedup, worst accuracy loss, date, run, how many more) and the
    driver majors its engines were measured on."""
    by_cell = {(c["gpuProduct"], c["compilerVersion"]): c["entries"] for c in data["cells"]}
    header = ["GPU product", *data["compilerVersions"]]
    rows = [
        [p, *(_cell(by_cell[(p, v)]) if (p, v) in by_cell else GAP for v in data["compilerVersions"])]
        for p in data["gpuProducts"]
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        f"model {data['model']}: {len(data['gpuProducts'])} GPU product(s) x "
        f"{len(data['compilerVersions'])} compiler version(s), {len(data['gaps'])} gap(s)"
    ]
    for row in [header, *rows]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return "\n".join(lines)
