"""Runs openai-node.test.mjs (the official npm `openai@6` client) against a fresh `minfer serve`."""
from conftest import run_node_test


def test_openai_node_client(server):
    run_node_test("openai-node.test.mjs", server.url, "openai", "OPENAI_NODE_MODULES")
