// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): split normalized text into words that BPE
// encodes independently. A Sequence is flattened into steps applied in order.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tokenizer/regex.h"

namespace gs {

// A piece of text on its way to BPE. `at_start`: the piece begins at offset 0 of the original
// input (Metaspace's prepend_scheme "first" only prepends there).
struct Piece {
  std::string text;
  bool at_start = false;
};

// How a Split keeps the delimiters it finds (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // `j` is the "pre_tokenizer" value (null: the whole piece is one word). Supported: Sequence,
  // Split, ByteLevel, Digits, Metaspace. Throws gs::Error naming `file` otherwise.
  static PreTokenizer from_json(const nlohmann::json& j, const std::string& file);
  // Metaspace(replacement "▁", prepend_scheme "first", split false): the pre-tokenizer
  // transformers' LlamaTokenizer (legacy=false) uses in place of tokenizer.json's normalizer.
  static PreTokenizer llama_metaspace();
  // ByteLevel without regex: every byte of the text becomes its mapped character.
  static PreTokenizer byte_level();

  std::vector<Piece> split(std::vector<Piece> pieces) const;

  struct Split {
    std::optional<Regex> regex;
    std::string pattern;
    SplitBehavior behavior;
    bool invert;
  };
  struct ByteLevel {
    bool add_prefix_space;
    std::optional<Regex> regex;
  };
  struct Digits {
    bool individual;
  };
  enum class Prepend { kNever, kFirst, kAlways };
  struct Metaspace {
    std::string replacement;
    Prepend prepend;
    bool split;
  };
  using Step = std::variant<Split, ByteLevel, Digits, Metaspace>;

 private:
  void add(const nlohmann::json& j, const std::string& file);
  std::vector<Step> steps_;
};

}  // namespace gs
