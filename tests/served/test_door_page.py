"""The door's page in a real headless browser (Debian's chromium, driven by playwright; no browser is
downloaded): a pasted text comes back as chunks highlighted by their scores, equal to the API's answer;
a dropped health-code screenshot comes back with a box drawn over each read line and the code's card.
Screenshots are saved in the test's folder and must show something (not one flat colour)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from PIL import Image

from clients.door import DoorClient
from samples.images import document, health_code
from samples.renderings import headless_chromium
from samples.texts import sample_texts
from tests.served.doors import running_door

DROP = """async (data) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], "code.png", { type: "image/png" }));
  return transfer;
}"""


@pytest.fixture(scope="module")
def page(server, tmp_path_factory):
    root = tmp_path_factory.mktemp("door-page")
    with running_door(server.options.grpc_url, root / "door.log") as door, headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(door.url)
        page.door = door
        yield page


def assert_not_flat(path: Path, colours: int = 50) -> None:
    with Image.open(path) as shot:
        assert shot.width >= 800 and len(set(shot.convert("RGB").get_flattened_data())) >= colours, (
            f"{path} shows next to nothing"
        )


def test_pasted_text_shows_the_apis_chunks_and_scores(page, tmp_path):
    text = sample_texts(1, 900, 1200, seed=81)[0]
    expected = DoorClient(page.door.url).classify(text)
    page.fill("#text", text)
    page.click("#score-text")
    page.wait_for_selector(".chunk")
    chunks = page.locator(".chunk")
    assert chunks.count() == len(expected.chunk_scores) > 1
    assert [float(s) for s in chunks.evaluate_all("nodes => nodes.map((n) => n.dataset.score)")] == pytest.approx(
        expected.chunk_scores, abs=1e-5
    )
    assert "".join(chunks.all_text_contents()) == "".join(text[s:e] for s, e in expected.chunk_spans)
    assert float(page.get_attribute("#overall", "data-score")) == pytest.approx(expected.score, abs=1e-5)
    page.screenshot(path=tmp_path / "text.png", full_page=True)
    assert_not_flat(tmp_path / "text.png")


def drop(page, data: bytes) -> None:
    transfer = page.evaluate_handle(DROP, base64.b64encode(data).decode())
    page.dispatch_event("#drop", "drop", {"dataTransfer": transfer})


def test_a_dropped_document_shows_its_boxes_and_is_not_sent_to_the_health_code_reader(page, tmp_path):
    scan = document(83, width=640, lines=3)
    lines = DoorClient(page.door.url).read(scan.data)
    page.goto(page.door.url)
    posted = []
    page.on("request", lambda request: posted.append(request.url) if request.method == "POST" else None)
    assert page.is_checked("#kind-document"), "a document is what the page reads by default"
    drop(page, scan.data)
    assert lines, "the scan has text to box"
    page.locator("#overlay polygon").nth(len(lines) - 1).wait_for(state="attached")
    assert page.locator("#overlay polygon").count() == len(lines)
    page.wait_for_timeout(300)  # a second request, if one were sent, would have left by now
    assert [url.removeprefix(page.door.url) for url in posted] == ["/v1/ocr"]
    assert page.is_hidden("#card") and page.is_hidden("#no-code") and page.is_hidden("#error")
    page.check("#kind-health-code")
    drop(page, scan.data)
    page.wait_for_selector("#no-code:not([hidden])")
    assert page.is_hidden("#card"), "no empty card under a document"
    assert sorted(url.removeprefix(page.door.url) for url in posted[1:]) == ["/v1/health-code", "/v1/ocr"]


def test_dropped_health_code_shows_its_boxes_and_the_health_code_card(page, tmp_path):
    shot = health_code(82, "green")
    client = DoorClient(page.door.url)
    lines, card = client.read(shot.data), client.health_code(shot.data)
    page.goto(page.door.url)
    assert page.is_hidden("#card") and page.is_hidden("#stage"), "nothing to show before an image is dropped"
    page.check("#kind-health-code")
    drop(page, shot.data)
    page.wait_for_selector("#card[data-color]:not([hidden])")
    page.wait_for_function(f"document.querySelectorAll('#overlay polygon').length === {len(lines)}")
    assert page.get_attribute("#card", "data-color") == card["color"] == "green"
    assert page.inner_text("#card-name") == card["fields"]["name"]
    assert page.locator("#lines li").count() == len(lines) > 0
    assert page.is_hidden("#error")
    page.screenshot(path=tmp_path / "image.png", full_page=True)
    assert_not_flat(tmp_path / "image.png")
    with Image.open(tmp_path / "image.png") as screenshot:
        assert (0, 168, 84) in set(screenshot.convert("RGB").get_flattened_data()), "the card's green is not on the screen"


def test_the_api_docs_page_renders_every_route_offline(page, tmp_path):
    page.goto(f"{page.door.url}/docs")
    page.wait_for_selector(".opblock-summary-path", timeout=20_000)
    paths = set(page.locator(".opblock-summary-path").all_inner_texts())
    assert {"/v1/radar", "/v1/ocr", "/v1/health-code", "/v1/resnet50"} <= {p.strip() for p in paths}, paths
    page.screenshot(path=tmp_path / "docs.png", full_page=True)
    assert_not_flat(tmp_path / "docs.png")
    page.goto(page.door.url)
