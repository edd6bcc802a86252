// Test helpers: a temporary model directory and a safetensors writer, to build broken copies
// of a real checkpoint.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "model/safetensors.h"

namespace gs::test {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("gs_model_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct StTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", or anything to test rejection
  Shape shape;
  std::vector<uint8_t> bytes;
};

inline void write_safetensors(const std::filesystem::path& file, const std::vector<StTensor>& ts) {
  nlohmann::json h = nlohmann::json::object();
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  std::string header = h.dump();
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::ofstream out(file, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(header.data(), std::streamsize(header.size()));
  for (const auto& t : ts) out.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
}

// Every tensor of the checkpoint in `dir`, converted to `dtype` ("F32", "F16" or "BF16").
inline std::vector<StTensor> read_tensors(const std::filesystem::path& dir, DType dtype = DType::F32) {
  SafetensorsCheckpoint ck(dir);
  std::vector<StTensor> out;
  for (const auto& [name, t] : ck.tensors()) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<uint8_t> src(size_t(n) * dtype_size(t.dtype)), dst(size_t(n) * dtype_size(dtype));
    std::memcpy(src.data(), t.data, src.size());
    convert_host(src.data(), t.dtype, dst.data(), dtype, size_t(n));
    const char* names[] = {"F32", "F16", "BF16"};
    out.push_back({name, names[int(dtype)], t.shape, std::move(dst)});
  }
  return out;
}

inline void copy_configs(const std::filesystem::path& from, const std::filesystem::path& to) {
  for (const char* f : {"config.json", "generation_config.json"})
    std::filesystem::copy_file(from / f, to / f, std::filesystem::copy_options::overwrite_existing);
}

}  // namespace gs::test
