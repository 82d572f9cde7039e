// Renders every chat template (tests/templates/sources/*.jinja and the real templates shipped by
// the npm references, see extract_package_templates.mjs) over every conversation in
// tests/templates/conversations/ with `kvdesk-cli template` and with three references configured
// as Hugging Face transformers renders chat templates (its variables, tojson, raise_exception and
// strftime_now at a fixed date): Python Jinja2 itself (render_jinja2.py), @huggingface/jinja and
// minijinja-js. kvdesk must do what Jinja2 does: the same bytes where it renders, exit 1 where it
// raises (with the template's message on stderr) or fails. The two independent JS engines show
// where each departs from Jinja2; the cases neither renders as Jinja2 does are listed, since
// there Jinja2 alone decides.
//
//   node compare.mjs --npm-dir build/npm --cli build/kvdesk-cli [--python python3] [--filter REGEX]
//   node compare.mjs --npm-dir build/npm    (references only: where the JS engines depart from Jinja2)
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { packageTemplates } from "./extract_package_templates.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const RENDER_DAY = "2025-04-05"; // what strftime_now shows, at local midnight
const CONTEXT_CHARS = 80;

// bos/eos for templates whose package does not say, by template name (first match wins).
const SPECIAL_TOKENS = [
  [/llama4/, "<|begin_of_text|>", "<|eot|>"],
  [/llama3|llama-guard3|firefunction|nemotron_70b|rnj-1|cogito_3b|tulu3/, "<|begin_of_text|>", "<|eot_id|>"],
  [/deepseek-coder/, "<｜begin▁of▁sentence｜>", "<|EOT|>"],
  [/deepseek|r1-1776|deepcoder/, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"],
  [/command|aya/, "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"],
  [/gemma/, "<bos>", "<end_of_turn>"],
  [/phi|nuextract/, "<s>", "<|endoftext|>"],
  [/granite/, "<|end_of_text|>", "<|end_of_text|>"],
  [/qwen|qwq|hermes|dolphin|internlm|marco|smallthinker|cogito|openchat|opencoder|yi|olmo|exaone|smollm/,
    "<|endoftext|>", "<|im_end|>"],
  [/./, "<s>", "</s>"],
];

// Template variables beyond the standard ones, as callers pass them with --kwargs, for the
// templates that read them; each is rendered over KWARGS_CONVERSATIONS as extra cases.
const TEMPLATE_KWARGS = [
  [/\benable_thinking\b/, { enable_thinking: false }],
  [/\bthinking\b/, { thinking: true }],
  [/\breasoning_effort\b/, { reasoning_effort: "high" }],
  [/\btools_in_user_message\b/, { tools_in_user_message: false }],
];
const KWARGS_CONVERSATIONS = ["system_multi_turn", "tool_calls"];

function parseOptions() {
  const { values } = parseArgs({
    options: {
      cli: { type: "string" }, "npm-dir": { type: "string" }, python: { type: "string" }, filter: { type: "string" },
    },
  });
  if (!values["npm-dir"]) {
    console.error("usage: node compare.mjs --npm-dir DIR [--cli KVDESK_CLI] [--python PYTHON3] [--filter REGEX]");
    process.exit(2);
  }
  if (values.cli && !fs.existsSync(values.cli)) {
    console.error(`kvdesk-cli not found at ${values.cli}`);
    process.exit(1);
  }
  return {
    cli: values.cli,
    npmDir: path.resolve(values["npm-dir"]),
    python: values.python ?? "python3",
    filter: new RegExp(values.filter ?? ""),
  };
}

async function loadHuggingFace(npmDir) {
  const entry = path.join(npmDir, "node_modules", "@huggingface", "jinja", "dist", "index.js");
  return import(pathToFileURL(entry).href);
}

// ---------------------------------------------------------------------------------------------
// Inputs: templates (each with a file kvdesk can read), conversations and the cases they make.

function handWrittenTemplates() {
  const dir = path.join(HERE, "sources");
  return fs.readdirSync(dir).filter((f) => f.endsWith(".jinja")).sort().map((file) => ({
    name: path.basename(file, ".jinja"),
    source: fs.readFileSync(path.join(dir, file), "utf8"),
    path: path.join(dir, file),
    bos: null,
    eos: null,
  }));
}

// Package templates are written under the npm dir so that a failing case can be rerun by hand.
async function packageTemplatesOnDisk(npmDir) {
  const dir = path.join(npmDir, "chat-templates");
  fs.mkdirSync(dir, { recursive: true });
  return (await packageTemplates(npmDir)).map((template) => {
    const file = path.join(dir, `${template.name}.jinja`);
    fs.writeFileSync(file, template.source);
    return { ...template, path: file };
  });
}

function withSpecialTokens(template) {
  const [, bos, eos] = SPECIAL_TOKENS.find(([pattern]) => pattern.test(template.name));
  return { ...template, bos: template.bos ?? bos, eos: template.eos ?? eos };
}

function loadConversations() {
  const dir = path.join(HERE, "conversations");
  return fs.readdirSync(dir).filter((f) => f.endsWith(".json")).sort().map((file) => {
    const data = JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
    return { name: path.basename(file, ".json"), path: path.join(dir, file), data };
  });
}

// A conversation that ends with the assistant is a prefill: rendered without a generation prompt.
function wantsGenerationPrompt(conversation) {
  return conversation.data.messages.at(-1).role !== "assistant";
}

function kwargsVariants(template) {
  return TEMPLATE_KWARGS.filter(([uses]) => uses.test(template.source)).map(([, kwargs]) => kwargs);
}

function caseLabel(template, conversation, addGenerationPrompt, kwargs) {
  return `${template.name} x ${conversation.name}` +
    (addGenerationPrompt ? "" : " (no generation prompt)") +
    (kwargs ? ` --kwargs '${JSON.stringify(kwargs)}'` : "");
}

function buildCases(templates, conversations) {
  const cases = [];
  for (const template of templates) {
    for (const conversation of conversations) {
      const addGenerationPrompt = wantsGenerationPrompt(conversation);
      const variants = KWARGS_CONVERSATIONS.includes(conversation.name) ? kwargsVariants(template) : [];
      for (const kwargs of [null, ...variants]) {
        const label = caseLabel(template, conversation, addGenerationPrompt, kwargs);
        cases.push({ label, template, conversation, addGenerationPrompt, kwargs });
      }
    }
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------
// The environment transformers gives a template: strftime_now at the fixed date, and tojson as
// json.dumps(ensure_ascii=False) with Python's separators.

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
  "September", "October", "November", "December"];
const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

// Python's strftime (C locale, glibc's %-d style flags) at RENDER_DAY, 00:00:00; codes it does
// not know stay as written, so that a template using one shows up as a difference.
function strftimeNow(format) {
  const [year, month, day] = RENDER_DAY.split("-").map(Number);
  const weekday = new Date(Date.UTC(year, month - 1, day)).getUTCDay();
  const dayOfYear = Math.round((Date.UTC(year, month - 1, day) - Date.UTC(year, 0, 1)) / 86400000) + 1;
  const pad = (n, width = 2) => String(n).padStart(width, "0");
  const codes = {
    Y: String(year), y: pad(year % 100), m: pad(month), d: pad(day), "-d": String(day), "-m": String(month),
    e: String(day).padStart(2, " "), j: pad(dayOfYear, 3), b: MONTHS[month - 1].slice(0, 3), B: MONTHS[month - 1],
    a: WEEKDAYS[weekday].slice(0, 3), A: WEEKDAYS[weekday], H: "00", I: "12", M: "00", S: "00", p: "AM", "%": "%",
  };
  return String(format).replace(/%(-?[A-Za-z%])/g, (code, key) => codes[key] ?? code);
}

function pythonJsonString(text, ensureAscii) {
  const escapes = { '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" };
  const unicodeEscape = (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");
  const special = ensureAscii ? /["\\\u0000-\u001f\u007f-\uffff]/g : /["\\\u0000-\u001f]/g;
  return '"' + text.replace(special, (c) => escapes[c] ?? unicodeEscape(c)) + '"';
}

// json.dumps(value, ensure_ascii, indent, separators, sort_keys) for the values minijinja-js
// hands a JS filter (maps arrive as Map, keyword arguments as a trailing Map).
function pythonJsonDumps(value, options, depth = 0) {
  const { indent, itemSeparator, keySeparator, sortKeys, ensureAscii } = options;
  const newline = indent === null ? "" : "\n" + " ".repeat(indent * (depth + 1));
  const closing = indent === null ? "" : "\n" + " ".repeat(indent * depth);
  const join = (parts, open, close) =>
    parts.length === 0 ? open + close : open + newline + parts.join(itemSeparator + newline) + closing + close;
  if (value === null || value === undefined) return "null";
  if (typeof value === "string") return pythonJsonString(value, ensureAscii);
  if (typeof value !== "object") return String(value);
  if (Array.isArray(value)) return join(value.map((item) => pythonJsonDumps(item, options, depth + 1)), "[", "]");
  let entries = value instanceof Map ? [...value.entries()] : Object.entries(value);
  if (sortKeys) entries = entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const members = entries.map(([key, item]) =>
    pythonJsonString(String(key), ensureAscii) + keySeparator + pythonJsonDumps(item, options, depth + 1));
  return join(members, "{", "}");
}

function transformersToJson(value, ...args) {
  const kwargs = args.at(-1) instanceof Map ? args.pop() : new Map();
  const indent = kwargs.get("indent") ?? args[0] ?? null;
  const separators = kwargs.get("separators") ?? null;
  return pythonJsonDumps(value, {
    indent,
    itemSeparator: separators ? separators[0] : indent === null ? ", " : ",",
    keySeparator: separators ? separators[1] : ": ",
    sortKeys: Boolean(kwargs.get("sort_keys")),
    ensureAscii: Boolean(kwargs.get("ensure_ascii")),
  });
}

// What apply_chat_template renders with: tools and documents are None (defined) when absent.
function templateVariables(testCase) {
  const { template, conversation, addGenerationPrompt, kwargs } = testCase;
  return {
    messages: conversation.data.messages,
    tools: conversation.data.tools ?? null,
    documents: null,
    add_generation_prompt: addGenerationPrompt,
    bos_token: template.bos,
    eos_token: template.eos,
    ...kwargs,
  };
}

// ---------------------------------------------------------------------------------------------
// Renderers. Each returns an outcome: {kind: "text", text}, {kind: "raise", message} (the
// template called raise_exception) or {kind: "error", message} (the engine failed otherwise).

class TemplateRaise extends Error {}

function pythonRange(start, stop, step = 1) {
  if (stop === undefined) [start, stop] = [0, start];
  if (step === 0) throw new Error("range() step must not be zero");
  const values = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) values.push(i);
  return values;
}

// Template.render() would declare @huggingface/jinja's own globals, which a context cannot
// replace, so the environment is built here: the same constants and range, raise_exception
// throwing a TemplateRaise, and strftime_now at the fixed date.
function huggingFaceEnvironment(Environment, variables) {
  const env = new Environment();
  const globals = {
    false: false, true: true, none: null, False: false, True: true, None: null, range: pythonRange,
    raise_exception: (message) => { throw new TemplateRaise(String(message)); },
    strftime_now: strftimeNow,
  };
  for (const [name, value] of Object.entries({ ...globals, ...variables })) env.set(name, value);
  return env;
}

function renderWithHuggingFace(huggingface, testCase) {
  try {
    const template = new huggingface.Template(testCase.template.source);
    const env = huggingFaceEnvironment(huggingface.Environment, templateVariables(testCase));
    return { kind: "text", text: new huggingface.Interpreter(env).run(template.parsed).value };
  } catch (error) {
    return { kind: error instanceof TemplateRaise ? "raise" : "error", message: error.message };
  }
}

// minijinja-js renders in WASM, where a Rust panic (minijinja has a few on odd templates) leaves
// the module unusable: a panic becomes an "error" outcome with the panic's message, which the
// module prints through console.error, and the next render gets a freshly loaded module.
class MinijinjaReference {
  constructor(npmDir) {
    this.require = createRequire(path.join(npmDir, "node_modules", "index.js"));
    this.modulePath = this.require.resolve("minijinja-js");
    this.Environment = this.require(this.modulePath).Environment;
  }

  reload() {
    delete this.require.cache[this.modulePath];
    this.Environment = this.require(this.modulePath).Environment;
  }

  render(testCase) {
    const printed = [];
    const consoleError = console.error;
    console.error = (...args) => printed.push(args.join(" "));
    try {
      return this.renderInEnvironment(testCase);
    } catch (error) {
      if (!(error instanceof WebAssembly.RuntimeError)) throw error;
      this.reload();
      return { kind: "error", message: printed.join("\n") || error.message };
    } finally {
      console.error = consoleError;
    }
  }

  // raise_exception cannot throw through WASM either, so it records the first message and
  // returns; a recorded message decides the outcome.
  renderInEnvironment(testCase) {
    const env = new this.Environment();
    let raised = null;
    env.trimBlocks = true;
    env.lstripBlocks = true;
    env.enablePyCompat();
    env.addGlobal("raise_exception", (message) => { raised ??= String(message); return ""; });
    env.addGlobal("strftime_now", strftimeNow);
    env.addFilter("tojson", transformersToJson);
    let outcome;
    try {
      outcome = { kind: "text", text: env.renderStr(testCase.template.source, templateVariables(testCase)) };
    } catch (error) {
      if (error instanceof WebAssembly.RuntimeError) throw error;
      outcome = { kind: "error", message: error.message };
    }
    env.free();
    return raised === null ? outcome : { kind: "raise", message: raised };
  }
}

// Python Jinja2 as transformers runs it (render_jinja2.py), all cases in one process. Its
// outcomes are what kvdesk must reproduce; raise_exception surfaces as a plain TemplateError.
function renderWithJinja2(python, cases) {
  const script = path.join(HERE, "render_jinja2.py");
  const jobs = cases.map(({ template, conversation, addGenerationPrompt, kwargs }) => ({
    template: template.path, conversation: conversation.path, bos: template.bos, eos: template.eos,
    date: RENDER_DAY, add_generation_prompt: addGenerationPrompt, kwargs,
  }));
  const run = spawnSync(python, [script], {
    input: JSON.stringify(jobs), maxBuffer: 1 << 30, env: { ...process.env, PYTHONIOENCODING: "utf-8" },
  });
  if (run.error || run.status !== 0) {
    console.error(`${python} ${script} failed (python3-jinja2, assets/apt-packages.txt): ` +
      (run.error?.message ?? run.stderr.toString("utf8")));
    process.exit(1);
  }
  return JSON.parse(run.stdout.toString("utf8")).map((rendered) => {
    if (rendered.ok) return { kind: "text", text: rendered.text };
    const raised = /^TemplateError: ([\s\S]*)$/.exec(rendered.error);
    return raised ? { kind: "raise", message: raised[1] } : { kind: "error", message: rendered.error };
  });
}

function kvdeskArguments(testCase) {
  const { template, conversation, addGenerationPrompt, kwargs } = testCase;
  const args = ["template", "--template", template.path, "--messages", conversation.path,
    "--bos-token", template.bos, "--eos-token", template.eos, "--date", RENDER_DAY];
  if (!addGenerationPrompt) args.push("--no-generation-prompt");
  if (kwargs) args.push("--kwargs", JSON.stringify(kwargs));
  return args;
}

// kvdesk's outcome: {kind: "text", bytes}, {kind: "failed", message} for exit 1, or
// {kind: "crash", message} for anything else.
function renderWithKvdesk(cli, testCase) {
  const run = spawnSync(cli, kvdeskArguments(testCase), { timeout: 30000, maxBuffer: 64 << 20 });
  const stderr = run.stderr ? run.stderr.toString("utf8").trim() : "";
  if (run.error) return { kind: "crash", message: run.error.message };
  if (run.status === 0) return { kind: "text", bytes: run.stdout };
  if (run.status === 1) return { kind: "failed", message: stderr };
  return { kind: "crash", message: `exit ${run.status ?? run.signal}: ${stderr}` };
}

// ---------------------------------------------------------------------------------------------
// Judging: kvdesk must do what Jinja2 does; the JS references show where they depart from it.

function sameOutcome(a, b) {
  if (a.kind !== b.kind) return false;
  if (a.kind === "text") return a.text === b.text;
  return a.kind === "error" || a.message === b.message;
}

function kvdeskMatches(reference, kvdesk) {
  if (reference.kind === "text") return kvdesk.kind === "text" && kvdesk.bytes.equals(Buffer.from(reference.text, "utf8"));
  if (reference.kind === "raise") return kvdesk.kind === "failed" && kvdesk.message.includes(reference.message);
  return kvdesk.kind === "failed";
}

// Which JS references render a case as Jinja2 does.
function referenceAgreement(result) {
  return {
    huggingface: sameOutcome(result.huggingface, result.jinja2),
    minijinja: sameOutcome(result.minijinja, result.jinja2),
  };
}

function firstDifference(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

function lineAndColumn(text, offset) {
  const before = text.slice(0, offset).split("\n");
  return `line ${before.length}, column ${before.at(-1).length + 1}`;
}

function excerpt(text, offset) {
  return JSON.stringify(text.slice(Math.max(0, offset - CONTEXT_CHARS), offset)) + " | " +
    JSON.stringify(text.slice(offset, offset + CONTEXT_CHARS));
}

// A short unified diff of two texts: where they first differ, with context each side.
function textDiff(expected, actual, expectedName, actualName) {
  const offset = firstDifference(expected, actual);
  return [
    `    first difference at character ${offset} (${lineAndColumn(expected, offset)}); lengths ${expected.length} vs ${actual.length}`,
    `    --- ${expectedName}`,
    `    +++ ${actualName}`,
    `    - ${excerpt(expected, offset)}`,
    `    + ${excerpt(actual, offset)}`,
  ].join("\n");
}

function describeOutcome(outcome) {
  if (outcome.kind === "text") return `rendered ${outcome.text.length} characters`;
  if (outcome.kind === "raise") return `raise_exception(${JSON.stringify(outcome.message)})`;
  return `${outcome.kind}: ${outcome.message.split("\n")[0]}`;
}

// One line on how a JS reference's outcome relates to Jinja2's.
function describeDeparture(name, outcome, jinja2) {
  if (sameOutcome(outcome, jinja2)) return `    ${name}: same as Jinja2`;
  if (outcome.kind === "text" && jinja2.kind === "text") {
    const offset = firstDifference(jinja2.text, outcome.text);
    return `    ${name}: differs at ${offset}: ${excerpt(outcome.text, offset)}`;
  }
  return `    ${name}: ${describeOutcome(outcome)}`;
}

function shellQuote(word) {
  return /^[\w./=:-]+$/.test(word) ? word : `'${word.replace(/'/g, "'\\''")}'`;
}

function describeFailure(result, cli) {
  const { testCase, huggingface, minijinja, jinja2, kvdesk } = result;
  const lines = [`FAIL ${testCase.label}`];
  const kvdeskText = kvdesk.kind === "text" ? kvdesk.bytes.toString("utf8") : null;
  if (jinja2.kind === "text" && kvdeskText !== null) {
    lines.push(textDiff(jinja2.text, kvdeskText, "Jinja2 (transformers)", "kvdesk"));
  } else {
    lines.push(`    Jinja2 (transformers): ${describeOutcome(jinja2)}`);
    lines.push(`    kvdesk: ${kvdeskText !== null ? `rendered ${kvdeskText.length} characters` : describeOutcome(kvdesk)}`);
  }
  lines.push(describeDeparture("@huggingface/jinja", huggingface, jinja2));
  lines.push(describeDeparture("minijinja-js", minijinja, jinja2));
  lines.push(`    rerun: ${[cli, ...kvdeskArguments(testCase)].map(shellQuote).join(" ")}`);
  return lines.join("\n");
}

// One line per template: "name: conversation, conversation (no generation prompt), ...".
function printCasesByTemplate(results) {
  const byTemplate = new Map();
  for (const { testCase } of results) {
    const rest = testCase.label.slice(testCase.template.name.length + " x ".length);
    byTemplate.set(testCase.template.name, [...(byTemplate.get(testCase.template.name) ?? []), rest]);
  }
  for (const [name, rests] of byTemplate) console.log(`  ${name}: ${rests.join(", ")}`);
}

// How far the JS references follow Jinja2; the cases that neither renders as Jinja2 does are
// decided by Jinja2 alone, and listed.
function printReferenceSummary(results) {
  const agreements = results.map(referenceAgreement);
  const count = (test) => agreements.filter(test).length;
  console.log(`JS references disagree with each other on ${results.filter((r) => !sameOutcome(r.huggingface, r.minijinja)).length} cases; ` +
    `@huggingface/jinja departs from Jinja2 on ${count((a) => !a.huggingface)}, minijinja-js on ${count((a) => !a.minijinja)}`);
  const neither = results.filter((r, i) => !agreements[i].huggingface && !agreements[i].minijinja);
  console.log(`neither JS reference renders as Jinja2 does on ${neither.length} cases:`);
  printCasesByTemplate(neither);
}

// Every case where a JS reference departs from Jinja2, and every case where Jinja2 refuses.
function printReferenceReport(results) {
  for (const result of results) {
    const agreement = referenceAgreement(result);
    if (agreement.huggingface && agreement.minijinja) continue;
    console.log(`${result.testCase.label}: Jinja2 ${describeOutcome(result.jinja2)}`);
    if (!agreement.huggingface) console.log(describeDeparture("@huggingface/jinja", result.huggingface, result.jinja2));
    if (!agreement.minijinja) console.log(describeDeparture("minijinja-js", result.minijinja, result.jinja2));
  }
  const refusing = results.filter((r) => r.jinja2.kind !== "text");
  console.log(`Jinja2 raises or fails on ${refusing.length} cases:`);
  for (const result of refusing) console.log(`  ${result.testCase.label}: ${describeOutcome(result.jinja2)}`);
  printReferenceSummary(results);
}

function printComparisonReport(results, templates, cli) {
  const failures = results.filter((r) => !r.passed);
  for (const failure of failures) console.log(describeFailure(failure, cli));
  const byMinijinja = results.filter((r) => r.passed && !referenceAgreement(r).huggingface && referenceAgreement(r).minijinja);
  printReferenceSummary(results);
  console.log(`kvdesk matched minijinja-js where @huggingface/jinja departs from Jinja2 on ${byMinijinja.length} cases:`);
  printCasesByTemplate(byMinijinja);
  const failedTemplates = new Set(failures.map((r) => r.testCase.template.name));
  console.log(`templates rendered identically: ${templates.length - failedTemplates.size}/${templates.length}`);
  console.log(`cases passed: ${results.length - failures.length}/${results.length}`);
  return failures.length === 0;
}

async function main() {
  const options = parseOptions();
  const huggingface = await loadHuggingFace(options.npmDir);
  const minijinja = new MinijinjaReference(options.npmDir);
  const handWritten = handWrittenTemplates();
  const fromPackages = await packageTemplatesOnDisk(options.npmDir);
  const templates = [...handWritten, ...fromPackages]
    .filter((t) => options.filter.test(t.name))
    .map(withSpecialTokens);
  const conversations = loadConversations();
  const cases = buildCases(templates, conversations);
  console.log(`template sources: ${handWritten.length + fromPackages.length} (${handWritten.length} hand-written, ` +
    `${fromPackages.length} from npm packages), ${templates.length} selected; conversations: ${conversations.length}; ` +
    `cases: ${cases.length}`);

  const jinja2 = renderWithJinja2(options.python, cases);
  const results = cases.map((testCase, i) => ({
    testCase,
    jinja2: jinja2[i],
    huggingface: renderWithHuggingFace(huggingface, testCase),
    minijinja: minijinja.render(testCase),
  }));
  if (!options.cli) {
    printReferenceReport(results);
    return;
  }
  for (const result of results) {
    result.kvdesk = renderWithKvdesk(options.cli, result.testCase);
    result.passed = kvdeskMatches(result.jinja2, result.kvdesk);
  }
  if (!printComparisonReport(results, templates, options.cli)) process.exit(1);
}

await main();
