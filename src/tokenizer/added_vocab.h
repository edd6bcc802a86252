// Added tokens of tokenizer.json ("added_tokens"): strings matched in the input before BPE runs
// (leftmost-longest, as tokenizers' AddedVocabulary), honouring lstrip/rstrip/single_word.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gs {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;      // removed by decode(skip_special_tokens)
  bool normalized = false;   // matched in normalized text (else in the raw input)
  bool lstrip = false;       // also swallows whitespace to its left
  bool rstrip = false;       // ... and to its right
  bool single_word = false;  // only matches when not inside a word
};

class AddedVocab {
 public:
  AddedVocab() = default;
  explicit AddedVocab(std::vector<AddedToken> tokens);

  // A run of `text`: [begin, end) is plain text when id < 0, else the matched token `id`
  // (including any whitespace its lstrip/rstrip swallowed).
  struct Split {
    size_t begin, end;
    int32_t id;
  };
  // Splits `text` on the tokens whose `normalized` flag equals `normalized`.
  std::vector<Split> split(std::string_view text, bool normalized) const;

  const AddedToken* by_id(int32_t id) const;
  std::optional<int32_t> by_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Token indices by first byte, longest first, for each `normalized` value.
  using Buckets = std::array<std::vector<size_t>, 256>;
  std::optional<size_t> longest_at(std::string_view text, size_t pos, const Buckets& b) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  Buckets raw_, normalized_;
};

}  // namespace gs
