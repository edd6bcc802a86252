// Tokenizer::from_dir: builds the pipeline from tokenizer.json and applies tokenizer_config.json.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace gs {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  GS_CHECK(in.good(), "{}: cannot open file (does the model directory contain it?)", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json parse_json(const fs::path& path) {
  const std::string text = read_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", path.string(), e.what());
  }
}

// A special token entry in tokenizer_config.json: a string, {"content": ...} or null.
std::string token_string(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const auto& v = cfg.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return "";
}

std::vector<AddedToken> added_tokens(const json& j) {
  std::vector<AddedToken> out;
  if (!j.contains("added_tokens")) return out;
  for (const auto& t : j.at("added_tokens")) {
    out.push_back(AddedToken{.id = t.at("id").get<int32_t>(),
                             .content = t.at("content").get<std::string>(),
                             .special = t.value("special", false),
                             .normalized = t.value("normalized", !t.value("special", false)),
                             .lstrip = t.value("lstrip", false),
                             .rstrip = t.value("rstrip", false),
                             .single_word = t.value("single_word", false)});
  }
  return out;
}

BpeModel load_model(const json& j, const std::string& file) {
  GS_CHECK(j.contains("model"), "{}: no \"model\" section", file);
  const auto& m = j.at("model");
  const std::string type = m.contains("type") ? m.at("type").get<std::string>() : m.contains("merges") ? "BPE" : "";
  if (type != "BPE")
    throw Unsupported(
        fmt::format("{}: unsupported tokenizer model type '{}' (only BPE is "
                    "supported)",
                    file, type));
  return BpeModel::from_json(m, file);
}

// transformers' LlamaTokenizer with legacy=false ignores tokenizer.json's normalizer and
// pre-tokenizer: it uses Metaspace(prepend_scheme "first", split false), so only the start of
// the input gets a "▁" (not text after a special token), and builds BOS/EOS from the config.
void apply_llama_non_legacy(Tokenizer::Impl& impl, const json& cfg) {
  impl.normalizer = Normalizer();
  impl.pre_tokenizer = PreTokenizer::llama_metaspace();
  impl.post = PostProcessor();
  if (cfg.value("add_bos_token", true) && impl.bos_id) impl.post.prefix.push_back(*impl.bos_id);
  if (cfg.value("add_eos_token", false) && impl.eos_id) impl.post.suffix.push_back(*impl.eos_id);
}

std::optional<int32_t> lookup(const Tokenizer::Impl& impl, const std::string& token) {
  if (token.empty()) return std::nullopt;
  if (auto id = impl.added.by_content(token)) return id;
  return impl.model.token_to_id(token);
}

std::string chat_template_of(const json& cfg, const fs::path& dir) {
  if (cfg.contains("chat_template")) {
    const auto& t = cfg.at("chat_template");
    if (t.is_string()) return t.get<std::string>();
    if (t.is_array())  // [{"name": ..., "template": ...}]: the default one
      for (const auto& e : t)
        if (e.value("name", "") == "default") return e.at("template").get<std::string>();
  }
  if (fs::exists(dir / "chat_template.jinja")) return read_file(dir / "chat_template.jinja");
  return "";
}

// Applies tokenizer_config.json (or special_tokens_map.json): special tokens and BOS/EOS.
void apply_config(Tokenizer::Impl& impl, const json& cfg, const fs::path& dir) {
  impl.bos_token = token_string(cfg, "bos_token");
  impl.eos_token = token_string(cfg, "eos_token");
  impl.bos_id = lookup(impl, impl.bos_token);
  impl.eos_id = lookup(impl, impl.eos_token);
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"})
    if (auto id = lookup(impl, token_string(cfg, key))) impl.special.insert(*id);
  if (cfg.contains("additional_special_tokens"))
    for (const auto& t : cfg.at("additional_special_tokens")) {
      const std::string s = t.is_string() ? t.get<std::string>() : t.value("content", "");
      if (auto id = lookup(impl, s)) impl.special.insert(*id);
    }
  impl.chat_template = chat_template_of(cfg, dir);
  if (cfg.value("tokenizer_class", "") == "LlamaTokenizer" && cfg.contains("legacy") && cfg.at("legacy").is_boolean() &&
      !cfg.at("legacy").get<bool>())
    apply_llama_non_legacy(impl, cfg);
}

std::shared_ptr<Tokenizer::Impl> build(const fs::path& dir) {
  const fs::path path = dir / "tokenizer.json";
  const std::string file = path.string();
  const json j = parse_json(path);
  GS_CHECK(j.is_object(), "{}: expected a JSON object at the top level", file);
  auto impl = std::make_shared<Tokenizer::Impl>(Tokenizer::Impl{
      .model = load_model(j, file),
      .added = AddedVocab(added_tokens(j)),
      .normalizer = Normalizer::from_json(j.value("normalizer", json()), file),
      .pre_tokenizer = PreTokenizer::from_json(j.value("pre_tokenizer", json()), file),
      .post = PostProcessor::from_json(j.value("post_processor", json()), file),
      .decoder = Decoder::from_json(j.value("decoder", json()), file),
      .size = 0,
      .special = {},
      .bos_id = std::nullopt,
      .eos_id = std::nullopt,
      .bos_token = "",
      .eos_token = "",
      .chat_template = "",
  });
  std::unordered_set<int32_t> ids;
  for (int32_t id = 0; id <= impl->model.max_id(); ++id)
    if (impl->model.id_to_token(id)) ids.insert(id);
  for (const auto& t : impl->added.tokens()) {
    ids.insert(t.id);
    if (t.special) impl->special.insert(t.id);
  }
  impl->size = static_cast<int>(ids.size());

  // tokenizer_config.json wins; special_tokens_map.json fills in what it lacks.
  json cfg = json::object();
  fs::path cfg_path = dir / "tokenizer_config.json";
  for (const char* name : {"special_tokens_map.json", "tokenizer_config.json"}) {
    if (!fs::exists(dir / name)) continue;
    const json part = parse_json(dir / name);
    GS_CHECK(part.is_object(), "{}: expected a JSON object", (dir / name).string());
    cfg.update(part);
    cfg_path = dir / name;
  }
  try {
    apply_config(*impl, cfg, dir);
  } catch (const json::exception& e) {
    fail("{}: unexpected content: {}", cfg_path.string(), e.what());
  }
  return impl;
}

}  // namespace

Tokenizer Tokenizer::from_dir(const std::filesystem::path& dir) {
  GS_CHECK(fs::is_directory(dir), "{}: tokenizer directory does not exist", dir.string());
  Tokenizer t;
  try {
    t.impl_ = build(dir);
  } catch (const json::exception& e) {
    fail("{}: unexpected tokenizer.json content: {}", (dir / "tokenizer.json").string(), e.what());
  }
  return t;
}

}  // namespace gs
