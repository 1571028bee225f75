"""Vertex AI's prediction protocol on `minfer serve` (AIP_MODE=PREDICTION): each instance of a
/predict request is answered as its route answers it alone (chat, completion past the first
second, so chunked inside, tokenize, embeddings), errors stay per instance, the health route
needs no key while /predict does, and without AIP_MODE there is no /predict."""
import json
import urllib.request

import pytest

from conftest import ServerProcess, post_json

KEY = {"Authorization": "Bearer vk"}


def post(url, path, body, headers=None):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def srv():
    s = ServerProcess("--parallel", "2", "-c", "2048", "-t", "2", "--temp", "0", "--api-key", "vk",
                      env={"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": "{port}", "AIP_HEALTH_ROUTE": "/vertex-health"})
    yield s
    assert s.stop() == 0


def test_instances_are_answered_as_their_routes(srv):
    chat = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 12}
    # Past its first second a non-streamed completion is written chunked: it must come whole.
    long = {"prompt": "Once upon a time", "n_predict": 160, "ignore_eos": True}
    st, body = post(srv.url, "/predict", {"instances": [
        {"@requestFormat": "chatCompletions", **chat, "stream": True},  # a stream is answered whole
        {"@requestFormat": "/tokenize", "content": "Hello world"},
        {"@requestFormat": "completion", **long},
        {"@requestFormat": "embeddings", "input": "Hello"}]}, KEY)
    assert st == 200 and len(body["predictions"]) == 4, body
    p_chat, p_tok, p_long, p_emb = body["predictions"]
    assert p_chat["choices"][0]["message"]["content"] == post(srv.url, "/v1/chat/completions", chat, KEY)[1]["choices"][0]["message"]["content"]
    assert p_tok == post(srv.url, "/tokenize", {"content": "Hello world"}, KEY)[1]
    alone = post(srv.url, "/completion", long, KEY)[1]
    assert p_long["content"] == alone["content"] and p_long["tokens_predicted"] == 160
    # "embeddings" is /embeddings (llama-server's shape), the first of the paths it names in sorted order.
    assert p_emb == post(srv.url, "/embeddings", {"input": "Hello"}, KEY)[1] and len(p_emb[0]["embedding"][0]) == 576


def test_errors_stay_per_instance(srv):
    st, body = post(srv.url, "/predict", {"instances": [
        {"@requestFormat": "tokenize", "content": "ok"}, {"content": "no format"}, {"@requestFormat": "nosuchRoute"},
        {"@requestFormat": "predict", "instances": []}, {"@requestFormat": "chatCompletions", "messages": []}]}, KEY)
    assert st == 200
    ok, missing, unknown, itself, bad = body["predictions"]
    assert ok["tokens"]
    assert "@requestFormat" in missing["error"]["message"] and "nosuchRoute" in unknown["error"]["message"]
    assert "predict" in itself["error"]["message"]
    assert bad["error"]["param"] == "messages"
    assert post(srv.url, "/predict", {"instance": []}, KEY)[0] == 400
    assert post(srv.url, "/predict", {"instances": [{}] * 129}, KEY)[0] == 400


def test_health_route_and_key(srv):
    with urllib.request.urlopen(srv.url + "/vertex-health", timeout=10) as r:
        assert r.status == 200 and json.loads(r.read())["status"] == "ok"
    assert post(srv.url, "/predict", {"instances": []})[0] == 401


def test_off_without_aip_mode():
    s = ServerProcess("--parallel", "1", "-c", "512", "-t", "1")
    try:
        assert post_json(s.url, "/predict", {"instances": []})[0] == 404
    finally:
        assert s.stop() == 0
