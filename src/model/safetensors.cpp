// Implements model/safetensors.h (Safetensors).
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/error.h"
#include "model/json_file.h"

namespace gs {

namespace fs = std::filesystem;
using nlohmann::json;

MappedFile::MappedFile(const fs::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  GS_CHECK(fd >= 0, "cannot open {}: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot stat {}", path.string());
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    GS_CHECK(p != MAP_FAILED, "cannot memory-map {}: {}", path.string(), std::strerror(errno));
    data_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

namespace {

DType parse_st_dtype(const std::string& s, const std::string& tensor, const fs::path& file) {
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  if (s == "F8_E4M3") return DType::F8E4M3;  // FP8 weights, with their scales (model/fp8_checkpoint.h)
  if (s == "U8") return DType::U8;           // MXFP4 blocks and scales (model/mxfp4.h)
  fail("{}: tensor '{}' has unsupported dtype {} (supported: F32, F16, BF16, F8_E4M3, U8)", file.string(), tensor, s);
}

Shape parse_shape(const json& j, const std::string& tensor, const fs::path& file) {
  GS_CHECK(j.is_array(), "{}: tensor '{}' has no valid 'shape'", file.string(), tensor);
  Shape s;
  for (const auto& d : j) {
    GS_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, "{}: tensor '{}' has an invalid shape {}", file.string(),
             tensor, j.dump());
    s.push_back(d.get<int64_t>());
  }
  return s;
}

// A shard named by model.safetensors.index.json: a relative path that stays inside the model
// directory (symbolic links are followed as they are: a Hugging Face cache links every file).
void check_shard_name(const std::string& s, const fs::path& index) {
  const fs::path p(s);
  bool inside = !s.empty() && s.find('\0') == std::string::npos && p.is_relative() && !p.has_root_name();
  for (const auto& part : p) inside = inside && part != "..";
  GS_CHECK(inside, "{}: shard '{}' is not a file name inside the model directory", index.string(), s);
}

json parse_header(const MappedFile& f) {
  const std::string file = f.path().string();
  GS_CHECK(f.size() >= 8, "{} is truncated: {} bytes, too short for a safetensors header", file, f.size());
  uint64_t n = 0;
  std::memcpy(&n, f.data(), 8);  // little-endian, as is every host we build for
  GS_CHECK(n <= f.size() - 8, "{} is truncated or not a safetensors file: header of {} bytes, file of {}", file, n,
           f.size());
  try {
    json h = json::parse(reinterpret_cast<const char*>(f.data()) + 8, reinterpret_cast<const char*>(f.data()) + 8 + n);
    GS_CHECK(h.is_object(), "{}: the safetensors header is not a JSON object", file);
    return h;
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number that overflows
    fail("{}: the safetensors header is not valid JSON: {}", file, e.what());
  }
}

}  // namespace

int64_t first_non_finite(const void* data, DType dtype, size_t n) {
  const auto* b = static_cast<const uint8_t*>(data);
  if (dtype == DType::F32) {
    for (size_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, b + 4 * i, 4);
      if ((u & 0x7F800000u) == 0x7F800000u) return int64_t(i);
    }
    return -1;
  }
  if (dtype == DType::F8E4M3) {  // e4m3 has no infinity; S.1111.111 is its NaN
    for (size_t i = 0; i < n; ++i)
      if ((b[i] & 0x7F) == 0x7F) return int64_t(i);
    return -1;
  }
  GS_CHECK(dtype == DType::F16 || dtype == DType::BF16, "first_non_finite: unsupported dtype {}", dtype_name(dtype));
  const uint16_t exp = dtype == DType::F16 ? 0x7C00 : 0x7F80;  // all-ones exponent: Inf or NaN
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, b + 2 * i, 2);
    if ((h & exp) == exp) return int64_t(i);
  }
  return -1;
}

SafetensorsCheckpoint::SafetensorsCheckpoint(const fs::path& dir) {
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    const json j = read_json_file(index);
    auto wm = j.find("weight_map");
    GS_CHECK(wm != j.end() && wm->is_object(), "{}: missing 'weight_map' object", index.string());
    std::set<std::string> shards;
    for (const auto& [name, file] : wm->items()) {
      GS_CHECK(file.is_string(), "{}: weight_map['{}'] must be a file name", index.string(), name);
      check_shard_name(file.get<std::string>(), index);
      shards.insert(file.get<std::string>());
    }
    for (const auto& s : shards) add_file(dir / s);
    for (const auto& [name, file] : wm->items())
      GS_CHECK(tensors_.count(name), "{}: tensor '{}' is not in {}", index.string(), name, file.get<std::string>());
  } else {
    GS_CHECK(fs::exists(single), "no weights in {}: neither model.safetensors nor model.safetensors.index.json",
             dir.string());
    add_file(single);
  }
}

SafetensorsCheckpoint SafetensorsCheckpoint::from_file(const fs::path& file) {
  SafetensorsCheckpoint c;
  c.add_file(file);
  return c;
}

void SafetensorsCheckpoint::add_file(const fs::path& path) {
  GS_CHECK(fs::is_regular_file(path), "{} not found", path.string());
  files_.push_back(std::make_unique<MappedFile>(path));
  const MappedFile& f = *files_.back();
  const json h = parse_header(f);
  uint64_t header_len = 0;
  std::memcpy(&header_len, f.data(), 8);
  const uint64_t base = 8 + header_len;
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> spans;  // [begin, end) of every tensor
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    GS_CHECK(e.is_object() && e.contains("dtype") && e["dtype"].is_string() && e.contains("data_offsets"),
             "{}: tensor '{}' has a malformed header entry", path.string(), name);
    TensorRef t{name, parse_st_dtype(e["dtype"].get<std::string>(), name, path),
                parse_shape(e.value("shape", json()), name, path), nullptr, &f};
    const json& off = e["data_offsets"];
    GS_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
             "{}: tensor '{}' has malformed data_offsets", path.string(), name);
    const uint64_t b = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      GS_CHECK(d == 0 || numel <= (int64_t(1) << 48) / d, "{}: tensor '{}' has an absurd shape {}", path.string(), name,
               shape_str(t.shape));
      numel *= d;
    }
    GS_CHECK(end >= b && end - b == uint64_t(numel) * dtype_size(t.dtype),
             "{}: tensor '{}' spans {} bytes but {} {} needs {}", path.string(), name, end - b, dtype_name(t.dtype),
             shape_str(t.shape), uint64_t(numel) * dtype_size(t.dtype));
    GS_CHECK(end <= f.size() - base, "{} is truncated: tensor '{}' ends at byte {} but the file has {} bytes",
             path.string(), name, base + end, f.size());
    if (end > b) spans.emplace_back(b, end, name);
    t.data = f.data() + base + b;
    GS_CHECK(tensors_.emplace(name, std::move(t)).second, "tensor '{}' appears twice (again in {})", name,
             path.string());
  }
  // Two tensors sharing bytes is a corrupt (or hostile) file, never a valid checkpoint.
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    GS_CHECK(std::get<0>(spans[i]) >= std::get<1>(spans[i - 1]),
             "{}: tensors '{}' (bytes {}..{}) and '{}' (bytes {}..{}) overlap in data_offsets", path.string(),
             std::get<2>(spans[i - 1]), std::get<0>(spans[i - 1]), std::get<1>(spans[i - 1]), std::get<2>(spans[i]),
             std::get<0>(spans[i]), std::get<1>(spans[i]));
}

const TensorRef* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace gs
