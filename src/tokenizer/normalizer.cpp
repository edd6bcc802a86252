// Implements tokenizer/normalizer.h.
#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace gs {

std::string replace_all(std::string_view text, const std::optional<Regex>& regex, const std::string& pattern,
                        const std::string& content) {
  std::string out;
  size_t pos = 0;
  if (regex) {
    for (auto [b, e] : regex->find_all(text)) {
      out.append(text.substr(pos, b - pos)).append(content);
      pos = e;
    }
  } else if (!pattern.empty()) {
    for (size_t hit; (hit = text.find(pattern, pos)) != std::string_view::npos;) {
      out.append(text.substr(pos, hit - pos)).append(content);
      pos = hit + pattern.size();
    }
  }
  out.append(text.substr(pos));
  return out;
}

namespace {

std::string apply_utf8proc(std::string_view text, int options) {
  utf8proc_uint8_t* out = nullptr;
  const auto n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  GS_CHECK(n >= 0, "Unicode normalization failed: {}", utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> hold(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::string lowercase(std::string_view text) {
  std::string out;
  for (size_t i = 0, n = 0; i < text.size(); i += n) {
    const char32_t cp = utf8::decode_at(text, i, &n);
    utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  }
  return out;
}

std::string strip(std::string_view text, bool left, bool right) {
  size_t b = 0, e = text.size();
  for (size_t n = 0; left && b < e && utf8::is_whitespace(utf8::decode_at(text, b, &n));) b += n;
  while (right && e > b) {
    size_t s = e - 1, n = 0;
    while (s > b && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
    if (!utf8::is_whitespace(utf8::decode_at(text, s, &n))) break;
    e = s;
  }
  return std::string(text.substr(b, e - b));
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& j, const std::string& file) {
  Normalizer n;
  if (!j.is_null()) n.add(j, file);
  return n;
}

void Normalizer::add(const nlohmann::json& j, const std::string& file) {
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& s : j.at("normalizers")) add(s, file);
  } else if (type == "NFC") {
    steps_.emplace_back(Unicode{UTF8PROC_COMPOSE});
  } else if (type == "NFD") {
    steps_.emplace_back(Unicode{UTF8PROC_DECOMPOSE});
  } else if (type == "NFKC") {
    steps_.emplace_back(Unicode{UTF8PROC_COMPOSE | UTF8PROC_COMPAT});
  } else if (type == "NFKD") {
    steps_.emplace_back(Unicode{UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT});
  } else if (type == "Lowercase") {
    steps_.emplace_back(Lowercase{});
  } else if (type == "Prepend") {
    steps_.emplace_back(Prepend{j.at("prepend").get<std::string>()});
  } else if (type == "Strip") {
    steps_.emplace_back(Strip{j.value("strip_left", true), j.value("strip_right", true)});
  } else if (type == "Replace") {
    const auto& p = j.at("pattern");
    Replace r{std::nullopt, "", j.at("content").get<std::string>()};
    if (p.contains("Regex"))
      r.regex.emplace(p.at("Regex").get<std::string>(), file);
    else
      r.pattern = p.at("String").get<std::string>();
    steps_.emplace_back(std::move(r));
  } else {
    throw Unsupported(
        fmt::format("{}: unsupported normalizer type '{}' (supported: Sequence, "
                    "NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip)",
                    file, type));
  }
}

std::string Normalizer::normalize(std::string_view text) const {
  std::string s(text);
  for (const auto& step : steps_) {
    if (const auto* u = std::get_if<Unicode>(&step)) {
      s = apply_utf8proc(s, u->options);
    } else if (std::holds_alternative<Lowercase>(step)) {
      s = lowercase(s);
    } else if (const auto* p = std::get_if<Prepend>(&step)) {
      if (!s.empty()) s = p->prefix + s;
    } else if (const auto* r = std::get_if<Replace>(&step)) {
      s = replace_all(s, r->regex, r->pattern, r->content);
    } else if (const auto* st = std::get_if<Strip>(&step)) {
      s = strip(s, st->left, st->right);
    }
  }
  return s;
}

}  // namespace gs
