// The driver -> worker batch stream: a decoded batch equals the scheduled one although each step
// sends only new tokens; requests that leave are dropped; one that starts over (or a reused id)
// is sent whole again. The connection's busy-polling receive, and its shared-memory lane.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "executor/connection.h"
#include "executor/shm_lane.h"
#include "executor/wire.h"

namespace gs {
namespace {

ScheduledRequest req(RequestId id, const std::vector<int32_t>& toks, const std::vector<int32_t>& blocks,
                     const SamplingParams& p, int computed) {
  ScheduledRequest r;
  r.id = id;
  r.all_token_ids = &toks;
  r.num_prompt_tokens = 3;
  r.num_computed_tokens = computed;
  r.num_new_tokens = int(toks.size()) - computed;
  r.block_ids = &blocks;
  r.sample = true;
  r.params = &p;
  r.seed = 7 * id;
  return r;
}

void expect_same(const SchedulerOutput& a, const SchedulerOutput& b) {
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    const auto &x = a.requests[i], &y = b.requests[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(*x.all_token_ids, *y.all_token_ids);
    EXPECT_EQ(*x.block_ids, *y.block_ids);
    EXPECT_EQ(x.num_computed_tokens, y.num_computed_tokens);
    EXPECT_EQ(x.num_new_tokens, y.num_new_tokens);
    EXPECT_EQ(x.seed, y.seed);
    EXPECT_EQ(x.params->temperature, y.params->temperature);
    EXPECT_EQ(x.params->logit_bias, y.params->logit_bias);
    EXPECT_EQ(x.params->seed, y.params->seed);
  }
}

TEST(Wire, BatchesRoundTripSendingOnlyNewTokens) {
  SamplingParams p;
  p.temperature = 0.5f;
  p.seed = 9;
  p.logit_bias = {{3, 1.5f}};
  std::vector<int32_t> a = {1, 2, 3}, b = {4, 5, 6, 7}, blocks = {0, 1};
  BatchEncoder enc;
  BatchDecoder dec;
  SchedulerOutput s1{{req(1, a, blocks, p, 0), req(2, b, blocks, p, 0)}};
  const std::string m1 = enc.encode(s1);
  expect_same(dec.decode(m1), s1);
  a.push_back(8), b.push_back(9);
  SchedulerOutput s2{{req(1, a, blocks, p, 3), req(2, b, blocks, p, 4)}};
  const std::string m2 = enc.encode(s2);
  EXPECT_LT(m2.size(), m1.size());  // no parameters, one token each
  expect_same(dec.decode(m2), s2);
  a.push_back(10);
  SchedulerOutput s3{{req(1, a, blocks, p, 4)}};  // request 2 left: dropped
  expect_same(dec.decode(enc.encode(s3)), s3);
  std::vector<int32_t> again = {7, 7};  // id 1 reused from scratch (a benchmark's next iteration)
  SchedulerOutput s4{{req(1, again, blocks, p, 0), req(2, b, blocks, p, 0)}};
  expect_same(dec.decode(enc.encode(s4)), s4);
}

TEST(Wire, RunnerConfigAndRepliesRoundTrip) {
  RunnerConfig c;
  c.model = "/m";
  c.tensor_parallel_size = 4;
  c.enable_expert_parallel = true;  // every rank places the experts alike
  c.compilation.cudagraph_mode = CUDAGraphMode::PIECEWISE;
  c.compilation.cudagraph_capture_sizes = {1, 8};
  c.disable_custom_all_reduce = true;
  c.compilation.cache_dir = "/data/gs-cache";  // every rank tunes into the same cache
  c.compilation.disable_compile_cache = true;
  c.enable_lora = true;  // every rank serves the same adapters
  c.lora_modules = {{"sql", "/a/sql"}, {"poet", "/a/poet"}};
  c.max_loras = 3, c.max_lora_rank = 32, c.max_cpu_loras = 5;
  // Kernel options the command line sets reach every rank's backend and communicator.
  c.kernel_options.moe.dense_max_tokens = 0;
  c.kernel_options.moe.dense_max_work_ratio = 3;
  c.kernel_options.decode.persistent_max_tokens = 2;
  c.kernel_options.all_reduce.in_projection = false;
  c.kernel_options.lora.fuse_below_tokens = 64;
  c.kernel_options.attention.decode_split_target = 512;
  c.kernel_options.attention.prefill_tiles_per_warp_d64 = 1;
  c.kernel_options.fp8.lt_fp8_gemm = false;
  c.kernel_options.fp8.lt_fast_accum = false;
  const RunnerConfig d = decode_runner_config(encode_runner_config(c));
  EXPECT_EQ(d.kernel_options.moe.dense_max_tokens, 0);
  EXPECT_EQ(d.kernel_options.moe.dense_max_work_ratio, 3);
  EXPECT_EQ(d.kernel_options.decode.persistent_max_tokens, 2);
  EXPECT_FALSE(d.kernel_options.all_reduce.in_projection);
  EXPECT_TRUE(d.kernel_options.all_reduce.lamport);
  EXPECT_EQ(d.kernel_options.lora.fuse_below_tokens, 64);
  EXPECT_EQ(d.kernel_options.attention.decode_split_target, 512);
  EXPECT_EQ(d.kernel_options.attention.prefill_tiles_per_warp_d64, 1);
  EXPECT_FALSE(d.kernel_options.fp8.lt_fp8_gemm);
  EXPECT_FALSE(d.kernel_options.fp8.lt_fast_accum);
  EXPECT_EQ(d.kernel_options.fp8.lt_max_rows, Fp8KernelOptions{}.lt_max_rows);
  EXPECT_TRUE(d.enable_lora);
  EXPECT_EQ(d.lora_modules, c.lora_modules);
  EXPECT_EQ(d.max_loras, 3);
  EXPECT_EQ(d.max_lora_rank, 32);
  EXPECT_EQ(d.max_cpu_loras, 5);
  const LoraRequest lr = decode_lora_request(encode_lora_request({7, "sql", "/a/sql"}));
  EXPECT_EQ(lr.id, 7);
  EXPECT_EQ(lr.name, "sql");
  EXPECT_EQ(lr.path, "/a/sql");
  EXPECT_EQ(d.model, "/m");
  EXPECT_EQ(d.tensor_parallel_size, 4);
  EXPECT_TRUE(d.enable_expert_parallel);
  EXPECT_TRUE(d.disable_custom_all_reduce);
  EXPECT_EQ(d.compilation.cache_dir, "/data/gs-cache");
  EXPECT_TRUE(d.compilation.disable_compile_cache);
  EXPECT_FALSE(decode_runner_config(encode_runner_config(RunnerConfig{})).disable_custom_all_reduce);
  EXPECT_EQ(d.compilation.cudagraph_mode, CUDAGraphMode::PIECEWISE);
  EXPECT_EQ(d.compilation.cudagraph_capture_sizes, (std::vector<int>{1, 8}));
  StepReply r;
  r.output.sampled.push_back({{42, -0.5f, {{42, -0.5f}, {7, -1.0f}}}, 5});
  r.output.prompt_logprobs.push_back({{11, -2.0f, {{3, -0.25f}}}, 6, 4});
  r.step_seconds = 0.25;
  const StepReply q = decode_step_reply(encode_step_reply(r));
  ASSERT_EQ(q.output.sampled.size(), 1u);
  EXPECT_EQ(q.output.sampled[0].token, 42);
  EXPECT_EQ(q.output.sampled[0].id, 5u);
  EXPECT_EQ(q.output.sampled[0].logprob, -0.5f);
  EXPECT_EQ(q.output.sampled[0].top, r.output.sampled[0].top);
  ASSERT_EQ(q.output.prompt_logprobs.size(), 1u);
  const PromptLogprob& p = q.output.prompt_logprobs[0];
  EXPECT_EQ(p.id, 6u);
  EXPECT_EQ(p.position, 4);
  EXPECT_EQ(p.token, 11);
  EXPECT_EQ(p.logprob, -2.0f);
  EXPECT_EQ(p.top, r.output.prompt_logprobs[0].top);
  EXPECT_EQ(q.step_seconds, 0.25);
  EXPECT_THROW(decode_step_reply("xy"), Error);
}

TEST(Connection, BusyPollsByDefaultOnlyForGpuRanksAndReceivesWhenTheSpinEnds) {
  unsetenv("GRAPHSERVE_TP_SPIN_MS");
  EXPECT_EQ(tp_spin_seconds(false), 0.0);
  EXPECT_DOUBLE_EQ(tp_spin_seconds(true), kTpSpinMs / 1000.0);
  setenv("GRAPHSERVE_TP_SPIN_MS", "0", 1);
  EXPECT_EQ(tp_spin_seconds(true), 0.0);
  setenv("GRAPHSERVE_TP_SPIN_MS", "5", 1);
  EXPECT_DOUBLE_EQ(tp_spin_seconds(true), 0.005);
  EXPECT_DOUBLE_EQ(tp_spin_seconds(false), 0.005);  // CPU ranks when told to
  unsetenv("GRAPHSERVE_TP_SPIN_MS");

  Listener listener("127.0.0.1", 0);
  std::thread peer([port = listener.port()] {
    Connection c = Connection::connect("127.0.0.1", port, 5.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past the 5 ms spin: then poll() sleeps
    c.send(MsgType::Step, "late");
    c.send(MsgType::Step, "next");
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    c.send(MsgType::StepReply, "any");
  });
  Connection conn = listener.accept(5.0, "the test's peer");
  EXPECT_EQ(conn.recv(5.0, "the test's peer", 0.005).payload, "late");
  EXPECT_EQ(conn.recv(5.0, "the test's peer", 1.0).payload, "next");  // already there
  EXPECT_EQ(wait_any({&conn}, 5.0, 0.005), 0);
  EXPECT_EQ(conn.recv(5.0, "the test's peer").type, MsgType::StepReply);
  peer.join();
}

// Two ends of one TCP connection, each with its side of one shared-memory lane.
struct LanePair {
  Listener listener{"127.0.0.1", 0};
  Connection driver, worker;
  LanePair() {
    std::thread t([this] { worker = Connection::connect("127.0.0.1", listener.port(), 5.0); });
    driver = listener.accept(5.0, "the test's worker");
    t.join();
    auto mine = std::make_unique<ShmLane>(ShmLane::make_name(), 0);
    auto theirs = std::make_unique<ShmLane>(mine->name(), 1);
    mine->unlink_name();
    driver.attach_lane(std::move(mine));
    worker.attach_lane(std::move(theirs));
  }
};

TEST(Connection, ShmLaneCarriesMessagesInOrderAndTheSocketWhatDoesNotFit) {
  LanePair p;
  EXPECT_FALSE(p.worker.ready());
  p.driver.send(MsgType::Step, "step 1");
  EXPECT_TRUE(p.worker.ready());
  const Message m = p.worker.recv(5.0, "the driver", 1.0);
  EXPECT_EQ(m.type, MsgType::Step);
  EXPECT_EQ(m.payload, "step 1");
  EXPECT_FALSE(p.worker.ready());
  p.worker.send(MsgType::StepReply, "");  // empty payloads too
  EXPECT_EQ(wait_any({&p.driver}, 5.0, 1.0), 0);
  EXPECT_EQ(p.driver.recv(5.0, "a worker").type, MsgType::StepReply);
  // Too large for the lane: the socket carries it, intact.
  const std::string big(ShmLane::kCapacity + 17, 'x');
  std::thread sender([&] { p.driver.send(MsgType::Step, big); });  // more than the socket buffers
  EXPECT_EQ(p.worker.recv(5.0, "the driver", 1.0).payload, big);
  sender.join();
  // A second message before the first was taken takes the socket too; both arrive.
  p.driver.send(MsgType::Step, "a");
  p.driver.send(MsgType::Shutdown, "b");
  EXPECT_EQ(p.worker.recv(5.0, "the driver").payload, "a");
  EXPECT_EQ(p.worker.recv(5.0, "the driver").type, MsgType::Shutdown);
}

TEST(Connection, ShmLaneWakesASleepingReceiverAndReportsHangsAndExits) {
  LanePair p;
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the receiver has stopped spinning
    p.worker.send(MsgType::StepReply, "late");
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(p.driver.recv(5.0, "a worker", 0.0).payload, "late");  // asleep on the futex, woken by the post
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  sender.join();
  EXPECT_EQ(wait_any({&p.driver}, 0.05, 0.01), -1);  // nothing within the time: -1, the caller's error
  try {
    p.driver.recv(0.05, "a worker", 0.0);
    ADD_FAILURE() << "no error for a peer that sends nothing";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a worker did not answer within 0 s"), std::string::npos) << e.what();
  }
  p.worker = Connection();  // the worker's process ends: its socket closes
  try {
    p.driver.recv(5.0, "a worker", 0.0);
    ADD_FAILURE() << "no error for a peer that exited";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a worker closed its connection"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gs
