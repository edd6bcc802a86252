// ModelRunner start-up: model, memory plan, persistent buffers, mode resolution, graph wrappers.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/logging.h"
#include "cudagraph/capture_sizes.h"
#include "cudagraph/forward_context.h"
#include "cudagraph/graph_memory.h"
#include "cudagraph/mode_resolution.h"
#include "model/deepseek_model.h"
#include "runner/device_setup.h"
#include "runner/model_runner_impl.h"

namespace gs {

namespace {
constexpr size_t kCpuDefaultKvBytes = size_t(512) << 20;
constexpr double kMiB = 1024.0 * 1024.0;
}  // namespace

void ModelRunner::Impl::build_model() {
  GS_CHECK(cfg.max_num_seqs >= 1 && cfg.max_num_batched_tokens >= 1 && cfg.block_size >= 1,
           "max_num_seqs ({}), max_num_batched_tokens ({}) and block_size ({}) must be >= 1", cfg.max_num_seqs,
           cfg.max_num_batched_tokens, cfg.block_size);
  const ModelSource src = model_source(cfg);
  mcfg = resolve_model_config(src);
  backend = make_backend(cfg.device, cfg.dtype, mcfg.torch_dtype, cfg.kernel_options);
  const bool ep = cfg.enable_expert_parallel;
  make_tp_layout(mcfg, cfg.tp_rank, cfg.tensor_parallel_size, ep);  // a model that does not split: before joining
  if (cfg.tensor_parallel_size > 1) comm = make_communicator(*backend, cfg);
  local_cfg = tp_layout(mcfg, comm.get(), ep).local;
  attention = local_cfg.mla.enabled()
                  ? make_mla_attention_for(*backend, mla_shape(local_cfg),
                                           cfg.max_model_len > 0 ? cfg.max_model_len : mcfg.max_position_embeddings)
                  : make_attention(*backend, attention_shape(local_cfg), cfg.kernel_options.attention);
  cascade_enabled = !cfg.disable_cascade_attn && attention->supports_cascade() &&
                    std::none_of(mcfg.layer_windows.begin(), mcfg.layer_windows.end(), [](int w) { return w > 0; });
  if (cascade_enabled) attention->prepare_cascade();
  max_tokens = cfg.max_num_batched_tokens;
  max_reqs = cfg.max_num_seqs;
  uniform_query_len = cfg.speculative.uniform_query_len();
  max_sample_rows = uniform_query_len > 1 ? std::min(max_tokens, max_reqs * uniform_query_len) : max_reqs;
  max_sample_rows = std::max(max_sample_rows, max_reqs);
  const auto t0 = std::chrono::steady_clock::now();
  const size_t before = backend->allocator().bytes_in_use();
  model = create_model(mcfg, src, *backend, *attention, max_tokens, {comm.get(), max_reqs, ep});
  spdlog::info("model weights and activations: {:.2f} GiB, loaded in {:.2f} s ({})",
               double(backend->allocator().bytes_in_use() - before) / (kMiB * 1024.0),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               !src.dummy ? src.dir : "dummy weights, " + (src.dir.empty() ? "preset " + src.preset : src.dir));
  if (mcfg.quant.fp8) spdlog::info("quantization: {}; kernels: {}", mcfg.quant.describe(), backend->fp8_kernels());
  if (cfg.enable_lora) {
    lora = std::make_unique<LoraInputs>(cfg, mcfg, tp_layout(mcfg, comm.get(), ep), *backend, max_tokens);
    model->bind_lora(&lora->slots());
    inputs.lora_slots = lora->token_slots();
  }
  // Refused before anything is sized from it (block tables, the sampler's token buffer).
  GS_CHECK(
      cfg.max_model_len <= 0 || mcfg.max_position_embeddings <= 0 || cfg.max_model_len <= mcfg.max_position_embeddings,
      "max_model_len {} exceeds the model's context of {} tokens (max_position_embeddings in config.json); "
      "use --max-model-len {} or less",
      cfg.max_model_len, mcfg.max_position_embeddings, mcfg.max_position_embeddings);
  max_model_len = cfg.max_model_len > 0 ? cfg.max_model_len : mcfg.max_position_embeddings;
  GS_CHECK(max_model_len > 0,
           "max_model_len is unknown: the model config has no max_position_embeddings; "
           "set --max-model-len");
  max_blocks_per_req = (max_model_len + cfg.block_size - 1) / cfg.block_size;
}

void ModelRunner::Impl::plan_kv_cache() {
  const KVLayout layout = kv_layout(local_cfg);  // MLA: one latent row a token, no V plane
  const DType kv_dtype = cfg.fp8_kv_cache() ? DType::F8E4M3 : backend->compute_dtype();
  const KVCacheSpec spec{0, cfg.block_size, layout.num_kv_heads, layout.head_dim, kv_dtype, layout.planes};
  const size_t per_block = spec.block_bytes() * size_t(mcfg.num_layers);
  size_t bytes = cfg.kv_cache_memory_bytes;
  long long cap = -1;  // the CPU default never holds more than every sequence at full length
  if (bytes == 0 && backend->device().is_cuda()) {
    // What gpu_memory_utilization leaves after weights and activations (already allocated) and the
    // graphs still to be captured (docs/CUDA_GRAPHS.md §8: reserved before the KV cache takes the rest).
    const DeviceMemory mem = device_memory(*backend);
    const double budget = cfg.gpu_memory_utilization * double(mem.total);
    const double reserve = double(graph_reserve.bytes);
    GS_CHECK(budget > double(mem.used) + reserve + double(per_block),
             "--gpu-memory-utilization {} allows {:.0f} MiB of the GPU's {:.0f} MiB, but {:.0f} MiB are in use after "
             "loading the model and the graphs need a reserve of {:.0f} MiB ({} FULL + {} piecewise graphs), which "
             "leaves no room for one KV cache block ({:.2f} MiB); raise --gpu-memory-utilization, set "
             "--kv-cache-memory-bytes, capture fewer sizes (-cc.max_cudagraph_capture_size) or run with "
             "--enforce-eager",
             cfg.gpu_memory_utilization, budget / kMiB, double(mem.total) / kMiB, double(mem.used) / kMiB,
             reserve / kMiB, graph_reserve.full_graphs, graph_reserve.piecewise_graphs, double(per_block) / kMiB);
    bytes = size_t(budget - double(mem.used) - reserve);
    spdlog::info(
        "memory plan: {:.0f} MiB budget ({} x {:.0f} MiB), {:.0f} MiB in use, {:.1f} MiB reserved for "
        "{} graphs, {:.0f} MiB for the KV cache",
        budget / kMiB, cfg.gpu_memory_utilization, double(mem.total) / kMiB, double(mem.used) / kMiB, reserve / kMiB,
        graph_reserve.full_graphs + graph_reserve.piecewise_graphs, double(bytes) / kMiB);
  } else if (bytes == 0) {
    bytes = kCpuDefaultKvBytes;
    cap = static_cast<long long>(max_reqs) * max_blocks_per_req;
  }
  long long blocks = static_cast<long long>(bytes / per_block);
  if (cap > 0) blocks = std::min(blocks, cap);
  GS_CHECK(blocks >= 1, "the KV cache budget of {} bytes is less than one block ({} bytes for {} layers)", bytes,
           per_block, mcfg.num_layers);
  GS_CHECK(blocks <= (1LL << 30), "too many KV blocks ({})", blocks);
  num_blocks = static_cast<int>(blocks);
  const Shape shape{num_blocks, cfg.block_size, layout.num_kv_heads, layout.head_dim};
  for (int l = 0; l < mcfg.num_layers; ++l) {
    KVCacheLayer layer{Tensor::empty(shape, spec.dtype, backend->allocator()),
                       layout.planes == 2 ? Tensor::empty(shape, spec.dtype, backend->allocator()) : Tensor()};
    backend->fill_zero(layer.k);
    if (layer.v.defined()) backend->fill_zero(layer.v);
    kv.push_back(layer);
  }
  backend->stream().synchronize();
  model->bind_kv_cache(kv);
  spdlog::info("KV cache: {} blocks of {} tokens ({:.1f} MiB, {} tokens, {})", num_blocks, cfg.block_size,
               double(per_block) * num_blocks / kMiB, static_cast<long long>(num_blocks) * cfg.block_size,
               dtype_name(kv_dtype));
}

void ModelRunner::Impl::allocate_buffers() {
  Allocator& a = backend->allocator();
  auto i32 = [&a](Shape s) { return Tensor::empty(s, DType::I32, a); };
  buf.input_ids = i32({max_tokens});
  buf.positions = i32({max_tokens});
  buf.slot_mapping = i32({max_tokens});
  buf.query_start_loc = i32({max_reqs + 1});
  buf.seq_lens = i32({max_reqs});
  buf.block_table = i32({max_reqs, max_blocks_per_req});
  buf.logits_rows = i32({max_sample_rows});
  buf.logits = Tensor::empty({max_sample_rows, mcfg.vocab_size}, DType::F32, a);
  sampler = std::make_unique<Sampler>(
      *backend, make_sampling_kernels(*backend),
      SamplerLimits{
          .max_rows = max_sample_rows, .vocab = mcfg.vocab_size, .num_slots = max_reqs, .max_tokens = max_model_len});
  for (const Tensor* t :
       {&buf.input_ids, &buf.positions, &buf.slot_mapping, &buf.query_start_loc, &buf.seq_lens, &buf.block_table})
    backend->fill_zero(*t);
  backend->stream().synchronize();

  md.query_start_loc = buf.query_start_loc;
  md.seq_lens = buf.seq_lens;
  md.block_table = buf.block_table;
  md.slot_mapping = buf.slot_mapping;
  md.block_size = cfg.block_size;
  md.max_blocks_per_req = max_blocks_per_req;
  inputs.attn = &md;
  input_addresses = {buf.input_ids.data(),       buf.positions.data(), buf.slot_mapping.data(),
                     buf.query_start_loc.data(), buf.seq_lens.data(),  buf.block_table.data()};
  if (lora) input_addresses.push_back(lora->token_slots().data());
}

void ModelRunner::Impl::resolve_mode_and_keys() {
  CompilationConfig cc = cfg.compilation;
  cc.cudagraph_mode = cfg.compilation.mode_for(backend->device().is_cuda(), cfg.enforce_eager);
  if (!cfg.compilation.cudagraph_mode && !cfg.enforce_eager && !backend->device().is_cuda())
    spdlog::info(
        "CPU backend: cudagraph_mode NONE (graphs give no speed on the CPU; set -cc.cudagraph_mode=... to "
        "run the graph paths here)");
  const std::vector<int> sizes = resolve_capture_sizes(cc, max_reqs, max_tokens);
  const BackendCGSupport support = min_cg_support({{attention->name(), attention->cudagraph_support()}});
  const bool piecewise = model->num_pieces() > 1;  // attention splits the forward
  ModeResolution res = resolve_cudagraph_mode(*cc.cudagraph_mode, support, piecewise, uniform_query_len, sizes);
  stats.resolved_mode = res.mode;
  spdlog::info("attention backend '{}' declares cudagraph support {}: cudagraph mode {} resolved to {}",
               attention->name(), cg_support_name(attention->cudagraph_support()), mode_name(*cc.cudagraph_mode),
               mode_name(res.mode));
  dispatcher.initialize_cudagraph_keys(
      res.mode, res.capture_sizes, uniform_query_len, max_reqs, cfg.enable_lora,
      piecewise_capture_sizes(res.mode, res.capture_sizes, cfg.piecewise_every_capture_size));
  if (!backend->device().is_cuda()) return;  // the CPU's graphs hold no device memory to reserve
  graph_reserve = estimate_graph_memory(dispatcher.keys(CUDAGraphMode::FULL).size(),
                                        dispatcher.keys(CUDAGraphMode::PIECEWISE).size(), model->num_pieces());
}

void ModelRunner::Impl::build_wrappers() {
  Stream& s = backend->stream();
  for (int i = 0; i < model->num_pieces(); ++i) {
    piece_graphs.push_back(
        std::make_unique<CUDAGraphWrapper>([this, i] { model->run_piece(i, inputs); }, CUDAGraphMode::PIECEWISE, s,
                                           CUDAGraphWrapper::Options{.name = fmt::format("piece {}", i)}));
  }
  // docs/CUDA_GRAPHS.md §5: the FULL wrapper holds the whole forward, ending in sampled ids; in PIECEWISE
  // runtime mode it passes through, attention and the sampling tail run eagerly. A FULL graph of a
  // single-token decode batch holds the model's one-op decode step where it has one.
  full_graph = std::make_unique<CUDAGraphWrapper>(
      [this] {
        const ForwardContext* fc = current_forward_context();
        const bool one_op = fc && fc->runtime_mode == CUDAGraphMode::FULL && fc->batch.uniform &&
                            fc->batch.uniform_query_len == 1 && model->run_decode_step(inputs);
        const int n = one_op ? 0 : model->num_pieces();
        for (int i = 0; i < n; ++i) {
          (*piece_graphs[i])(input_addresses);
          if (i + 1 < n) model->run_attention(i, inputs);
        }
        run_tail();
      },
      CUDAGraphMode::FULL, s, CUDAGraphWrapper::Options{.name = "full model"});
}

}  // namespace gs
