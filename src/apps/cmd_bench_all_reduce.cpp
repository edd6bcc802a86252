// graphserve bench all-reduce: all-reduce latency per message size on this host's GPUs, NCCL vs
// the custom one-shot / two-shot all-reduce, each inside a CUDA graph; one process per GPU
// (as the tensor-parallel workers run), rank 0 prints the table and writes the JSON; then the
// fused all-reduce + residual add + RMSNorm against the two ops, per number of rows.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <map>

#include "apps/commands.h"
#include "core/error.h"
#include "core/logging.h"
#include "engine/byte_size.h"

#ifdef GS_HAVE_CUDA
#include "distributed/cuda/all_reduce_bench.h"
#include "distributed/cuda/nccl_communicator.h"
#include "ops/cuda/cuda_backend.h"
#endif

namespace gs {

namespace {

struct AllReduceArgs {
  int tensor_parallel_size = 2;
  std::vector<std::string> sizes{"4K",   "8K", "16K", "32K", "64K", "128K", "256K",
                                 "512K", "1M", "2M",  "4M",  "8M",  "16M"};
  bool disable_custom_all_reduce = false;
  double nvlink_peak_gbs = 450;  // Hopper's NVLink 4: 18 links x 25 GB/s per direction
  int calls = 20, replays = 20;
  int norm_hidden = 4096;  // llama3.1-8b's hidden size
  std::vector<int> norm_rows{1, 8, 16, 32, 128};
  std::string output_json = "bench_all_reduce.json";
};

#ifdef GS_HAVE_CUDA
// The fused all-reduce + residual add + RMSNorm against the two ops it replaces; the JSON rows.
nlohmann::json report_norm(const AllReduceArgs& a, const std::vector<AllReduceNormTiming>& rows) {
  fmt::print(
      "\nall-reduce + residual add + RMSNorm, bf16 x [rows, {}], f32 residual, in a CUDA graph: one fused kernel "
      "vs the one-shot all-reduce then add_rms_norm\n",
      a.norm_hidden);
  fmt::print("{:>6} {:>10} {:>11} {:>10} {:>7} {:>9}\n", "rows", "fused us", "unfused us", "saved us", "fused?",
             "max diff");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    fmt::print("{:>6} {:>10.2f} {:>11.2f} {:>10.2f} {:>7} {:>9.2g}\n", r.rows, r.fused_us, r.unfused_us,
               r.unfused_us - r.fused_us, r.fused_available ? "yes" : "no", r.max_abs_diff);
    out.push_back({{"rows", r.rows},
                   {"hidden", a.norm_hidden},
                   {"fused", r.fused_available},
                   {"fused_us", r.fused_us},
                   {"unfused_us", r.unfused_us},
                   {"max_abs_diff", r.max_abs_diff}});
  }
  return out;
}

void report(const AllReduceArgs& a, const std::vector<AllReduceTiming>& rows, const AllReducePolicy& policy,
            const std::vector<AllReduceNormTiming>& norm_rows) {
  std::map<size_t, std::map<AllReduceAlgo, AllReduceTiming>> by_size;
  for (const auto& r : rows) by_size[r.bytes][r.algo] = r;
  auto cell = [](const std::map<AllReduceAlgo, AllReduceTiming>& m, AllReduceAlgo algo) {
    auto it = m.find(algo);
    return it == m.end() ? std::string("-") : fmt::format("{:.2f}", it->second.us);
  };
  fmt::print("all-reduce, bf16, {} ranks, in a CUDA graph ({} calls x {} replays); NVLink peak {:.0f} GB/s\n",
             a.tensor_parallel_size, a.calls, a.replays, a.nvlink_peak_gbs);
  fmt::print("{:>10} {:>10} {:>10} {:>10} {:>9} {:>10} {:>7} {:>8}\n", "bytes", "nccl us", "1shot us", "2shot us",
             "picked", "bus GB/s", "% peak", "max err");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [bytes, m] : by_size) {
    const AllReduceAlgo picked = choose_all_reduce(policy, bytes);
    const AllReduceTiming& p = m.count(picked) ? m.at(picked) : m.at(AllReduceAlgo::Nccl);
    double err = 0;
    for (const auto& [algo, t] : m) err = std::max(err, t.max_abs_err);
    fmt::print("{:>10} {:>10} {:>10} {:>10} {:>9} {:>10.1f} {:>6.1f}% {:>8.2g}\n", bytes, cell(m, AllReduceAlgo::Nccl),
               cell(m, AllReduceAlgo::OneShot), cell(m, AllReduceAlgo::TwoShot), all_reduce_algo_name(picked),
               p.bus_gbs, 100.0 * p.bus_gbs / a.nvlink_peak_gbs, err);
    for (const auto& [algo, t] : m)
      out.push_back({{"bytes", bytes},
                     {"algo", all_reduce_algo_name(algo)},
                     {"us", t.us},
                     {"bus_gbs", t.bus_gbs},
                     {"max_abs_err", t.max_abs_err},
                     {"picked", algo == picked}});
  }
  const nlohmann::json norm = report_norm(a, norm_rows);
  if (!a.output_json.empty())
    write_output_json(a.output_json, {{"world", a.tensor_parallel_size},
                                      {"nvlink_peak_gbs", a.nvlink_peak_gbs},
                                      {"policy", describe_all_reduce_policy(policy, "")},
                                      {"results", out},
                                      {"all_reduce_add_rms_norm", norm}});
}

// One rank: joins the group (rank 0 makes it and writes it to every other rank's pipe), runs the
// benchmark, and rank 0 reports.
void run_rank(const AllReduceArgs& a, int rank, const std::vector<std::array<int, 2>>& pipes,
              const std::vector<size_t>& sizes) {
  std::string group;
  if (rank == 0) {
    group = make_nccl_group_id();
    for (int r = 1; r < a.tensor_parallel_size; ++r)
      GS_CHECK(write(pipes[size_t(r)][1], group.data(), group.size()) == ssize_t(group.size()),
               "bench all-reduce: could not hand the group to rank {}", r);
  } else {
    char buf[512];
    const ssize_t n = read(pipes[size_t(rank)][0], buf, sizeof(buf));
    GS_CHECK(n > 0, "bench all-reduce: rank {} got no group from rank 0", rank);
    group.assign(buf, size_t(n));
  }
  auto backend = make_cuda_backend(rank, DType::BF16);
  auto comm = make_nccl_communicator(group, rank, a.tensor_parallel_size, *backend, a.disable_custom_all_reduce);
  const auto rows = bench_all_reduce(*comm, *backend, sizes, a.calls, a.replays);
  std::vector<AllReduceNormTiming> norm_rows;
  if (a.norm_hidden > 0)
    norm_rows = bench_all_reduce_add_rms_norm(*comm, *backend, a.norm_rows, a.norm_hidden, a.calls, a.replays);
  if (rank == 0) report(a, rows, all_reduce_policy(*comm), norm_rows);
  comm->barrier();
}

void run(const AllReduceArgs& a) {
  const int world = a.tensor_parallel_size;
  GS_CHECK(world >= 2, "bench all-reduce needs --tensor-parallel-size >= 2, got {}", world);
  std::vector<size_t> sizes;
  for (const auto& s : a.sizes) sizes.push_back(parse_byte_size(s, "--sizes"));
  std::vector<std::array<int, 2>> pipes(size_t(world), {-1, -1});
  for (auto& p : pipes) GS_CHECK(pipe(p.data()) == 0, "bench all-reduce: pipe() failed (errno {})", errno);
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {  // no CUDA in this process: each child initialises its own
    const pid_t pid = fork();
    GS_CHECK(pid >= 0, "bench all-reduce: fork failed (errno {})", errno);
    if (pid == 0) {
      int code = 0;
      try {
        run_rank(a, r, pipes, sizes);
      } catch (const std::exception& e) {
        spdlog::error("bench all-reduce rank {}: {}", r, e.what());
        code = 1;
      }
      std::fflush(stdout);
      _exit(code);
    }
    pids.push_back(pid);
  }
  bool failed = false;
  for (size_t done = 0; done < pids.size(); ++done) {
    int status = 0;
    const pid_t pid = wait(&status);
    if (pid > 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !failed) {
      failed = true;  // the other ranks would wait for it forever
      for (pid_t p : pids)
        if (p != pid) kill(p, SIGTERM);
    }
  }
  GS_CHECK(!failed, "bench all-reduce: a rank failed (its error is logged above)");
}
#else
void run(const AllReduceArgs&) {
  throw Unsupported("graphserve bench all-reduce needs a CUDA build and at least 2 GPUs");
}
#endif

}  // namespace

void add_bench_all_reduce(CLI::App& bench) {
  auto args = std::make_shared<AllReduceArgs>();
  auto* cmd = bench.add_subcommand("all-reduce", "All-reduce latency per message size: NCCL vs the custom all-reduce");
  cmd->add_option("--tensor-parallel-size", args->tensor_parallel_size, "GPUs of this host (one process each)")
      ->capture_default_str();
  cmd->add_option("--sizes", args->sizes, "Message sizes in bytes (suffixes K, M)")->delimiter(',');
  cmd->add_flag("--disable-custom-all-reduce", args->disable_custom_all_reduce, "time NCCL only");
  cmd->add_option("--nvlink-peak-gbs", args->nvlink_peak_gbs, "NVLink bandwidth per direction, GB/s")
      ->capture_default_str();
  cmd->add_option("--norm-hidden", args->norm_hidden,
                  "Row width of the fused all-reduce + residual add + RMSNorm table (0 to skip it)")
      ->capture_default_str();
  cmd->add_option("--norm-rows", args->norm_rows, "Rows (tokens) of the fused all-reduce + RMSNorm table")
      ->delimiter(',');
  cmd->add_option("--num-calls", args->calls, "All-reduces per captured graph")->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters", args->replays, "Timed graph replays")->check(CLI::PositiveNumber);
  cmd->add_option("--output-json", args->output_json, "JSON results file ('' to skip)");
  cmd->callback([args] { run(*args); });
}

}  // namespace gs
