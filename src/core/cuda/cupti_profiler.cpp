// Implements core/cuda/cupti_profiler.h: CUPTI's activity API (concurrent kernel records, which
// include the kernel nodes of replayed graphs), loaded with dlopen.
#include "core/cuda/cupti_profiler.h"

#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/cuda/cuda_check.h"
#include "core/error.h"

namespace gs {

namespace {

constexpr size_t kBufferBytes = size_t(8) << 20;

struct CuptiApi {
  void* lib = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*num_dropped)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;

  template <typename F>
  bool bind(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    return f != nullptr;
  }
  // Loads the library; "" on success, else why not.
  std::string load() {
    for (const char* path : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                             "/usr/local/cuda/lib64/libcupti.so.13"})
      if ((lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib)
      return "CUPTI (libcupti.so.13) was not found; add the folder holding it (the CUDA toolkit's lib64 or "
             "extras/CUPTI/lib64) to LD_LIBRARY_PATH";
    const bool ok = bind(enable, "cuptiActivityEnable") && bind(disable, "cuptiActivityDisable") &&
                    bind(register_callbacks, "cuptiActivityRegisterCallbacks") &&
                    bind(flush_all, "cuptiActivityFlushAll") && bind(next_record, "cuptiActivityGetNextRecord") &&
                    bind(num_dropped, "cuptiActivityGetNumDroppedRecords") &&
                    bind(result_string, "cuptiGetResultString");
    return ok ? "" : "the CUPTI library found lacks the activity API (cuptiActivity*)";
  }
};

// Where CUPTI's buffer callbacks (plain functions, no user data) deliver records: the one live
// profiler's sink. Guarded by its mutex; set and cleared by that profiler.
struct Sink {
  std::mutex mu;
  std::vector<KernelRecord> records;
  size_t dropped = 0;
};
CuptiApi g_api;
std::atomic<Sink*> g_sink{nullptr};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  Sink* sink = g_sink.load();
  if (sink) {
    std::lock_guard lock(sink->mu);
    CUpti_Activity* rec = nullptr;
    while (g_api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      sink->records.push_back({k->name ? k->name : "?", k->start, k->end, k->graphId});
    }
    size_t dropped = 0;
    if (g_api.num_dropped(ctx, stream, &dropped) == CUPTI_SUCCESS) sink->dropped += dropped;
  }
  std::free(buffer);
}

std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  return g_api.result_string && g_api.result_string(r, &s) == CUPTI_SUCCESS && s ? s : "unknown CUPTI error";
}

class CuptiProfiler final : public KernelProfiler {
 public:
  CuptiProfiler() { g_sink.store(&sink_); }
  ~CuptiProfiler() override {
    if (recording_) g_api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    g_sink.store(nullptr);
  }
  CuptiProfiler(const CuptiProfiler&) = delete;
  CuptiProfiler& operator=(const CuptiProfiler&) = delete;

  void start() override {
    GS_CUDA_CHECK(cudaDeviceSynchronize());
    g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    {
      std::lock_guard lock(sink_.mu);
      sink_.records.clear();
      sink_.dropped = 0;
    }
    const CUptiResult r = g_api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    GS_CHECK(r == CUPTI_SUCCESS, "cannot enable CUPTI kernel records: {}", result_text(r));
    recording_ = true;
  }

  std::vector<KernelRecord> stop() override {
    GS_CUDA_CHECK(cudaDeviceSynchronize());
    g_api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    recording_ = false;
    g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard lock(sink_.mu);
    GS_CHECK(sink_.dropped == 0, "CUPTI dropped {} kernel records; profile fewer steps", sink_.dropped);
    std::vector<KernelRecord> out = std::move(sink_.records);
    sink_.records.clear();
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    return out;
  }

 private:
  Sink sink_;
  bool recording_ = false;
};

}  // namespace

std::unique_ptr<KernelProfiler> make_cupti_profiler(std::string* why_not) {
  static std::once_flag once;
  static std::string load_error;
  std::call_once(once, [] {
    load_error = g_api.load();
    if (!load_error.empty()) return;
    const CUptiResult r = g_api.register_callbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) load_error = "cannot register CUPTI activity buffers: " + result_text(r);
  });
  if (!load_error.empty() || g_sink.load() != nullptr) {
    if (why_not) *why_not = load_error.empty() ? "another kernel profiler is already recording" : load_error;
    return nullptr;
  }
  return std::make_unique<CuptiProfiler>();
}

}  // namespace gs
