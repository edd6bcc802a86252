// A compiled PCRE2 pattern (UTF + UCP, JIT when available) used by Split pre-tokenizers and
// Replace normalizers/decoders. Immutable after construction; safe to share between threads.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gs {

class Regex {
 public:
  // Throws gs::Error naming `what` (e.g. the tokenizer.json path) when the pattern is invalid.
  Regex(const std::string& pattern, const std::string& what);

  // All non-overlapping matches in `text` (valid UTF-8), as [begin, end) byte offsets.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

// The GPT-2 split pattern that ByteLevel pre-tokenizers with use_regex apply.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace gs
