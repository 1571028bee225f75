// `minfer serve` driven by the official `openai` npm package (v6). Run by test_openai_node.py,
// which starts the server: MINFER_URL is its base URL, OPENAI_NODE_MODULES where npm put openai.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(process.env.OPENAI_NODE_MODULES + '/');
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
const pkg = JSON.parse(readFileSync(process.env.OPENAI_NODE_MODULES + '/openai/package.json', 'utf8'));
assert.equal(pkg.version.split('.')[0], '6', `expected openai@6, found ${pkg.version}`);

const client = new OpenAI({ baseURL: process.env.MINFER_URL + '/v1', apiKey: 'none', maxRetries: 0 });
const MSG = [{ role: 'user', content: 'What is the capital of France?' }];
const PROMPTS = ['What is the capital of France?', 'Name three colors.', 'Write a haiku about the sea.', 'What is 2 + 2?'];

const greedy = (content, extra = {}) =>
  client.chat.completions.create({ model: 'smollm2', messages: [{ role: 'user', content }], temperature: 0, max_tokens: 20, ...extra });

async function streamText(content, extra = {}) {
  const s = await client.chat.completions.create({
    model: 'smollm2', messages: [{ role: 'user', content }], temperature: 0, max_tokens: 20, stream: true, ...extra,
  });
  const chunks = [];
  for await (const c of s) chunks.push(c);
  return chunks;
}

test('models', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ['smollm2']);
});

test('non-stream chat', async () => {
  const r = await greedy(PROMPTS[0], { max_tokens: 12 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('stream equals non-stream, role first, one id, usage chunk', async () => {
  const solo = await greedy(PROMPTS[1]);
  const chunks = await streamText(PROMPTS[1], { stream_options: { include_usage: true } });
  assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const text = chunks.filter((c) => c.choices.length).map((c) => c.choices[0].delta.content ?? '').join('');
  assert.equal(text, solo.choices[0].message.content);
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, solo.usage.completion_tokens);
});

test('max_tokens gives finish_reason length', async () => {
  const r = await greedy(PROMPTS[2], { max_tokens: 4 });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 4);
});

test('stop string cuts the reply', async () => {
  const full = (await greedy(PROMPTS[0], { max_tokens: 24 })).choices[0].message.content;
  const words = full.split(/\s+/).filter(Boolean);
  assert.ok(words.length >= 4, full);
  const stop = ' ' + words[2];
  const r = await greedy(PROMPTS[0], { max_tokens: 24, stop: [stop] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].message.content, full.slice(0, full.indexOf(stop)));
});

test('logprobs', async () => {
  const r = await greedy(PROMPTS[3], { max_tokens: 6, logprobs: true, top_logprobs: 2 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 2);
    assert.equal(t.top_logprobs[0].token, t.token);
  }
});

test('errors map to the client error classes', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'smollm2', messages: MSG, temperature: 'hot' }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature');
  await assert.rejects(
    client.chat.completions.create({ model: 'smollm2', messages: [{ role: 'user', content: 'word '.repeat(1100) }] }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
  await assert.rejects(client.get('/nope'), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
});

test('concurrent streams equal their solo results', async () => {
  const solo = [];
  for (const p of PROMPTS) solo.push((await greedy(p)).choices[0].message.content);
  const together = await Promise.all(PROMPTS.map(async (p) => {
    const chunks = await streamText(p);
    return chunks.filter((c) => c.choices.length).map((c) => c.choices[0].delta.content ?? '').join('');
  }));
  assert.deepEqual(together, solo);
});

test('abort mid-stream frees the slot', async () => {
  const metric = async (name) => {
    const text = await (await fetch(process.env.MINFER_URL + '/metrics')).text();
    const line = text.split('\n').find((l) => l.startsWith(name + ' '));
    return Number(line.split(' ')[1]);
  };
  const before = await metric('minfer_jobs_cancelled_total');
  const ac = new AbortController();
  const s = await client.completions.create(
    { model: 'smollm2', prompt: 'Once upon a time', max_tokens: 800, temperature: 0, stream: true,
      logit_bias: { 0: -100, 1: -100, 2: -100 } },
    { signal: ac.signal });
  let n = 0;
  try {  // openai@6 ends the iteration (or throws an AbortError) once the signal fires
    for await (const _ of s) if (++n === 3) ac.abort();
  } catch (e) {
    assert.ok(e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError, String(e));
  }
  assert.ok(n < 20, `the stream went on after abort (${n} chunks)`);
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline && ((await metric('minfer_jobs_cancelled_total')) === before || (await metric('minfer_slots_busy')) !== 0))
    await new Promise((r) => setTimeout(r, 50));
  assert.equal(await metric('minfer_jobs_cancelled_total'), before + 1);
  assert.equal(await metric('minfer_slots_busy'), 0);
});

// Tools: the client's own stream accumulator (chat.completions.stream -> finalChatCompletion)
// must rebuild from delta.tool_calls the same call the non-streamed reply has.
const WEATHER = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];

test('tool call: required, stream accumulated by the client equals non-stream', async () => {
  const body = {
    model: 'smollm2', messages: [{ role: 'user', content: 'What is the weather in Paris?' }], temperature: 0,
    max_tokens: 40, tools: WEATHER, tool_choice: 'required',
  };
  const r = await client.chat.completions.create(body);
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const calls = r.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].type, 'function');
  assert.equal(calls[0].function.name, 'get_weather');
  assert.equal(typeof JSON.parse(calls[0].function.arguments).city, 'string');
  assert.ok(calls[0].id.length > 0);
  const stream = client.chat.completions.stream(body);
  const deltas = [];
  stream.on('chunk', (c) => deltas.push(c));
  const fin = await stream.finalChatCompletion();
  const got = fin.choices[0].message.tool_calls;
  assert.equal(got.length, 1);
  assert.equal(got[0].function.name, 'get_weather');
  assert.equal(got[0].function.arguments, calls[0].function.arguments);
  assert.equal(fin.choices[0].finish_reason, 'tool_calls');
  assert.ok(deltas.every((c) => !c.choices.length || !c.choices[0].delta.content), 'no content in a tool-call stream');
});

test('tool call: a named tool_choice and the reply to a tool result', async () => {
  const first = await client.chat.completions.create({
    model: 'smollm2', messages: [{ role: 'user', content: 'Weather in Rome?' }], temperature: 0, max_tokens: 40,
    tools: WEATHER, tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const call = first.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  const second = await client.chat.completions.create({
    model: 'smollm2', temperature: 0, max_tokens: 16, tools: WEATHER, tool_choice: 'none',
    messages: [{ role: 'user', content: 'Weather in Rome?' }, first.choices[0].message,
      { role: 'tool', tool_call_id: call.id, content: '25 C and sunny' }],
  });
  assert.equal(second.choices[0].message.tool_calls, undefined);
  assert.ok(second.choices[0].message.content.length > 0);
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
});

test('tool call: bad tools are a 400 naming the field', async () => {
  await assert.rejects(client.chat.completions.create({
    model: 'smollm2', messages: MSG, tools: [{ type: 'function', function: { name: 'bad name!' } }],
  }), (e) => e.status === 400 && e.error?.param === 'tools[0].function.name');
});

test('responses: create, and the stream helper rebuilds the same response', async () => {
  const args = { model: 'smollm2', instructions: 'Answer briefly.', input: PROMPTS[0], max_output_tokens: 16, temperature: 0 };
  const r = await client.responses.create(args);
  assert.ok(r.id.startsWith('resp_'));
  assert.equal(r.output[0].type, 'message');
  const chat = await client.chat.completions.create({
    model: 'smollm2', temperature: 0, max_tokens: 16,
    messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: PROMPTS[0] }],
  });
  assert.equal(r.output_text, chat.choices[0].message.content);
  const stream = client.responses.stream(args);
  let deltas = '';
  for await (const ev of stream) if (ev.type === 'response.output_text.delta') deltas += ev.delta;
  const final = await stream.finalResponse();
  assert.equal(deltas, r.output_text);
  assert.equal(final.output_text, r.output_text);
  assert.equal(final.usage.output_tokens, r.usage.output_tokens);
});
