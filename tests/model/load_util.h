// Helpers of the model-loading error tests: load a directory and return the error's message,
// write edited copies of stories260K.
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "checkpoint_writer.h"
#include "model_harness.h"
#include "test_paths.h"

namespace gs::test {

namespace fs = std::filesystem;

inline ModelSource dir_source(const fs::path& p) {
  ModelSource s;
  s.dir = p.string();
  return s;
}

// The message of the gs::Error that loading `dir` throws, or "" when it loads.
inline std::string load_error(const fs::path& dir) {
  try {
    auto be = make_cpu_backend();
    const ModelSource src = dir_source(dir);
    const ModelConfig cfg = resolve_model_config(src);
    auto attn = make_cpu_attention(*be, attention_shape(cfg));
    create_model(cfg, src, *be, *attn, 8);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// A copy of stories260K with `edit` applied to its tensors.
template <typename Edit>
void write_model(const fs::path& dir, Edit edit) {
  copy_configs(stories260k_dir(), dir);
  auto ts = read_tensors(stories260k_dir());
  edit(ts);
  write_safetensors(dir / "model.safetensors", ts);
}

inline void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

inline void edit_config(const fs::path& dir, const std::string& key, const nlohmann::json& value) {
  std::ifstream in(dir / "config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j[key] = value;
  write_text(dir / "config.json", j.dump());
}

#define EXPECT_ERROR_HAS(msg, ...)                                                            \
  do {                                                                                        \
    for (const char* part : {__VA_ARGS__})                                                    \
      EXPECT_NE((msg).find(part), std::string::npos) << "'" << part << "' not in: " << (msg); \
  } while (0)

}  // namespace gs::test
