// --output-json of the bench commands: one way to write a result file, with a clear error.
#include <fmt/format.h>

#include <fstream>

#include "apps/commands.h"
#include "core/error.h"

namespace gs {

void write_output_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  GS_CHECK(out.good(), "--output-json: cannot open '{}' for writing", path);
  out << j.dump(2) << "\n";
  out.close();
  GS_CHECK(!out.fail(), "--output-json: writing '{}' failed (disk full?)", path);
  fmt::print(stderr, "wrote {}\n", path);
}

}  // namespace gs
