// Bounded mutation fuzzing (a fixed seed and count) of the safetensors reader: a valid adapter
// file with its header (and length prefix) mutated either loads or throws gs::Error, never
// anything else, and every tensor it accepts lies inside the file.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

#include "checkpoint_writer.h"
#include "core/error.h"
#include "model/safetensors.h"

namespace gs {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(FuzzSafetensors, MutatedHeadersLoadOrFailCleanly) {
  test::TempDir d;
  std::vector<test::StTensor> ts;
  for (int i = 0; i < 3; ++i) {
    test::StTensor t{"layers." + std::to_string(i) + ".w", i == 1 ? "BF16" : "F32", {2, 3}, {}};
    t.bytes.assign(i == 1 ? 12 : 24, uint8_t(i));
    ts.push_back(t);
  }
  const fs::path file = d.path() / "f.safetensors";
  test::write_safetensors(file, ts);
  const std::string good = read_all(file);
  uint64_t header_len = 0;
  std::memcpy(&header_len, good.data(), 8);
  const std::vector<std::string> tokens = {"-1",
                                           "1e30",
                                           "18446744073709551615",
                                           "\"F64\"",
                                           "[]",
                                           "{}",
                                           "null",
                                           "[0,",
                                           "\"shape\":[9999999999,99999999]",
                                           "\"data_offsets\":[0,24]",
                                           ","};
  std::mt19937 rng(7);
  int loaded = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = good;
    for (int k = 1 + int(rng() % 3); k > 0; --k) {
      const size_t at = 8 + rng() % header_len;  // inside the JSON header
      switch (rng() % 4) {
        case 0: bytes[at] = char(rng() % 256); break;
        case 1: bytes.erase(at, 1 + rng() % 4); break;
        case 2: bytes.insert(at, tokens[rng() % tokens.size()]); break;
        default: bytes[rng() % 8] = char(rng() % 256); break;  // the length prefix
      }
    }
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    try {
      const SafetensorsCheckpoint c = SafetensorsCheckpoint::from_file(file);
      for (const auto& [name, t] : c.tensors()) {
        const auto* begin = static_cast<const uint8_t*>(t.data);
        size_t n = dtype_size(t.dtype);
        for (int64_t s : t.shape) n *= size_t(s);
        ASSERT_GE(begin, t.file->data());
        ASSERT_LE(begin + n, t.file->data() + t.file->size()) << name;
      }
      ++loaded;
    } catch (const Error&) {}
  }
  EXPECT_GT(loaded, 0);  // some mutations leave a valid file
}

}  // namespace
}  // namespace gs
