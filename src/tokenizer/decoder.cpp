// Implements tokenizer/decoder.h.
#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace gs {

namespace {

using Tokens = std::vector<std::string>;

// All tokens become one string of their bytes; a token with a character outside the byte map
// (an added token such as "  ") contributes its own UTF-8 bytes. Invalid UTF-8 becomes U+FFFD
// unless `raw`.
Tokens decode_byte_level(const Tokens& tokens, bool raw = false) {
  std::string bytes;
  for (const auto& t : tokens) {
    std::string mapped;
    bool ok = true;
    for (size_t i = 0, n = 0; ok && i < t.size(); i += n) {
      const auto b = char_to_byte(utf8::decode_at(t, i, &n));
      if (b)
        mapped += static_cast<char>(*b);
      else
        ok = false;
    }
    bytes += ok ? mapped : t;
  }
  return {raw ? bytes : utf8::lossy(bytes)};
}

std::optional<unsigned char> byte_token(const std::string& t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return std::nullopt;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = t[k];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return std::nullopt;
    v = v * 16 + d;
  }
  return static_cast<unsigned char>(v);
}

// Runs of <0xNN> tokens become their text when valid UTF-8 (or `raw`), else one U+FFFD per byte.
Tokens byte_fallback(const Tokens& tokens, bool raw = false) {
  Tokens out;
  std::string run;
  size_t run_len = 0;
  const auto flush = [&] {
    if (run_len == 0) return;
    if (raw || utf8::lossy(run) == run) {
      out.push_back(run);
    } else {
      for (size_t k = 0; k < run_len; ++k) out.emplace_back("\xEF\xBF\xBD");
    }
    run.clear();
    run_len = 0;
  };
  for (const auto& t : tokens) {
    if (const auto b = byte_token(t)) {
      run += static_cast<char>(*b);
      ++run_len;
    } else {
      flush();
      out.push_back(t);
    }
  }
  flush();
  return out;
}

// Removes up to `start` leading and `stop` trailing copies of `content` (one character).
std::string strip(const std::string& t, const std::string& content, size_t start, size_t stop) {
  size_t b = 0, e = t.size();
  for (size_t k = 0; k < start && t.compare(b, content.size(), content) == 0 && b < e; ++k) b += content.size();
  for (size_t k = 0; k < stop && e >= b + content.size() && t.compare(e - content.size(), content.size(), content) == 0;
       ++k)
    e -= content.size();
  return t.substr(b, e - b);
}

}  // namespace

Decoder Decoder::from_json(const nlohmann::json& j, const std::string& file) {
  Decoder d;
  if (j.is_null())
    d.join_with_space_ = true;
  else
    d.add(j, file);
  return d;
}

Decoder Decoder::byte_level() {
  Decoder d;
  d.steps_.emplace_back(ByteLevel{});
  return d;
}

void Decoder::add(const nlohmann::json& j, const std::string& file) {
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& s : j.at("decoders")) add(s, file);
  } else if (type == "ByteLevel") {
    steps_.emplace_back(ByteLevel{});
  } else if (type == "ByteFallback") {
    steps_.emplace_back(ByteFallback{});
  } else if (type == "Fuse") {
    steps_.emplace_back(Fuse{});
  } else if (type == "Strip") {
    steps_.emplace_back(
        Strip{j.at("content").get<std::string>(), j.value("start", size_t{0}), j.value("stop", size_t{0})});
  } else if (type == "Replace") {
    const auto& p = j.at("pattern");
    Replace r{std::nullopt, "", j.at("content").get<std::string>()};
    if (p.contains("Regex"))
      r.regex.emplace(p.at("Regex").get<std::string>(), file);
    else
      r.pattern = p.at("String").get<std::string>();
    steps_.emplace_back(std::move(r));
  } else if (type == "Metaspace") {
    const std::string scheme = j.contains("prepend_scheme") ? j.at("prepend_scheme").get<std::string>()
                                                            : (j.value("add_prefix_space", true) ? "always" : "never");
    steps_.emplace_back(Metaspace{j.value("replacement", std::string("\xE2\x96\x81")), scheme != "never"});
  } else {
    throw Unsupported(
        fmt::format("{}: unsupported decoder type '{}' (supported: Sequence, "
                    "ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace)",
                    file, type));
  }
}

std::string Decoder::decode(Tokens tokens) const { return run(std::move(tokens), false); }

std::string Decoder::token_bytes(const std::string& token) const { return run({token}, true); }

// `in_text`: one token as it stands inside a text (token_bytes), else a whole text.
std::string Decoder::run(Tokens tokens, bool in_text) const {
  for (const auto& step : steps_) {
    if (std::holds_alternative<ByteLevel>(step)) {
      tokens = decode_byte_level(tokens, in_text);
    } else if (std::holds_alternative<ByteFallback>(step)) {
      tokens = byte_fallback(tokens, in_text);
    } else if (std::holds_alternative<Fuse>(step)) {
      std::string all;
      for (const auto& t : tokens) all += t;
      tokens = {std::move(all)};
    } else if (const auto* r = std::get_if<Replace>(&step)) {
      for (auto& t : tokens) t = replace_all(t, r->regex, r->pattern, r->content);
    } else if (const auto* s = std::get_if<Strip>(&step)) {
      if (!in_text)  // it trims the text's ends, never a token inside it
        for (auto& t : tokens) t = strip(t, s->content, s->start, s->stop);
    } else if (const auto* m = std::get_if<Metaspace>(&step)) {
      // As tokenizers: every replacement becomes a space, except in the first token, where
      // (when a prefix was prepended on encode) they are dropped.
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] =
            replace_all(tokens[i], std::nullopt, m->replacement, i == 0 && m->strip_first && !in_text ? "" : " ");
    }
  }
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (join_with_space_ && i > 0) out += ' ';
    out += tokens[i];
  }
  return out;
}

}  // namespace gs
