// The BPE model of tokenizer.json ("model": {"type": "BPE"}): vocabulary, ranked merges, byte
// fallback and unknown-token handling, encoding one pre-tokenized word at a time.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gs {

// Hashing that lets unordered maps keyed by std::string be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

inline constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // "▁", SentencePiece's space

// The first position >= from (and > 0) of a "▁" that follows a character other than "▁", or
// s.size() when there is none.
size_t metaspace_cut(std::string_view s, size_t from);

class BpeModel {
 public:
  struct Options {
    std::optional<std::string> unk_token;
    bool byte_fallback = false;  // unknown characters become <0xNN> tokens
    bool fuse_unk = false;       // consecutive unknown characters give one unk token
    bool ignore_merges = false;  // a word already in the vocabulary is one token (Llama-3)
    std::string continuing_subword_prefix, end_of_word_suffix;
  };

  // `merges` pairs are token strings; throws gs::Error naming `file` if one is not in `vocab`.
  BpeModel(TokenMap vocab, const std::vector<std::pair<std::string, std::string>>& merges, Options options,
           const std::string& file);
  // Reads the "model" object of tokenizer.json (merges as "a b" strings or ["a", "b"] pairs).
  static BpeModel from_json(const nlohmann::json& model, const std::string& file);

  // Appends the ids of one word (already normalized and pre-tokenized).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // Whether a word cut before any "▁" that follows another character encodes as its parts do:
  // true when no token holds "▁" after another character (SentencePiece-style vocabularies) and
  // no option looks at the word whole, so no merge can cross such a cut.
  bool cuts_before_metaspace() const { return cuts_before_metaspace_; }

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // nullptr if unknown
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }
  size_t vocab_size() const { return vocab_.size(); }

 private:
  struct Merge {
    int32_t rank, new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  std::vector<int32_t> initial_symbols(std::string_view word) const;
  std::vector<int32_t> merge_all(std::vector<int32_t> ids) const;
  std::vector<int32_t> encode_uncached(std::string_view word) const;

  TokenMap vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<uint64_t, Merge> merges_;
  Options opt_;
  std::optional<int32_t> unk_id_;
  std::array<int32_t, 256> byte_ids_{};  // <0xNN> token ids, -1 where absent
  bool cuts_before_metaspace_ = false;

  // Words seen before (bounded); encode is const and may run on several threads.
  static constexpr size_t kCacheCapacity = 20000, kCacheMaxWord = 256;
  struct Cache {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words;
  };
  std::unique_ptr<Cache> cache_ = std::make_unique<Cache>();
};

}  // namespace gs
