// The official openai npm client against temper serve. Run by internal/serve's TestOpenAINodeClient
// (TEMPER_NODE_TEST=1 go test -run TestOpenAINodeClient ./internal/serve/), which starts two servers:
// TEMPER_BASE_URL serves a tiny random byte-level model (TEMPER_MODEL), TEMPER_TOOLS_BASE_URL a
// scripted engine behind the real Qwen3 tokenizer and chat template that writes a <tool_call>
// (TEMPER_TOOLS_MODEL).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.TEMPER_BASE_URL, apiKey: 'unused', maxRetries: 0 });
const tools = new OpenAI({ baseURL: process.env.TEMPER_TOOLS_BASE_URL, apiKey: 'unused', maxRetries: 0 });
const model = process.env.TEMPER_MODEL;
const toolsModel = process.env.TEMPER_TOOLS_MODEL;

const chat = (extra = {}) => ({
  model,
  messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hi.' }],
  seed: 7, max_tokens: 24, temperature: 1, ...extra,
});

const tests = {
  async models() {
    const page = await client.models.list();
    assert.deepEqual(page.data.map((m) => m.id), [model]);
  },

  async 'chat, streaming and usage'() {
    const whole = await client.chat.completions.create(chat());
    const c = whole.choices[0];
    assert.equal(c.message.role, 'assistant');
    assert.ok(['stop', 'length'].includes(c.finish_reason), c.finish_reason);
    assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);
    const stream = await client.chat.completions.create(chat({ stream: true, stream_options: { include_usage: true } }));
    let text = '';
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        text += ch.delta.content ?? '';
        finish = ch.finish_reason ?? finish;
      }
    }
    assert.ok(chunks > 2, `${chunks} chunks`);
    assert.equal(text, c.message.content);
    assert.equal(finish, c.finish_reason);
    assert.deepEqual(usage, whole.usage);
  },

  async logprobs() {
    const out = await client.chat.completions.create(chat({ logprobs: true, top_logprobs: 2 }));
    const lps = out.choices[0].logprobs.content;
    assert.ok(lps.length > 0);
    for (const e of lps) {
      assert.ok(e.logprob <= 0);
      assert.equal(e.top_logprobs.length, 2);
      assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
      assert.ok(e.logprob <= e.top_logprobs[0].logprob + 1e-6);
    }
  },

  async n() {
    const one = await client.chat.completions.create(chat());
    const three = await client.chat.completions.create(chat({ n: 3 }));
    assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
    assert.equal(three.choices[0].message.content, one.choices[0].message.content);
    assert.ok(new Set(three.choices.map((c) => c.message.content)).size > 1);
  },

  async 'seed reproducibility among concurrent requests'() {
    const req = chat({ messages: [{ role: 'user', content: 'Count to five.' }], seed: 11, max_tokens: 40 });
    const alone = await client.chat.completions.create(req);
    const all = await Promise.all(Array.from({ length: 6 }, (_, i) => client.chat.completions.create(
      i % 2 === 0 ? req : chat({ messages: [{ role: 'user', content: 'Other '.repeat(i) }], seed: 100 + i, max_tokens: 10 + 7 * i }))));
    for (let i = 0; i < 6; i += 2) assert.equal(all[i].choices[0].message.content, alone.choices[0].message.content);
    const other = await client.chat.completions.create({ ...req, seed: 12 });
    assert.notEqual(other.choices[0].message.content, alone.choices[0].message.content);
  },

  async completions() {
    const out = await client.completions.create({ model, prompt: '12+34=', max_tokens: 8, seed: 5, logprobs: 1 });
    assert.equal(typeof out.choices[0].text, 'string');
    assert.equal(out.choices[0].logprobs.tokens.length, out.choices[0].logprobs.token_logprobs.length);
  },

  async 'tool calls'() {
    const req = {
      model: toolsModel, seed: 1,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', description: 'Current weather',
        parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    };
    const out = await tools.chat.completions.create(req);
    const c = out.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.tool_calls.length, 1);
    assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(c.message.tool_calls[0].function.arguments), { city: 'Paris', unit: 'celsius' });
    // Streamed: the call arrives as tool_calls deltas, never as content.
    const stream = await tools.chat.completions.create({ ...req, stream: true });
    let content = '';
    const calls = [];
    let finish = null;
    for await (const chunk of stream) {
      for (const ch of chunk.choices) {
        content += ch.delta.content ?? '';
        for (const tc of ch.delta.tool_calls ?? []) calls.push(tc);
        finish = ch.finish_reason ?? finish;
      }
    }
    assert.equal(content, 'Let me check.');
    assert.equal(finish, 'tool_calls');
    assert.equal(calls[0].function.name, 'get_weather');
    // The result goes back as a tool message.
    await tools.chat.completions.create({ ...req, messages: [...req.messages, c.message,
      { role: 'tool', tool_call_id: c.message.tool_calls[0].id, content: '{"temp": 21}' }] });
  },

  async errors() {
    await assert.rejects(client.chat.completions.create(chat({ model: 'gpt-4o' })),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found');
    await assert.rejects(client.chat.completions.create(chat({ top_k: 5 })),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'top_k' && e.code === 'unknown_parameter');
    await assert.rejects(client.chat.completions.create(chat({ max_tokens: 100000 })),
      (e) => e.status === 413 && e.code === 'context_length_exceeded');
    await assert.rejects(tools.chat.completions.create({ model: toolsModel, messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'required' }),
      (e) => e.status === 400 && e.param === 'tool_choice');
  },
};

let failed = 0;
for (const [name, fn] of Object.entries(tests)) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}
const version = JSON.parse(readFileSync(new URL('./node_modules/openai/package.json', import.meta.url))).version;
console.log(`${Object.keys(tests).length - failed} of ${Object.keys(tests).length} passed (openai ${version})`);
process.exit(failed ? 1 : 0);
