// Drives a running graphserve with the official OpenAI Node SDK; prints one JSON line of what
// it saw for tests/server/e2e_test.cpp to check (completions, chat, models.retrieve,
// responses.create, tool calls named and required with the stream helper, zod response_format
// through beta.chat.completions.parse; embeddings.create on a second, pooling server).
// Usage: node openai_sdk_test.mjs PORT [EMBEDDINGS_PORT]
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";

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

// tool_choice "required": the call, then a round trip (the assistant's call and the tool's result
// go back), and the same request through the SDK's stream helper, which assembles the streamed
// call from its opening chunk and argument fragments.
// The tiny model's favourite tokens are whitespace, which JSON allows anywhere between its tokens:
// logit_bias keeps it off stories260K's whitespace-only tokens so the JSON ends within max_tokens.
const logit_bias = Object.fromEntries([12, 13, 14, 15, 16, 35, 410].map((id) => [id, -100]));
const required = { model, messages: weather, tools, tool_choice: "required", max_tokens: 64, temperature: 0, logit_bias,
  parallel_tool_calls: false };
const rc = await client.chat.completions.create(required);
const rcall = rc.choices[0].message.tool_calls?.[0];
out.required_name = rcall?.function.name;
out.required_arguments = rcall?.function.arguments;
out.required_finish = rc.choices[0].finish_reason;
const round = await client.chat.completions.create({
  model, max_tokens: 8, temperature: 0, tools,
  messages: [...weather, rc.choices[0].message, { role: "tool", tool_call_id: rcall?.id ?? "x", content: "12 degrees" }],
});
out.round_trip_role = round.choices[0].message.role;
out.round_trip_finish = round.choices[0].finish_reason;
const helper = client.beta.chat.completions.stream(required);
let fragments = 0, doneName = null, doneArgs = null;
helper.on("tool_calls.function.arguments.delta", (e) => { if (e.arguments_delta) fragments += 1; });
helper.on("tool_calls.function.arguments.done", (e) => { doneName = e.name; doneArgs = e.arguments; });
const final = await helper.finalChatCompletion();
out.required_stream_name = final.choices[0].message.tool_calls?.[0]?.function.name;
out.required_stream_arguments = final.choices[0].message.tool_calls?.[0]?.function.arguments;
out.required_stream_id = final.choices[0].message.tool_calls?.[0]?.id ?? null;
out.required_stream_finish = final.choices[0].finish_reason;
out.required_stream_fragments = fragments;
out.required_stream_done = doneName === out.required_stream_name && doneArgs === out.required_stream_arguments;

// response_format from a zod schema, parsed by the SDK into an object of the schema's shape.
const Forecast = z.object({
  city: z.string().max(12),
  unit: z.enum(["c", "f"]),
  sunny: z.boolean(),
  days: z.number().int().min(1).max(7),
});
const parsed = await client.beta.chat.completions.parse({
  model, messages: weather, response_format: zodResponseFormat(Forecast, "forecast"), max_tokens: 96, temperature: 0,
  logit_bias,
});
const p = parsed.choices[0].message.parsed;
out.zod_finish = parsed.choices[0].finish_reason;
out.zod_types = p ? { city: typeof p.city, unit: p.unit, sunny: typeof p.sunny, days: Number.isInteger(p.days) } : null;
out.zod_valid = Forecast.safeParse(p).success;

try {
  await client.completions.create({ model, prompt: "x", temperature: 5 });
} catch (e) {
  out.bad_status = e.status;
  out.bad_message = e.error?.message ?? e.message;
}
console.log(JSON.stringify(out));
