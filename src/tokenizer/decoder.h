// Decoders of tokenizer.json ("decoder"): turn token strings back into text. Each step maps the
// list of token strings to a new list (tokenizers' decode_chain); the result is their
// concatenation.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tokenizer/regex.h"

namespace gs {

class Decoder {
 public:
  // `j` is the "decoder" value (null: tokens joined with spaces, as tokenizers does).
  // Supported: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace.
  static Decoder from_json(const nlohmann::json& j, const std::string& file);
  static Decoder byte_level();

  std::string decode(std::vector<std::string> tokens) const;
  // The bytes one token adds inside a text (logprobs report these): the steps on this token
  // alone, keeping byte tokens' raw bytes even when they are not UTF-8 by themselves, with
  // Metaspace giving its space and Strip (which trims the text's ends) left out.
  std::string token_bytes(const std::string& token) const;

  struct ByteLevel {};
  struct Replace {
    std::optional<Regex> regex;
    std::string pattern, content;
  };
  struct ByteFallback {};
  struct Fuse {};
  struct Strip {
    std::string content;
    size_t start, stop;
  };
  struct Metaspace {
    std::string replacement;
    bool strip_first;
  };
  using Step = std::variant<ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace>;

 private:
  void add(const nlohmann::json& j, const std::string& file);
  std::string run(std::vector<std::string> tokens, bool in_text) const;
  std::vector<Step> steps_;
  bool join_with_space_ = false;
};

}  // namespace gs
