"""The catalog site's pages, rendered from a catalog in the operator's layout (a local copy of the
bucket): the grid shows the engine each GPU product gets, older engines of a cell are marked
superseded (and those the index marks superseded for another stack say for which), every engine has its fetch command, routes chart and provenance, names from the catalog
cannot inject markup, and every page stands alone (no script, nothing fetched from elsewhere)."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from html.parser import HTMLParser
from pathlib import Path

import pytest

from enginewright.api.contracts import (
    AccuracyFacts,
    CompilerFacts,
    EngineFacts,
    GpuFacts,
    IndexEntry,
    MeasuredRoute,
    MeasuredRoutes,
    ModelFacts,
    Provenance,
    RouteFacts,
    RunFacts,
    SearchFacts,
    TimingFacts,
    TunedAtBuild,
)
from enginewright.catalog.reader import Catalog
from enginewright.catalog.site import model_page, read_model, write_site
from enginewright.catalog.writer import superseded
from enginewright.store.layout import CatalogKeys, site_page
from enginewright.store.objects import LocalStore

MODEL = "mlp"
ORT_OLD, ORT_NEW = "onnxruntime-1.9.0", "onnxruntime-1.23.2"


def publish(
    store: LocalStore,
    model: str,
    gpu: str,
    version: str,
    uid: str,
    day: str,
    speedup: float,
    *,
    routes: bool = True,
    namespace: str = "team",
    winner_route: str = "-graph_optimization_level=all",
    default_kept: bool = False,
    tuned: TunedAtBuild | None = None,
):
    """One engine as the operator publishes it (engine, provenance, routes.json, index entry)."""
    keys = CatalogKeys(model, gpu, version, "ab" * 32, "cd" * 6, uid)
    engine = f"engine of {uid}".encode()
    sha = hashlib.sha256(engine).hexdigest()
    uri = store.uri(keys.engine(".ort.tar"))
    store.put(keys.engine(".ort.tar"), engine)
    provenance = Provenance(
        engine=EngineFacts(uri=uri, sha256=sha, size=len(engine), tuned_at_build=tuned),
        model=ModelFacts(
            uri="s3://models/mlp.onnx", sha256="ab" * 32, format="onnx", name=model, input_shapes={"x": [16, 64]}
        ),
        accuracy=AccuracyFacts(
            disabled=False,
            metric="cosine",
            threshold=1e-3,
            data_digests={"pairs[0].inputs": "11" * 32, "pairs[0].references": "22" * 32},
            loss_per_output={"y": 2.5e-7},
        ),
        route=RouteFacts(id="r-win", route=winner_route, knobs={"graph_optimization_level": "all"}),
        compiler=CompilerFacts(name="onnxruntime", versions={"compiler": version, "node": "node-h200-0"}),
        gpu=GpuFacts(product=gpu, node=f"node-{gpu.lower()}-0", compute_capability="9.0", driver="580.1"),
        timing=TimingFacts(
            objective="gpuTime",
            speedup=speedup,
            speedup_name="gpuTime speedup",
            speedup_interval=[speedup - 0.05, speedup + 0.05],
            confirmed=True,
            how_measured="confirmation round: 3 interleaved rounds against the default; more",
        ),
        search=SearchFacts(
            mode="mixed", routes_planned=3, routes_measured=3, outcomes={"ok": 2, "accuracy_rejected": 1}
        ),
        run=RunFacts(namespace=namespace, name=f"run-{uid}", uid=uid, generation=1, target=gpu),
        operator_version="0.1.0",
        published_at=f"2026-11-{day}T00:00:00Z",
    )
    store.put(keys.provenance, json.dumps(provenance.model_dump(mode="json", by_alias=True)).encode())
    if routes:
        store.put(
            keys.routes,
            json.dumps(
                MeasuredRoutes(
                    objective="gpuTime",
                    metric="cosine",
                    threshold=1e-3,
                    default_id="r-def",
                    winner_id="r-def" if default_kept else "r-win",
                    headline_speedup=speedup,
                    headline_interval=[speedup - 0.05, speedup + 0.05],
                    routes=[
                        MeasuredRoute(id="r-def", route="", stage="stage1", outcome="ok", route_ms=0.5, max_loss=0.0),
                        MeasuredRoute(
                            id="r-win",
                            route=winner_route,
                            stage="stage1",
                            outcome="ok",
                            route_ms=0.4,
                            default_ms=0.5,
                            speedup=1.25,
                            speedup_interval=[1.2, 1.3],
                            max_loss=2.5e-7,
                        ),
                        MeasuredRoute(
                            id="r-bad",
                            route="-enable_mem_pattern=0",
                            stage="stage1",
                            outcome="accuracy_rejected",
                            route_ms=0.45,
                            default_ms=0.5,
                            speedup=1.11,
                            max_loss=0.5,
                        ),
                    ],
                ).wire()
            ).encode(),
        )
    try:
        index = json.loads(store.get(keys.index))
    except FileNotFoundError:
        index = {"model": model, "entries": [], "owner": {"namespace": namespace}}
    index["entries"].append(
        IndexEntry(
            gpu_product=gpu,
            compiler_version=version,
            folder=keys.folder,
            engine=uri,
            sha256=sha,
            route=winner_route,
            speedup=speedup,
            confirmed=True,
            model_sha256="ab" * 32,
            run=f"{namespace}/run-{uid}",
            run_uid=uid,
            published_at=f"2026-11-{day}T00:00:00Z",
            compute_capability="9.0",
        ).wire()
    )
    store.put(keys.index, json.dumps(index).encode())
    return sha


class Page(HTMLParser):
    """What a page is made of: its text, tags, attributes and links."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def all(self, tag: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag]

    @property
    def words(self) -> str:
        return re.sub(r"\s+", " ", " ".join(self.text))


@pytest.fixture
def site(tmp_path):
    store = LocalStore(tmp_path / "bucket")
    shas = {
        "old-h200": publish(store, MODEL, "NVIDIA-H200", ORT_NEW, "uid-old-h200", "01", 1.105),
        "new-h200": publish(store, MODEL, "NVIDIA-H200", ORT_NEW, "uid-new-h200", "05", 1.234),
        "l40s": publish(store, MODEL, "NVIDIA-L40S", ORT_OLD, "uid-l40s", "03", 1.05, routes=False),
        "other": publish(store, "<b>x</b>", "NVIDIA-H200", ORT_NEW, "uid-other", "04", 1.5, namespace="b"),
    }
    catalog = Catalog.from_uri(str(tmp_path / "bucket"))
    written = write_site(catalog, tmp_path / "site")
    return catalog, tmp_path / "site", written, shas


def test_the_grid_shows_what_each_gpu_product_gets(site):
    catalog, out, written, shas = site
    page = Page((out / site_page(MODEL)).read_text())
    grid = re.search(r'<table class="grid">.*?</table>', (out / site_page(MODEL)).read_text(), re.S).group(0)
    cells = Page(grid)
    assert [a.get("scope") for t, a in cells.tags if t == "th"] == ["col", "col", "col", "row", "row"]
    words = cells.words
    assert f"GPU product {ORT_OLD} {ORT_NEW}" in words  # versions in release order, not as strings
    h200 = words[words.index("NVIDIA-H200") :]
    # the newest H200 engine with its interval and loss; the older one only counted as superseded
    assert "1.234× gpuTime speedup 95% 1.184–1.284" in h200 and "+1 superseded" in h200 and "1.105" not in words
    assert "loss 2.5e-07 (cosine, threshold 0.001)" in h200 and "2026-11-05 · run team/run-uid-new-h200" in h200
    # the gaps say so
    assert words.count("— no engine") == 2
    assert "no engine for NVIDIA-H200 × onnxruntime-1.9.0, NVIDIA-L40S × onnxruntime-1.23.2" in page.words


def test_every_engine_has_its_fetch_command_sha256_and_superseded_ones_say_so(site):
    catalog, out, _, shas = site
    text = (out / site_page(MODEL)).read_text()
    page = Page(text)
    articles = {a["id"]: a["class"] for a in page.all("article")}
    assert len(articles) == 3
    superseded = [i for i, c in articles.items() if "superseded" in c]
    assert len(superseded) == 1 and "uid-old-h200"[:13] in superseded[0]
    old = text[text.index(f'id="{superseded[0]}"') :]
    assert 'superseded</span> by <a href="#engine-NVIDIA-H200-onnxruntime-1.23.2-uid-new-h200">' in old
    for sha in (shas["old-h200"], shas["new-h200"], shas["l40s"]):
        assert sha in text
    commands = [shlex.split(Page(m).words) for m in re.findall(r"<pre><code>(.*?)</code></pre>", text, re.S)]
    assert len(commands) == 3
    assert all(
        c[:2] == ["enginewright", "fetch"]
        and c[c.index("--catalog") + 1] == catalog.location
        and c[c.index("--model") + 1] == MODEL
        for c in commands
    )
    assert {c[c.index("--run") + 1] for c in commands} == {"uid-old-h200", "uid-new-h200", "uid-l40s"}


def test_routes_are_charted_and_tabled_and_an_engine_without_routes_says_why(site):
    catalog, out, _, _ = site
    text = (out / site_page(MODEL)).read_text()
    page = Page(text)
    svgs = page.all("svg")
    assert len(svgs) == 2  # the L40S engine has no routes.json
    for svg in svgs:
        assert svg["role"] == "img" and len(svg["aria-labelledby"].split()) == 2
    desc = re.search(r"<desc[^>]*>(.*?)</desc>", text).group(1)
    assert (
        "the winner -graph_optimization_level=all takes 0.810 of the default&#x27;s time (headline 1.234× faster)"
        in desc
    )
    assert "[winner]" in page.words and "[default]" in page.words and "[rejected]" in page.words
    assert page.words.count("Routes measured (3)") == 2
    assert "Not in the catalog for this engine (no routes.json" in page.words
    assert "pairs[0].references" in page.words and "22" * 32 in page.words and "node-nvidia-h200-0" in page.words


def test_pages_stand_alone_and_names_cannot_inject_markup(site):
    catalog, out, written, _ = site
    assert sorted(p.relative_to(out).as_posix() for p in written) == sorted(
        [site_page(), site_page(MODEL), site_page("<b>x</b>")]
    )
    for path in written:
        text = path.read_text()
        page = Page(text)
        assert not page.all("script") and not page.all("link") and not page.all("img")
        assert not re.search(r'(src|href)="(https?:)?//', text)  # nothing fetched from elsewhere
        assert "<b>x</b>" not in text
        assert len(text.encode()) < 60_000
        for table in re.findall(r"<table.*?</table>", text, re.S):
            assert "<th scope=" in table and "<caption>" in table
    index = Page((out / site_page()).read_text())
    links = [a["href"] for a in index.all("a")]
    for href in links:  # every link of the index opens a page that was written
        from urllib.parse import unquote

        assert (out / unquote(href.split("#")[0])).is_file(), href
    assert "%253Cb%253Ex%253C%252Fb%253E/index.html" in " ".join(links)


def test_only_the_index_owners_engines_are_shown(tmp_path):
    store = LocalStore(tmp_path / "bucket")
    publish(store, MODEL, "NVIDIA-H200", ORT_NEW, "uid-mine", "01", 1.2)
    keys = CatalogKeys(MODEL, "NVIDIA-H200", ORT_NEW, "ab" * 32, "cd" * 6, "uid-mine")
    index = json.loads(store.get(keys.index))
    index["entries"].append(
        {**index["entries"][0], "run": "intruder/x", "runUid": "uid-intruder", "publishedAt": "2026-12-01T00:00:00Z"}
    )
    store.put(keys.index, json.dumps(index).encode())
    view = read_model(Catalog.from_uri(str(tmp_path / "bucket")), MODEL)
    assert [e.entry.run_uid for e in view.engines] == ["uid-mine"]
    assert not Path(tmp_path / "site").exists()


def test_a_kept_default_route_says_so_instead_of_an_interval(tmp_path):
    store = LocalStore(tmp_path / "bucket")
    publish(store, MODEL, "NVIDIA-H200", ORT_NEW, "uid-kept", "01", 1.0, winner_route="", default_kept=True)
    write_site(Catalog.from_uri(str(tmp_path / "bucket")), tmp_path / "site")
    page = Page((tmp_path / "site" / site_page(MODEL)).read_text())
    assert page.words.count("the default route is kept") == 2  # in the grid and in the engine's headline
    assert "the default route won" in page.words  # the chart's description
    index = Page((tmp_path / "site" / site_page()).read_text())
    assert "mlp onnxruntime-1.23.2 1.000× default kept (default) 2026-11-01" in index.words


def test_a_large_search_is_capped_in_the_chart_and_the_table(tmp_path):
    from enginewright.catalog.site import PLOTTED, TABLED

    store = LocalStore(tmp_path / "bucket")
    publish(store, MODEL, "NVIDIA-H200", ORT_NEW, "uid-big", "01", 1.2)
    keys = CatalogKeys(MODEL, "NVIDIA-H200", ORT_NEW, "ab" * 32, "cd" * 6, "uid-big")
    doc = MeasuredRoutes.model_validate_json(store.get(keys.routes))
    doc.routes += [
        MeasuredRoute(
            id=f"r{i}",
            route=f"-k{i}=1",
            stage="stage2",
            outcome="ok",
            route_ms=0.5,
            default_ms=0.5,
            speedup=1.0 + i / 1000,
            max_loss=1e-7,
        )
        for i in range(100)
    ]
    store.put(keys.routes, json.dumps(doc.wire()).encode())
    write_site(Catalog.from_uri(str(tmp_path / "bucket")), tmp_path / "site")
    text = (tmp_path / "site" / site_page(MODEL)).read_text()
    assert text.count("<g><title>") == PLOTTED
    assert text.count('<tr class="row-') + text.count("<tr><td>") == TABLED
    assert f"{103 - TABLED} more routes in routes.json" in Page(text).words
    assert f"{103 - PLOTTED} more not drawn" in Page(text).words
    assert "-k99=1" in text  # the fastest are kept


def test_an_engine_the_index_marks_superseded_for_another_stack_says_which(tmp_path):
    store = LocalStore(tmp_path / "bucket")
    publish(store, MODEL, "NVIDIA-H200", ORT_OLD, "uid-old-stack", "01", 1.1)
    publish(store, MODEL, "NVIDIA-H200", ORT_NEW, "uid-new-stack", "05", 1.2)
    keys = CatalogKeys(MODEL, "NVIDIA-H200", ORT_NEW, "ab" * 32, "cd" * 6, "uid-new-stack")
    index = json.loads(store.get(keys.index))
    new = next(e for e in index["entries"] if e["runUid"] == "uid-new-stack")
    new["stack"] = {"driverMajor": "550", "compiler": "onnxruntime", "compilerVersion": ORT_NEW}
    index["entries"] = [*superseded([e for e in index["entries"] if e is not new], new), new]
    store.put(keys.index, json.dumps(index).encode())

    catalog = Catalog.from_uri(str(tmp_path / "bucket"))
    view = read_model(catalog, MODEL)
    old = next(e for e in view.engines if e.entry.run_uid == "uid-old-stack")
    # Another compiler version, so another cell: only the index's mark makes it superseded.
    assert old.superseded_by is not None and old.superseded_by.run_uid == "uid-new-stack"
    text = model_page(view, catalog, "2026-12-02T00:00:00Z")
    article = text[text.index(f'id="{old.anchor}"') :]
    assert f"for {ORT_NEW}, driver 550; still the engine for its own stack" in Page(article).words


def test_an_engine_whose_build_autotuned_kernel_configs_says_so(tmp_path):
    from enginewright.api.contracts import TUNED_NOTE

    store = LocalStore(tmp_path / "bucket")
    tuned = TunedAtBuild(kernels=24, by_coordinate_descent=24, note=TUNED_NOTE)
    publish(store, MODEL, "NVIDIA-H100", ORT_NEW, "uid-tuned", "01", 2.0, tuned=tuned)
    none = TunedAtBuild(kernels=0, by_coordinate_descent=0, note="none")
    publish(store, MODEL, "NVIDIA-H200", ORT_NEW, "uid-none", "02", 1.5, tuned=none)
    write_site(Catalog.from_uri(str(tmp_path / "bucket")), tmp_path / "site")
    page = Page((tmp_path / "site" / site_page(MODEL)).read_text())
    said = "build choices kernel configs autotuned while building: 24 (24 by coordinate descent); the engine keeps"
    assert page.words.count(said) == 1 and page.words.count("build choices") == 1  # not for the build that kept none
