// Tokenizer: text <-> token ids, from a Hugging Face tokenizer.json (+ tokenizer_config.json).
//
// Supports byte-level BPE (GPT-2, Llama-3, Qwen2 split patterns) and SentencePiece-style BPE
// with byte fallback, added/special tokens (matched before BPE), and the normalizers,
// pre-tokenizers, post-processors and decoders those use. A value type: copies share the
// immutable tables.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gs {

class Tokenizer {
 public:
  // Loads <dir>/tokenizer.json and, if present, <dir>/tokenizer_config.json (special tokens,
  // add_bos_token, chat_template). Throws gs::Error naming the file and the problem.
  static Tokenizer from_dir(const std::filesystem::path& dir);
  // A built-in byte-level tokenizer for models without one (dummy weights): ids 0..255 are
  // bytes, then <s>, </s>; vocab_size must be >= 258.
  static Tokenizer byte_level(int vocab_size);
  // For dummy (random) weights: byte_level plus a pseudo-word for every id above </s>, and a
  // plain chat template, so random ids decode to visible text (tokenizer/dummy_tokenizer.cpp).
  static Tokenizer dummy(int vocab_size);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The same, stopping once the text is known to have more than `max_tokens` tokens: the
  // result then holds the text's first tokens, more than max_tokens (the rest of the word, or
  // of the part of a long word, that crossed the limit) and no suffix of special tokens;
  // otherwise it equals encode(text). A text far over the limit is not split or encoded past it.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens, size_t max_tokens) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int size() const;  // base vocabulary plus added tokens (len(tokenizer) in HF)
  std::string id_to_token(int32_t id) const;
  // The bytes token `id` adds inside a text (see Decoder::token_bytes); may be partial UTF-8.
  std::string token_bytes(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;

  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::string bos_token() const;  // "" when unset
  std::string eos_token() const;
  const std::string& chat_template() const;  // "" when the model has none

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

// Turns a growing stream of token ids into text, emitting only complete UTF-8 and never
// emitting text that a later token could still change (as vLLM's incremental detokenizer).
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tok, std::span<const int32_t> prompt_ids, bool skip_special_tokens);
  // Adds one generated token; returns the newly final text (possibly empty).
  std::string push(int32_t id);
  // The text held back at the end of generation.
  std::string flush();
  const std::string& text() const { return text_; }  // all output text so far

 private:
  bool ends_in_byte_run() const;

  const Tokenizer* tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;
  size_t read_offset_ = 0;
  std::string text_;
};

}  // namespace gs
