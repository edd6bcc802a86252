// Safetensors: memory-mapped checkpoint files, single or sharded, validated on open.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace gs {

// A read-only memory mapping of a whole file; unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws gs::Error naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// One tensor inside a mapped file.
struct TensorRef {
  std::string name;
  DType dtype = DType::F32;  // F32, F16, BF16 or F8E4M3
  Shape shape;
  const void* data = nullptr;
  const MappedFile* file = nullptr;
};

// The index of the first NaN or infinity among `n` values of `dtype` (F32, F16 or BF16) at
// `data` (any alignment), or -1 when all are finite.
int64_t first_non_finite(const void* data, DType dtype, size_t n);

// All tensors of a checkpoint: model.safetensors, or the shards of model.safetensors.index.json.
class SafetensorsCheckpoint {
 public:
  // Throws gs::Error naming the file and problem (missing, bad header, truncated, bad dtype, a
  // shard of model.safetensors.index.json outside `model_dir`).
  explicit SafetensorsCheckpoint(const std::filesystem::path& model_dir);

  // One safetensors file by itself (a PEFT adapter's adapter_model.safetensors).
  static SafetensorsCheckpoint from_file(const std::filesystem::path& file);

  const TensorRef* find(const std::string& name) const;
  const std::map<std::string, TensorRef>& tensors() const { return tensors_; }

 private:
  SafetensorsCheckpoint() = default;
  void add_file(const std::filesystem::path& path);

  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorRef> tensors_;
};

}  // namespace gs
