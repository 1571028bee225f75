"""`minfer MODEL PROMPT --grammar / --grammar-file` (one-shot, --cnv, with speculative decoding):
the output matches the grammar (checked by Python, not by minfer), bad grammars exit 1 with
line:column, and `minfer grammar` reports like llama.cpp's gbnf-validator."""
import json
import os
import subprocess
import tempfile

MINFER = os.environ.get("MINFER_BIN", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")
JSON_GBNF = os.path.join(os.environ.get("MINFER_LLAMA_SRC", ""), "grammars", "json.gbnf")


def run(*args, stdin=None):
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    assert os.path.isfile(MODEL), f"MINFER_SMOLLM2={MODEL!r} is missing (scripts/setup.sh fetches it)"
    return subprocess.run([MINFER, *args], capture_output=True, text=True, input=stdin, timeout=300)


def test_choice_grammar_greedy_and_sampled():
    for sampling in (["--greedy"], ["--temp", "1.0", "--seed", "3"], ["--temp", "1.5", "--seed", "11", "--top-k", "0"]):
        r = run(MODEL, "Is the sky blue? Answer yes or no.", "-n", "16", "-t", "2", *sampling,
                "--grammar", 'root ::= ("yes" | "no" | "maybe") "."')
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() in ("yes.", "no.", "maybe."), (sampling, r.stdout)
        assert "stop: eog" in r.stderr  # the grammar completes, then only end-of-generation is allowed


def test_json_grammar_output_parses():
    assert os.path.isfile(JSON_GBNF), JSON_GBNF
    prompt = "Describe a cat as a JSON object with fields name, age and color."
    for sampling in (["--greedy"], ["--temp", "0.9", "--seed", "5"], ["--temp", "1.2", "--seed", "8"]):
        for spec in ([], ["--spec-ngram"]):
            r = run(MODEL, prompt, "-n", "120", "-t", "2", *sampling, *spec, "--grammar-file", JSON_GBNF)
            assert r.returncode == 0, r.stderr
            if "stop: eog" in r.stderr:
                assert isinstance(json.loads(r.stdout), dict), r.stdout
            else:  # cut by -n: still a prefix the grammar accepts
                with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                    json.dump([r.stdout], f)
                v = run("grammar", JSON_GBNF, "--texts-json", f.name, "--json")
                os.unlink(f.name)
                assert json.loads(v.stdout) == ["incomplete"], (r.stdout, v.stdout)
    # Speculative decoding leaves a constrained greedy output unchanged.
    a = run(MODEL, prompt, "-n", "80", "-t", "2", "--greedy", "--grammar-file", JSON_GBNF)
    b = run(MODEL, prompt, "-n", "80", "-t", "2", "--greedy", "--grammar-file", JSON_GBNF, "--spec-ngram", "--spec-draft", MODEL)
    assert a.returncode == 0 and b.returncode == 0 and a.stdout == b.stdout


def test_conversation_replies_follow_the_grammar():
    r = run("--cnv", MODEL, "-n", "16", "-t", "2", "--greedy", "--grammar", 'root ::= [0-9]+',
            stdin="How many legs has a cat?\nAnd a bird?\n")
    assert r.returncode == 0, r.stderr
    replies = [line.strip() for line in r.stdout.splitlines() if line.strip() and not line.startswith(">")]
    assert replies, r.stdout
    digits = [x for x in replies if x.isdigit()]
    assert len(digits) >= 2, r.stdout


def test_bad_grammars_exit_1_with_the_place():
    r = run(MODEL, "hi", "-n", "4", "--grammar", 'root ::= "a" | b')
    assert r.returncode == 1 and "--grammar: gbnf 1:16: undefined rule 'b'" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-n", "4", "--grammar-file", "/nonexistent.gbnf")
    assert r.returncode == 1 and "/nonexistent.gbnf" in r.stderr
    r = run(MODEL, "hi", "--grammar", "root ::= \"a\"", "--grammar-file", JSON_GBNF)
    assert r.returncode != 0 and "excludes" in r.stderr, r.stderr
    with tempfile.NamedTemporaryFile("w", suffix=".gbnf", delete=False) as f:
        f.write("root ::= x\nx ::= x \"y\"\n")
    r = run("grammar", f.name)
    os.unlink(f.name)
    assert r.returncode == 1 and "left recursion in rule 'x'" in r.stderr


def test_grammar_command_verdicts():
    r = run("grammar", JSON_GBNF, '{"a": [1, 2]}', '{"a": [1,', '{"a" 1}')
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["match", "incomplete", "no match at byte 5"]
    r = run("grammar", JSON_GBNF)
    assert r.returncode == 0 and r.stdout.startswith("grammar ok: ")


SCHEMA = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}, "confidence": {"type": "integer", "minimum": 0, "maximum": 100}},
          "required": ["answer", "confidence"], "additionalProperties": False}


def check_schema_output(text):
    doc = json.loads(text)
    assert set(doc) == {"answer", "confidence"} and doc["answer"] in ("yes", "no"), doc
    assert isinstance(doc["confidence"], int) and 0 <= doc["confidence"] <= 100, doc


def test_json_schema_one_shot_and_conversation():
    for sampling in (["--greedy"], ["--temp", "1.0", "--seed", "4"]):
        r = run(MODEL, "Is the sky blue? Reply in JSON.", "-n", "60", "-t", "2", *sampling, "--json-schema", json.dumps(SCHEMA))
        assert r.returncode == 0 and "stop: eog" in r.stderr, r.stderr
        check_schema_output(r.stdout)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(SCHEMA, f)
    r = run(MODEL, "--cnv", "-n", "60", "-t", "2", "--greedy", "--json-schema-file", f.name,
            stdin="Is the sky blue?\nIs grass red?\n")
    os.unlink(f.name)
    assert r.returncode == 0, r.stderr
    dec, at, replies = json.JSONDecoder(), 0, []  # replies may span lines: read JSON documents in turn
    while (start := r.stdout.find("{", at)) >= 0:
        doc, at = dec.raw_decode(r.stdout, start)
        replies.append(r.stdout[start:at])
    assert len(replies) == 2, r.stdout
    for text in replies:
        check_schema_output(text)


def test_bad_schemas_exit_1_with_the_pointer():
    r = run(MODEL, "hi", "-n", "4", "--json-schema", '{"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}')
    assert r.returncode == 1 and "--json-schema: json-schema #/properties/n: unsupported keyword 'multipleOf'" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-n", "4", "--json-schema", "{not json")
    assert r.returncode == 1 and "not valid JSON" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-n", "4", "--json-schema-file", "/nonexistent.json")
    assert r.returncode == 1 and "/nonexistent.json" in r.stderr, r.stderr
    r = run(MODEL, "hi", "--grammar", 'root ::= "a"', "--json-schema", "{}")
    assert r.returncode != 0 and "excludes" in r.stderr, r.stderr
