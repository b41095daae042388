"""Object-store keys built from names a user chose (namespace, run, GPU type, batch, file names).

A key is '/'-separated segments. A name that becomes one segment must not add segments ('/'),
climb out of its prefix ('.', '..'), be empty, or carry control characters that logs and
terminals interpret. `safe_segment` escapes such a name instead of refusing it, reversibly and
without collisions: bytes outside [A-Za-z0-9._-] become %XX (so '%' itself too), and a name made
only of dots gets its dots escaped. Names that are already safe (every Kubernetes object name,
route ids) come back unchanged.
"""

from __future__ import annotations

import hashlib
import re

SAFE_CHARS = re.compile(r"[A-Za-z0-9._-]")
MAX_SEGMENT_BYTES = 255  # one path component on common file systems (the local store maps keys to files)
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def safe_segment(name: str) -> str:
    """`name` as one key segment: unchanged when already safe, else percent-escaped. An escaped
    name longer than MAX_SEGMENT_BYTES keeps its first part and ends with a digest of the whole.
    Raises ValueError for an empty name (nothing to name a segment with)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"an object-store key segment cannot be empty (got {name!r})")
    escaped = "".join(ch if SAFE_CHARS.fullmatch(ch) else "".join(f"%{b:02X}" for b in ch.encode()) for ch in name)
    if set(escaped) == {"."}:
        escaped = escaped.replace(".", "%2E")
    if len(escaped) > MAX_SEGMENT_BYTES:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        head = escaped[: MAX_SEGMENT_BYTES - 17]
        cut = head.rfind("%", len(head) - 2)  # do not end inside a %XX escape
        escaped = f"{head[:cut] if cut != -1 else head}~{digest}"  # '~' never appears in a full-length escape
    return escaped


def unescape_segment(segment: str) -> str:
    """The name `safe_segment` escaped. A shortened one gives its first part and `~digest`, where
    the cut may have split a character's bytes: that character reads as U+FFFD instead of raising
    (a catalog listing met a long non-ASCII model name and stopped with a UnicodeDecodeError)."""
    raw = re.sub(rb"%([0-9A-F]{2})", lambda m: bytes([int(m.group(1), 16)]), segment.encode())
    return raw.decode(errors="replace")


def object_key(*names: str) -> str:
    """A key from names, each made one safe segment: object_key('runs', ns, run, gpu) ."""
    return "/".join(safe_segment(name) for name in names)


def check_key(key: str) -> str:
    """Refuse a key (e.g. the object part of a user's s3:// URI) with an empty, '.' or '..' segment
    or a control character; returns the key."""
    if not key:
        raise ValueError("object key is empty")
    bad = [repr(seg) for seg in key.split("/") if seg in ("", ".", "..")]
    if bad:
        raise ValueError(
            f"object key {key!r} has empty, '.' or '..' segments ({', '.join(bad)}): name the object by its plain path"
        )
    if CONTROL.search(key):
        raise ValueError(f"object key {key!r} contains control characters")
    return key
