// POST /v1/embeddings, as vLLM serves it for pooling models (--runner pooling): `input` is a
// string, a list of strings, a list of token ids or a list of such lists; each becomes one
// engine request, prefilled in the same batches (and graphs) as any prompt, whose pooled final
// hidden state (last token or mean, L2-normalised) comes back as its embedding. `dimensions`
// shortens the vectors (then renormalised) where the model is Matryoshka-trained;
// `encoding_format` is "float" or "base64" (little-endian float32). A generation model answers
// 400 naming --runner pooling.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "server/api_error.h"
#include "server/api_server.h"
#include "server/json_body.h"
#include "server/json_fields.h"
#include "server/request_bounds.h"

namespace gs {
namespace {

using nlohmann::json;
namespace f = fields;

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit per request

std::vector<std::vector<int32_t>> embedding_inputs(const json& body, const EngineClient& client) {
  if (!body.contains("input")) bad_param("input", "'input' (a string, a list of strings or token ids) is required");
  const json& in = body["input"];
  const int vocab = client.model().vocab_size;
  auto ids_of = [&](const json& list) {
    std::vector<int32_t> ids;
    for (const json& t : list) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
        bad_param("input", fmt::format("'input': token ids must be integers in [0, {})", vocab));
      ids.push_back(t.get<int32_t>());
    }
    return ids;
  };
  std::vector<std::vector<int32_t>> out;
  if (in.is_string()) {
    out.push_back(encode_prompt(client, in.get_ref<const std::string&>(), true, "input"));
  } else if (in.is_array() && !in.empty() && in[0].is_number()) {
    out.push_back(ids_of(in));
  } else if (in.is_array() && !in.empty()) {
    if (in.size() > kMaxInputs)
      bad_param("input", fmt::format("'input' has {} items; at most {}", in.size(), kMaxInputs));
    for (const json& item : in) {
      if (item.is_string())
        out.push_back(encode_prompt(client, item.get_ref<const std::string&>(), true, "input"));
      else if (item.is_array())
        out.push_back(ids_of(item));
      else
        bad_param("input", "'input' items must all be strings or all lists of token ids");
    }
  } else {
    bad_param("input", "'input' must be a non-empty string or list");
  }
  for (const auto& ids : out)
    if (ids.empty()) bad_param("input", "'input' has an empty item: each needs at least one token");
  return out;
}

// `dimensions`: the first d components, renormalised (Matryoshka embeddings).
int requested_dimensions(const json& body, const ServedModel& m) {
  if (!f::present(body, "dimensions")) return m.hidden_size;
  const int d = static_cast<int>(f::get_int(body, "dimensions", m.hidden_size, 1, m.hidden_size));
  if (!m.matryoshka)
    bad_param("dimensions",
              "'dimensions': this model does not support Matryoshka representation (it was not "
              "trained for shorter embeddings)");
  const auto& allowed = m.matryoshka_dims;
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), d) == allowed.end())
    bad_param("dimensions",
              fmt::format("'dimensions' {} is not one the model supports: {}", d, fmt::join(allowed, ", ")));
  return d;
}

std::vector<float> shorten(std::vector<float> v, int d) {
  if (d >= static_cast<int>(v.size())) return v;
  v.resize(size_t(d));
  double norm = 0.0;
  for (float x : v) norm += double(x) * x;
  if (norm > 0.0)
    for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
  return v;
}

std::string base64(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * 4, '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) n |= uint32_t(uint8_t(bytes[i + 2]));
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

}  // namespace

HttpResponse ApiServer::handle_embeddings(const HttpRequest& req) {
  const ServedModel& m = client_.model();
  if (!m.pooling)
    throw ApiError(400,
                   "this server runs a generation model: start it with --runner pooling (or --convert embed) "
                   "to serve /v1/embeddings");
  if (draining_) throw ApiError(503, "the server is shutting down", "", "service_unavailable");
  const json body = parse_json_body(req.body, cfg_.max_json_depth);
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  if (f::present(body, "model")) {
    const std::string name = f::get_string(body, "model", "");
    if (name != m.name && std::find(m.aliases.begin(), m.aliases.end(), name) == m.aliases.end())
      throw ApiError::model_not_found(name);
  }
  const std::string encoding = f::get_string(body, "encoding_format", "float");
  if (encoding != "float" && encoding != "base64")
    bad_param("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
  const int dims = requested_dimensions(body, m);
  std::vector<std::vector<int32_t>> inputs;
  try {
    inputs = embedding_inputs(body, client_);
  } catch (const ApiError&) {
    throw;
  } catch (const std::exception& e) {
    throw ApiError(400, e.what(), "input");
  }

  SamplingParams params;
  params.pooling = m.pooling_type;
  params.max_tokens = 1;
  params.temperature = 0.0f;
  auto queue = std::make_shared<OutputQueue>();
  std::vector<RequestId> ids;
  ++in_flight_;
  struct Done {
    ApiServer* s;
    ~Done() { s->finish_one(); }
  } done{this};
  try {
    for (size_t i = 0; i < inputs.size(); ++i)
      ids.push_back(client_.submit(inputs[i], params, queue, static_cast<int>(i), ""));
  } catch (const std::exception& e) {
    for (RequestId id : ids) client_.abort(id);
    throw ApiError(400, e.what(), "input");
  }
  std::vector<std::vector<float>> vectors(inputs.size());
  size_t finished = 0;
  int prompt_tokens = 0;
  while (finished < inputs.size()) {
    std::optional<ChoiceOutput> item = queue->pop(std::chrono::milliseconds(1000));
    if (!item || !item->out.finished || item->choice < 0 || size_t(item->choice) >= inputs.size()) continue;
    if (!item->out.error.empty() || item->out.embedding.empty()) {
      for (RequestId id : ids) client_.abort(id);
      throw ApiError(500, "the embedding failed in the engine: " + item->out.error, "", "server_error");
    }
    vectors[size_t(item->choice)] = shorten(std::move(item->out.embedding), dims);
    prompt_tokens += item->out.num_prompt_tokens;
    ++finished;
  }
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i)
    data.push_back({{"object", "embedding"},
                    {"index", i},
                    {"embedding", encoding == "base64" ? json(base64(vectors[i])) : json(vectors[i])}});
  const json out = {{"object", "list"},
                    {"data", std::move(data)},
                    {"model", m.name},
                    {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return HttpResponse{200, "application/json", out.dump(), {}};
}

}  // namespace gs
