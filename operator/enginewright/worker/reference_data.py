"""The reference pairs' .npz files read and checked against a model's signature before anything is
built: the probe's check (worker/job.py) and `enginewright tune`'s (cli/tune.py) are this one."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Sequence

from enginewright.accuracy.signature import PairData, Signature, mismatches, summary


def check_pairs(
    signature: Signature,
    inputs: list[Path],
    references: list[Path] | None,
    labels: list[tuple[str, str]],
    outputs: Sequence[str] = (),
) -> str | None:
    """The .npz files of the reference pairs against the model's signature (`accuracy.signature`): None
    when they fit, else one message naming each file and tensor and saying what the model expects.
    Unreadable files are said the same way. Shared by the probe and `enginewright tune`."""
    import numpy as np

    pairs, unreadable = [], []
    for i, (inputs_path, (inputs_label, references_label)) in enumerate(zip(inputs, labels)):
        loaded = {}
        for kind, path, label in (
            ("inputs", inputs_path, inputs_label),
            ("references", references[i] if references else None, references_label),
        ):
            if path is None:
                continue
            try:
                with np.load(path, allow_pickle=False) as data:
                    loaded[kind] = {k: data[k] for k in data.files}
            except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
                unreadable.append(f"{label}: not a readable .npz of arrays ({type(exc).__name__}: {exc})")
        if "inputs" in loaded and (references is None or "references" in loaded):
            pairs.append(PairData(inputs_label, loaded["inputs"], references_label, loaded.get("references")))
    found = unreadable + mismatches(signature, pairs, list(outputs))
    return summary(found, signature) if found else None
