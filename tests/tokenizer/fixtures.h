// The tokenizer fixtures of ../shared/golden/tokenizers, each loaded once per test executable.
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace gs::test {

inline const Tokenizer& golden_tokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, Tokenizer> loaded;
  std::lock_guard lock(mu);
  auto it = loaded.find(name);
  if (it == loaded.end()) it = loaded.emplace(name, Tokenizer::from_dir(golden_dir() / "tokenizers" / name)).first;
  return it->second;
}

// The chunks an IncrementalDetokenizer gives for `output` after `prompt`: one per token, then
// the flush.
inline std::vector<std::string> stream_chunks(const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                              const std::vector<int32_t>& output, bool skip_special) {
  IncrementalDetokenizer detok(tok, prompt, skip_special);
  std::vector<std::string> chunks;
  for (int32_t id : output) chunks.push_back(detok.push(id));
  chunks.push_back(detok.flush());
  return chunks;
}

// What a stream must add up to: decode(prompt + output) minus decode(prompt).
inline std::string expected_suffix(const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                   const std::vector<int32_t>& output, bool skip_special) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), output.begin(), output.end());
  const std::string full = tok.decode(all, skip_special), head = tok.decode(prompt, skip_special);
  return full.starts_with(head) ? full.substr(head.size()) : "<decode(prompt) is not a prefix>";
}

}  // namespace gs::test
