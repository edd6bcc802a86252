// Normalizers of tokenizer.json ("normalizer"): text rewrites applied before pre-tokenization to
// each piece of text between added tokens. A Sequence is flattened into its steps.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tokenizer/regex.h"

namespace gs {

class Normalizer {
 public:
  // `j` is the "normalizer" value (null gives the identity); `file` names tokenizer.json in
  // errors. Supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip.
  static Normalizer from_json(const nlohmann::json& j, const std::string& file);

  std::string normalize(std::string_view text) const;
  bool empty() const { return steps_.empty(); }

  struct Unicode {
    int options;
  };  // utf8proc composition/decomposition flags
  struct Lowercase {};
  struct Prepend {
    std::string prefix;
  };
  struct Replace {
    std::optional<Regex> regex;
    std::string pattern, content;
  };
  struct Strip {
    bool left, right;
  };
  using Step = std::variant<Unicode, Lowercase, Prepend, Replace, Strip>;

 private:
  void add(const nlohmann::json& j, const std::string& file);
  std::vector<Step> steps_;
};

// Replaces every match of a String or Regex pattern ({"String": s} / {"Regex": r}) by `content`.
std::string replace_all(std::string_view text, const std::optional<Regex>& regex, const std::string& pattern,
                        const std::string& content);

}  // namespace gs
