// The tokenizer fixtures of ../shared/golden/tokenizers, each loaded once per test executable.
#pragma once
#include <map>
#include <mutex>
#include <string>

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

}  // namespace gs::test
