// The main() of every test executable: GoogleTest with the log level taken from $GRAPHSERVE_LOG_LEVEL.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/logging.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* level = std::getenv("GRAPHSERVE_LOG_LEVEL");
  gs::set_log_level(level ? level : "warn");
  return RUN_ALL_TESTS();
}
