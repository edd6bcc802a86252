// IncrementalDetokenizer: vLLM's prefix/read-offset scheme. The text of ids_[prefix:read] was
// final when it was emitted; each push decodes ids_[prefix:] and emits what lies beyond that
// prefix text, unless it ends in U+FFFD (an unfinished UTF-8 character), or the last token is a
// byte-fallback <0xNN>: HF's ByteFallback decodes a run of them as a unit, one U+FFFD per byte
// when the run is not valid UTF-8, so a later byte can still turn a finished character of the
// run into U+FFFD. (ByteLevel's lossy decoding gives one U+FFFD per invalid sequence and never
// changes text that ends in a valid character: there the U+FFFD rule suffices.)
//
// The concatenated output equals decode(prompt + output)[len(decode(prompt)):]. For the first
// generated token this keeps the SentencePiece leading space when text precedes it (" The cat",
// so prompt + output reads right, as vLLM), but not when nothing does (a prompt of only <s> with
// skip_special_tokens): there decode strips it, as Hugging Face's output_text does.
#include <algorithm>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace gs {

namespace {

// vLLM starts the prefix window this many tokens before the end of the prompt.
constexpr size_t kInitialWindow = 5;

bool is_byte_token(const Tokenizer& tok, int32_t id) {
  const std::string t = tok.id_to_token(id);
  return t.size() == 6 && t.starts_with("<0x") && t.back() == '>';
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, std::span<const int32_t> prompt_ids,
                                               bool skip_special_tokens)
    : tok_(&tok), skip_special_(skip_special_tokens) {
  size_t start = prompt_ids.size() > kInitialWindow ? prompt_ids.size() - kInitialWindow : 0;
  // Byte-fallback runs decode as a unit: never start the window inside one.
  while (start > 0 && is_byte_token(tok, prompt_ids[start])) --start;
  ids_.assign(prompt_ids.begin() + static_cast<std::ptrdiff_t>(start), prompt_ids.end());
  prefix_offset_ = 0;
  read_offset_ = ids_.size();
}

std::string IncrementalDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  if (ends_in_byte_run()) return "";  // the run may go on
  const std::span<const int32_t> all(ids_);
  const std::string prefix = tok_->decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  const std::string full = tok_->decode(all.subspan(prefix_offset_), skip_special_);
  if (full.size() <= prefix.size() || utf8::ends_with_replacement(full) || !full.starts_with(prefix)) return "";
  std::string fresh = full.substr(prefix.size());
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  text_ += fresh;
  return fresh;
}

// Whether the last token that decoding keeps (skipped special tokens are not) is a <0xNN>.
bool IncrementalDetokenizer::ends_in_byte_run() const {
  for (size_t i = ids_.size(); i > read_offset_; --i) {
    const int32_t id = ids_[i - 1];
    if (!(skip_special_ && tok_->is_special(id))) return is_byte_token(*tok_, id);
  }
  return false;
}

std::string IncrementalDetokenizer::flush() {
  const std::span<const int32_t> all(ids_);
  const std::string prefix = tok_->decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  const std::string full = tok_->decode(all.subspan(prefix_offset_), skip_special_);
  size_t common = 0;  // normally all of prefix
  while (common < prefix.size() && common < full.size() && prefix[common] == full[common]) ++common;
  std::string rest = full.size() > prefix.size() ? full.substr(common) : std::string();
  prefix_offset_ = read_offset_ = ids_.size();
  text_ += rest;
  return rest;
}

}  // namespace gs
