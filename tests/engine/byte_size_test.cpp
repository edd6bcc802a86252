// Byte sizes as users write them ("512MiB", "1.5GiB", ...): parsing and the errors of bad ones.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/byte_size.h"

namespace gs {
namespace {

TEST(ByteSize, ParsesPlainAndSuffixed) {
  EXPECT_EQ(parse_byte_size("536870912"), 536870912u);
  EXPECT_EQ(parse_byte_size("512MiB"), 512u << 20);
  EXPECT_EQ(parse_byte_size("512M"), 512u << 20);
  EXPECT_EQ(parse_byte_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_byte_size("2gb"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("100k"), 102400u);
  EXPECT_EQ(parse_byte_size("7B"), 7u);
}

TEST(ByteSize, RejectsGarbageWithMessage) {
  for (const char* bad : {"", "MiB", "12XB", "-5", "1.2.3G", "abc"}) {
    try {
      parse_byte_size(bad, "--kv-cache-memory");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--kv-cache-memory"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace gs
