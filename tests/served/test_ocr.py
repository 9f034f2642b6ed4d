"""Served `ocr` against RapidOCR's own pipeline (in its RapidOCR-exact sizing mode, its networks over BLS, on a
server of the test's own), against the known text of generated pages (with the committed sizing and the CPU
profile's in-process networks), and under load, where the recogniser batches crops of concurrent images."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from rapidocr_onnxruntime import RapidOCR

from clients.ocr import OcrClient
from kit.control.configs import set_parameter
from samples.images import document, health_code
from tests.ocr_cases import character_accuracy, documents, health_codes, read_all, squash
from tests.served.reliability import own_server

OCR_MODELS = ("ocr", "ocr_det", "ocr_cls", "ocr_rec")

# RapidOCR pads each recogniser batch of 6 crops to its widest; here each crop goes to a width
# bucket. Padding shifts the recogniser's output a little, and RapidOCR disagrees with itself as
# much: between its batch sizes 6 (default) and 1, on these images, it reads a space in 5 of 81
# lines in one and not the other, its scores move by up to 0.058, and on low-confidence lines that
# the detector finds inside QR codes it picks a different near-tie character ('可蛋' / '可蜜').
# So a line matches when its text (spaces aside) is what RapidOCR reads at batch size 6 or 1.
# Boxes do not depend on the recogniser: equal to the pixel (measured 0 px).
SCORE_TOL = 0.06
MEAN_SCORE_TOL = 0.01
BOX_TOL_PX = 3
# Measured 0.9965 over the 10 pages (character accuracy, spaces ignored).
ACCURACY_FLOOR = 0.99


@pytest.fixture(scope="module")
def pages():
    return documents()


@pytest.fixture(scope="module")
def images(pages):
    return [p.data for p in pages] + [s.data for s in health_codes(per_color=1)]


@pytest.fixture(scope="module")
def served(server, images):
    return read_all(OcrClient, server.options.grpc_url, images)


@pytest.fixture(scope="module")
def bls_server(tmp_path_factory):
    """The same repository with `ocr` in RapidOCR's mode (its detector sizing, crops cut as detected) and its
    networks called over BLS, as the GPU profiles call them (the CPU profile's run in the entry's process)."""

    def rapidocr_mode(config):
        set_parameter(config, "det_sizing", "rapidocr")
        set_parameter(config, "crop_pad", 0)
        set_parameter(config, "engines", "bls")

    exact = {"ocr": rapidocr_mode}
    with own_server(tmp_path_factory.mktemp("ocr-rapidocr"), patches=exact, models=OCR_MODELS) as server:
        yield server


@pytest.fixture(scope="module")
def served_rapidocr_mode(bls_server, images):
    return read_all(OcrClient, bls_server.options.grpc_url, images)


def test_served_lines_match_rapidocr_on_every_generated_image(images, served_rapidocr_mode):
    served = served_rapidocr_mode
    reference, unbatched = RapidOCR(), RapidOCR(rec_batch_num=1)
    exact, diffs = 0, []
    for data, lines in zip(images, served):
        expected = reference(data)[0] or []
        texts = [squash(line.text) for line in lines]
        if texts != [squash(e[1]) for e in expected]:
            alone = unbatched(data)[0] or []
            assert len(alone) == len(expected) == len(lines)
            for text, one, other in zip(texts, expected, alone):
                assert text in (squash(one[1]), squash(other[1]))
        for line, (box, text, score) in zip(lines, expected):
            exact += line.text == text
            diffs.append(abs(line.score - score))
            np.testing.assert_allclose(np.array(line.box), np.array(box), atol=BOX_TOL_PX)
    print(
        f"\nparity: {len(diffs)} lines in {len(images)} images, every line as RapidOCR reads it, {exact} identical "
        f"to its default including spaces; score diff mean {np.mean(diffs):.4f} max {np.max(diffs):.4f}"
    )
    assert max(diffs) <= SCORE_TOL and np.mean(diffs) <= MEAN_SCORE_TOL


def test_character_accuracy_on_pages_with_known_text(pages, served):
    accuracy = character_accuracy([[line.text for line in lines] for lines in served[: len(pages)]], [p.lines for p in pages])
    print(f"\ncharacter accuracy: {accuracy:.4f} over {len(pages)} pages")
    assert accuracy >= ACCURACY_FLOOR


def test_both_protocols_and_base64_json_give_the_same_lines(url, protocol, served, images):
    client = OcrClient(url, protocol)
    assert client.read(images[0]) == served[0]
    client.close()
    if protocol == "http":
        rest = OcrClient(url, "http", base64_json=True)
        lines = rest.read(images[0])
        assert [(l.text, l.box) for l in lines] == [(l.text, l.box) for l in served[0]]
        np.testing.assert_allclose([l.score for l in lines], [l.score for l in served[0]], rtol=1e-6)


def rec_stats(grpc_client):
    stats = grpc_client.get_inference_statistics("ocr_rec").model_stats[0]
    sizes = {b.batch_size: b.compute_infer.count for b in stats.batch_stats}
    return stats.inference_stats.success.count, stats.execution_count, sizes


def test_sixteen_concurrent_images_of_different_sizes_are_answered_and_batched(bls_server):
    sizes = [540, 600, 720, 960, 1080, 1200, 1440, 1600]
    images = [document(200 + i, width=w).data for i, w in enumerate(sizes)]
    images += [health_code(300 + i, ["green", "yellow", "red", None][i % 4], width=w).data for i, w in enumerate(sizes)]
    grpc_client = grpcclient.InferenceServerClient(bls_server.options.grpc_url)
    client = OcrClient(bls_server.options.grpc_url, "grpc", concurrency=16)
    alone = [client.read(data) for data in images]
    requests_before, executions_before, _ = rec_stats(grpc_client)
    together = client.read_many(images)
    requests_after, executions_after, batch_sizes = rec_stats(grpc_client)
    client.close()
    grpc_client.close()
    for one, many in zip(alone, together):
        assert not isinstance(many, Exception), many
        assert [l.text for l in many] == [l.text for l in one]
        assert [l.box for l in many] == [l.box for l in one]
        np.testing.assert_allclose([l.score for l in many], [l.score for l in one], atol=1e-4)
    requests, executions = requests_after - requests_before, executions_after - executions_before
    print(
        f"\nocr_rec: {requests} requests (one per image and width bucket) in {executions} executions; "
        f"executions by batch size {dict(sorted(batch_sizes.items()))}"
    )
    assert max(batch_sizes) > 1
