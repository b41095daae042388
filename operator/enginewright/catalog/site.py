"""The catalog site: static HTML pages that answer "what do I deploy on this GPU, and why?".

    index.html            every model, and per GPU product the engine each model hands out
    <model>/index.html    the model's GPU product x compiler version grid, then every engine: its
                          speedup with its interval, accuracy loss, route, knobs, the routes measured
                          (an inline SVG chart and its table), provenance, sha256, the fetch command

Paths are relative to the catalog folder (`store.layout.site_page`), so the same files work from a
directory (`enginewright catalog site --out DIR`) and from the bucket beside the model folders (the
operator writes them after each publish). Each page is one self-contained file: inline CSS, inline
SVG, no JavaScript, no fonts or scripts from elsewhere, so it opens offline and from one presigned URL.

Reading (`read_model`) goes through `catalog.reader.Catalog`; rendering (`model_page`, `index_page`)
is pure: plain data in, HTML text out.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from pydantic import ValidationError

from enginewright.api.cache import now_iso
from enginewright.api.contracts import IndexEntry, MeasuredRoute, MeasuredRoutes, Provenance
from enginewright.catalog.compatibility import Offer
from enginewright.catalog.listing import _version_key
from enginewright.catalog.reader import Catalog, owned_entries
from enginewright.store.layout import REPORT, in_folder, site_page

PLOTTED = 40  # routes drawn per engine (default, winner, then the fastest, then rejected ones)
TABLED = 60  # routes listed per engine (default, winner, then by speedup); more are in its routes.json


# ------------------------------------------------------------------------------------ what is read


@dataclass(frozen=True)
class Engine:
    """One published engine as its page shows it."""

    entry: IndexEntry
    offer: Offer
    provenance: Provenance | None
    provenance_problem: str | None  # why `provenance` is None (missing, or not the v1 contract)
    routes: MeasuredRoutes | None  # None: published before routes.json was written
    superseded_by: IndexEntry | None  # the index's mark (another stack), else a newer one of the same cell

    @property
    def anchor(self) -> str:
        return f"engine-{_slug(self.entry.gpu_product)}-{_slug(self.entry.compiler_version)}-{self.entry.run_uid[:13]}"


@dataclass(frozen=True)
class ModelView:
    model: str
    engines: list[Engine]  # current ones first, per cell newest first

    @property
    def products(self) -> list[str]:
        return sorted({e.entry.gpu_product for e in self.engines})

    @property
    def versions(self) -> list[str]:
        return sorted({e.entry.compiler_version for e in self.engines}, key=_version_key)


def _typed(model, raw: bytes | None, what: str):
    if raw is None:
        return None, f"no {what}"
    try:
        return model.model_validate(json.loads(raw)), None
    except (ValueError, ValidationError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else {"loc": (), "msg": str(exc)}
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        return None, f"{what} does not follow its contract ({where}: {first['msg']})"


def read_model(catalog: Catalog, model: str) -> ModelView:
    """The model's engines from the catalog (only those its index owner published, as `fetch` hands
    out), each with its provenance and routes, and which ones a newer engine superseded."""
    found = [
        (offer, IndexEntry.model_validate(raw_entry), raw_entry, raw) for offer, raw_entry, raw in catalog.offers(model)
    ]
    newest: dict[tuple[str, str], IndexEntry] = {}
    for _, entry, _, _ in found:
        cell = (entry.gpu_product, entry.compiler_version)
        if cell not in newest or (entry.published_at, entry.run_uid) > (
            newest[cell].published_at,
            newest[cell].run_uid,
        ):
            newest[cell] = entry
    by_folder = {entry.folder: entry for _, entry, _, _ in found}
    engines = []
    for offer, entry, raw_entry, provenance_raw in found:
        provenance, problem = _typed(Provenance, provenance_raw, "provenance.json")
        routes, _ = _typed(MeasuredRoutes, catalog.routes_bytes(raw_entry), "routes.json")
        # The index's mark (a newer entry on another stack, perhaps another compiler version) first.
        marked = by_folder.get(entry.superseded_by.folder) if entry.superseded_by else None
        top = marked or newest[(entry.gpu_product, entry.compiler_version)]
        engines.append(Engine(entry, offer, provenance, problem, routes, None if top is entry else top))
    engines.sort(
        key=lambda e: (
            e.superseded_by is not None,
            e.entry.gpu_product,
            _version_key(e.entry.compiler_version),
            "" if e.superseded_by is None else _reverse(e.entry.published_at),
        )
    )
    return ModelView(model, engines)


def _reverse(text: str) -> str:
    """Sorts newest first among ISO dates."""
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


def read_index(catalog: Catalog, model: str) -> list[IndexEntry]:
    return [IndexEntry.model_validate(e) for e in owned_entries(catalog.index_doc(model))]


# ------------------------------------------------------------------------------------- rendering

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;margin:0 auto;
max-width:1180px;padding:0 1.2rem 3rem}
header{border-bottom:1px solid #d0d7de;padding:.8rem 0;margin-bottom:1rem}header p{margin:.2rem 0;color:#57606a}
h1{font-size:1.6rem;margin:.4rem 0}h2{font-size:1.25rem;margin:1.8rem 0 .6rem;border-bottom:1px solid #eaeef2}
h3{font-size:1.1rem;margin:1.4rem 0 .4rem}h4{font-size:1rem;margin:1rem 0 .3rem}
table{border-collapse:collapse;margin:.4rem 0 1rem}caption{text-align:left;color:#57606a;padding:.2rem 0;
font-size:.9rem}th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}
thead th,th[scope=row]{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.gap{color:#8c959f}a{color:#0550ae}code,pre{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
code{overflow-wrap:anywhere}pre{background:#f6f8fa;border:1px solid #d0d7de;padding:.6rem;white-space:pre-wrap;
overflow-wrap:anywhere;margin:.3rem 0}
.speedup{font-size:1.15rem;font-weight:700}.muted{color:#57606a}
.badge{display:inline-block;font-size:.78rem;font-weight:600;border-radius:1em;padding:0 .6em;margin-left:.4em;
border:1px solid}.current{color:#116329;border-color:#4ac26b;background:#dafbe1}
.superseded-badge{color:#6e5600;border-color:#d4a72c;background:#fff8c5}
article.engine{border:1px solid #d0d7de;border-radius:6px;padding:.2rem 1rem .8rem;margin:1rem 0}
article.superseded{background:repeating-linear-gradient(135deg,#fff,#fff 12px,#f6f8fa 12px,#f6f8fa 24px)}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.15rem 1rem;margin:.3rem 0}dt{color:#57606a}dd{margin:0}
figure{margin:.4rem 0}figcaption{color:#57606a;font-size:.9rem}svg{max-width:100%;height:auto}
.row-winner{background:#fff8c5}.row-default{background:#f6f8fa}
.tok{white-space:nowrap}td.nowrap{white-space:nowrap}.scroll{overflow-x:auto}
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", text)


def _route(route: str) -> str:
    """A route as code, breaking lines only between its knob tokens, never inside one."""
    tokens = route.split() or ["(default)"]
    return "<code>" + " ".join(f'<span class="tok">{_e(t)}</span>' for t in tokens) + "</code>"


def _x(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}×"


def _num(value: float | None, spec: str = ".4g") -> str:
    return "—" if value is None else format(value, spec)


def _interval(bounds: list[float] | None) -> str:
    return f"95% {bounds[0]:.3f}–{bounds[1]:.3f}" if bounds and len(bounds) == 2 else "no interval"


def _page(title: str, header: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>\n"
        f"<body><header>{header}</header>\n<main>\n{body}\n</main></body></html>\n"
    )


def _href_model(model: str) -> str:
    return quote(site_page(model), safe="/")


def fetch_command(location: str, model: str, offer: Offer, dest: str = "./engine") -> str:
    """The `enginewright fetch` command that gets exactly this engine (its run pinned; the GPU and
    compiler given, so it runs on any machine)."""
    words = [
        "enginewright",
        "fetch",
        "--catalog",
        location,
        "--model",
        model,
        "--gpu",
        offer.gpu_product,
        "--compiler-version",
        offer.compiler_version,
    ]
    if offer.compiler == "inductor" and offer.cuda:
        words += ["--cuda", offer.cuda]
    words += ["--run", offer.run_uid, "--dest", dest]
    return " ".join(shlex.quote(w) for w in words)


def _speedup_of(engine: Engine) -> tuple[float | None, list[float] | None, str]:
    """The published headline speedup, its interval and its name."""
    p = engine.provenance
    if p:
        return p.timing.speedup, p.timing.speedup_interval, p.timing.speedup_name
    return engine.entry.speedup, None, "speedup"


def _default_kept(engine: Engine) -> bool:
    """No route beat the default: the published engine is the default route's."""
    if engine.routes:
        return engine.routes.winner_id == engine.routes.default_id
    return not (engine.entry.route or (engine.provenance.route.route if engine.provenance else ""))


def _loss_text(engine: Engine) -> str:
    if engine.offer.accuracy_validated is False:
        return "accuracy not validated"
    p = engine.provenance
    metric = f" ({p.accuracy.metric}, threshold {p.accuracy.threshold:g})" if p and p.accuracy.threshold else ""
    return (
        f"loss {_num(engine.offer.worst_loss, '.2g')}{metric}"
        if engine.offer.worst_loss is not None
        else f"loss not recorded{metric}"
    )


def _cell(engines: list[Engine]) -> str:
    if not engines:
        return '<td class="gap">— no engine</td>'
    top, older = engines[0], engines[1:]
    speedup, bounds, name = _speedup_of(top)
    more = f'<br><a href="#{older[0].anchor}">+{len(older)} superseded</a>' if older else ""
    how = (
        "the default route is kept"
        if _default_kept(top)
        else _interval(bounds) + ("" if top.entry.confirmed else " · unconfirmed")
    )
    return (
        f'<td><a href="#{top.anchor}"><span class="speedup">{_x(speedup)}</span></a> {_e(name)}<br>'
        f"{_e(how)}<br>{_e(_loss_text(top))}<br>"
        f"{_e(top.entry.published_at[:10])} · run {_e(top.entry.run)}{more}</td>"
    )


def grid(view: ModelView) -> str:
    """GPU products (rows) x compiler versions (columns), the engine each cell hands out."""
    head = "".join(f'<th scope="col">{_e(v)}</th>' for v in view.versions)
    rows = []
    for product in view.products:
        cells = "".join(
            _cell([e for e in view.engines if (e.entry.gpu_product, e.entry.compiler_version) == (product, version)])
            for version in view.versions
        )
        rows.append(f'<tr><th scope="row"><a href="#gpu-{_slug(product)}">{_e(product)}</a></th>{cells}</tr>')
    return (
        f'<table class="grid"><caption>The engine each GPU product gets per compiler version (newest '
        f"published; its speedup over the default route with its 95% interval, worst accuracy loss, date, run)"
        f'</caption><thead><tr><th scope="col">GPU product</th>{head}</tr></thead><tbody>{"".join(rows)}'
        f"</tbody></table>"
    )


# --------------------------------------------------------------------------------- routes measured


@dataclass(frozen=True)
class _Bar:
    route: MeasuredRoute
    kind: str  # default, winner, passed, rejected
    relative: float  # time per call / the default's, in the same rounds
    bounds: tuple[float, float] | None


def _bars(routes: MeasuredRoutes) -> tuple[list[_Bar], list[MeasuredRoute]]:
    """Routes with a time relative to the default beside them, and those without one (failed...).
    The winner sits at the headline (as report.png draws it), the others at their sweep ratios."""
    bars, untimed = [], []
    for r in routes.routes:
        if r.id == routes.default_id:
            bars.append(_Bar(r, "default", 1.0, None))
            continue
        if r.id == routes.winner_id and routes.headline_speedup:
            low_high = routes.headline_interval
            bars.append(
                _Bar(r, "winner", 1 / routes.headline_speedup, (1 / low_high[1], 1 / low_high[0]) if low_high else None)
            )
            continue
        if not r.speedup:
            untimed.append(r)
            continue
        kind = "passed" if r.outcome == "ok" else "rejected"
        bounds = (1 / r.speedup_interval[1], 1 / r.speedup_interval[0]) if r.speedup_interval else None
        bars.append(_Bar(r, kind, 1 / r.speedup, bounds))
    order = {"default": 0, "winner": 1, "passed": 2, "rejected": 3}
    bars.sort(key=lambda b: (order[b.kind], b.relative))
    return bars, untimed


COLOURS = {"default": "#6e7781", "winner": "#bf8700", "passed": "#0969da", "rejected": "#cf222e"}


def routes_svg(routes: MeasuredRoutes, ident: str) -> str:
    """A bar per route: its time per call relative to the default's in the same rounds (1 = the
    default; shorter is faster), with its 95% interval; default and winner marked. Relative, not
    absolute: each route's time comes from its own rounds, only its ratio to the default beside it
    is comparable across routes."""
    bars, _ = _bars(routes)
    shown = bars[:PLOTTED]
    if not shown:
        return ""
    top = max(max(b.bounds[1] if b.bounds else b.relative for b in shown) * 1.05, 1.15)
    top = min(top, 3.0)
    left, right, row, head = 300, 700, 20, 40
    width, height = 800, head + row * len(shown) + 42

    def x(value: float) -> float:
        return left + (right - left) * min(value, top) / top

    step = 0.25 if top <= 1.6 else 0.5
    ticks, parts = [], []
    value = 0.0
    while value <= top + 1e-9:
        ticks.append(
            f'<line x1="{x(value):.1f}" x2="{x(value):.1f}" y1="{head - 6}" y2="{height - 36}" '
            f'stroke="#d0d7de"/><text x="{x(value):.1f}" y="{height - 22}" text-anchor="middle">'
            f"{value:g}</text>"
        )
        value += step
    winner = next((b for b in shown if b.kind == "winner"), None)
    for i, b in enumerate(shown):
        y = head + i * row
        label = b.route.route or "(default)"
        short = label if len(label) <= 44 else label[:43] + "…"
        tag = {"default": " [default]", "winner": " [winner]", "rejected": " [rejected]"}.get(b.kind, "")
        detail = (
            f"{label}: {b.relative:.3f} of the default's time"
            + (f" (95% {b.bounds[0]:.3f}–{b.bounds[1]:.3f})" if b.bounds else "")
            + f", max loss {_num(b.route.max_loss, '.2g')}, {b.route.outcome}"
        )
        bar = (
            f'<rect x="{left}" y="{y + 3}" width="{max(1.0, x(b.relative) - left):.1f}" height="13" '
            f'fill="{COLOURS[b.kind]}"' + (' stroke="#1f2328" stroke-width="1.5"' if b.kind == "winner" else "") + "/>"
        )
        whisker = ""
        if b.bounds:
            lo, hi = x(b.bounds[0]), x(b.bounds[1])
            whisker = (
                f'<line x1="{lo:.1f}" x2="{hi:.1f}" y1="{y + 9.5}" y2="{y + 9.5}" stroke="#1f2328"/>'
                f'<line x1="{lo:.1f}" x2="{lo:.1f}" y1="{y + 5}" y2="{y + 14}" stroke="#1f2328"/>'
                f'<line x1="{hi:.1f}" x2="{hi:.1f}" y1="{y + 5}" y2="{y + 14}" stroke="#1f2328"/>'
            )
        clipped = "▸" if b.relative > top else ""
        value_x = min(x(b.relative), right) + 6 + (max(0.0, x(b.bounds[1]) - x(b.relative)) if b.bounds else 0.0)
        parts.append(
            f"<g><title>{_e(detail)}</title>"
            f'<text x="{left - 8}" y="{y + 14}" text-anchor="end"'
            + (' font-weight="700"' if b.kind in ("winner", "default") else "")
            + f">{_e(short)}{_e(tag)}</text>{bar}{whisker}"
            f'<text x="{value_x:.1f}" y="{y + 14}">{clipped}{b.relative:.3f}</text></g>'
        )
    default_line = (
        f'<line x1="{x(1.0):.1f}" x2="{x(1.0):.1f}" y1="{head - 10}" y2="{height - 36}" '
        f'stroke="#1f2328" stroke-dasharray="4 3"/><text x="{x(1.0):.1f}" y="{head - 14}" '
        f'text-anchor="middle">default = 1</text>'
    )
    title = f"Time per call of each route relative to the default route ({routes.objective})"
    described = (
        f"{len(bars)} routes with a time; "
        + (
            f"the winner {winner.route.route or '(default)'} takes {winner.relative:.3f} of the default's "
            f"time (headline {routes.headline_speedup:.3f}× faster)"
            if winner
            else "the default route won"
        )
        + (f"; {len(bars) - len(shown)} more not drawn" if len(bars) > len(shown) else "")
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" aria-labelledby="{ident}-t {ident}-d" font-family="system-ui,sans-serif" '
        f'font-size="12" fill="#1f2328"><title id="{ident}-t">{_e(title)}</title>'
        f'<desc id="{ident}-d">{_e(described)}</desc>{"".join(ticks)}{default_line}{"".join(parts)}'
        f'<text x="{(left + right) / 2}" y="{height - 6}" text-anchor="middle">time per call ÷ the default\'s '
        f"in the same rounds (shorter is faster; bars: 95% across loads and rounds)</text></svg>"
    )


def routes_table(routes: MeasuredRoutes) -> str:
    def mark(r: MeasuredRoute) -> str:
        marks = [m for m, on in (("default", r.id == routes.default_id), ("winner", r.id == routes.winner_id)) if on]
        return " ".join(marks)

    order = sorted(
        routes.routes,
        key=lambda r: (
            r.id != routes.winner_id,
            r.id != routes.default_id,
            r.speedup is None,
            -(r.speedup or 0.0),
            r.route,
        ),
    )
    rows = []
    for r in order[:TABLED]:
        cls = (
            ' class="row-winner"'
            if r.id == routes.winner_id
            else ' class="row-default"'
            if r.id == routes.default_id
            else ""
        )
        rows.append(
            f'<tr{cls}><td>{_e(mark(r))}</td><th scope="row">{_route(r.route)}</th>'
            f'<td>{_e(r.stage)}</td><td>{_e(r.outcome)}</td><td class="num">{_num(r.route_ms, ".4f")}</td>'
            f'<td class="num">{_num(r.default_ms, ".4f")}</td><td class="num">{_x(r.speedup)}</td>'
            f'<td class="nowrap">{_e(_interval(r.speedup_interval) if r.speedup_interval else "—")}</td>'
            f'<td class="num">{_num(r.max_loss, ".2g")}</td>'
            f'<td class="num">{_num(r.build_seconds, ".1f")}</td></tr>'
        )
    more = f'<p class="muted">{len(order) - TABLED} more routes in routes.json.</p>' if len(order) > TABLED else ""
    return (
        f'<div class="scroll"><table class="routes"><caption>Routes measured ({len(routes.routes)}): ms per '
        f"call ({_e(routes.objective)}), "
        f"the default's ms in the same rounds, speedup = their ratio, its 95% interval across loads and rounds. The winner's "
        f'row shows its sweep figures; its headline is above.</caption><thead><tr><th scope="col"></th>'
        f'<th scope="col">route</th><th scope="col">stage</th><th scope="col">outcome</th><th scope="col">ms</th>'
        f'<th scope="col">default ms</th><th scope="col">speedup</th><th scope="col">interval</th>'
        f'<th scope="col">max loss</th><th scope="col">build s</th></tr></thead><tbody>{"".join(rows)}</tbody>'
        f"</table></div>{more}"
    )


# ------------------------------------------------------------------------------------ one engine


def _dl(items: list[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in items if v) + "</dl>"


def _pairs_table(mapping: dict, caption: str, key: str, value: str) -> str:
    if not mapping:
        return ""
    rows = "".join(
        f'<tr><th scope="row">{_e(k)}</th><td><code>{_e(v)}</code></td></tr>' for k, v in sorted(mapping.items())
    )
    return (
        f'<table><caption>{_e(caption)}</caption><thead><tr><th scope="col">{_e(key)}</th><th scope="col">'
        f"{_e(value)}</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _build_choices(p: Provenance) -> str:
    """What the engine's build autotuned (a rebuild of its route tunes again); nothing where it kept
    no autotuned config or the provenance does not say."""
    tuned = p.engine.tuned_at_build
    if tuned is None or not tuned.kernels:
        return ""
    return _e(f"kernel configs autotuned while building: {tuned.brief()}; {tuned.note}")


def provenance_section(engine: Engine, catalog: Catalog) -> str:
    p = engine.provenance
    key = catalog.provenance_key(engine.entry.wire())
    where = (
        f'<p class="muted">From <code>{_e(catalog.uri(key))}</code>; report: <code>'
        f"{_e(catalog.uri(in_folder(engine.entry.folder, REPORT)))}</code>.</p>"
    )
    if p is None:
        return f"<h4>Provenance</h4><p>Not shown: {_e(engine.provenance_problem)}.</p>{where}"
    versions = {k: v for k, v in (p.compiler.versions or {}).items() if v}
    return (
        "<h4>Provenance</h4>"
        + _dl(
            [
                ("model", f"{_e(p.model.name)} · <code>{_e(p.model.uri)}</code> · {_e(p.model.format)}"),
                ("model sha256", f"<code>{_e(p.model.sha256)}</code>"),
                (
                    "input shapes",
                    f"<code>{_e(json.dumps(p.model.input_shapes, separators=(',', ':')))}</code>"
                    if p.model.input_shapes
                    else "",
                ),
                (
                    "accuracy",
                    "not validated: " + _e(p.accuracy.reason)
                    if p.accuracy.disabled
                    else f"{_e(p.accuracy.metric)} below {_num(p.accuracy.threshold, 'g')}; loss per output: "
                    + ", ".join(f"{_e(k)} {_num(v, '.2g')}" for k, v in (p.accuracy.loss_per_output or {}).items()),
                ),
                (
                    "GPU",
                    f"{_e(p.gpu.product)}"
                    + (f" · node <code>{_e(p.gpu.node)}</code>" if p.gpu.node else "")
                    + (f" · compute capability {_e(p.gpu.compute_capability)}" if p.gpu.compute_capability else "")
                    + (f" · driver {_e(p.gpu.driver)}" if p.gpu.driver else ""),
                ),
                (
                    "run",
                    f"{_e(p.run.namespace)}/{_e(p.run.name)} · uid <code>{_e(p.run.uid)}</code> · generation "
                    f"{_e(p.run.generation)} · target {_e(p.run.target)}",
                ),
                (
                    "search",
                    f"{_e(p.search.mode)}: {p.search.routes_measured} of {p.search.routes_planned} planned routes "
                    f"measured ("
                    + ", ".join(f"{_e(k)} {v}" for k, v in p.search.outcomes.items() if v)
                    + ")"
                    + (f"; cut short: {_e(p.search.cut_short)}" if p.search.cut_short else ""),
                ),
                ("how measured", _e(p.timing.how_measured)),
                ("build choices", _build_choices(p)),
                ("host", _e((p.timing.host or {}).get("note"))),
                ("operator", f"{_e(p.operator_version)} · published {_e(p.published_at)}"),
            ]
        )
        + _pairs_table(p.accuracy.data_digests or {}, "Reference data digests", "data", "sha256")
        + _pairs_table(versions, "Versions of the measurement", "component", "version")
        + where
    )


def engine_article(engine: Engine, view: ModelView, catalog: Catalog) -> str:
    entry, p = engine.entry, engine.provenance
    speedup, bounds, name = _speedup_of(engine)
    if engine.superseded_by:
        newer = next(e for e in view.engines if e.entry is engine.superseded_by)
        badge = (
            f'<span class="badge superseded-badge">superseded</span> by <a href="#{newer.anchor}">run '
            f"{_e(newer.entry.run)} of {_e(newer.entry.published_at[:10])}</a>"
        )
        if entry.superseded_by and entry.superseded_by.stack:
            badge += (
                f" for {_e(entry.superseded_by.stack.describe())}; still the engine for "
                f"{_e(entry.stack.describe() if entry.stack else 'its own stack')}"
            )
    else:
        badge = '<span class="badge current">current</span>'
    knobs = p.route.knobs if p else {}
    route = entry.route or (p.route.route if p else "")
    how = p.timing.how_measured.split(";")[0] if p else ""
    headline = (
        f'<p><span class="speedup">{_x(speedup)}</span> {_e(name)} over the default route '
        f"({'the default route is kept' if _default_kept(engine) else _e(_interval(bounds))}; "
        f"{'confirmed' if entry.confirmed else 'unconfirmed'}"
        + (f": {_e(how)}" if how else "")
        + f") · {_e(_loss_text(engine))}</p>"
    )
    get_it = f"<h4>Get it</h4><pre><code>{_e(fetch_command(catalog.location, view.model, engine.offer))}</code></pre>"
    facts = _dl(
        [
            ("route", _route(route)),
            ("engine sha256", f"<code>{_e(entry.sha256)}</code>"),
            (
                "engine",
                f"<code>{_e(entry.engine)}</code>" + (f" · {p.engine.size:,} bytes" if p and p.engine.size else ""),
            ),
            ("published", f"{_e(entry.published_at)} by run {_e(entry.run)}"),
        ]
    )
    knob_table = (
        _pairs_table(knobs, "Knobs of the route (besides the compiler's defaults)", "knob", "value")
        if knobs
        else '<p class="muted">No knobs: the compiler\'s default route.</p>'
    )
    if engine.routes:
        svg = routes_svg(engine.routes, engine.anchor)
        measured = (
            "<h4>Routes measured</h4>"
            + (
                f"<figure>{svg}<figcaption>Each route's time per call against the "
                f"default's in the same rounds; the winner at its headline speedup. The table says the same in "
                f"numbers.</figcaption></figure>"
                if svg
                else ""
            )
            + routes_table(engine.routes)
        )
    else:
        measured = (
            "<h4>Routes measured</h4><p>Not in the catalog for this engine (no routes.json: published "
            "before it was written); its report.md lists them.</p>"
        )
    return (
        f'<article class="engine{" superseded" if engine.superseded_by else ""}" id="{engine.anchor}">'
        f"<h4>{_e(entry.compiler_version)} · {_e(entry.published_at[:10])} · run {_e(entry.run)} {badge}</h4>"
        f"{headline}{get_it}{facts}{knob_table}{measured}{provenance_section(engine, catalog)}</article>"
    )


# ------------------------------------------------------------------------------------------ pages


def model_page(view: ModelView, catalog: Catalog, generated_at: str) -> str:
    """The model's page: its grid, then every engine by GPU product (current before superseded)."""
    current = [e for e in view.engines if e.superseded_by is None]
    gaps = [
        (p, v)
        for p in view.products
        for v in view.versions
        if not any((e.entry.gpu_product, e.entry.compiler_version) == (p, v) for e in view.engines)
    ]
    header = (
        f'<p><a href="../index.html">← all models</a> · catalog <code>{_e(catalog.location)}</code> · '
        f"generated {_e(generated_at)}</p><h1>{_e(view.model)}</h1>"
        f"<p>{len(view.engines)} engine(s) published, {len(current)} current, on {len(view.products)} GPU "
        f"product(s) × {len(view.versions)} compiler version(s)"
        + ("; no engine for " + ", ".join(f"{_e(p)} × {_e(v)}" for p, v in gaps) if gaps else "")
        + ".</p>"
    )
    auto = (
        f"enginewright fetch --catalog {shlex.quote(catalog.location)} --model {shlex.quote(view.model)} "
        f"--dest ./engine"
    )
    body = [
        f"<h2>What to deploy</h2>{grid(view)}<p>On the serving machine, <code>{_e(auto)}</code> picks the "
        f"engine for its own GPU and installed compiler (the newest that fits; an init container does this, "
        f"see examples/inference-deployment.yaml). Each engine below has the command that gets exactly it.</p>"
    ]
    for product in view.products:
        here = [e for e in view.engines if e.entry.gpu_product == product]
        body.append(
            f'<section id="gpu-{_slug(product)}" aria-labelledby="gpu-{_slug(product)}-h">'
            f'<h2 id="gpu-{_slug(product)}-h">{_e(product)}</h2>'
            + "".join(engine_article(e, view, catalog) for e in here)
            + "</section>"
        )
    return _page(f"{view.model} — engine catalog", header, "\n".join(body))


def index_page(models: dict[str, list[IndexEntry]], catalog: Catalog, generated_at: str) -> str:
    """Every model (engines, products, versions, last published) and, per GPU product, each model's
    current engines."""
    rows: list[str] = []
    by_product: dict[str, list[tuple[str, IndexEntry]]] = {}
    for model, entries in sorted(models.items()):
        cells: dict[tuple[str, str], IndexEntry] = {}
        for e in entries:
            cell = (e.gpu_product, e.compiler_version)
            if cell not in cells or (e.published_at, e.run_uid) > (cells[cell].published_at, cells[cell].run_uid):
                cells[cell] = e
        for (product, _), e in cells.items():
            by_product.setdefault(product, []).append((model, e))
        last = max((e.published_at for e in entries), default="")
        rows.append(
            f'<tr><th scope="row"><a href="{_href_model(model)}">{_e(model)}</a></th>'
            f"<td>{_e(', '.join(sorted({e.gpu_product for e in entries})))}</td>"
            f"<td>{_e(', '.join(sorted({e.compiler_version for e in entries}, key=_version_key)))}</td>"
            f'<td class="num">{len(cells)}</td><td class="num">{len(entries) - len(cells)}</td>'
            f"<td>{_e(last[:19].replace('T', ' '))}</td></tr>"
        )
    header = (
        f"<h1>Engine catalog</h1><p>catalog <code>{_e(catalog.location)}</code> · {len(models)} model(s) · "
        f"generated {_e(generated_at)}</p>"
    )
    body = [
        f'<h2>Models</h2><table><caption>Every model of the catalog</caption><thead><tr><th scope="col">model'
        f'</th><th scope="col">GPU products</th><th scope="col">compiler versions</th><th scope="col">current '
        f'engines</th><th scope="col">superseded</th><th scope="col">last published (UTC)</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
        if rows
        else "<p>No model has been published yet.</p>"
    ]
    for product in sorted(by_product):
        items = sorted(by_product[product], key=lambda me: (me[0], _version_key(me[1].compiler_version)))
        lines = "".join(
            f'<tr><th scope="row"><a href="{_href_model(m)}#engine-{_slug(e.gpu_product)}-{_slug(e.compiler_version)}-'
            f'{e.run_uid[:13]}">{_e(m)}</a></th><td>{_e(e.compiler_version)}</td><td class="num">{_x(e.speedup)}</td>'
            f"<td>{'default kept' if not e.route else 'confirmed' if e.confirmed else 'unconfirmed'}</td>"
            f"<td>{_route(e.route)}</td>"
            f"<td>{_e(e.published_at[:10])}</td></tr>"
            for m, e in items
        )
        body.append(
            f'<h2 id="gpu-{_slug(product)}">On {_e(product)}</h2><table><caption>What each model hands out on '
            f'{_e(product)} (the newest engine per compiler version)</caption><thead><tr><th scope="col">model'
            f'</th><th scope="col">compiler version</th><th scope="col">speedup</th><th scope="col">decision'
            f'</th><th scope="col">route</th><th scope="col">published</th></tr></thead><tbody>{lines}'
            f"</tbody></table>"
        )
    return _page("Engine catalog", header, "\n".join(body))


# ------------------------------------------------------------------------------------ the whole site


def pages(
    catalog: Catalog, models: list[str] | None = None, generated_at: str | None = None, every: list[str] | None = None
) -> dict[str, str]:
    """Site pages by path relative to the catalog folder: the index (every model, `every` when the
    caller has listed them already) and the page of each model in `models` (default: all)."""
    generated_at = generated_at or now_iso()
    every = catalog.models() if every is None else every
    out = {site_page(): index_page({m: read_index(catalog, m) for m in every}, catalog, generated_at)}
    for model in every if models is None else models:
        out[site_page(model)] = model_page(read_model(catalog, model), catalog, generated_at)
    return out


def write_site(catalog: Catalog, out: Path) -> list[Path]:
    """Every page into the directory `out` (created); returns the files written."""
    written = []
    for path, text in pages(catalog).items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def publish_site(catalog: Catalog, model: str) -> list[str]:
    """After `model` was published: its page and the index into the catalog itself (beside the model
    folders), and the page of any model that has none yet (published before the site was on).
    Returns the keys written."""
    every = catalog.models()  # (lists the whole catalog prefix: once per publish)
    missing = [m for m in every if m != model and not catalog.store.exists(catalog.key(site_page(m)))]
    written = []
    for path, text in pages(catalog, [model, *missing], every=every).items():
        key = catalog.key(path)
        catalog.store.put(key, text.encode("utf-8"), content_type="text/html; charset=utf-8")
        written.append(key)
    return written
