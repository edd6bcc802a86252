// Implements server/structured_request.h.
#include "server/structured_request.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "structured/constraint_error.h"

namespace gs {

using Json = nlohmann::ordered_json;
using Kind = structured::ConstraintSpec::Kind;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) { throw ApiError(400, why, field); }

std::string schema_text(const Json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();  // vLLM takes a schema as JSON text too
  if (!v.is_object() && !v.is_boolean()) bad(field, fmt::format("'{}' must be a JSON schema object", field));
  return v.dump();
}

std::vector<std::string> choices(const Json& v, const std::string& field) {
  if (!v.is_array() || v.empty()) bad(field, fmt::format("'{}' must be a non-empty list of strings", field));
  std::vector<std::string> out;
  for (const auto& c : v) {
    if (!c.is_string()) bad(field, fmt::format("'{}' must be a list of strings", field));
    out.push_back(c.get<std::string>());
  }
  return out;
}

std::string text(const Json& v, const std::string& field) {
  if (!v.is_string() || v.get<std::string>().empty()) bad(field, fmt::format("'{}' must be a non-empty string", field));
  return v.get<std::string>();
}

void add(std::optional<StructuredField>& out, std::string field, structured::ConstraintSpec spec) {
  if (out) bad(field, fmt::format("'{}' and '{}' both constrain the output; give one", out->field, field));
  out = StructuredField{std::move(field), std::move(spec)};
}

void response_format(const Json& rf, std::optional<StructuredField>& out) {
  if (rf.is_null()) return;
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    bad("response_format", "'response_format' must be an object with a 'type' (text, json_object or json_schema)");
  const std::string type = rf["type"];
  structured::ConstraintSpec s;
  if (type == "text") return;
  if (type == "json_object") {
    s.kind = Kind::kJsonObject;
  } else if (type == "json_schema") {
    if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
      bad("response_format.json_schema", "response_format type json_schema needs a 'json_schema' object");
    const Json& js = rf["json_schema"];
    if (!js.contains("schema"))
      bad("response_format.json_schema.schema", "'response_format.json_schema' needs a 'schema'");
    s.kind = Kind::kJsonSchema;
    s.text = schema_text(js["schema"], "response_format.json_schema.schema");
  } else {
    bad("response_format.type",
        fmt::format("unknown response_format type '{}' (text, json_object or json_schema)", type));
  }
  add(out, type == "json_object" ? "response_format" : "response_format.json_schema.schema", std::move(s));
}

void structured_outputs(const Json& so, std::optional<StructuredField>& out) {
  if (so.is_null()) return;
  if (!so.is_object()) bad("structured_outputs", "'structured_outputs' must be an object");
  const bool compact = so.contains("disable_any_whitespace") && so["disable_any_whitespace"] == true;
  for (const auto& [key, v] : so.items()) {
    if (v.is_null() || key == "disable_any_whitespace" || key == "disable_fallback" ||
        key == "disable_additional_properties" || key == "backend" || key == "whitespace_pattern")
      continue;
    const std::string field = "structured_outputs." + key;
    structured::ConstraintSpec s;
    s.any_whitespace = !compact;
    if (key == "json")
      s.kind = Kind::kJsonSchema, s.text = schema_text(v, field);
    else if (key == "regex")
      s.kind = Kind::kRegex, s.text = text(v, field);
    else if (key == "choice")
      s.kind = Kind::kChoice, s.choices = choices(v, field);
    else if (key == "grammar")
      s.kind = Kind::kGrammar, s.text = text(v, field);
    else if (key == "json_object") {
      if (v != true) continue;
      s.kind = Kind::kJsonObject;
    } else if (key == "structural_tag") {
      bad(field, "'structured_outputs.structural_tag' is not supported");
    } else {
      bad(field, fmt::format("unknown field '{}' (json, regex, choice, grammar, json_object)", field));
    }
    add(out, field, std::move(s));
  }
}

}  // namespace

std::optional<StructuredField> parse_structured_fields(const Json& body) {
  std::optional<StructuredField> out;
  if (!body.is_object()) return out;
  if (body.contains("response_format")) response_format(body["response_format"], out);
  if (body.contains("structured_outputs")) structured_outputs(body["structured_outputs"], out);
  structured::ConstraintSpec s;
  if (body.contains("guided_json") && !body["guided_json"].is_null())
    s.kind = Kind::kJsonSchema, s.text = schema_text(body["guided_json"], "guided_json"), add(out, "guided_json", s);
  if (body.contains("guided_regex") && !body["guided_regex"].is_null())
    s.kind = Kind::kRegex, s.text = text(body["guided_regex"], "guided_regex"), add(out, "guided_regex", s);
  if (body.contains("guided_choice") && !body["guided_choice"].is_null())
    s.kind = Kind::kChoice, s.choices = choices(body["guided_choice"], "guided_choice"), add(out, "guided_choice", s);
  if (body.contains("guided_grammar") && !body["guided_grammar"].is_null())
    s.kind = Kind::kGrammar, s.text = text(body["guided_grammar"], "guided_grammar"), add(out, "guided_grammar", s);
  return out;
}

void apply_structured_field(const StructuredField& f, const EngineClient& client, SamplingParams& params) {
  try {
    params.grammar = client.compile_constraint(f.spec);
  } catch (const structured::ConstraintError& e) {
    throw ApiError(400, fmt::format("'{}': {}", f.field, e.what()), f.field);
  }
}

}  // namespace gs

namespace gs {

std::shared_ptr<const structured::CompiledGrammar> EngineClient::compile_constraint(
    const structured::ConstraintSpec&) const {
  throw ApiError(400, "structured output is not available on this engine");
}

}  // namespace gs
