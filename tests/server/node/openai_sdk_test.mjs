// Drives a running graphserve with the official OpenAI Node SDK; prints one JSON line of what
// it saw for tests/server/e2e_test.cpp to check (completions, chat, models.retrieve,
// responses.create; embeddings.create on a second, pooling server).
// Usage: node openai_sdk_test.mjs PORT [EMBEDDINGS_PORT]
import OpenAI from "openai";

const port = process.argv[2];
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30000 });
const out = {};

const models = await client.models.list();
const model = models.data[0].id;

const c = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 12, temperature: 0 });
out.completion = c.choices[0].text;
out.completion_usage = c.usage.completion_tokens;

let text = "";
for await (const chunk of await client.completions.create({
  model, prompt: "Once upon a time", max_tokens: 12, temperature: 0, stream: true,
})) text += chunk.choices[0]?.text ?? "";
out.completion_stream = text;

const messages = [{ role: "user", content: "Tell me a story" }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
out.chat = chat.choices[0].message.content;

let streamed = "", finish = null, usage = null;
const stream = await client.chat.completions.create({
  model, messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const ch of chunk.choices) {
    streamed += ch.delta?.content ?? "";
    if (ch.finish_reason) finish = ch.finish_reason;
  }
}
out.chat_stream = streamed;
out.chat_finish = finish;
out.chat_usage = usage?.completion_tokens;

const card = await client.models.retrieve(model);
out.retrieved = card.id;

const resp = await client.responses.create({
  model, input: "Tell me a story", instructions: "Be brief.", max_output_tokens: 8, temperature: 0,
});
out.response_text = resp.output_text;
out.response_status = resp.status;
out.response_output_tokens = resp.usage?.output_tokens;
let deltas = "", completed = null;
for await (const ev of await client.responses.create({
  model, input: "Tell me a story", instructions: "Be brief.", max_output_tokens: 8, temperature: 0, stream: true,
})) {
  if (ev.type === "response.output_text.delta") deltas += ev.delta;
  if (ev.type === "response.completed") completed = ev.response;
}
out.response_stream = deltas;
out.response_stream_completed = completed?.output_text ?? completed?.output?.[0]?.content?.[0]?.text;
const follow = await client.responses.create({
  model, input: "And then?", previous_response_id: resp.id, max_output_tokens: 4, temperature: 0,
});
out.followup_status = follow.status;

if (process.argv[3]) {
  const embed = new OpenAI({ baseURL: `http://127.0.0.1:${process.argv[3]}/v1`, apiKey: "unused", maxRetries: 0 });
  // The SDK asks for base64 and decodes it; an explicit float request is checked too.
  const e = await embed.embeddings.create({ model, input: ["Once upon a time", "The cat"] });
  const f = await embed.embeddings.create({ model, input: "The cat", encoding_format: "float" });
  out.embedding_count = e.data.length;
  out.embedding_dim = e.data[1].embedding.length;
  out.embedding_norm = Math.sqrt(e.data[1].embedding.reduce((s, x) => s + x * x, 0));
  out.embedding_b64_vs_float = Math.max(...e.data[1].embedding.map((x, i) => Math.abs(x - f.data[0].embedding[i])));
}
// Tools: a named tool_choice (constrained to the function's parameters), whole and streamed.
const tools = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { unit: { enum: ["c", "f"] } }, required: ["unit"], additionalProperties: false },
  },
}];
const tool_choice = { type: "function", function: { name: "get_weather" } };
const weather = [{ role: "user", content: "What is the weather?" }];
const tc = await client.chat.completions.create({ model, messages: weather, tools, tool_choice, max_tokens: 48, temperature: 0 });
const call = tc.choices[0].message.tool_calls?.[0];
out.tool_name = call?.function.name;
out.tool_arguments = call?.function.arguments;
out.tool_finish = tc.choices[0].finish_reason;
let args = "", name = null;
for await (const chunk of await client.chat.completions.create({
  model, messages: weather, tools, tool_choice, max_tokens: 48, temperature: 0, stream: true,
})) {
  for (const piece of chunk.choices[0]?.delta?.tool_calls ?? []) {
    name ??= piece.function?.name ?? null;
    args += piece.function?.arguments ?? "";
  }
}
out.tool_stream_name = name;
out.tool_stream_arguments = args;

try {
  await client.completions.create({ model, prompt: "x", temperature: 5 });
} catch (e) {
  out.bad_status = e.status;
  out.bad_message = e.error?.message ?? e.message;
}
console.log(JSON.stringify(out));
