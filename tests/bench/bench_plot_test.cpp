// bench serve --plot runs gnuplot without a shell: a hostile model id is only text in the title.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "bench/run_program.h"
#include "bench/serve_bench.h"

namespace gs {
namespace {

namespace fs = std::filesystem;

TEST(BenchPlot, AHostileModelIdRunsNothing) {
  if (run_program({"gnuplot", "--version"}) != 0) GTEST_SKIP() << "gnuplot is not installed";
  const fs::path dir = fs::temp_directory_path() / fmt::format("gs_plot_{}", ::getpid());
  fs::create_directories(dir);
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);  // a shell would run `touch` here
  ServeBenchResult r;
  r.model = "x$(touch PWNED1)`touch PWNED2`'\"; system('touch PWNED3')";
  for (int i = 0; i < 3; ++i) {
    RequestResult q;
    q.ok = true;
    q.start = i;
    q.ttft = 0.01 * (i + 1);
    q.latency = 0.1 * (i + 1);
    r.requests.push_back(q);
  }
  const fs::path png = dir / "p $(touch PWNED4).png";
  EXPECT_NO_THROW(plot_serve_bench(r, png.string()));
  fs::current_path(cwd);
  EXPECT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 1000u);
  for (const char* name : {"PWNED1", "PWNED2", "PWNED3", "PWNED4"}) {
    EXPECT_FALSE(fs::exists(dir / name)) << name;
    EXPECT_FALSE(fs::exists(cwd / name)) << name;
  }
  fs::remove_all(dir);
}

TEST(BenchPlot, RunProgramReportsExitStatus) {
  EXPECT_EQ(run_program({"true"}), 0);
  EXPECT_EQ(run_program({"false"}), 1);
  EXPECT_EQ(run_program({"/nonexistent/program"}), 127);
}

}  // namespace
}  // namespace gs
