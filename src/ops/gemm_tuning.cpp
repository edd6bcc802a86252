// Implements ops/gemm_tuning.h (the GEMM tuning cache file).
#include "ops/gemm_tuning.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/logging.h"

#include <unistd.h>

namespace gs {

namespace {

using nlohmann::json;
constexpr int kFormat = 1;

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

json entry_json(const GemmShape& s, const GemmAlgoRecord& r) {
  json algo = json::array();
  for (uint64_t w : r.algo) algo.push_back(fmt::format("{:016x}", w));
  return {{"m", s.m}, {"n", s.n}, {"k", s.k}, {"in_f32", s.in_f32}, {"y_f32", s.y_f32}, {"algo", algo}, {"us", r.us}};
}

// One entry, or a reason it is malformed.
std::optional<std::pair<GemmShape, GemmAlgoRecord>> parse_entry(const json& e, std::string& why) {
  for (const char* k : {"m", "n", "k"})
    if (!e.contains(k) || !e[k].is_number_integer() || e[k].get<long long>() < 1 ||
        e[k].get<long long>() > (1LL << 30)) {
      why = fmt::format("entry field '{}' is not a positive integer", k);
      return std::nullopt;
    }
  if (!e.contains("in_f32") || !e["in_f32"].is_boolean() || !e.contains("y_f32") || !e["y_f32"].is_boolean() ||
      !e.contains("us") || !e["us"].is_number() || !e.contains("algo") || !e["algo"].is_array() ||
      e["algo"].size() != 8) {
    why = "an entry lacks in_f32, y_f32, us or its 8 algorithm words";
    return std::nullopt;
  }
  GemmShape s{e["m"].get<int>(), e["n"].get<int>(), e["k"].get<int>(), e["in_f32"].get<bool>(), e["y_f32"].get<bool>()};
  GemmAlgoRecord r;
  r.us = e["us"].get<float>();
  for (size_t i = 0; i < 8; ++i) {
    const json& w = e["algo"][i];
    if (!w.is_string() || w.get<std::string>().size() != 16 ||
        w.get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos) {
      why = "an algorithm word is not 16 hex digits";
      return std::nullopt;
    }
    r.algo[i] = std::stoull(w.get<std::string>(), nullptr, 16);
  }
  return std::make_pair(s, r);
}

}  // namespace

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/graphserve";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/graphserve";
  return {};
}

std::string gemm_tuning_key_hash(const std::string& key_text) { return fmt::format("{:016x}", fnv1a64(key_text)); }

std::string gemm_tuning_file(const std::string& cache_dir, const std::string& key_text) {
  return cache_dir + "/gemm_tuning/" + gemm_tuning_key_hash(key_text) + ".json";
}

std::optional<GemmTuningTable> load_gemm_tuning(const std::string& path, const std::string& key_text) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  auto ignored = [&](const std::string& why) -> std::optional<GemmTuningTable> {
    spdlog::warn("GEMM tuning cache {} ignored ({}); tuning again", path, why);
    return std::nullopt;
  };
  std::ifstream in(path);
  if (!in) return ignored("cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return ignored("not a JSON object: corrupt");
  if (!j.contains("format") || j["format"] != kFormat) return ignored(fmt::format("not format {}", kFormat));
  if (!j.contains("key") || !j["key"].is_string()) return ignored("no key");
  if (j["key"].get<std::string>() != key_text) return ignored("written for another key: stale");
  if (!j.contains("entries") || !j["entries"].is_array()) return ignored("no entries");
  GemmTuningTable table;
  for (const json& e : j["entries"]) {
    std::string why;
    auto parsed = parse_entry(e, why);
    if (!parsed) return ignored(why);
    table[parsed->first] = parsed->second;
  }
  return table;
}

bool save_gemm_tuning(const std::string& path, const std::string& key_text, const GemmTuningTable& table) {
  json entries = json::array();
  for (const auto& [s, r] : table) entries.push_back(entry_json(s, r));
  const json j = {{"format", kFormat}, {"key", key_text}, {"entries", entries}};
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = fmt::format("{}.tmp{}", path, static_cast<long long>(::getpid()));
  {
    std::ofstream out(tmp);
    out << j.dump(1) << "\n";
    if (!out) {
      spdlog::warn("GEMM tuning cache: cannot write {} ({}); the tuning is not kept", tmp,
                   ec ? ec.message() : "write failed");
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    spdlog::warn("GEMM tuning cache: cannot rename {} to {} ({}); the tuning is not kept", tmp, path, ec.message());
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace gs
