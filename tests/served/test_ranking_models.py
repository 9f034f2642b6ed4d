"""Cross-encoders a user brings as Hugging Face checkpoints (`kit add NAME --task text-ranking --from DIR`, nothing
else; tests.served.conftest.TEXT_RANKERS): a BERT and a DistilBERT, served on the real server beside the shipped
models. Their scores equal `transformers`' own text-classification pipeline in process on the same query-chunk pairs
(documents longer than the model's limit included, scored by their chunks' best or mean), concurrent pairs share the
pairs model's executions, bad input fails alone, and the door serves each on its route, OpenAI-style /v1/rerank and
TEI's /rerank, with the same scores; the client answers the same over gRPC, HTTP and the door."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from clients.ranking import TextRankingClient, pair_tensors
from kit.control.configs import REPO_ROOT
from kit.control.exports import export_python
from kit.control.ranking_task import names
from perf.sim.device import SIM
from samples.texts import MULTILINGUAL, sample_texts
from tests.served.conftest import TEXT_RANKERS
from tests.served.doors import call, client_on, running_door
from tests.served.statistics import counted, executions
from tests.served.text_specs import assert_placed_as_radar

OUTPUTS = ("SCORE", "CHUNK_SCORES", "CHUNK_SPANS", "TOKENS")
ATOL = 1e-4  # served (ONNX Runtime, pairs padded to length buckets, batched) against the pipeline on each pair alone
QUERY = "When does the committee meet to review the budget?"
DOCUMENTS = [
    "The committee will meet on Thursday to review the budget.",
    " ".join(sample_texts(count=3, min_chars=300, max_chars=700, seed=13)),  # several chunks under either model
    MULTILINGUAL[2],
    "Bread.",
]


def pytorch(name: str, checkpoints, spec) -> list[dict]:
    """Each document beside the query through `transformers`' pipeline (tests.checkpoints rank, in the export venv)."""
    command = [export_python(), "-m", "tests.checkpoints", "rank", "--model", str(checkpoints / TEXT_RANKERS[name][0])]
    command += ["--max-chars", str(spec.max_chars), "--aggregation", spec.aggregation]
    cases = json.dumps([{"query": QUERY, "documents": DOCUMENTS}])
    return json.loads(subprocess.run(command, cwd=REPO_ROOT, input=cases, capture_output=True, text=True, check=True).stdout)


@pytest.fixture(scope="module")
def references(brought_models, checkpoints) -> dict[str, list[dict]]:
    return {name: pytorch(name, checkpoints, brought_models[name]) for name in TEXT_RANKERS}


def ask(url: str, model: str, query: str, document: str) -> dict[str, np.ndarray]:
    client = grpcclient.InferenceServerClient(url)
    try:
        inputs = []
        for name, array in pair_tensors(query, document).items():
            tensor = grpcclient.InferInput(name, [1], "BYTES")
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        result = client.infer(model, inputs)
        return {name: result.as_numpy(name) for name in OUTPUTS}
    finally:
        client.close()


@pytest.mark.parametrize("model", sorted(TEXT_RANKERS))
def test_served_scores_equal_the_transformers_pipeline_on_the_same_pairs(model, server, references):
    assert any(len(want["spans"]) > 1 for want in references[model]), "no document of the check took several chunks"
    for document, want in zip(DOCUMENTS, references[model]):
        got = ask(server.options.grpc_url, model, QUERY, document)
        np.testing.assert_array_equal(got["CHUNK_SPANS"], np.array(want["spans"]).reshape(-1, 2))
        np.testing.assert_allclose(got["CHUNK_SCORES"], want["chunk_scores"], atol=ATOL, err_msg=f"{model}: {document[:40]}")
        np.testing.assert_allclose(got["SCORE"], [want["score"]], atol=ATOL, err_msg=f"{model}: {document[:40]}")
        assert got["TOKENS"][0] > len(want["spans"])


@pytest.mark.parametrize("model", sorted(TEXT_RANKERS))
def test_concurrent_pairs_share_executions_and_each_is_answered_as_alone(model, grpc_client, server, references):
    before = executions(grpc_client, f"{model}_pairs")
    sent = list(range(len(DOCUMENTS))) * 16
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda i: ask(server.options.grpc_url, model, QUERY, DOCUMENTS[i]), sent))
    pairs = f"{model}_pairs"
    requests, runs = counted(grpc_client, {pairs: before}, {pairs: len(sent)})[pairs]
    assert requests == len(sent) and runs < requests, f"{runs} executions for {requests} pairs: none carried more than one"
    for i, answer in zip(sent, answers):
        np.testing.assert_allclose(answer["SCORE"], [references[model][i]["score"]], atol=ATOL)


def test_an_empty_document_and_an_overlong_query_fail_alone_among_good_ones(server, references):
    url = server.options.grpc_url
    with ThreadPoolExecutor(10) as pool:
        good = [pool.submit(ask, url, "reranker", QUERY, document) for document in DOCUMENTS * 2]
        empty = pool.submit(ask, url, "reranker", QUERY, " \n ")
        overlong = pool.submit(ask, url, "reranker", "word " * 200, DOCUMENTS[0])
        for bad, words in ((empty, "DOCUMENT is empty"), (overlong, "QUERY takes")):
            with pytest.raises(InferenceServerException) as caught:
                bad.result()
            assert caught.value.status() == "StatusCode.INVALID_ARGUMENT" and words in caught.value.message()
        for i, answer in enumerate(good):
            np.testing.assert_allclose(answer.result()["SCORE"], [references["reranker"][i % 4]["score"]], atol=ATOL)


def test_the_door_serves_a_cross_encoder_on_its_route_openais_rerank_and_teis(door, server, brought_models, references, tmp_path):
    want = [reference["score"] for reference in references["reranker"]]
    own = call(door, "POST", brought_models["reranker"].door_route, json={"query": QUERY, "documents": DOCUMENTS})
    assert own.status == 200, own.data[:300]
    for i, (document, reference) in enumerate(zip(own.json()["documents"], references["reranker"])):
        assert document["index"] == i and [[c["start"], c["end"]] for c in document["chunks"]] == reference["spans"]
        assert document["score"] == pytest.approx(reference["score"], abs=ATOL)
    body = {"model": "reranker", "query": QUERY, "documents": DOCUMENTS, "top_n": 2}
    openai_style = call(door, "POST", "/v1/rerank", json=body).json()
    best = sorted(range(len(want)), key=lambda i: -want[i])
    assert [result["index"] for result in openai_style["results"]] == best[:2]
    for result in openai_style["results"]:
        assert result["relevance_score"] == pytest.approx(want[result["index"]], abs=ATOL)
        assert result["document"]["text"] == DOCUMENTS[result["index"]]
    assert openai_style["usage"]["total_tokens"] > 0 and openai_style["model"] == "reranker"
    with running_door(server.options.grpc_url, tmp_path / "door.log", "--tei", "reranker") as tei:
        ranks = call(tei, "POST", "/rerank", json={"query": QUERY, "texts": DOCUMENTS, "return_text": True}).json()
        assert [rank["index"] for rank in ranks] == best
        assert all(rank["score"] == pytest.approx(want[rank["index"]], abs=ATOL) and rank["text"] for rank in ranks)
        assert "text" not in call(tei, "POST", "/rerank", json={"query": QUERY, "texts": DOCUMENTS[:1]}).json()[0]
        tokens = call(tei, "POST", "/tokenize", json={"inputs": DOCUMENTS[0]}).json()[0]  # the pairs model's tokenizer
        assert [t["text"] for t in tokens][1:-1] == [DOCUMENTS[0][t["start"] : t["stop"]] for t in tokens][1:-1]
        assert [t["special"] for t in tokens] == [True] + [False] * (len(tokens) - 2) + [True]
        assert call(tei, "GET", "/info").json()["model_type"] == {
            "reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}
        }
    refused = call(door, "POST", "/v1/rerank", json={**body, "documents": [DOCUMENTS[0], "  "]})
    assert refused.status == 422 and refused.json()["error"]["param"].startswith("documents")


@pytest.mark.parametrize("protocol", ["grpc", "http", "door"])
def test_the_ranking_client_answers_on_every_transport(protocol, server, door, references):
    with client_on(protocol, server, door, TextRankingClient, "passage_ranker", route="/v1/passage-ranker") as client:
        ranked = client.rank(QUERY, DOCUMENTS)
    assert [document.score for document in ranked] == sorted((document.score for document in ranked), reverse=True)
    for document in ranked:
        want = references["passage_ranker"][document.index]
        assert document.score == pytest.approx(want["score"], abs=ATOL)
        assert [[start, end] for start, end, _ in document.chunks] == want["spans"]


@pytest.mark.parametrize("profile", ["cpu", "gpu", "gpu-embedded", SIM / "sim-h100.json"])
def test_a_cross_encoder_is_placed_in_every_profile_as_radar_is(profile, brought_models):
    """Built for each profile, a text-ranking spec's three models run where RADAR's run (the simulated device aside,
    which only RADAR's measured curve can drive), its graph or checkpoint reading token types where the checkpoint's
    tokenizer makes them, and bounded as RADAR's graph is."""
    classifiers = assert_placed_as_radar(profile, brought_models, sorted(TEXT_RANKERS), names, "pairs")
    for model, classifier in classifiers.items():
        assert [t.name for t in classifier.input][2:] == (["token_type_ids"] if model == "reranker" else [])
