"""The cache in ConfigMaps: one entry per route, in shards of at most SHARD_LIMIT bytes (a ConfigMap
holds at most 1 MiB, an etcd request 1.5 MiB). Pure placement logic; `cache` does the API calls.

A shard's data maps `<route-id>.json` to the entry's JSON. New entries go into the last shard
while it has room, then into a new one; an entry already in any shard is never placed again, so a
pass costs what the new entries cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SHARD_LIMIT = 800 * 1024


def data_key(route_id: str) -> str:
    return f"{route_id}.json"


def size_of(data: dict[str, str]) -> int:
    return sum(len(k.encode()) + len(v.encode()) for k, v in data.items())


@dataclass
class Placement:
    shards: list[dict[str, str]]  # every shard's data after placing, in order
    changed: set[int] = field(default_factory=set)  # indices of shards to write (new or grown)


def place(shards: list[dict[str, str]], new: dict[str, str], limit: int = SHARD_LIMIT) -> Placement:
    """Place new entries (data key -> JSON) into the shards. Keys already present in any shard are
    skipped; an entry larger than `limit` on its own is refused with ValueError."""
    present = {key for shard in shards for key in shard}
    out = Placement([dict(s) for s in shards])
    sizes = [size_of(s) for s in out.shards]
    for key in sorted(new):
        if key in present:
            continue
        size = len(key.encode()) + len(new[key].encode())
        if size > limit:
            raise ValueError(f"cache entry {key} is {size} bytes, over the {limit}-byte shard limit")
        if not out.shards or sizes[-1] + size > limit:
            out.shards.append({})
            sizes.append(0)
        out.shards[-1][key] = new[key]
        sizes[-1] += size
        out.changed.add(len(out.shards) - 1)
        present.add(key)
    return out
