"""Runs openai-node.test.mjs (the official npm `openai@6` client) against a fresh `minfer serve`."""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def test_openai_node_client(server):
    modules = os.environ.get("OPENAI_NODE_MODULES", os.path.join(HERE, "../../.deps/npm-openai/node_modules"))
    assert os.path.isdir(os.path.join(modules, "openai")), f"npm openai@6 missing in {modules} (scripts/setup.sh)"
    env = dict(os.environ, MINFER_URL=server.url, OPENAI_NODE_MODULES=os.path.abspath(modules))
    r = subprocess.run(["node", "--test", "--test-reporter=spec", os.path.join(HERE, "openai-node.test.mjs")],
                       env=env, capture_output=True, text=True, timeout=400)
    print(r.stdout[-6000:])
    print(r.stderr[-3000:])
    assert r.returncode == 0, "node client tests failed"
    assert "# fail 0" in r.stdout or "ℹ fail 0" in r.stdout
