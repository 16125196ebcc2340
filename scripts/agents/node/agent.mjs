// A tool-using agent for Temper's agent gateway on the official openai npm client (docs/agent-gateway.md).
//
// Temper starts it once per episode in the code sandbox, with the episode on standard input as JSON
// ({prompt, task, reference, seed, temperature, max_tokens, max_calls, model, mode, attempt}) and
// OPENAI_BASE_URL pointing at the episode's model endpoint (the policy being trained). It asks the
// model the question; when the model writes a calculator call, <tool>{"name": "calc", "arguments":
// {"expr": "48213*9071"}}</tool>, the agent computes it with its own calculator (BigInt) and sends the
// result back as a tool message; the model's first answer without a call goes to standard output,
// which the phase's verifiers score. Each request carries the episode's seed plus the call's index,
// so that a replayed episode gets the same tokens. With TEMPER_AGENT_LOG=- it prints every response
// after the answer, one JSON line each.
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const MAX_TURNS = 4;

// calc evaluates + - * and parentheses over integers exactly: the agent's own calculator.
export function calc(expr) {
  const toks = expr.match(/\d+|[-+*()]|\S/g) ?? [];
  let i = 0;
  const peek = () => toks[i];
  const take = () => toks[i++];
  const atom = () => {
    const t = take();
    if (t === '(') {
      const v = sum();
      if (take() !== ')') throw new Error('missing )');
      return v;
    }
    if (t === '-') return -atom();
    if (t !== undefined && /^\d+$/.test(t)) return BigInt(t);
    throw new Error(`unexpected ${JSON.stringify(t)}`);
  };
  const product = () => {
    let v = atom();
    while (peek() === '*') { take(); v *= atom(); }
    return v;
  };
  const sum = () => {
    let v = product();
    while (peek() === '+' || peek() === '-') v = take() === '+' ? v + product() : v - product();
    return v;
  };
  const v = sum();
  if (i !== toks.length) throw new Error('trailing input');
  return v.toString();
}

async function main() {
  const episode = JSON.parse(readFileSync(0, 'utf8'));
  // The gateway's endpoint serves one episode: retrying a refused call would only repeat it.
  const client = new OpenAI({ maxRetries: 0, timeout: 120_000 });
  const messages = [{ role: 'user', content: episode.prompt }];
  const responses = [];
  let answer = '';
  for (let k = 0; k < Math.min(MAX_TURNS, episode.max_calls ?? MAX_TURNS); k++) {
    const out = await client.chat.completions.create({
      model: episode.model, messages, max_tokens: episode.max_tokens, temperature: episode.temperature,
      seed: episode.seed + k, stop: ['</tool>'], logprobs: true,
    });
    responses.push(out);
    const choice = out.choices[0];
    const text = choice.message.content ?? '';
    const start = text.indexOf('<tool>');
    if (start < 0 || choice.finish_reason !== 'stop') { // an answer, or a call cut short
      answer = text;
      break;
    }
    answer = text.slice(0, start);
    let args;
    let result;
    try {
      const call = JSON.parse(text.slice(start + '<tool>'.length));
      if (call.name !== 'calc') throw new Error(`unknown tool ${JSON.stringify(call.name)}`);
      args = call.arguments;
      result = calc(args.expr);
    } catch (e) {
      answer = `error: ${e.message}`;
      break;
    }
    // The call goes back as the model wrote it (compact JSON, as the chat template renders a call),
    // so that the next prompt extends this one and the episode stays one trajectory.
    messages.push({ role: 'assistant', content: text.slice(0, start),
      tool_calls: [{ id: `call_${k}`, type: 'function', function: { name: 'calc', arguments: JSON.stringify(args) } }] });
    messages.push({ role: 'tool', tool_call_id: `call_${k}`, content: result });
  }
  const lines = [answer.trim().replaceAll('\n', ' ')];
  if (process.env.TEMPER_AGENT_LOG === '-') lines.push(...responses.map((r) => JSON.stringify(r)));
  process.stdout.write(lines.join('\n') + '\n');
}

main().catch((e) => {
  process.stderr.write(`${e.stack ?? e}\n`);
  process.exit(1);
});
